"""Durable intents: the file work a committed change still owes, kept in the database until it is done.

A drop, truncate or overwrite commits its metadata first and only then moves the files it removed into
cmroot; a create makes its directory after it committed (a failed or killed call leaves no directory
behind). If the process dies in between, that work would be lost: dropped files would stay in the warehouse
for good, and a table re-created under the same name would adopt them. So each change inserts one row in
``file_intents`` in the same transaction as the change and its event, naming the work (``recycle`` files
and remove directories, ``makedirs``, or ``publish`` a replication load's staged copies). After the commit
the request does the work and deletes the row; rows a crash left behind are completed by housekeeping (the
server's periodic pass, ``Metastore.open`` and ``hmsrepl intents run``) until they succeed. Work that can never
succeed (a path the file system refuses: too long, an invalid character) is parked instead: reported once,
kept for the operator (``hmsrepl intents list``) and left out of housekeeping until the operator fixes the
cause and runs ``hmsrepl intents run --include-parked``. Every step is
idempotent, so doing an intent twice, or in two processes at once, is harmless: a file already in cmroot is
not moved again, a directory already gone is not an error.

No resurrection: before a table, partition or database takes a location, the pending intents whose files or
directories lie under (or above) it are completed first; if one cannot be completed the create is refused,
naming the cause. A directory of a dropped object whose intent is done holds no data file the drop named.
"""

from __future__ import annotations

import errno
import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import delete, insert, select, update

from hmsrepl.exceptions import InvalidOperationError
from hmsrepl.faults import fault_point
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.eventlog import EventLog, MetastoreTransaction
from hmsrepl.metastore.file_capture import list_data_files
from hmsrepl.metastore.list_parameter import in_list_parameter
from hmsrepl.metastore.schema import file_intents
from hmsrepl.metastore.sql_constant import constant
from hmsrepl.storage.base import path_key
from hmsrepl.storage.directory_syncs import DirectorySyncs
from hmsrepl.storage.rooted import RootedFileSystem
from hmsrepl.storage.staging import publish_owed, staging_name

log = logging.getLogger(__name__)

RECYCLE = "recycle"
MAKEDIRS = "makedirs"
PUBLISH = "publish"
KINDS = (RECYCLE, MAKEDIRS, PUBLISH)
# Kinds whose pending work puts files in, or takes them out of, a location: done before a new object takes it.
SETTLED_BEFORE_CREATE = (RECYCLE, PUBLISH)
#: Whether an intent a new object may have to settle is pending: a create asks it in the statement that
#: reads its database, so the usual answer, none, costs no read of the intents (``settle``'s ``any_pending``).
ANY_SETTLE_CANDIDATE = (
    select(file_intents.c.id)
    .where(
        file_intents.c.kind.in_([constant(kind) for kind in SETTLED_BEFORE_CREATE])
    )  # not expanded per call, nor bound
    .exists()
)
_INSERT_INTENT = insert(file_intents)  # built once: a load records intents by the hundred
_INSERT_INTENT_RETURNING = insert(file_intents).returning(file_intents.c.id, sort_by_parameter_order=True)


@dataclass(frozen=True)
class Intent:
    id: int
    kind: str
    payload: dict[str, Any]
    created_at: int
    claimed_at: int
    attempts: int
    last_error: str | None
    parked_at: int | None = None

    def paths(self) -> list[str]:
        """Every location the intent touches: its directories and its files' original places."""
        files = [EncodedFileUri.decode(text).file_uri for text in self.payload.get("files", [])]
        return [*self.payload.get("dirs", []), *files]


@dataclass(frozen=True)
class IntentRunResult:
    completed: int
    failed: int
    skipped: int
    parked: int = 0

    def __str__(self) -> str:
        text = f"{self.completed} completed, {self.failed} failed, {self.skipped} skipped"
        return text + (f", {self.parked} parked (see 'hmsrepl intents list')" if self.parked else "")


#: What the file system answers for a path it will never accept: retrying the same work cannot help.
_IMPOSSIBLE_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.EINVAL, errno.EILSEQ})


def can_never_succeed(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the intent's paths themselves are refused, for good."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in _IMPOSSIBLE_ERRNOS:
            return True
        if isinstance(cause, (UnicodeEncodeError, ValueError)) and "null" in str(cause).lower():
            return True  # Python refuses a path with an embedded NUL before the system sees it
        cause = cause.__cause__ or cause.__context__
    return False


def _write_rows(tx: MetastoreTransaction, unwritten: list[tuple[list[Intent], int]]) -> None:
    """Insert the rows of the intents at ``(group, index)``, in that order, and give each in its group the id
    its row received: with the transaction's events where their append can take them, else on their own."""
    conn = tx.conn
    intents = [group[index] for group, index in unwritten]
    rows = [
        {
            "kind": intent.kind,
            "payload": json.dumps(intent.payload),
            "created_at": intent.created_at,
            "claimed_at": intent.claimed_at,
            "attempts": 0,
        }
        for intent in intents
    ]

    def number(ids: Sequence[int]) -> None:
        for (group, index), intent_id in zip(unwritten, ids, strict=True):
            group[index] = replace(group[index], id=intent_id)
        unwritten.clear()

    if tx.ride_with_append(rows, number):
        return
    if conn.dialect.insert_executemany_returning_sort_by_parameter_order and len(rows) > 1:
        ids = conn.execute(_INSERT_INTENT_RETURNING, rows).scalars().all()
    else:
        ids = [conn.execute(_INSERT_INTENT, row).inserted_primary_key[0] for row in rows]
    number(ids)


#: The deletion of completed intents' rows (parameter ``ids``): built once, one statement text for any
#: number of rows (``list_parameter``), so a create's completion is neither rebuilt nor rendered again at
#: each call, and stays prepared on PostgreSQL.
_DELETE_ROWS = delete(file_intents).where(in_list_parameter(file_intents.c.id, "ids"))


def _delete_rows_text(ids: Sequence[int]) -> str:
    """``_DELETE_ROWS`` as text, the ids written in (``EventLog.send_alone_unawaited`` sends text): ids the
    program read, made integers, so nothing in it needs escaping; built without SQLAlchemy's compiler, whose
    literal rendering costs more than the statement's own time in the server."""
    listed = ", ".join(str(int(intent_id)) for intent_id in ids)
    return f"DELETE FROM {file_intents.name} WHERE {file_intents.c.id.name} IN ({listed})"


def _now_ms() -> int:
    return int(time.time() * 1000)


class FileIntents:
    """Records intents inside metastore transactions and completes them, now or after a restart."""

    def __init__(self, events: EventLog, cm: ChangeManager) -> None:
        self.events = events
        self.cm = cm

    # -- recording -------------------------------------------------------------------------------------
    def recycle(self, tx: MetastoreTransaction, files: Sequence[str], dirs: Sequence[str] = ()) -> None:
        """After commit: recycle ``files`` (encoded URIs) into cmroot, then remove ``dirs``."""
        dirs = [d for d in dirs if d]
        if files or dirs:
            self._record(tx, RECYCLE, {"files": list(files), "dirs": dirs})

    def makedirs(self, tx: MetastoreTransaction, dirs: Sequence[str]) -> None:
        """After commit: make ``dirs`` (a new object's location), before the call returns to its client."""
        dirs = [d for d in dirs if d]
        if dirs:
            self._record(tx, MAKEDIRS, {"dirs": dirs})

    def publish(self, tx: MetastoreTransaction, files: Sequence[str]) -> None:
        """After commit: rename the staged copies of ``files`` (encoded URIs) into place, then pin them.

        A load adding a file to a location it keeps stages the copy there under a hidden name and names it
        in the same transaction as the metadata: the rename after the commit makes the file appear at once,
        and a crash in between leaves the rename to housekeeping, never a file readers see before its commit.
        """
        if files:
            self._record(tx, PUBLISH, {"files": list(files)}, first=True)

    def _record(
        self, tx: MetastoreTransaction, kind: str, payload: dict[str, Any], *, first: bool = False
    ) -> None:
        now = _now_ms()
        # One completion per transaction and position: a load batch creating hundreds of objects then
        # deletes their rows in one statement instead of one transaction each.
        key = "file_intents_first" if first else "file_intents"
        group: list[Intent] | None = tx.shared.get(key)
        if group is None:
            group = tx.shared[key] = []
            tx.on_commit(lambda: self._after_commit(group), first=first)
        group.append(Intent(0, kind, payload, now, now, 0, None))  # numbered when its row is written
        # The rows are written together just before the commit (one multi-row insert for a whole load batch,
        # in recording order): committed with the change, or not at all, as if written one by one.
        unwritten: list[tuple[list[Intent], int]] | None = tx.shared.get("file_intents_unwritten")
        if unwritten is None:
            unwritten = tx.shared["file_intents_unwritten"] = []
            tx.before_commit.append(lambda: _write_rows(tx, unwritten))
        unwritten.append((group, len(group) - 1))

    def _after_commit(self, intents: list[Intent]) -> None:
        """The request's own completion; a failure leaves the row for housekeeping, the change stands."""
        fault_point("after_commit_before_intent")
        for intent, exc in self.complete_all(intents):
            if can_never_succeed(exc):
                continue  # reported as parked by complete_all
            # the metadata change committed: report, retry later, do not fail the call
            log.warning(
                "file work of intent %s (%s) failed, housekeeping will retry it: %s",
                intent.id,
                intent.kind,
                exc,
            )

    # -- completing ------------------------------------------------------------------------------------
    def complete(self, intent: Intent) -> None:
        """Do the intent's work and delete its row; on failure record the error and re-raise."""
        for _, exc in self.complete_all([intent]):
            raise exc

    def complete_all(self, intents: Sequence[Intent]) -> list[tuple[Intent, Exception]]:
        """Do each intent's work, in order, and delete the rows of those done in one statement.

        A failure is recorded on its row (kept for housekeeping) and returned; the others go on. One that can
        never succeed is parked and reported once, here.
        """
        done: list[int] = []
        failed: list[tuple[Intent, Exception]] = []
        for intent in intents:
            try:
                self._perform(intent)
            except Exception as exc:
                impossible = can_never_succeed(exc)
                with self.events.transaction() as tx:
                    tx.conn.execute(
                        update(file_intents)
                        .where(file_intents.c.id == intent.id)
                        .values(
                            attempts=file_intents.c.attempts + 1,
                            last_error=f"{type(exc).__name__}: {exc}"[:4000],
                            **({"parked_at": _now_ms()} if impossible else {}),
                        )
                    )
                if impossible:
                    log.error(
                        "file intent %s (%s) can never succeed and is parked: %s; it stays listed by "
                        "'hmsrepl intents list' and housekeeping no longer retries it: fix the path, then run "
                        "'hmsrepl intents run --include-parked'",
                        intent.id,
                        intent.kind,
                        exc,
                    )
                failed.append((intent, exc))
            else:
                done.append(intent.id)
        fault_point("intent_before_delete_row")
        # Joins the caller's transaction if one is open (a create settling a drop inside a load batch): a
        # rollback then brings the rows back, and the work, being idempotent, is simply done again. Alone, its
        # answer is not waited for where the driver allows: a row it fails to delete is done again likewise.
        if done and not self.events.send_alone_unawaited(_delete_rows_text(done)):
            self.events.execute_alone(_DELETE_ROWS, {"ids": done})
        return failed

    def _perform(self, intent: Intent) -> None:
        if intent.kind == MAKEDIRS:
            files = self.cm.files.batch()  # a batch's directories share parents: each resolved once
            for directory in intent.payload.get("dirs", []):
                files.makedirs(directory)
        elif intent.kind == PUBLISH:
            files = intent.payload.get("files", [])
            publish_owed(self.cm.files, [EncodedFileUri.decode(text).file_uri for text in files])
            self.cm.pin(files)
        elif intent.kind == RECYCLE:
            files = intent.payload.get("files", [])
            syncs = DirectorySyncs()
            self.cm.recycle(files, syncs)
            named = {path_key(EncodedFileUri.decode(text).file_uri) for text in files}
            for directory in intent.payload.get("dirs", []):
                syncs.before_removing(self.cm.files, directory)
                if _remove_directory(self.cm.files, directory, named):
                    syncs.removed(self.cm.files, directory)
            syncs.flush()
        else:
            raise InvalidOperationError(
                f"file intent {intent.id} has unknown kind '{intent.kind}'; upgrade this metastore to one "
                f"that knows it, or delete the row once the work is done by hand"
            )

    def pending(
        self, limit: int | None = None, *, committed_only: bool = False, include_parked: bool = True
    ) -> list[Intent]:
        """Pending intents, oldest first; ``committed_only`` leaves out those of this thread's open transaction.

        Those belong to changes that have not committed yet: their work must wait for the commit.
        """
        query = select(file_intents).order_by(file_intents.c.id)
        if not include_parked:
            query = query.where(file_intents.c.parked_at.is_(None))
        if limit is not None:
            query = query.limit(limit)
        reader = self.events.read_engine.connect() if committed_only else self.events.reader()
        with reader as conn:
            return [
                Intent(
                    row.id,
                    row.kind,
                    json.loads(row.payload),
                    row.created_at,
                    row.claimed_at,
                    row.attempts,
                    row.last_error,
                    row.parked_at,
                )
                for row in conn.execute(query)
            ]

    def owed_copies(self) -> set[str]:
        """Path keys of staged copies that committed loads still have to publish: never leftovers to sweep."""
        return {
            path_key(staging_name(EncodedFileUri.decode(text).file_uri))
            for intent in self.pending(committed_only=True)
            if intent.kind == PUBLISH
            for text in intent.payload.get("files", [])
        }

    def _claim(self, intent: Intent) -> bool:
        """Take the intent for this process (optimistically: whoever moves ``claimed_at`` first has it)."""
        with self.events.transaction() as tx:
            return (
                tx.conn.execute(
                    update(file_intents)
                    .where(file_intents.c.id == intent.id, file_intents.c.claimed_at == intent.claimed_at)
                    .values(claimed_at=max(_now_ms(), intent.claimed_at + 1))
                ).rowcount
                == 1
            )

    def run_pending(self, lease_seconds: float = 0.0, *, include_parked: bool = False) -> IntentRunResult:
        """Complete the intents nobody has worked on for ``lease_seconds``, oldest first.

        The periodic pass leaves a lease so that it does not race the request that is completing its own
        intent right now (harmless, but wasted work); after a restart (``Metastore.open``) and from the CLI
        every row is taken. A failing intent is kept with its error and retried by the next pass, unless it
        can never succeed: that one is parked, and only ``include_parked`` (the operator's run) tries it again.
        """
        completed = failed = skipped = parked = 0
        cutoff = _now_ms() - int(lease_seconds * 1000)
        for intent in self.pending(include_parked=include_parked):
            if intent.claimed_at > cutoff or not self._claim(intent):
                skipped += 1
                continue
            try:
                self.complete(intent)
            except Exception as exc:  # keep going: one bad intent must not block the others
                if can_never_succeed(exc):
                    parked += 1
                    continue
                failed += 1
                log.warning("file intent %s (%s) failed again: %s", intent.id, intent.kind, exc)
            else:
                completed += 1
        if completed or failed:
            log.info(
                "file intents: %s completed, %s failed, %s left to their owner", completed, failed, skipped
            )
        return IntentRunResult(completed, failed, skipped, parked)

    def _settle_candidates(self) -> list[Intent]:
        """Committed intents a new object may have to wait for; read once per open transaction.

        A load batch creates hundreds of objects in one transaction: one read serves them all (what other
        writers commit meanwhile is as unseen as it would be a moment after a fresh read).
        """
        tx = self.events.current_transaction()
        if tx is not None and "settle_candidates" in tx.shared:
            return tx.shared["settle_candidates"]
        candidates = [i for i in self.pending(committed_only=True) if i.kind in SETTLED_BEFORE_CREATE]
        if tx is not None:
            tx.shared["settle_candidates"] = candidates
        return candidates

    def settle(self, locations: Iterable[str | None], what: str, *, any_pending: bool = True) -> None:
        """Complete pending recycle and publish intents touching ``locations`` before a new object takes them.

        This is what keeps a re-created name from adopting the files of a dropped object whose recycling
        a crash interrupted. Raises InvalidOperationError naming the location and the cause when an intent
        cannot be completed now. ``any_pending``: False when the caller just read ``ANY_SETTLE_CANDIDATE`` as
        false (there is nothing to settle, and nothing to read).
        """
        given = [loc for loc in locations if loc]
        if not given or not any_pending:
            return
        candidates = self._settle_candidates()
        if not candidates:  # the usual case: no location need be keyed (a load settles 100,000 partitions')
            return
        keys = {path_key(loc).rstrip("/") for loc in given}
        for intent in list(candidates):
            if not _overlaps(intent.paths(), keys):
                continue
            try:
                self.complete(intent)
                candidates.remove(intent)
            except Exception as exc:
                raise InvalidOperationError(
                    f"{what} cannot be created yet: its location still holds files of a dropped object whose "
                    f"recycling into cmroot failed ({exc}); fix the cause and run 'hmsrepl intents run', "
                    "then retry"
                ) from exc


def _ancestors(key: str) -> Iterable[str]:
    """``key`` and every parent of it (``s3://b/a/b`` -> itself, ``s3://b/a``, ``s3://b``)."""
    while key:
        yield key
        if "/" not in key:
            return
        key = key.rsplit("/", 1)[0]
        if key.endswith(":/") or key.endswith(":") or key.endswith("/"):
            return


def _overlaps(paths: Sequence[str], keys: set[str]) -> bool:
    """Whether any path lies at, under or above one of ``keys`` (linear in the paths' depth)."""
    normalized = {path_key(p).rstrip("/") for p in paths}
    if any(ancestor in keys for p in normalized for ancestor in _ancestors(p)):
        return True
    return any(ancestor in normalized for key in keys for ancestor in _ancestors(key))


def _remove_directory(fs: RootedFileSystem, directory: str, named: set[str]) -> bool:
    """Remove a dropped object's directory, unless it holds data files the drop did not name; True if gone.

    Those were written after the drop was decided (a new writer of the same name): deleting them would
    lose data, so the directory is kept and they are left to their object. Hidden files (``_SUCCESS``,
    ``.crc``) and empty subdirectories go with the directory.
    """
    strangers = [s.uri for s in list_data_files(fs, directory) if path_key(s.uri) not in named]
    if strangers:
        log.warning(
            "kept directory '%s' of a dropped object: it holds %s data files the drop did not name (e.g. '%s')",
            directory,
            len(strangers),
            strangers[0],
        )
        return False
    fs.delete_tree(directory)
    return not fs.has_entry(directory)
