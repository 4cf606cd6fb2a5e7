"""Writing and reading insert-only transactional tables (Hive's "micro-managed" tables), in any file format.

An insert-only table gets ACID semantics from its directory layout instead of from row ids: each write
goes into a fresh ``delta_<w>_<w>_0000`` (append) or ``base_<w>`` (overwrite) directory under a write id
allocated in a metastore txn, and readers pick directories with their ``ValidWriteIdList``. So a writer
can put files wherever it likes inside its own directory, in any format, and nobody sees them until the
txn commits; an aborted write needs no cleanup to stay invisible; and an overwrite leaves older files in
place for readers still holding an older snapshot (a cleaner removes them later, as Hive's does).

The commit records the written files with checksums (ACID_WRITE event, then COMMIT_TXN listing them), so
replication copies exactly the committed files, at commit time, and nothing for aborted txns.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Literal, TypeVar

from hmsrepl.acid.directories import (
    DirKind,
    base_dir_name,
    delta_dir_name,
    parse_directory_name,
    visible_directories,
)
from hmsrepl.exceptions import (
    HmsReplError,
    InvalidObjectError,
    InvalidOperationError,
    NoSuchPartitionError,
)
from hmsrepl.formats.writeids import ValidTxnList, ValidWriteIdList
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.metastore.service import Metastore
from hmsrepl.storage.base import is_hidden, join_uri, relative_to

log = logging.getLogger(__name__)
_T = TypeVar("_T")

WriteMode = Literal["append", "overwrite"]
EMPTY_DIRECTORY_MARKER = "_SUCCESS"
"""Written into a new directory that would otherwise be empty, so listings (which see files, not
directories, on object stores too) still find it: an empty overwrite must hide the older data."""

_INSERT_ONLY_HINT = "TBLPROPERTIES ('transactional'='true', 'transactional_properties'='insert_only')"


def is_insert_only(table: Table) -> bool:
    """Hive compares these properties case-insensitively, so ``INSERT_ONLY`` counts as well."""
    props = {key.lower(): value for key, value in table.parameters.items()}
    return (
        props.get("transactional", "").strip().lower() == "true"
        and props.get("transactional_properties", "").strip().lower() == "insert_only"
    )


def require_insert_only(table: Table, action: str) -> None:
    """Refuse tables whose readers would not honour write ids, before any txn is opened.

    Writing a delta directory into a plain table would expose uncommitted files to its readers, and a full
    ACID table's readers expect ORC files with row ids, which an insert-only writer does not produce.
    """
    name = table.qualified_name
    props = {key.lower(): value for key, value in table.parameters.items()}
    if props.get("transactional", "").strip().lower() != "true":
        raise InvalidObjectError(
            f"cannot {action} table '{name}' transactionally: it is not a transactional table; "
            f"create it (or ALTER it) with {_INSERT_ONLY_HINT}, or use a plain non-transactional write"
        )
    if not is_insert_only(table):
        kind = props.get("transactional_properties") or "default"
        raise InvalidObjectError(
            f"cannot {action} table '{name}': it is a full ACID table (transactional_properties='{kind}') "
            "whose readers need ORC files with row ids; only insert-only tables are supported here, "
            f"so use a table created with {_INSERT_ONLY_HINT}"
        )
    if not table.sd.location:
        raise InvalidObjectError(f"table '{name}' has no location; it cannot hold data files")


def _check_partition_values(table: Table, partition_values: Sequence[str] | None) -> list[str] | None:
    keys = table.partition_key_names
    if not keys:
        if partition_values:
            raise InvalidObjectError(
                f"table '{table.qualified_name}' is not partitioned; do not pass partition values "
                f"({list(partition_values)})"
            )
        return None
    if partition_values is None:
        raise InvalidObjectError(
            f"table '{table.qualified_name}' is partitioned by {keys}; pass partition_values, one per key"
        )
    values = list(partition_values)
    for value in values:
        if not isinstance(value, str):
            raise InvalidObjectError(
                f"partition value {value!r} for table '{table.qualified_name}' must be a string, "
                "as Hive stores partition values; convert it with str() first"
            )
    return values


class _Heartbeat:
    """Keeps a long write's txn alive: the metastore aborts txns silent for longer than its timeout."""

    def __init__(self, metastore: Metastore, txn_id: int, interval: float) -> None:
        self._metastore = metastore
        self._txn_id = txn_id
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"hmsrepl-heartbeat-{txn_id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._metastore.txns.heartbeat(self._txn_id)
            except HmsReplError as exc:  # aborted or gone: further beats cannot help, commit will report it
                log.warning("heartbeat of txn %s stopped: %s", self._txn_id, exc)
                return
            except Exception as exc:  # a transient database error; the next beat may get through
                log.warning("heartbeat of txn %s failed: %s", self._txn_id, exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()


class InsertOnlyWriter:
    """One transactional write (append or overwrite) into an insert-only table or one of its partitions.

    Use as a context manager: entering opens the txn, allocates the write id and creates ``target_uri``;
    write the data files into that directory; leaving the block commits, or aborts if the block raised.
    A missing partition is added first (if another writer adds it concurrently, that one is used); it stays
    if the write aborts, and reads as empty. A background heartbeat keeps the txn alive during long writes.
    """

    def __init__(
        self,
        metastore: Metastore,
        db_name: str,
        table_name: str,
        partition_values: Sequence[str] | None = None,
        *,
        mode: WriteMode = "append",
        user: str = "hive",
        host: str | None = None,
        heartbeat: bool = True,
    ) -> None:
        if mode not in ("append", "overwrite"):
            raise ValueError(f"mode must be 'append' or 'overwrite', not {mode!r}")
        self.metastore = metastore
        self.db_name = db_name.lower()
        self.table_name = table_name.lower()
        self.requested_partition = None if partition_values is None else list(partition_values)
        self.mode: WriteMode = mode
        self.user = user
        self.host = host or socket.gethostname()
        self._heartbeat_enabled = heartbeat
        self._heartbeat: _Heartbeat | None = None
        self._state = "new"
        self._txn_id: int | None = None
        self._write_id: int | None = None
        self._location: str | None = None
        self._target: str | None = None
        self.partition_values: list[str] | None = None
        self.files: list[str] = []
        """Encoded URIs (``fileuri#checksum#cmroot#subdir``) recorded at commit."""
        self.commit_event_id: int | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------
    def begin(self) -> InsertOnlyWriter:
        """Validate the table, open the txn, allocate the write id and create the target directory.

        Everything that can fail on bad input is checked before the txn opens, so mistakes leave no
        aborted txns (or events) behind.
        """
        if self._state != "new":
            raise InvalidOperationError(f"this writer for '{self.qualified_name}' was already started")
        catalog = self.metastore.catalog
        table = catalog.get_table(self.db_name, self.table_name)
        require_insert_only(table, "write to")
        values = _check_partition_values(table, self.requested_partition)
        target_sd = table.sd if values is None else self._ensure_partition(table, values).sd
        location = target_sd.location
        if not location:
            raise InvalidObjectError(f"partition {values} of table '{self.qualified_name}' has no location")
        self.partition_values = values
        self._location = location

        txns = self.metastore.txns
        [self._txn_id] = txns.open_txns(1, user=self.user, host=self.host)
        self._state = "open"
        try:
            [allocation] = txns.allocate_table_write_ids([self._txn_id], self.db_name, self.table_name)
            self._write_id = allocation.write_id
            name = (
                base_dir_name(self._write_id) if self.mode == "overwrite" else delta_dir_name(self._write_id)
            )
            self._target = join_uri(location, name)
            fs = self.metastore.cm.files  # the metastore's data roots
            if next(iter(fs.list_files(self._target)), None) is not None:
                raise InvalidOperationError(
                    f"directory '{self._target}' already holds files although write id {self._write_id} of "
                    f"'{self.qualified_name}' was just allocated (left by a dropped table of the same "
                    "name?); move them away, then retry"
                )
            fs.makedirs(self._target)
        except BaseException as exc:
            self._abort_quietly(f"begin failed: {exc}")
            raise
        if self._heartbeat_enabled:
            interval = max(self.metastore.txns.timeout_seconds / 3, 1.0)
            self._heartbeat = _Heartbeat(self.metastore, self._txn_id, interval)
        return self

    def _ensure_partition(self, table: Table, values: list[str]) -> Partition:
        catalog = self.metastore.catalog
        try:
            return catalog.get_partition(table.db_name, table.table_name, values)
        except NoSuchPartitionError:
            new = Partition(values=values, db_name=table.db_name, table_name=table.table_name)
            catalog.add_partitions(table.db_name, table.table_name, [new], if_not_exists=True)
            return catalog.get_partition(table.db_name, table.table_name, values)

    def commit(self) -> list[str]:
        """Record the files now in the target directory and commit; returns their encoded URIs.

        Files are listed and checksummed before the txn commits, so the COMMIT_TXN event names the exact
        content that became visible. If anything fails the txn is aborted and the error re-raised.
        """
        self._require_open("commit")
        target, location = self.target_uri, self.location
        try:
            fs = self.metastore.cm.files
            statuses = list(fs.list_files(target))
            if not statuses:
                fs.write_bytes(join_uri(target, EMPTY_DIRECTORY_MARKER), b"")
            data = [s for s in statuses if not is_hidden(relative_to(s.uri, target))]
            files = describe_files(location, self.metastore.cm, data)  # may take long: still heartbeating
            self._stop_heartbeat()
            txns = self.metastore.txns
            txns.add_write_notification(
                self.txn_id, self.write_id, self.db_name, self.table_name, self.partition_values, files
            )
            event_id = txns.commit_txn(self.txn_id)
        except BaseException as exc:
            self._abort_quietly(f"commit failed: {exc}")
            raise
        self._state = "committed"
        self.files = files
        self.commit_event_id = event_id
        return files

    def abort(self, reason: str = "client") -> None:
        """Abort the txn. Files already written stay on disk but are never visible to any reader."""
        if self._state == "aborted":
            return
        self._require_open("abort")
        self._stop_heartbeat()
        self.metastore.txns.abort_txns([self.txn_id], reason=reason)
        self._state = "aborted"

    def heartbeat(self) -> None:
        """Tell the metastore the writer is alive (done automatically unless ``heartbeat=False``)."""
        self._require_open("heartbeat")
        self.metastore.txns.heartbeat(self.txn_id)

    def _abort_quietly(self, reason: str) -> None:
        """Abort on a failure path without hiding the original error behind a second one."""
        self._stop_heartbeat()
        if self._state != "open" or self._txn_id is None:
            return
        try:
            self.metastore.txns.abort_txns([self._txn_id], reason=reason[:200])
        except Exception as exc:  # e.g. already aborted by timeout, or the database is unreachable
            log.warning("could not abort txn %s after a failed write: %s", self._txn_id, exc)
        self._state = "aborted"

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None

    def _require_open(self, action: str) -> None:
        if self._state != "open":
            raise InvalidOperationError(
                f"cannot {action}: the write to '{self.qualified_name}' is {self._state}, not open"
                + ("; call begin() or use the writer as a context manager" if self._state == "new" else "")
            )

    def __enter__(self) -> InsertOnlyWriter:
        return self.begin()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._state != "open":  # committed or aborted explicitly inside the block
            return
        if exc_type is None:
            self.commit()
        else:
            self._abort_quietly(f"{exc_type.__name__}: {exc}")

    # -- what the caller writes into ----------------------------------------------------------------------
    @property
    def qualified_name(self) -> str:
        return f"{self.db_name}.{self.table_name}"

    @property
    def txn_id(self) -> int:
        return self._started(self._txn_id, "txn_id")

    @property
    def write_id(self) -> int:
        return self._started(self._write_id, "write_id")

    @property
    def location(self) -> str:
        """The table's or partition's location; the target directory is directly below it."""
        return self._started(self._location, "location")

    @property
    def target_uri(self) -> str:
        """The new ``delta_*``/``base_*`` directory, spelled like the stored location (never decoded)."""
        return self._started(self._target, "target_uri")

    @property
    def state(self) -> str:
        """``new``, ``open``, ``committed`` or ``aborted``."""
        return self._state

    def _started(self, value: _T | None, what: str) -> _T:
        if value is None:
            raise InvalidOperationError(
                f"{what} of the write to '{self.qualified_name}' is known only after begin() "
                "(or entering the writer's with-block)"
            )
        return value


class InsertOnlyReader:
    """The files of an insert-only table visible in one snapshot.

    The snapshot is fixed when the reader is made (the current one unless ``valid_write_ids`` is given),
    so every partition is read as of the same moment however long the read takes.
    """

    def __init__(
        self,
        metastore: Metastore,
        db_name: str,
        table_name: str,
        valid_write_ids: ValidWriteIdList | None = None,
    ) -> None:
        self.metastore = metastore
        self.table = metastore.catalog.get_table(db_name, table_name)
        require_insert_only(self.table, "read")
        # Compacted directories carry a txn id; the current txn list is right for them even with an old
        # write-id list, since a compaction only ever holds data committed before it.
        self.valid_txns: ValidTxnList = metastore.txns.get_valid_txns()
        if valid_write_ids is None:
            [entry] = metastore.txns.get_valid_write_ids([self.table.qualified_name], self.valid_txns)
            valid_write_ids = entry.write_ids
        elif valid_write_ids.table_name not in (None, self.table.qualified_name):
            raise InvalidObjectError(
                f"the ValidWriteIdList is for table '{valid_write_ids.table_name}', not "
                f"'{self.table.qualified_name}'; get one with get_valid_write_ids(['{self.table.qualified_name}'])"
            )
        self.valid_write_ids = valid_write_ids

    def files(self, partition_values: Sequence[str] | None = None) -> list[str]:
        """Visible data file URIs of one partition, or of the whole table (every partition) by default."""
        if self.table.partition_keys and partition_values is None:
            return [uri for _, uris in self.partition_files() for uri in uris]
        values = _check_partition_values(self.table, partition_values)
        if values is None:
            return self._location_files(self.table.sd.location or "")
        part = self.metastore.catalog.get_partition(self.table.db_name, self.table.table_name, values)
        return self._location_files(part.sd.location or "")

    def partition_files(self) -> list[tuple[Partition | None, list[str]]]:
        """(partition, visible files) for every partition, or ``[(None, files)]`` for an unpartitioned table.

        Partitions added after the snapshot are listed too, but their files are invisible to it.
        """
        if not self.table.partition_keys:
            return [(None, self._location_files(self.table.sd.location or ""))]
        parts = self.metastore.catalog.get_partitions(self.table.db_name, self.table.table_name)
        return [(part, self._location_files(part.sd.location or "")) for part in parts]

    def _location_files(self, location: str) -> list[str]:
        if not location:
            return []
        entries: dict[str, list[str]] = {}
        for status in self.metastore.cm.files.list_files(location):
            relative = relative_to(status.uri, location)
            # Hidden files still reveal their directory (an empty base holds only a marker).
            uris = entries.setdefault(relative.split("/", 1)[0], [])
            if not is_hidden(relative):
                uris.append(status.uri)
        try:
            chosen = visible_directories(entries, self.valid_write_ids, valid_txns=self.valid_txns)
        except ValueError as exc:
            raise InvalidObjectError(
                f"cannot read '{location}' of table '{self.table.qualified_name}': {exc}"
            ) from exc
        for name in chosen:
            parsed = parse_directory_name(name)
            if parsed is not None and parsed.kind is DirKind.DELETE_DELTA:
                raise InvalidObjectError(
                    f"'{location}' of table '{self.table.qualified_name}' holds delete delta '{name}', "
                    "which only full ACID tables have; read this table with Hive's ACID reader"
                )
        return [uri for name in chosen for uri in sorted(entries[name])]


def visible_files(
    metastore: Metastore,
    db_name: str,
    table_name: str,
    partition_values: Sequence[str] | None = None,
    valid_write_ids: ValidWriteIdList | None = None,
) -> list[str]:
    """Data file URIs of an insert-only table (or one partition) visible to ``valid_write_ids``.

    Defaults to the current snapshot. Hidden files (``_SUCCESS``, ``.crc``, ``_``/``.`` names) are never
    returned; order is originals, base, then deltas by write id.
    """
    reader = InsertOnlyReader(metastore, db_name, table_name, valid_write_ids)
    return reader.files(partition_values)
