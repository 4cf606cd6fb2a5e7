"""Applying the notification log, in order, to the cached tables.

The log is the cache's source of truth (HIVE-21637): it is totally ordered and every change commits with its
event, so replaying it keeps each cached table equal to the database as of the last applied event, minus
the changes of transactions still open, which are held back:

- ALLOC_WRITE_ID opens a write id in the table's tag; COMMIT_TXN applies what the txn held back and marks its
  write ids committed; ABORT_TXN drops what it held back and marks them aborted. One COMMIT_TXN is applied
  under one lock hold, so a txn that wrote through several metastore instances becomes visible whole.
- ACID_WRITE, and catalog events whose new snapshot carries a txn's stamp (see ``attribution``), are held
  back until that txn commits: until then the table keeps serving its committed version to readers whose
  lists have the write id open, which is exactly what they must see.
- A catalog change no txn claims (non-ACID DDL, or a client that did not name its txn) is applied at once,
  as the database applied it. On a transactional table it may belong to any txn with an open write id, so
  the table serves no reader until all those write ids have committed or aborted ("unsettled"). That is
  the conservative reading of "non-ACID DDL has no write id": never guess which snapshot it belongs to.
- A table whose id no longer matches (drop and recreate) or that was renamed is forgotten and reloaded;
  anything this code cannot read in an event makes it forget the tables the event names. Both turn into
  misses (database reads), never into wrong answers.

Each table remembers up to which event it is current (``base_event_id``): a table loaded from the database
may be ahead of the log position, and events it already reflects are skipped for it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hmsrepl.cache.attribution import TxnWrite, claimed_write
from hmsrepl.cache.entries import (
    CachedObject,
    Change,
    DropPartition,
    MarkWritten,
    PutPartition,
    ReplaceTable,
    TableKey,
    TableState,
    object_of,
)
from hmsrepl.cache.store import CacheStore, DatabaseEntry
from hmsrepl.cache.writeid_state import WriteIdStateError, aborted, allocated, committed
from hmsrepl.exceptions import MetastoreError
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore.events import EventType, NotificationEvent
from hmsrepl.metastore.model import Database, Partition, Table

log = logging.getLogger(__name__)

_TABLE_EVENTS = {
    EventType.CREATE_TABLE,
    EventType.ALTER_TABLE,
    EventType.DROP_TABLE,
    EventType.ADD_PARTITION,
    EventType.ALTER_PARTITION,
    EventType.DROP_PARTITION,
    EventType.INSERT,
    EventType.ACID_WRITE,
    EventType.ALLOC_WRITE_ID,
}
_TXN_END_EVENTS = {EventType.COMMIT_TXN, EventType.ABORT_TXN}
_DATABASE_EVENTS = {EventType.CREATE_DATABASE, EventType.ALTER_DATABASE, EventType.DROP_DATABASE}


@dataclass(frozen=True)
class Scope:
    """The tables and databases an event changes (by name, old and new for a rename)."""

    tables: frozenset[TableKey]
    databases: frozenset[str]


def event_scope(event: NotificationEvent, body: dict[str, Any] | None = None) -> Scope:
    """What ``event`` changes; a load that overlaps such an event may have read a mix of versions."""
    kind = event.event_type
    tables: set[TableKey] = set()
    databases: set[str] = set()
    if kind in _TABLE_EVENTS and event.db_name and event.table_name:
        tables.add((event.db_name, event.table_name))
        if kind == EventType.ALTER_TABLE:
            after = (body or event.body()).get("after") or {}
            tables.add((str(after.get("db_name", event.db_name)), str(after.get("table_name", ""))))
    elif kind in _TXN_END_EVENTS:
        for entry in (body or event.body()).get("write_ids") or []:
            tables.add((entry["db"], entry["table"]))
    elif kind in _DATABASE_EVENTS and event.db_name:
        databases.add(event.db_name)
    return Scope(frozenset(tables), frozenset(databases))


def snapshot_size(snapshot: dict[str, Any]) -> int:
    """Bytes of an object's JSON form: the cache's (approximate) measure of what an entry costs."""
    return len(json.dumps(snapshot, separators=(",", ":")))


class EventApplier:
    """Applies one event at a time to the store; called by the updater thread only, in log order."""

    def __init__(self, store: CacheStore, *, on_stale: Callable[[TableKey], None]) -> None:
        self.store = store
        self.on_stale = on_stale  # a table the cache had to forget; the updater loads it again
        self._event_id = 0  # the event being applied
        self._handlers: dict[str, Callable[[NotificationEvent, dict[str, Any]], None]] = {
            EventType.CREATE_DATABASE: self._database,
            EventType.ALTER_DATABASE: self._database,
            EventType.DROP_DATABASE: self._drop_database,
            EventType.CREATE_TABLE: self._create_table,
            EventType.ALTER_TABLE: self._alter_table,
            EventType.DROP_TABLE: self._drop_table,
            EventType.ADD_PARTITION: self._add_partitions,
            EventType.ALTER_PARTITION: self._alter_partition,
            EventType.DROP_PARTITION: self._drop_partitions,
            EventType.ACID_WRITE: self._acid_write,
            EventType.ALLOC_WRITE_ID: self._alloc_write_ids,
            EventType.COMMIT_TXN: self._end_txn,
            EventType.ABORT_TXN: self._end_txn,
        }

    def apply(self, event: NotificationEvent) -> None:
        handler = self._handlers.get(event.event_type)
        if handler is None:  # INSERT (no metadata change), OPEN_TXN, functions: nothing cached changes
            return
        body = event.body()
        self._event_id = event.event_id
        with self.store.lock:
            try:
                handler(event, body)
            except (KeyError, TypeError, ValueError, MetastoreError):
                # An event this code cannot read must not leave the tables it names serving old content.
                log.warning(
                    "cache: cannot apply event %s (%s); forgetting the tables it names",
                    event.event_id,
                    event.event_type,
                    exc_info=True,
                )
                for key in event_scope(event, body).tables:
                    self._forget(key)

    # -- helpers --------------------------------------------------------------------------------------------
    def _current(self, event: NotificationEvent, key: TableKey) -> TableState | None:
        """The cached table the event applies to, unless it already reflects the event."""
        state = self.store.table(key)
        if state is None or event.event_id <= state.base_event_id:
            return None
        return state

    def _with_id(self, event: NotificationEvent, table_snapshot: dict[str, Any]) -> TableState | None:
        """Like ``_current``, but a different table id means the name now belongs to another table."""
        key = (event.db_name or "", event.table_name or "")
        state = self._current(event, key)
        if state is not None and table_snapshot.get("id") != state.table_id:
            self._forget(key)
            return None
        return state

    def _forget(self, key: TableKey) -> None:
        self.store.remove(key)
        self.on_stale(key)

    def _change(self, state: TableState, change: Change, claim: TxnWrite | None) -> None:
        """Hold a claimed change back for its txn; apply an unclaimed one now and unsettle the table."""
        target = object_of(change)
        assert target is not None
        txn = self._claimant(state, claim)
        holder = state.holder_of(target)
        if txn is not None and holder in (None, txn):
            state.hold(txn, change, self._event_id)
            return
        # Unclaimed, or a second open txn replacing an object another one holds (they cannot be ordered):
        # the database has this version now, including whatever the open txns wrote before it.
        state.forget_held(target)
        state.apply(change)
        state.unsettled = state.unsettled | state.write_ids.open_write_ids

    @staticmethod
    def _claimant(state: TableState, claim: TxnWrite | None) -> int | None:
        if claim is None or claim.write_id not in state.write_ids.open_write_ids:
            return None
        owner = state.owners.get(claim.write_id)
        return claim.txn_id if owner in (None, claim.txn_id) else None

    # -- databases (eventually consistent) --------------------------------------------------------------------
    def _database(self, event: NotificationEvent, body: dict[str, Any]) -> None:
        name = event.db_name or ""
        current = self.store.database(name)
        if current is not None and event.event_id <= current.base_event_id:
            return
        snapshot = body.get("after") or body["database"]
        entry = CachedObject(Database.model_validate(snapshot), snapshot_size(snapshot))
        self.store.put_database(name, DatabaseEntry(entry, event.event_id))

    def _drop_database(self, event: NotificationEvent, body: dict[str, Any]) -> None:
        name = event.db_name or ""
        current = self.store.database(name)
        if current is None or event.event_id > current.base_event_id:
            self.store.remove_database(name)
        for key in self.store.tables():
            state = self.store.table(key)
            if key[0] == name and state is not None and event.event_id > state.base_event_id:
                self.store.remove(key)

    # -- tables -------------------------------------------------------------------------------------------------
    def _create_table(self, event: NotificationEvent, body: dict[str, Any]) -> None:
        key = (event.db_name or "", event.table_name or "")
        existing = self.store.table(key)
        if existing is not None and event.event_id <= existing.base_event_id:
            return
        table = Table.model_validate(body["table"])
        self.store.install(
            TableState(
                table_id=table.id or 0,
                table=CachedObject(table, snapshot_size(body["table"])),
                partitions={},
                write_ids=ValidWriteIdList(table.qualified_name, 0),  # a new table has no write ids yet
                base_event_id=event.event_id,
            )
        )

    def _alter_table(self, event: NotificationEvent, body: dict[str, Any]) -> None:
        before, after = body["before"], body["after"]
        old_key = (event.db_name or "", event.table_name or "")
        new_key = (after["db_name"], after["table_name"])
        if new_key != old_key:
            # A rename moves partitions (and their locations) and write ids in the database; rather than
            # re-derive all that, forget both names and load the table afresh under its new one.
            for key in (old_key, new_key):
                state = self.store.table(key)
                if state is not None and event.event_id > state.base_event_id:
                    self.store.remove(key)
            self.on_stale(new_key)
            return
        state = self._with_id(event, after)
        if state is None or body.get("is_truncate"):  # a truncate removes files, not metadata
            return
        claim = claimed_write(before.get("parameters"), after.get("parameters") or {})
        with self.store.changing(state):
            self._change(state, ReplaceTable(Table.model_validate(after), snapshot_size(after)), claim)

    def _drop_table(self, event: NotificationEvent, body: dict[str, Any]) -> None:
        key = (event.db_name or "", event.table_name or "")
        if self._current(event, key) is not None:
            self.store.remove(key)

    def _add_partitions(self, event: NotificationEvent, body: dict[str, Any]) -> None:
        state = self._with_id(event, body["table"])
        if state is None:
            return
        with self.store.changing(state):
            for snapshot in body["partitions"]:
                part = Partition.model_validate(snapshot)
                change = PutPartition(state.partition_name(part.values), part, snapshot_size(snapshot))
                self._change(state, change, claimed_write(None, part.parameters))

    def _alter_partition(self, event: NotificationEvent, body: dict[str, Any]) -> None:
        state = self._with_id(event, body["table"])
        if state is None or body.get("is_truncate"):
            return
        after = body["after"]
        part = Partition.model_validate(after)
        claim = claimed_write(body["before"].get("parameters"), part.parameters)
        with self.store.changing(state):
            self._change(
                state, PutPartition(state.partition_name(part.values), part, snapshot_size(after)), claim
            )

    def _drop_partitions(self, event: NotificationEvent, body: dict[str, Any]) -> None:
        state = self._with_id(event, body["table"])
        if state is None:
            return
        with self.store.changing(state):
            for snapshot in body["partitions"]:
                self._change(state, DropPartition(state.partition_name(snapshot["values"])), None)

    # -- transactions -------------------------------------------------------------------------------------------
    def _acid_write(self, event: NotificationEvent, body: dict[str, Any]) -> None:
        state = self._with_id(event, body["table"])
        if state is None:
            return
        partition = body.get("partition")
        name = state.partition_name(partition["values"]) if partition else None
        state.hold(int(body["txn_id"]), MarkWritten(int(body["write_id"]), name), event.event_id)

    def _alloc_write_ids(self, event: NotificationEvent, body: dict[str, Any]) -> None:
        key = (body["db"], body["table"])
        state = self._current(event, key)
        if state is None:
            return
        try:
            ids = state.write_ids
            for pair in body["txn_to_write_ids"]:
                ids = allocated(ids, int(pair["write_id"]))
                state.owners[int(pair["write_id"])] = int(pair["txn_id"])
            state.write_ids = ids
        except WriteIdStateError:
            log.warning("cache: %s; reloading %s.%s", event.event_id, *key, exc_info=True)
            self._forget(key)

    def _end_txn(self, event: NotificationEvent, body: dict[str, Any]) -> None:
        commit = event.event_type == EventType.COMMIT_TXN
        txn_id = int(body["txn_id"])
        for entry in body.get("write_ids") or []:
            key = (entry["db"], entry["table"])
            state = self._current(event, key)
            if state is None:
                continue
            write_id = int(entry["write_id"])
            try:
                ids = committed(state.write_ids, write_id) if commit else aborted(state.write_ids, write_id)
            except WriteIdStateError:
                log.warning(
                    "cache: event %s names an unknown write id; reloading %s.%s", event.event_id, *key
                )
                self._forget(key)
                continue
            with self.store.changing(state):
                state.release(txn_id, commit=commit)
                state.write_ids = ids
                state.owners.pop(write_id, None)
                state.unsettled = state.unsettled - {write_id}
