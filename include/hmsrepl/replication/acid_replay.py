"""Replication of transactional (ACID) tables: txn events on both sides, and the source txn -> target txn map.

Seed 004's design. Write ids, not txn ids, name ACID data (directory names, ValidWriteIdLists), so write ids
are kept identical per table while each source txn is replayed by a target txn of its own, recorded in the
target's ``repl_txn_map`` from the replayed OPEN_TXN until its COMMIT/ABORT_TXN. Data of a txn is copied
at its COMMIT_TXN only, so an aborted txn copies nothing, and every table a txn wrote changes in the one
target transaction that commits it (together with ``repl.last.id``).

Dump side: every OPEN_TXN is dumped (no one knows yet which database a txn will touch), as are every
COMMIT/ABORT_TXN (they close what OPEN_TXN opened) with the commit's writes filtered to the policy.
Other events of ACID tables carry no file listing: a listing of an ACID directory includes files of open
and aborted txns, which must never be copied outside of a commit.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from hmsrepl.acid.directories import (
    DirKind,
    base_dir_name,
    delta_dir_name,
    parse_directory_name,
    visible_directories,
)
from hmsrepl.exceptions import InvalidObjectError, NoSuchObjectError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.formats.partition_names import parse_partition_name
from hmsrepl.formats.writeids import ValidTxnList, ValidWriteIdList
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.messages import (
    AbortTxnMessage,
    AcidWriteMessage,
    AddPartitionMessage,
    AllocWriteIdMessage,
    CommitTxnMessage,
    Message,
    OpenTxnMessage,
    relative_path,
)
from hmsrepl.metastore.payloads import TableSnapshot, TableWriteId, TxnWrite
from hmsrepl.metastore.transactions import ReplicationSnapshot, ReplicationTxnError
from hmsrepl.replication.dump_events import DumpEvent
from hmsrepl.replication.layout import DumpDir, DumpLayout, DumpMetadata
from hmsrepl.replication.policy import ReplicationPolicy
from hmsrepl.replication.target import TargetWriter
from hmsrepl.storage.base import FileStatus, is_hidden, join_uri, relative_to
from hmsrepl.storage.rooted import RootedFileSystem

log = logging.getLogger(__name__)

OPEN_TXN_TIMEOUT = "hive.repl.bootstrap.dump.open.txn.timeout"
DEFAULT_OPEN_TXN_TIMEOUT = "1h"
TXN_EVENTS = (EventType.OPEN_TXN, EventType.COMMIT_TXN, EventType.ABORT_TXN)
"""Txn events logged without a database (a fact of the log, not of the types: ``SPECS`` has no database for
them either): a dump reads them besides its database's events."""
REPL_HOST = "hmsrepl-load"

__all__ = ["ReplicationTxnError"]

# -- settings ----------------------------------------------------------------------------------------------
_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|sec|m|min|h|hr|hour|hours|d|day|days)?\s*", re.I)
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "hour": 3600}
_UNIT_SECONDS |= {"hours": 3600, "d": 86400, "day": 86400, "days": 86400}


def open_txn_timeout_seconds(settings: dict[str, str]) -> float:
    """``hive.repl.bootstrap.dump.open.txn.timeout`` in seconds; like Hive, a bare number means hours."""
    text = settings.get(OPEN_TXN_TIMEOUT, DEFAULT_OPEN_TXN_TIMEOUT)
    match = _DURATION.fullmatch(text)
    if match is None:
        raise InvalidObjectError(
            f"'{OPEN_TXN_TIMEOUT}'='{text}' is not a duration; write e.g. '1h', '30m', '90s' or '0s'"
        )
    return float(match.group(1)) * _UNIT_SECONDS[(match.group(2) or "h").lower()]


# -- dump side ---------------------------------------------------------------------------------------------
def wait_for_open_txns(
    source: Metastore,
    db_name: str,
    timeout_seconds: float,
    *,
    poll_seconds: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[int]:
    """Wait for the txns open now that write to ``db_name``, then abort those still open (as Hive's
    bootstrap dump does), so that the dump does not hold a database half-way through long writes.

    Txns opened later are not waited for: the dump records them as open and the replica replays them.
    Returns the txns this aborted.
    """
    txns = source.txns
    pending = txns.open_txns_writing(db_name)
    deadline = clock() + timeout_seconds
    while pending:
        states = txns.txn_states(pending)
        pending = [txn for txn in pending if states.get(txn) == "open"]
        if not pending or clock() >= deadline:
            break
        sleep(min(poll_seconds, max(deadline - clock(), 0.0)))
    if pending:
        log.warning(
            "bootstrap dump of %s: aborting txns %s still open after %ss (%s)",
            db_name,
            pending,
            timeout_seconds,
            OPEN_TXN_TIMEOUT,
        )
        txns.abort_txns(pending, reason=f"open longer than {OPEN_TXN_TIMEOUT} during a bootstrap dump")
    return pending


def is_acid_snapshot(table: TableSnapshot | Mapping[str, Any] | None) -> bool:
    """Whether a table snapshot (an event's, or a bootstrap dump's document) is a transactional table."""
    if isinstance(table, TableSnapshot):
        params: Mapping[str, Any] = table.parameters
    else:
        params = (table or {}).get("parameters") or {}
    return str(params.get("transactional", "")).strip().lower() == "true"


Prepare = Callable[[DumpEvent[Any], ReplicationPolicy, Metastore | None], DumpEvent[Any] | None]


def prepare_for_dump(
    event: DumpEvent[Any], policy: ReplicationPolicy, source: Metastore | None = None
) -> DumpEvent[Any] | None:
    """The event as an incremental dump of ``policy`` writes it, or None to leave it out (``DUMP_PREPARATION``).

    COMMIT_TXN keeps only the writes of the policy's tables (and lists their files under ``files`` so a
    load's pre-flight checks them, and with ``source`` an empty overwrite's marker, see
    ``_empty_base_marker``); non-txn events of ACID tables lose their data changes; an INSERT
    event on an ACID table (a writer that bypassed write ids) is left out, since its files belong to no
    committed write id.
    """
    return DUMP_PREPARATION[event.kind](event, policy, source)


def _as_is(
    event: DumpEvent[Any], policy: ReplicationPolicy, source: Metastore | None
) -> DumpEvent[Any] | None:
    return event


def _commit_for_policy(
    event: DumpEvent[CommitTxnMessage], policy: ReplicationPolicy, source: Metastore | None
) -> DumpEvent[Any] | None:
    def marked(write: TxnWrite) -> TxnWrite:
        if write.files or source is None:
            return write
        return msgspec.structs.replace(write, files=_empty_base_marker(source, write))

    return commit_keeping(event, lambda w: _included(w, policy), marked)


def commit_keeping(
    event: DumpEvent[CommitTxnMessage],
    keep: Callable[[TxnWrite | TableWriteId], bool],
    mark: Callable[[TxnWrite], TxnWrite] = lambda write: write,
) -> DumpEvent[CommitTxnMessage]:
    """The COMMIT_TXN with only the writes and write ids ``keep`` accepts (``mark`` may complete a kept
    write), its ``files`` listing the kept writes' files for a load's pre-flight."""
    body = event.message.body
    writes = [mark(w) for w in body.writes if keep(w)]
    return event.rewritten(
        msgspec.structs.replace(
            body,
            writes=writes,
            write_ids=[w for w in body.write_ids if keep(w)],
            files=[uri for w in writes for uri in w.files],
        )
    )


def _carries_acid_data(message: Message[Any]) -> bool:
    return is_acid_snapshot(message.table) and message.carries_data


def _without_acid_data(
    event: DumpEvent[Any], policy: ReplicationPolicy, source: Metastore | None
) -> DumpEvent[Any] | None:
    if not _carries_acid_data(event.message):
        return event
    return event.without_data()


def _partitions_without_acid_data(
    event: DumpEvent[AddPartitionMessage], policy: ReplicationPolicy, source: Metastore | None
) -> DumpEvent[Any] | None:
    """None per partition: its data is left to the commits writing it (in the format's own key)."""
    if not _carries_acid_data(event.message):
        return event
    return event.rewritten(event.message.body.without_data())


def _not_acid_insert(
    event: DumpEvent[Any], policy: ReplicationPolicy, source: Metastore | None
) -> DumpEvent[Any] | None:
    return None if _carries_acid_data(event.message) else event


DUMP_PREPARATION: dict[EventType, Prepare] = {
    EventType.COMMIT_TXN: _commit_for_policy,
    EventType.CREATE_TABLE: _without_acid_data,
    EventType.ALTER_TABLE: _without_acid_data,
    EventType.ALTER_PARTITION: _without_acid_data,
    EventType.ADD_PARTITION: _partitions_without_acid_data,
    EventType.INSERT: _not_acid_insert,
    **dict.fromkeys(
        (
            EventType.OPEN_TXN,
            EventType.ABORT_TXN,
            EventType.ALLOC_WRITE_ID,
            EventType.ACID_WRITE,
            EventType.CREATE_DATABASE,
            EventType.ALTER_DATABASE,
            EventType.DROP_DATABASE,
            EventType.DROP_TABLE,
            EventType.DROP_PARTITION,
            EventType.CREATE_FUNCTION,
            EventType.DROP_FUNCTION,
            EventType.UPDATE_TABLE_COLUMN_STAT,
            EventType.UPDATE_PARTITION_COLUMN_STAT,
            EventType.DELETE_TABLE_COLUMN_STAT,
            EventType.DELETE_PARTITION_COLUMN_STAT,
        ),
        _as_is,
    ),
}
"""How an incremental dump writes each event type (every type listed: ``tests/unit/test_event_tables.py``)."""


def _empty_base_marker(source: Metastore, write: TxnWrite) -> list[str]:
    """The marker of an overwrite that wrote no rows: its ``base_<wid>`` holds only ``_SUCCESS``.

    Commits list data files only, but that empty base is what hides the older data from readers, so the
    replica needs the directory too. Looked up at dump time (best effort: a table dropped since has
    nothing left to show).
    """
    values = [v for _, v in parse_partition_name(write.partition)] if write.partition else None
    try:
        table = source.catalog.get_table(write.db, write.table)
        obj = source.catalog.get_partition(write.db, write.table, values) if values else table
    except NoSuchObjectError:
        return []
    if not obj.sd.location:
        return []
    directory = join_uri(obj.sd.location, base_dir_name(write.write_id))
    fs = source.cm.files
    statuses = list(fs.list_files(directory)) if fs.exists(directory) else []
    return describe_files(obj.sd.location, source.cm, statuses)


def write_locations(message: CommitTxnMessage) -> list[tuple[str, list[str]]]:
    """(source table/partition location, files) of each write of a dumped COMMIT_TXN, for copy planners:
    a file's place below its location is its ``subdir`` and name, as for every other event."""
    out = []
    for write in message.body.writes:
        if write.files:
            first = write.files[0]
            uri = EncodedFileUri.decode(first).file_uri
            out.append((uri[: -len(relative_path(first)) - 1], list(write.files)))
    return out


def _included(write: TxnWrite | TableWriteId, policy: ReplicationPolicy) -> bool:
    return write.db == policy.db_name and not policy.functions_only and policy.includes_table(write.table)


def visible_statuses(
    fs: RootedFileSystem, location: str | None, write_ids: ValidWriteIdList, valid_txns: ValidTxnList
) -> list[FileStatus]:
    """Files of one ACID location that make up the snapshot ``write_ids`` (what a reader would read).

    A chosen directory with no data files (an empty overwrite's base holds only a marker) contributes its
    hidden marker, so a copy recreates the directory and readers of the copy skip what it replaced too.
    """
    if not location:
        return []
    if not fs.exists(location):
        return []
    entries: dict[str, list[FileStatus]] = {}
    for status in fs.list_files(location):
        entries.setdefault(relative_to(status.uri, location).split("/", 1)[0], []).append(status)
    chosen = visible_directories(entries, write_ids, valid_txns=valid_txns)
    out: list[FileStatus] = []
    for name in chosen:
        data = [s for s in entries[name] if not is_hidden(relative_to(s.uri, location))]
        out.extend(data or entries[name])
    return out


def acid_state_document(snapshot: ReplicationSnapshot, tables: set[str]) -> dict[str, Any]:
    """What a bootstrap dump records in ``_acid_state`` for the ACID tables it holds."""
    return {
        "event_id": snapshot.event_id,
        "open_txns": list(snapshot.open_txns),
        "tables": {
            name: {
                "high_watermark": write_ids.high_watermark,
                "open": {str(w): owners[w] for w in sorted(write_ids.open_write_ids)},
                "aborted": sorted(write_ids.aborted_write_ids),
            }
            for name, (write_ids, owners) in snapshot.tables.items()
            if name in tables
        },
    }


def dump_acid_files(
    source: Metastore, location: str | None, snapshot_ids: ValidWriteIdList, valid_txns: ValidTxnList
) -> list[str]:
    """Encoded files of one ACID location as of a snapshot (a bootstrap dump's ``_files``).

    A compactor's base is dumped to be placed as a plain ``base_<wid>``: its ``_v<txn>`` suffix names a
    source txn, which means nothing (or another txn) on the replica. Without it the base is valid on the
    replica when its write id is, which is the same snapshot: the base was valid in the dumped one (no
    write id at or below it open there) and every write id the replica opens later is above the watermark.
    A minor compaction's ``delta_<min>_<max>_v<txn>`` is placed as ``delta_<min>_<max>`` for the same
    reason; a statement-less range of write ids still reads as a compactor's (``is_compacted_delta``).
    """
    files = describe_files(
        location, source.cm, visible_statuses(source.cm.files, location, snapshot_ids, valid_txns)
    )
    return [_without_compactor_suffix(text) for text in files]


def _without_compactor_suffix(text: str) -> str:
    entry = EncodedFileUri.decode(text)
    top, slash, rest = entry.subdir.partition("/")
    parsed = parse_directory_name(top)
    if parsed is None or parsed.kind is DirKind.DELETE_DELTA or parsed.visibility_txn_id is None:
        return text
    if parsed.kind is DirKind.BASE:
        plain = base_dir_name(parsed.max_write_id)
    else:  # a minor compaction's delta: statement-less, as Hive 3's compactor named it (still a compactor's)
        plain = delta_dir_name(parsed.min_write_id, parsed.max_write_id, None)
    return dataclasses.replace(entry, subdir=plain + slash + rest).encode()


# -- load side ----------------------------------------------------------------------------------------------
def load_bootstrap_state(writer: TargetWriter, dump: DumpDir, meta: DumpMetadata) -> None:
    """Give each ACID table of a bootstrapped replica the source's write-id state, and open a target txn
    for every source txn open at the dump (its later events will name it). Earlier replays are superseded."""
    txns = writer.target.txns
    txns.repl_forget(writer.db)
    if not dump.exists(DumpLayout.acid_state(meta.db_name)):
        return
    state = dump.read_json(DumpLayout.acid_state(meta.db_name))
    mapping = txns.repl_open_txns(writer.db, state["open_txns"], host=REPL_HOST) if state["open_txns"] else {}
    for name, table in state["tables"].items():
        _set_table_state(writer, name, table, mapping)


def load_bootstrapped_tables_state(
    writer: TargetWriter, sub: DumpDir, meta: DumpMetadata, names: list[str]
) -> None:
    """Give the ACID tables an incremental dump bootstrapped (REPLACE, a rename into the policy) the
    source's write-id state as of the dump's last event, leaving every other table's state and txn alone.

    The window's events are replayed before (same database transaction), so a source txn owning an open write
    id has its target txn already, unless it opened before anything this replica replayed: opened here then.
    A table absent from the state has no write ids yet: whatever the replica held under its name is cleared.
    """
    relative = DumpLayout.acid_state(meta.db_name)
    tables = sub.read_json(relative)["tables"] if sub.exists(relative) else {}
    owners = sorted({src for name in names for src in (tables.get(name) or {}).get("open", {}).values()})
    mapping = writer.target.txns.repl_open_txns(writer.db, owners, host=REPL_HOST) if owners else {}
    empty = {"high_watermark": 0, "open": {}, "aborted": []}
    for name in names:
        _set_table_state(writer, name, tables.get(name, empty), mapping)


def _set_table_state(
    writer: TargetWriter, name: str, table: dict[str, Any], mapping: Mapping[int, int]
) -> None:
    """One table's ``_acid_state`` entry onto the replica, its open write ids owned by the mapped txns."""
    open_ids = {int(w): src for w, src in table["open"].items()}
    write_ids = ValidWriteIdList(
        f"{writer.db}.{name}", table["high_watermark"], frozenset(open_ids), frozenset(table["aborted"])
    )
    writer.target.txns.set_table_write_id_state(
        writer.db, name, write_ids, {w: mapping[src] for w, src in open_ids.items()}
    )


def _open_txn(w: TargetWriter, ev: dict[str, Any], msg: OpenTxnMessage, meta: DumpMetadata) -> None:
    w.target.txns.repl_open_txns(w.db, msg.body.txn_ids, user=msg.body.user or "hive", host=REPL_HOST)


def _alloc_write_id(
    w: TargetWriter, ev: dict[str, Any], msg: AllocWriteIdMessage, meta: DumpMetadata
) -> None:
    for pair in msg.body.txn_to_write_ids:
        w.target.txns.repl_allocate_write_id(w.db, pair.txn_id, w.db, msg.body.table, pair.write_id)


def _acid_write(w: TargetWriter, ev: dict[str, Any], msg: AcidWriteMessage, meta: DumpMetadata) -> None:
    """Checked only: the files travel with the COMMIT_TXN (which records them as write notifications on
    the target txn), but a write of a txn the replica never opened is reported here, at the first event."""
    w.target.txns.repl_target_txn(w.db, msg.body.txn_id, event=f"ACID_WRITE (event {ev['event_id']})")


def _commit_txn(w: TargetWriter, ev: dict[str, Any], msg: CommitTxnMessage, meta: DumpMetadata) -> None:
    """Copy the txn's files into its write directories, record them, commit the target txn."""
    txns = w.target.txns
    src_txn = msg.body.txn_id
    target_txn = txns.repl_target_txn(w.db, src_txn, event=f"COMMIT_TXN (event {ev['event_id']})")
    for write in msg.body.writes:
        table = w.get_table(write.table)
        if table is None:
            raise ReplicationTxnError(
                f"COMMIT_TXN (event {ev['event_id']}) of source txn {src_txn} wrote table "
                f"'{write.table}', which replica database '{w.db}' does not have; run a bootstrap"
            )
        values = [v for _, v in parse_partition_name(write.partition)] if write.partition else None
        location = (w.catalog.get_partition(w.db, table.table_name, values) if values else table).sd.location
        if not location:
            raise ReplicationTxnError(f"'{w.db}.{table.table_name}' has no location on the replica")
        files = write.files if not meta.metadata_only else []
        _copy_write_dirs(w, location, files)
        recorded = [
            w.target.cm.encode(join_uri(location, relative_path(encoded)), entry.checksum, entry.subdir)
            for encoded in files
            if not is_hidden(relative_path(encoded))
            for entry in [EncodedFileUri.decode(encoded)]
        ]
        txns.add_write_notification(target_txn, write.write_id, w.db, table.table_name, values, recorded)
    txns.repl_close_txn(w.db, src_txn, commit=True)


def _copy_write_dirs(w: TargetWriter, location: str, files: list[str]) -> None:
    """Make each write directory (``delta_*``/``base_*``) the files name hold exactly those files.

    A write directory belongs to one write id, so reconciling it cannot touch other txns' data; the
    checksum-verified copy with cmroot fallback is the target writer's.
    """
    groups: dict[str, tuple[str, list[str]]] = {}
    for encoded in files:
        entry = EncodedFileUri.decode(encoded)
        top, _, rest = entry.subdir.partition("/")
        if not top:
            raise ReplicationTxnError(
                f"committed file '{entry.file_uri}' is not inside a write directory (delta_*/base_*); "
                "it was not written by a transactional writer and cannot be replicated as ACID data"
            )
        source_location = entry.file_uri[: -len(relative_path(encoded)) - 1]
        _, group = groups.setdefault(top, (join_uri(source_location, top), []))
        group.append(dataclasses.replace(entry, subdir=rest).encode())
    for top, (source_dir, group) in groups.items():
        w.reconcile(join_uri(location, top), group, source_dir)


def _abort_txn(w: TargetWriter, ev: dict[str, Any], msg: AbortTxnMessage, meta: DumpMetadata) -> None:
    """Abort the replaying txn; nothing is copied. An abort of a txn never opened here has nothing to undo."""
    try:
        w.target.txns.repl_close_txn(w.db, msg.body.txn_id, commit=False)
    except ReplicationTxnError:
        log.warning(
            "ABORT_TXN of source txn %s: no target txn in '%s'; nothing to abort", msg.body.txn_id, w.db
        )


HANDLERS: dict[str, Callable[[TargetWriter, dict[str, Any], Any, DumpMetadata], None]] = {
    EventType.OPEN_TXN: _open_txn,
    EventType.ALLOC_WRITE_ID: _alloc_write_id,
    EventType.ACID_WRITE: _acid_write,
    EventType.COMMIT_TXN: _commit_txn,
    EventType.ABORT_TXN: _abort_txn,
}
