"""Loading tables from the database into the cache, tagged with the write ids they are valid for.

A load reads a table, its partitions and its ValidWriteIdList (converted from one ValidTxnList snapshot per
batch, as HIVE-21637's prewarm does) in several statements; a write committing between them would put two
versions under one tag, and a tag taken before a commit would make a newer entry pass for an older one.
Every write commits together with its notification event, so the loader notes the log position before and
after reading and keeps only tables that no event in between touched: those were read as of one position,
and every event up to it is reflected in them. Touched tables are retried later, and reads go to the
database meanwhile: a racing write can delay a load, never make it install a stale or mixed entry.

Content read from the database may include changes of txns that are still open (the catalog applies them
at once), so a loaded table is unsettled until the write ids open at load time have committed or aborted.
Content showing an aborted txn's change (the catalog never rolls one back) can serve no reader until a
later committed write replaces it: such a table is not installed ("tainted") and reads go to the database,
which refuses them the same way (see ``visibility``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hmsrepl.cache.apply import event_scope, snapshot_size
from hmsrepl.cache.entries import CachedObject, TableKey, TableState
from hmsrepl.cache.visibility import aborted_write_id
from hmsrepl.exceptions import NoSuchObjectError
from hmsrepl.formats.writeids import MalformedWriteIdListError, ValidTxnList
from hmsrepl.gc_pause import gc_paused
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Partition, Table
from hmsrepl.metastore.transactions import TableWriteIds


@dataclass
class LoadResult:
    states: list[TableState] = field(default_factory=list)
    raced: list[TableKey] = field(default_factory=list)  # a write committed during the load: retry
    missing: list[TableKey] = field(default_factory=list)  # no such table (any more)
    tainted: list[TableKey] = field(default_factory=list)  # shows an aborted write: not installable
    event_id: int = 0  # the log position the loaded states reflect


@dataclass
class _Read:
    key: TableKey
    table: Table
    rows: list[tuple[str, str, int]]
    write_ids: TableWriteIds


class SnapshotLoader:
    def __init__(self, metastore: Metastore, *, after_read: Callable[[list[TableKey]], None] | None = None):
        self.metastore = metastore
        self.after_read = after_read  # test hook: runs inside the consistency window

    def load_tables(self, keys: Sequence[TableKey]) -> LoadResult:
        catalog, txns, events = self.metastore.catalog, self.metastore.txns, self.metastore.events
        result = LoadResult()
        first = events.current_event_id()
        snapshot = _valid_txns(self.metastore)
        reads: list[_Read] = []
        for key in keys:
            db_name, table_name = key
            try:
                table = catalog.get_table(db_name, table_name)
                rows = catalog.get_partition_docs(db_name, table_name) if table.partition_keys else []
                [write_ids] = txns.get_valid_write_ids([f"{db_name}.{table_name}"], snapshot)
            except NoSuchObjectError:
                result.missing.append(key)
                continue
            reads.append(_Read(key, table, rows, write_ids))
        if self.after_read is not None:
            self.after_read(list(keys))
        result.event_id = last = events.current_event_id()
        touched: set[TableKey] = set()
        if last > first:
            for event in events.next_events(first, to_event_id=last):
                touched |= event_scope(event).tables
        with gc_paused():
            for read in reads:
                if read.key in touched or read.write_ids.table_id != read.table.id:
                    result.raced.append(read.key)
                else:
                    state = _state(read, last)
                    shown = [state.table_model, *(p.model for p in (state.partitions or {}).values())]
                    if aborted_write_id(shown, state.write_ids) is not None:  # type: ignore[arg-type]
                        result.tainted.append(read.key)
                    else:
                        result.states.append(state)
        return result

    def load_databases(self, names: Sequence[str]) -> tuple[dict[str, Database], int]:
        """Databases by name, as of the returned log position; any touched in between are left out."""
        events = self.metastore.events
        first = events.current_event_id()
        found: dict[str, Database] = {}
        for name in names:
            try:
                found[name] = self.metastore.catalog.get_database(name)
            except NoSuchObjectError:
                continue
        last = events.current_event_id()
        if last > first:
            for event in events.next_events(first, to_event_id=last):
                for name in event_scope(event).databases:
                    found.pop(name, None)
        return found, last


def _valid_txns(metastore: Metastore, attempts: int = 5) -> ValidTxnList:
    """The global snapshot, retried when a txn opened while it was read made it inconsistent.

    ``get_valid_txns`` reads the high watermark and the txn rows in two statements, so a concurrent
    open_txns can show up above the watermark; the result then fails validation instead of being wrong,
    and reading again is safe.
    """
    for attempt in range(attempts):
        try:
            return metastore.txns.get_valid_txns()
        except MalformedWriteIdListError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _state(read: _Read, event_id: int) -> TableState:
    partitions: dict[str, CachedObject] = {}
    for name, doc, write_id in read.rows:
        part = Partition.model_validate_json(doc)
        part.write_id = write_id  # the row's column is authoritative; not yet shared, so set in place
        partitions[name] = CachedObject(part, len(doc))
    ids = read.write_ids.write_ids
    table = read.table
    return TableState(
        table_id=table.id or 0,
        table=CachedObject(table, snapshot_size(table.model_dump(mode="json"))),
        partitions=partitions if table.partition_keys else {},
        write_ids=ids,
        base_event_id=event_id,
        unsettled=ids.open_write_ids,
    )
