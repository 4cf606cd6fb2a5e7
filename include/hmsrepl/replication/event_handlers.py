"""What an incremental load does with each event: one handler per event type, and the folds that apply a table's
run of partition events as a few catalog calls.

A handler receives the target writer, the dumped event and its typed message; it changes the replica only
through the writer (``target.TargetWriter``), inside the batch's transaction. ``PartitionRuns`` and
``TableCreates`` gather what a batch does to partitions and new tables so that it costs a few calls, not one
per event, while keeping each object's events in order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hmsrepl.exceptions import InvalidOperationError, NoSuchObjectError
from hmsrepl.formats.partition_names import parse_partition_name
from hmsrepl.metastore.event_specs import Scope, kinds, spec_of
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.messages import (
    AddPartitionMessage,
    AlterDatabaseMessage,
    AlterPartitionMessage,
    AlterTableMessage,
    CommitTxnMessage,
    CreateFunctionMessage,
    CreateTableMessage,
    DataChange,
    DeleteColumnStatMessage,
    DropDatabaseMessage,
    DropFunctionMessage,
    DropPartitionMessage,
    DropTableMessage,
    InsertMessage,
    Message,
    UpdateColumnStatMessage,
)
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.payloads import PartitionSnapshot, TableSnapshot
from hmsrepl.replication import acid_replay, iceberg
from hmsrepl.replication.dump_event_checks import event_message
from hmsrepl.replication.event_batches import database_event
from hmsrepl.replication.layout import DumpMetadata
from hmsrepl.replication.replica_files import compose
from hmsrepl.replication.table_writes import tables_touched
from hmsrepl.replication.target import TargetWriter


class PartitionRuns:
    """Folds partition events into each partition's final state, per table, within one batch.

    A batch commits as one transaction, so readers of the target only ever see batch boundaries; applying a
    table's run of ADD/ALTER/DROP_PARTITION and partition INSERT events as one drop, one add and one alter
    call gives the same target as applying them one by one, with far fewer round trips and without copying
    file versions that a later event replaces. A partition's successive data changes are composed in memory
    into one (``replica_files.compose``) and published once. A table's run is flushed before any other event
    that touches that table (or the database) is applied, so event order per object is kept.
    """

    def __init__(self, writer: TargetWriter, meta: DumpMetadata) -> None:
        self.writer, self.meta = writer, meta
        self.tables: dict[str, TableSnapshot] = {}
        self.parts: dict[str, dict[str, PartState | None]] = {}

    def absorb(self, msg: Message[Any]) -> bool:
        """Take a partition event into its table's run; False for any other event (flush, then apply it)."""
        fold = _FOLDS.get(EventType(msg.kind))
        table = msg.table
        if fold is None or table is None or (isinstance(msg, InsertMessage) and msg.partition is None):
            return False
        self.tables[table.table_name] = table
        fold(self.parts.setdefault(table.table_name, {}), msg, self.meta)
        return True

    def flush_for(self, msg: Message[Any]) -> None:
        """Flush the runs an event depends on: its table's (both names for a rename), all for a database
        event, every transactional table's for a transaction's event (it writes ACID tables only), none for
        a function's."""
        if msg.table_name is None:
            if database_event(msg):
                self.flush()
            elif spec_of(msg.kind).scope is Scope.TXN:
                for name in [n for n, table in self.tables.items() if acid_replay.is_acid_snapshot(table)]:
                    self._flush_table(name)
            return
        for name in tables_touched(msg):
            self._flush_table(name)

    def flush(self) -> None:
        for name in list(self.tables):
            self._flush_table(name)

    def _flush_table(self, name: str) -> None:
        table, parts = self.tables.pop(name, None), self.parts.pop(name, {})
        if table is None:
            return
        dropped = [part_name for part_name, state in parts.items() if state is None]
        if dropped:
            self.writer.drop_partitions(name, [[v for _, v in parse_partition_name(n)] for n in dropped])
        kept = [(state.snapshot.to_json(), state.change) for state in parts.values() if state is not None]
        if kept:
            self.writer.put_partitions(name, kept, table.location)


class TableCreates:
    """New tables that take no data with them (a metadata-only load's, a partitioned table's), created
    together: one catalog call checks all their locations in one read, where each would cost its own.

    Only events ``PartitionRuns`` absorbs may come between them, and those are applied later still: any
    other event is applied after the pending tables are created, and so is every partition run (the load
    creates them before it flushes one). Each table therefore exists before anything else touches it, in
    the same transaction: readers of the target see the same batch.
    """

    def __init__(self, writer: TargetWriter, meta: DumpMetadata) -> None:
        self.writer, self.meta = writer, meta
        self.pending: list[Table] = []

    def absorb(self, msg: Message[Any]) -> bool:
        """Take a CREATE_TABLE of a table known not to exist and without data; False for any other event."""
        if not isinstance(msg, CreateTableMessage) or _table_change(msg, self.meta) is not None:
            return False
        table = self.writer.mapping.table(msg.table.to_json())
        if iceberg.is_iceberg(table) or not self.writer.claim_absent(table.table_name):
            return False  # an Iceberg table's metadata is rewritten for the replica: ``put_table``
        self.pending.append(table)
        return True

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        self.writer.create_tables(pending)


@dataclass
class PartState:
    """A partition's state at the end of a table's run: its snapshot and its data change since the batch
    began (composed; None: no data change)."""

    snapshot: PartitionSnapshot
    change: DataChange | None


def _fold_add(parts: dict[str, PartState | None], msg: AddPartitionMessage, meta: DumpMetadata) -> None:
    for name, snapshot, change in zip(msg.partition_names(), msg.partitions, msg.changes(), strict=True):
        parts[name] = PartState(snapshot, _data(change, meta))


def _fold_drop(parts: dict[str, PartState | None], msg: DropPartitionMessage, meta: DumpMetadata) -> None:
    for name in msg.partition_names():
        parts[name] = None


def _fold_alter(parts: dict[str, PartState | None], msg: AlterPartitionMessage, meta: DumpMetadata) -> None:
    """ALTER_PARTITION (new metadata, maybe data): compose onto the run."""
    _fold_write(parts, msg.partition_names()[0], msg.after, msg.data, meta)


def _fold_insert(parts: dict[str, PartState | None], msg: InsertMessage, meta: DumpMetadata) -> None:
    """A partition INSERT (data only: it changes data, not the partition's metadata)."""
    (name,) = msg.partition_names()
    previous = parts.get(name)
    snapshot = previous.snapshot if previous is not None else msg.partition
    if snapshot is not None:
        _fold_write(parts, name, snapshot, msg.data, meta)


def _fold_write(
    parts: dict[str, PartState | None],
    name: str,
    snapshot: PartitionSnapshot,
    data: DataChange | None,
    meta: DumpMetadata,
) -> None:
    previous = parts.get(name)
    parts[name] = PartState(snapshot, compose(previous.change if previous else None, _data(data, meta)))


Fold = Callable[[dict[str, PartState | None], Any, DumpMetadata], None]
"""A fold receives the message class of its event type (``SPECS``), as handlers do."""
_FOLDS: dict[EventType, Fold] = {
    EventType.ADD_PARTITION: _fold_add,
    EventType.DROP_PARTITION: _fold_drop,
    EventType.ALTER_PARTITION: _fold_alter,
    EventType.INSERT: _fold_insert,
}


# -- event handlers: one per event type (a table of behaviours, not a chain of ifs) ----------------------------
Handler = Callable[[TargetWriter, dict[str, Any], Any, DumpMetadata], None]
"""A handler receives the message class of the event type it is registered for (``SPECS``; checked by
``tests/unit/test_event_specs.py``), so it reads its typed body without a downcast."""


def objects_to_copy(msg: Message[Any]) -> list[tuple[str | None, Sequence[str]]]:
    """(source location, files) of each object whose data an event changes: the files a load copies."""
    if isinstance(msg, CommitTxnMessage):  # each write's files, below its table or partition
        return list(acid_replay.write_locations(msg))
    return [(obj.location, obj.change.added) for obj in msg.objects() if obj.change.added]


def _data(change: DataChange | None, meta: DumpMetadata) -> DataChange | None:
    return None if meta.metadata_only else change


def _table_change(msg: Message[Any], meta: DumpMetadata) -> DataChange | None:
    """The data change of a table-level event (None: metadata only, or a partitioned table)."""
    objects = msg.objects()
    return _data(objects[0].change, meta) if objects else None


def _create_table(w: TargetWriter, ev: dict[str, Any], msg: CreateTableMessage, meta: DumpMetadata) -> None:
    w.put_table(msg.table.to_json(), _table_change(msg, meta), msg.table.location)


def _alter_table(w: TargetWriter, ev: dict[str, Any], msg: AlterTableMessage, meta: DumpMetadata) -> None:
    after = msg.table.to_json()
    if msg.rename_target is not None:
        w.rename_table(msg.before.table_name, after)
    w.put_table(after, _table_change(msg, meta), msg.table.location)


def _drop_table(w: TargetWriter, ev: dict[str, Any], msg: DropTableMessage, meta: DumpMetadata) -> None:
    w.drop_table(msg.table.table_name)


def _add_partition(w: TargetWriter, ev: dict[str, Any], msg: AddPartitionMessage, meta: DumpMetadata) -> None:
    parts = [(p.to_json(), _data(c, meta)) for p, c in zip(msg.partitions, msg.changes(), strict=True)]
    w.put_partitions(msg.table.table_name, parts, msg.table.location)


def _alter_partition(
    w: TargetWriter, ev: dict[str, Any], msg: AlterPartitionMessage, meta: DumpMetadata
) -> None:
    w.put_partitions(msg.table.table_name, [(msg.after.to_json(), _data(msg.data, meta))], msg.table.location)


def _drop_partition(
    w: TargetWriter, ev: dict[str, Any], msg: DropPartitionMessage, meta: DumpMetadata
) -> None:
    w.drop_partitions(msg.table.table_name, [p.values for p in msg.partitions])


def _insert(w: TargetWriter, ev: dict[str, Any], msg: InsertMessage, meta: DumpMetadata) -> None:
    if meta.metadata_only:
        return
    if msg.partition is not None:
        w.put_partitions(msg.table.table_name, [(msg.partition.to_json(), msg.data)])
    else:
        w.put_table(msg.table.to_json(), msg.data, msg.table.location)


def _alter_database(
    w: TargetWriter, ev: dict[str, Any], msg: AlterDatabaseMessage, meta: DumpMetadata
) -> None:
    w.put_database(msg.database.to_json(), {})


def _drop_database(w: TargetWriter, ev: dict[str, Any], msg: DropDatabaseMessage, meta: DumpMetadata) -> None:
    with contextlib.suppress(NoSuchObjectError):
        w.catalog.drop_database(w.db, cascade=True)


def _create_function(
    w: TargetWriter, ev: dict[str, Any], msg: CreateFunctionMessage, meta: DumpMetadata
) -> None:
    w.put_function(msg.function.to_json())


def _drop_function(w: TargetWriter, ev: dict[str, Any], msg: DropFunctionMessage, meta: DumpMetadata) -> None:
    w.drop_function(msg.function.function_name)


def _update_column_stats(
    w: TargetWriter, ev: dict[str, Any], msg: UpdateColumnStatMessage, meta: DumpMetadata
) -> None:
    """Statistics follow their table: a table or partition dropped later in the window is not an error."""
    body = msg.body
    with contextlib.suppress(NoSuchObjectError):
        w.target.stats.update(
            w.db,
            msg.table_name or "",
            body.stats,
            partition_name=body.partition,
            engine=body.engine,
            last_analyzed=body.last_analyzed,
        )


def _delete_column_stats(
    w: TargetWriter, ev: dict[str, Any], msg: DeleteColumnStatMessage, meta: DumpMetadata
) -> None:
    body = msg.body
    for column in body.columns:
        with contextlib.suppress(NoSuchObjectError):  # already gone: replaying twice, or dropped since
            w.target.stats.delete(
                w.db, msg.table_name or "", column, partition_name=body.partition, engine=body.engine
            )


HANDLERS: dict[str, Handler] = {
    EventType.CREATE_TABLE: _create_table,
    EventType.ALTER_TABLE: _alter_table,
    EventType.DROP_TABLE: _drop_table,
    EventType.ADD_PARTITION: _add_partition,
    EventType.ALTER_PARTITION: _alter_partition,
    EventType.DROP_PARTITION: _drop_partition,
    EventType.INSERT: _insert,
    EventType.ALTER_DATABASE: _alter_database,
    EventType.DROP_DATABASE: _drop_database,
    EventType.CREATE_FUNCTION: _create_function,
    EventType.DROP_FUNCTION: _drop_function,
    EventType.UPDATE_TABLE_COLUMN_STAT: _update_column_stats,
    EventType.UPDATE_PARTITION_COLUMN_STAT: _update_column_stats,
    EventType.DELETE_TABLE_COLUMN_STAT: _delete_column_stats,
    EventType.DELETE_PARTITION_COLUMN_STAT: _delete_column_stats,
    **acid_replay.HANDLERS,  # txn events
}
# Counted, not applied: the replica database itself is made by the bootstrap.
NOT_YET_REPLAYED = kinds(replayed=False)


def parse_event(event: dict[str, Any]) -> Message[Any]:
    """The typed message of a dumped event (parsed once per event, for every step of its load)."""
    return event_message(event)


def apply_event(
    writer: TargetWriter, event: dict[str, Any], meta: DumpMetadata, msg: Message[Any] | None = None
) -> None:
    kind = event["event_type"]
    handler = HANDLERS.get(kind)
    if handler is None:
        if kind not in NOT_YET_REPLAYED:
            raise InvalidOperationError(
                f"event {event['event_id']} has unknown type '{kind}'; the dump is corrupt"
            )
        writer.stats.skipped_events[kind] = writer.stats.skipped_events.get(kind, 0) + 1
        return
    handler(writer, event, msg if msg is not None else parse_event(event), meta)
