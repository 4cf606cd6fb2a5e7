"""Writes of unpartitioned tables folded per table within one load batch: one put of each table, not one
per event.

A batch commits as one transaction, so readers of the target only see batch boundaries. A table's run of
INSERT and ALTER_TABLE events (a Spark job appending to a table, its statistics following) therefore has
the same effect as one put of the table's last snapshot with the run's data changes composed in memory
(``replica_files.compose``): one publication of the table's files, one catalog write and one replica event,
where each event cost its own, with the round trips and file work they bring. ``PartitionRuns`` does the
same for partitions.

Folded: INSERTs and ALTER_TABLEs without a rename, of plain tables (transactional tables are the
transactions' to write; an Iceberg table's metadata is rewritten per put) that keep their location (a change
is relative to its table's directory). A table's run is flushed before any other event that touches the
table (a rename, a drop, a re-creation), all runs before a database event, so each table still sees its
events in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hmsrepl.formats.iceberg_tables import is_iceberg
from hmsrepl.metastore.messages import AlterTableMessage, InsertMessage, Message
from hmsrepl.metastore.payloads import DataChange, TableSnapshot
from hmsrepl.replication import acid_replay
from hmsrepl.replication.replica_files import compose
from hmsrepl.replication.target import TargetWriter


@dataclass
class TableState:
    """A table at the end of its run: its last snapshot and its data changes composed (None: no data)."""

    snapshot: TableSnapshot
    change: DataChange | None


def tables_touched(msg: Message[Any]) -> set[str]:
    """The tables an event's pending batched writes must be flushed for: its table, and both names of a
    rename (none for an event without a table)."""
    if msg.table_name is None:
        return set()
    names = {msg.table_name}
    if isinstance(msg, AlterTableMessage):
        names |= {msg.before.table_name, msg.table.table_name}
    return names


class TableWrites:
    """The pending table runs of one batch (see the module's docstring)."""

    def __init__(self, writer: TargetWriter) -> None:
        self.writer = writer
        self.tables: dict[str, TableState] = {}

    def absorb(self, msg: Message[Any]) -> bool:
        """Take a plain table's INSERT or ALTER_TABLE without a rename into its run; False for any other
        event (flush what it depends on, then apply it)."""
        if isinstance(msg, InsertMessage):
            if msg.partition is not None:
                return False
            change: DataChange | None = msg.data
        elif isinstance(msg, AlterTableMessage) and msg.rename_target is None:
            objects = msg.objects()
            change = objects[0].change if objects else None
        else:
            return False
        table = msg.table
        if table.partition_keys or acid_replay.is_acid_snapshot(table) or is_iceberg(table.parameters):
            return False
        name = table.table_name
        previous = self.tables.get(name)
        if previous is not None and previous.snapshot.location != table.location:
            self._flush_table(name)  # a change is relative to its own directory: never composed across
            previous = None
        self.tables[name] = TableState(table, compose(previous.change if previous else None, change))
        return True

    def flush_for(self, msg: Message[Any]) -> None:
        """Flush the run of the table an event touches (both names of a rename). An event without a table
        touches none here: the load flushes every run before a database event
        (``event_batches.database_event``)."""
        for name in tables_touched(msg):
            self._flush_table(name)

    def flush(self) -> None:
        for name in list(self.tables):
            self._flush_table(name)

    def _flush_table(self, name: str) -> None:
        state = self.tables.pop(name, None)
        if state is not None:
            self.writer.put_table(state.snapshot.to_json(), state.change, state.snapshot.location)
