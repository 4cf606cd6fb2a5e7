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
  When one of them aborts and the content shows its change (the database never rolls one back), the
  table is forgotten and loaded again; so is a table whose new version shows an aborted write.
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
from hmsrepl.cache.visibility import aborted_write_id
from hmsrepl.cache.writeid_state import WriteIdStateError, aborted, allocated, committed
from hmsrepl.exceptions import MetastoreError
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.events import EventType, NotificationEvent
from hmsrepl.metastore.messages import (
    AbortTxnMessage,
    AcidWriteMessage,
    AddPartitionMessage,
    AllocWriteIdMessage,
    AlterPartitionMessage,
    AlterTableMessage,
    CommitTxnMessage,
    CreateTableMessage,
    DatabaseMessage,
    DropDatabaseMessage,
    DropPartitionMessage,
    DropTableMessage,
    Message,
)
from hmsrepl.metastore.model import Database, Partition, Table
from hmsrepl.metastore.payloads import Snapshot, TableSnapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Scope:
    """The tables and databases an event changes (by name, old and new for a rename)."""

    tables: frozenset[TableKey]
    databases: frozenset[str]


NOTHING = Scope(frozenset(), frozenset())


AnyMessage = Message[Any]


def _table_scope(event: NotificationEvent, message: AnyMessage | None) -> Scope:
    if not (event.db_name and event.table_name):
        return NOTHING
    return Scope(frozenset({(event.db_name, event.table_name)}), frozenset())


def _altered_table_scope(event: NotificationEvent, message: AnyMessage | None) -> Scope:
    """Both names of a rename (across databases too)."""
    scope = _table_scope(event, message)
    if not scope.tables:
        return scope
    after = (message or parse_event(event)).table
    if after is None:
        return scope
    return Scope(scope.tables | {(after.db_name, after.table_name)}, frozenset())


def _txn_end_scope(event: NotificationEvent, message: AnyMessage | None) -> Scope:
    parsed = message or parse_event(event)
    if not isinstance(parsed, CommitTxnMessage | AbortTxnMessage):
        return NOTHING
    return Scope(frozenset((entry.db, entry.table) for entry in parsed.body.write_ids), frozenset())


def _database_scope(event: NotificationEvent, message: AnyMessage | None) -> Scope:
    return Scope(frozenset(), frozenset({event.db_name} if event.db_name else ()))


def _no_scope(event: NotificationEvent, message: AnyMessage | None) -> Scope:
    """Nothing the cache holds: functions and column statistics are not cached, OPEN_TXN changes no table."""
    return NOTHING


SCOPES: dict[EventType, Callable[[NotificationEvent, AnyMessage | None], Scope]] = {
    EventType.CREATE_DATABASE: _database_scope,
    EventType.ALTER_DATABASE: _database_scope,
    EventType.DROP_DATABASE: _database_scope,
    EventType.CREATE_TABLE: _table_scope,
    EventType.ALTER_TABLE: _altered_table_scope,
    EventType.DROP_TABLE: _table_scope,
    EventType.ADD_PARTITION: _table_scope,
    EventType.ALTER_PARTITION: _table_scope,
    EventType.DROP_PARTITION: _table_scope,
    EventType.INSERT: _table_scope,
    EventType.ACID_WRITE: _table_scope,
    EventType.ALLOC_WRITE_ID: _table_scope,
    EventType.COMMIT_TXN: _txn_end_scope,
    EventType.ABORT_TXN: _txn_end_scope,
    **dict.fromkeys(
        (
            EventType.OPEN_TXN,
            EventType.CREATE_FUNCTION,
            EventType.DROP_FUNCTION,
            EventType.UPDATE_TABLE_COLUMN_STAT,
            EventType.UPDATE_PARTITION_COLUMN_STAT,
            EventType.DELETE_TABLE_COLUMN_STAT,
            EventType.DELETE_PARTITION_COLUMN_STAT,
        ),
        _no_scope,
    ),
}
"""What each event type changes in the cache's terms."""


def event_scope(event: NotificationEvent, message: AnyMessage | None = None) -> Scope:
    """What ``event`` changes; a load that overlaps such an event may have read a mix of versions."""
    scope = SCOPES.get(event.event_type)  # type: ignore[call-overload]
    return scope(event, message) if scope is not None else NOTHING


def empties_data(message: AlterTableMessage | AlterPartitionMessage) -> bool:
    """A truncate: the change leaves no file and the metadata as it was (format 1 flags it ``is_truncate``).

    An ALTER that changes metadata and records an empty object for the first time is no truncate.
    """
    if message.body.before != message.body.after:
        return False
    return any(obj.change.complete and not obj.change.added for obj in message.objects())


def snapshot_size(snapshot: dict[str, Any] | Snapshot) -> int:
    """Bytes of an object's JSON form: the cache's (approximate) measure of what an entry costs."""
    document = snapshot.to_json() if isinstance(snapshot, Snapshot) else snapshot
    return len(json.dumps(document, separators=(",", ":")))


class EventApplier:
    """Applies one event at a time to the store; called by the updater thread only, in log order."""

    def __init__(self, store: CacheStore, *, on_stale: Callable[[TableKey], None]) -> None:
        self.store = store
        self.on_stale = on_stale  # a table the cache had to forget; the updater loads it again
        self._event_id = 0  # the event being applied

    def apply(self, event: NotificationEvent) -> None:
        handler = HANDLERS.get(event.event_type)  # type: ignore[call-overload]
        if handler is None:  # a type of no cached object (IGNORED), or one this version does not know
            return
        self._event_id = event.event_id
        message: AnyMessage | None = None
        with self.store.lock:
            try:
                message = parse_event(event)
                handler(self, event, message)
            except (KeyError, TypeError, ValueError, MetastoreError):
                # An event this code cannot read must not leave the tables it names serving old content.
                log.warning(
                    "cache: cannot apply event %s (%s); forgetting the tables it names",
                    event.event_id,
                    event.event_type,
                    exc_info=True,
                )
                for key in event_scope(event, message).tables:
                    self._forget(key)

    # -- helpers --------------------------------------------------------------------------------------------
    def _current(self, event: NotificationEvent, key: TableKey) -> TableState | None:
        """The cached table the event applies to, unless it already reflects the event."""
        state = self.store.table(key)
        if state is None or event.event_id <= state.base_event_id:
            return None
        return state

    def _with_id(self, event: NotificationEvent, table_snapshot: TableSnapshot) -> TableState | None:
        """Like ``_current``, but a different table id means the name now belongs to another table."""
        key = (event.db_name or "", event.table_name or "")
        state = self._current(event, key)
        if state is not None and table_snapshot.id != state.table_id:
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
        shown = _shown(change)
        if shown is not None and aborted_write_id([shown], state.write_ids) is not None:
            # The new version carries an aborted txn's change (the database never rolls one back): no
            # reader may see it, and no later event removes it, so load again (see the loader).
            self._forget(state.key)
            return
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
    def _database(self, event: NotificationEvent, message: DatabaseMessage[Any]) -> None:
        name = event.db_name or ""
        current = self.store.database(name)
        if current is not None and event.event_id <= current.base_event_id:
            return
        snapshot = message.database.to_json()
        entry = CachedObject(Database.model_validate(snapshot), snapshot_size(snapshot))
        self.store.put_database(name, DatabaseEntry(entry, event.event_id))

    def _drop_database(self, event: NotificationEvent, message: DropDatabaseMessage) -> None:
        name = event.db_name or ""
        current = self.store.database(name)
        if current is None or event.event_id > current.base_event_id:
            self.store.remove_database(name)
        for key in self.store.tables():
            state = self.store.table(key)
            if key[0] == name and state is not None and event.event_id > state.base_event_id:
                self.store.remove(key)

    # -- tables -------------------------------------------------------------------------------------------------
    def _create_table(self, event: NotificationEvent, message: CreateTableMessage) -> None:
        key = (event.db_name or "", event.table_name or "")
        existing = self.store.table(key)
        if existing is not None and event.event_id <= existing.base_event_id:
            return
        snapshot = message.table.to_json()
        table = Table.model_validate(snapshot)
        self.store.install(
            TableState(
                table_id=table.id or 0,
                table=CachedObject(table, snapshot_size(snapshot)),
                partitions={},
                write_ids=ValidWriteIdList(table.qualified_name, 0),  # a new table has no write ids yet
                base_event_id=event.event_id,
            )
        )

    def _alter_table(self, event: NotificationEvent, message: AlterTableMessage) -> None:
        before, after = message.before, message.table
        old_key = (event.db_name or "", event.table_name or "")
        new_key = (after.db_name, after.table_name)
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
        if state is None or empties_data(message):  # a truncate removes files, not metadata
            return
        claim = claimed_write(before.parameters, after.parameters)
        document = after.to_json()
        with self.store.changing(state):
            self._change(state, ReplaceTable(Table.model_validate(document), snapshot_size(document)), claim)

    def _drop_table(self, event: NotificationEvent, message: DropTableMessage) -> None:
        key = (event.db_name or "", event.table_name or "")
        if self._current(event, key) is not None:
            self.store.remove(key)

    def _add_partitions(self, event: NotificationEvent, message: AddPartitionMessage) -> None:
        state = self._with_id(event, message.table)
        if state is None:
            return
        with self.store.changing(state):
            for snapshot in message.partitions:
                document = snapshot.to_json()
                part = Partition.model_validate(document)
                change = PutPartition(state.partition_name(part.values), part, snapshot_size(document))
                self._change(state, change, claimed_write(None, part.parameters))

    def _alter_partition(self, event: NotificationEvent, message: AlterPartitionMessage) -> None:
        state = self._with_id(event, message.table)
        if state is None or empties_data(message):
            return
        after = message.after.to_json()
        part = Partition.model_validate(after)
        before = message.before
        claim = claimed_write(before.parameters if before is not None else None, part.parameters)
        with self.store.changing(state):
            self._change(
                state, PutPartition(state.partition_name(part.values), part, snapshot_size(after)), claim
            )

    def _drop_partitions(self, event: NotificationEvent, message: DropPartitionMessage) -> None:
        state = self._with_id(event, message.table)
        if state is None:
            return
        with self.store.changing(state):
            for snapshot in message.partitions:
                self._change(state, DropPartition(state.partition_name(snapshot.values)), None)

    # -- transactions -------------------------------------------------------------------------------------------
    def _acid_write(self, event: NotificationEvent, message: AcidWriteMessage) -> None:
        body = message.body
        state = self._with_id(event, body.table)
        if state is None:
            return
        name = state.partition_name(body.partition.values) if body.partition is not None else None
        state.hold(body.txn_id, MarkWritten(body.write_id, name), event.event_id)

    def _alloc_write_ids(self, event: NotificationEvent, message: AllocWriteIdMessage) -> None:
        body = message.body
        key = (body.db, body.table)
        state = self._current(event, key)
        if state is None:
            return
        try:
            ids = state.write_ids
            for pair in body.txn_to_write_ids:
                ids = allocated(ids, pair.write_id)
                state.owners[pair.write_id] = pair.txn_id
            state.write_ids = ids
        except WriteIdStateError:
            log.warning("cache: %s; reloading %s.%s", event.event_id, *key, exc_info=True)
            self._forget(key)

    def _commit_txn(self, event: NotificationEvent, message: CommitTxnMessage) -> None:
        self._end_txn(event, message, commit=True)

    def _abort_txn(self, event: NotificationEvent, message: AbortTxnMessage) -> None:
        self._end_txn(event, message, commit=False)

    def _end_txn(
        self, event: NotificationEvent, message: CommitTxnMessage | AbortTxnMessage, *, commit: bool
    ) -> None:
        txn_id = message.body.txn_id
        for entry in message.body.write_ids:
            key = (entry.db, entry.table)
            state = self._current(event, key)
            if state is None:
                continue
            write_id = entry.write_id
            try:
                ids = committed(state.write_ids, write_id) if commit else aborted(state.write_ids, write_id)
            except WriteIdStateError:
                log.warning(
                    "cache: event %s names an unknown write id; reloading %s.%s", event.event_id, *key
                )
                self._forget(key)
                continue
            if not commit and write_id in state.unsettled and _shows_write(state, write_id):
                # Content read while this txn was open shows its change, which the abort does not undo in
                # the database either: the entry cannot be trusted for any reader; load it again.
                self._forget(key)
                continue
            with self.store.changing(state):
                state.release(txn_id, commit=commit)
                state.write_ids = ids
                state.owners.pop(write_id, None)
                state.unsettled = state.unsettled - {write_id}


def _shows_write(state: TableState, write_id: int) -> bool:
    """Whether the entry's content carries ``write_id`` (as an object's write id or a txn stamp)."""
    shown = [state.table_model, *(p.model for p in (state.partitions or {}).values())]
    return aborted_write_id(shown, ValidWriteIdList("", write_id, (), {write_id})) is not None  # type: ignore[arg-type]


def _shown(change: Change) -> Table | Partition | None:
    """The object version a change installs, if any."""
    if isinstance(change, ReplaceTable):
        return change.table
    if isinstance(change, PutPartition):
        return change.partition
    return None


Handler = Callable[[EventApplier, NotificationEvent, Any], None]
"""A handler receives the message class of the event type it is registered for (``SPECS``; checked by
``tests/unit/test_event_specs.py``), so it reads its typed body without a downcast."""
HANDLERS: dict[EventType, Handler] = {
    EventType.CREATE_DATABASE: EventApplier._database,
    EventType.ALTER_DATABASE: EventApplier._database,
    EventType.DROP_DATABASE: EventApplier._drop_database,
    EventType.CREATE_TABLE: EventApplier._create_table,
    EventType.ALTER_TABLE: EventApplier._alter_table,
    EventType.DROP_TABLE: EventApplier._drop_table,
    EventType.ADD_PARTITION: EventApplier._add_partitions,
    EventType.ALTER_PARTITION: EventApplier._alter_partition,
    EventType.DROP_PARTITION: EventApplier._drop_partitions,
    EventType.ACID_WRITE: EventApplier._acid_write,
    EventType.ALLOC_WRITE_ID: EventApplier._alloc_write_ids,
    EventType.COMMIT_TXN: EventApplier._commit_txn,
    EventType.ABORT_TXN: EventApplier._abort_txn,
}
"""How the cache applies each event type; the others change nothing it holds (``IGNORED``)."""
IGNORED = frozenset(
    {
        EventType.INSERT,  # data only: the cache holds metadata
        EventType.OPEN_TXN,  # a txn matters to the cache once it allocates write ids
        EventType.CREATE_FUNCTION,
        EventType.DROP_FUNCTION,
        EventType.UPDATE_TABLE_COLUMN_STAT,
        EventType.UPDATE_PARTITION_COLUMN_STAT,
        EventType.DELETE_TABLE_COLUMN_STAT,
        EventType.DELETE_PARTITION_COLUMN_STAT,
    }
)
