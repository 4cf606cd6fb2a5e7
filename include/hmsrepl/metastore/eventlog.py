"""The transactional notification log: every change and its events commit in one database transaction.

Event ids come from a single sequence row that each writing transaction locks (by advancing it) as its
last step before commit. The lock is held until commit, so ids are gap-free, strictly increasing,
and assigned in commit order: a reader that sees event N committed has already seen every event below N,
even with several metastore processes writing to one database.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Executable,
    Select,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)

from hmsrepl.exceptions import EventsCleanedUpError
from hmsrepl.gc_pause import gc_paused
from hmsrepl.metastore import mariadb_append, mariadb_unawaited, pg_append
from hmsrepl.metastore.database import reads, writer
from hmsrepl.metastore.event_specs import SPECS
from hmsrepl.metastore.events import (
    JSON_FORMAT,
    EventType,
    LoggedEvent,
    NotificationEvent,
    PendingEvent,
    encode_message,
)
from hmsrepl.metastore.payloads import Payload
from hmsrepl.metastore.protection import (
    check_crossing,
    check_held_row,
    check_writable,
    databases_to_check,
    judge_locked_rows,
    named_databases,
    skips_locked_rows,
)
from hmsrepl.metastore.schema import notification_log, notification_sequence

DELETE_BATCH = 10_000
# The sequence row advanced by ``count`` (a bound parameter): built once, one statement text for any count.
_SEQ = notification_sequence
_ADVANCE_RETURNING = (
    update(_SEQ)
    .where(_SEQ.c.id == 1)
    .values(next_event_id=_SEQ.c.next_event_id + bindparam("count"))
    .returning(_SEQ.c.next_event_id)
)
_ADVANCE_MYSQL = (
    update(_SEQ)
    .where(_SEQ.c.id == 1)
    .values(next_event_id=func.last_insert_id(_SEQ.c.next_event_id + bindparam("count")))
)


#: Appends a transaction's events with the commit check in one statement: (conn, databases to check, event
#: rows, event time, file intent rows, the documents of those databases judged already, which lets the
#: statement commit where it can) -> (first id or None, database rows read, intent ids).
AppendChecked = Callable[
    [
        Connection,
        Sequence[str],
        Sequence[dict[str, Any]],
        int,
        Sequence[dict[str, Any]],
        Sequence[str | None],
    ],
    tuple[int | None, list[str], list[int]],
]


@dataclass(frozen=True)
class OneStatementAppend:
    """A backend's append of the check, the ids, the events and file intents in one statement."""

    append_checked: AppendChecked
    max_intents: int | None = None  # the most file intent rows it takes (None: any number)

    def takes(self, intents: int) -> bool:
        return self.max_intents is None or intents <= self.max_intents


_PG_APPEND = OneStatementAppend(pg_append.append_checked)
_MARIADB_APPEND = OneStatementAppend(mariadb_append.append_checked, mariadb_append.MAX_INTENTS)


def _one_statement_append(conn: Connection) -> OneStatementAppend | None:
    """The backend's one-statement append, or None where the append takes a statement per step: SQLite, whose
    statements cost no round trip, and MySQL or MariaDB before 10.6, which cannot skip locked rows."""
    if conn.dialect.name == "postgresql":
        return _PG_APPEND
    if conn.dialect.name in ("mysql", "mariadb") and skips_locked_rows(conn.dialect):
        return _MARIADB_APPEND
    return None


@dataclass
class IntentRows:
    """File intent rows for the append to insert (``MetastoreTransaction.ride_with_append``)."""

    rows: list[dict[str, Any]]
    take_ids: Callable[[list[int]], None]


@dataclass
class MetastoreTransaction:
    """A database transaction in progress: the connection, the events it will log and post-commit work."""

    conn: Connection
    events: list[PendingEvent] = field(default_factory=list)
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    # Work to write into the transaction once its changes are all made, before its events (rows gathered
    # during the transaction and inserted in one statement, such as the file intents of a load batch).
    before_commit: list[Callable[[], None]] = field(default_factory=list)
    # File intent rows the events' append writes in its own statement (``ride_with_append``).
    intent_rows: IntentRows | None = None
    # Database rows' documents as this transaction read them, by name: the commit's protection check judges
    # them before the append, which on MariaDB then commits in its own request when the rows it locks still
    # hold them (``mariadb_append``), one round trip fewer. A writer that read its database's row adds it.
    database_docs: dict[str, str] = field(default_factory=dict)
    event_ids: list[int] = field(default_factory=list)
    shared: dict[str, Any] = field(default_factory=dict)  # what components gather per transaction

    def emit(self, event_type: EventType, db_name: str | None, table_name: str | None, body: Payload) -> None:
        """Log an event of this transaction; ``body`` is the payload its type carries (``SPECS``)."""
        wanted = SPECS[event_type].message.body_type
        if not isinstance(body, wanted):
            raise TypeError(f"{event_type} carries a {wanted.__name__}, not a {type(body).__name__}")
        event = PendingEvent(event_type, db_name, table_name, body)
        check_crossing(self.conn, event)  # a rename into a protected database: refused before its file work
        self.events.append(event)

    def ride_with_append(self, rows: list[dict[str, Any]], take_ids: Callable[[list[int]], None]) -> bool:
        """Have the append of this transaction's events insert ``rows`` of file intents too, where it is one
        statement (PostgreSQL, ``pg_append``; MariaDB, ``mariadb_append``, a few rows): a client write recording
        a directory to make then costs no round trip of its own for it. ``take_ids`` receives the rows' new
        ids, in order. False (nothing taken: the caller inserts them) where the append cannot take them, or
        when the transaction logs no event."""
        if not self.events or self.intent_rows is not None:
            return False
        append = _one_statement_append(self.conn)
        if append is None or not append.takes(len(rows)):
            return False
        self.intent_rows = IntentRows(rows, take_ids)
        return True

    def on_commit(self, action: Callable[[], None], *, first: bool = False) -> None:
        """Run ``action`` once the transaction has committed (e.g. recycle files it dropped).

        ``first``: before the actions registered so far (work that readers of the change are waiting for).
        """
        if first:
            self.after_commit.insert(0, action)
        else:
            self.after_commit.append(action)

    def release(self) -> None:
        """Drop the callbacks and shared state of a transaction that ended. A callback may refer back to the
        transaction (a cycle), which left its events, their bodies and all it gathered to the cyclic collector
        (a load batch's: some 1,700 objects) instead of being freed by reference counts when its last user
        lets go."""
        self.before_commit.clear()
        self.after_commit.clear()
        self.shared.clear()


class EventLog:
    """Appends events inside metastore transactions and serves the notification API's reads."""

    def __init__(self, engine: Engine, *, compress: bool = True, compress_min_bytes: int = 1024) -> None:
        self.engine = engine
        self.write_engine = writer(engine)
        self.read_engine = reads(engine)  # reads outside a write transaction (autocommit on PostgreSQL)
        self.compress = compress
        self.compress_min_bytes = compress_min_bytes
        self._local = threading.local()

    def current_transaction(self) -> MetastoreTransaction | None:
        """This thread's open transaction, if any (``transaction`` joins it)."""
        return getattr(self._local, "tx", None)

    @contextmanager
    def transaction(self) -> Iterator[MetastoreTransaction]:
        """A metastore write: changes made on ``tx.conn`` and events emitted commit together, or neither.

        Inside an open transaction of the same thread this joins it: a caller that wraps many changes in
        one transaction (a replication load applying a batch of events) commits them, and their events,
        at once. Reads through ``reader()`` then see the batch's own writes.
        """
        outer = self.current_transaction()
        if outer is not None:
            yield outer
            return
        ended: MetastoreTransaction | None = None
        try:
            with self.write_engine.begin() as conn:
                tx = ended = MetastoreTransaction(conn)
                self._local.tx = tx
                try:
                    yield tx
                    for flush in tx.before_commit:
                        flush()
                    # The transaction's last request: the append may commit it (``database_docs``).
                    if tx.events:
                        tx.event_ids = self._append(conn, tx.events, tx.intent_rows, tx.database_docs)
                finally:
                    self._local.tx = None
            for action in tx.after_commit:
                action()
        finally:
            if ended is not None:
                ended.release()

    def execute_alone(self, statement: Executable, params: Mapping[str, Any] | None = None) -> None:
        """Run one write statement that logs no event: in this thread's open transaction if any, else as a
        transaction of its own.

        On PostgreSQL and MariaDB a lone statement is atomic without a transaction, so it runs in autocommit
        (``database.reads``): one round trip instead of BEGIN (PostgreSQL), the statement and COMMIT (a
        request deleting the file intent it just completed pays this after every create). On SQLite it is a
        short write transaction.
        """
        tx = self.current_transaction()
        if tx is not None:
            tx.conn.execute(statement, params)
            return
        if self.read_engine is self.engine:  # no autocommit engine (SQLite)
            with self.write_engine.begin() as conn:
                conn.execute(statement, params)
            return
        with self.read_engine.connect() as conn:  # autocommit: no COMMIT to send
            conn.execute(statement, params)

    def send_alone_unawaited(self, sql: str) -> bool:
        """Send ``sql``, one write statement whose outcome the caller does not need, as ``execute_alone``
        would run it alone, without waiting for the server's answer (``mariadb_unawaited``): True when sent,
        False where it cannot be (inside this thread's open transaction, a driver that must wait for the
        answer, a connection that refused it), and the caller runs it with ``execute_alone``."""
        if self.current_transaction() is not None or self.read_engine is self.engine:
            return False
        if not mariadb_unawaited.sends_unawaited(self.read_engine):
            return False
        return mariadb_unawaited.send_unawaited(self.read_engine, sql)

    @contextmanager
    def reader(self, *, snapshot: bool = False) -> Iterator[Connection]:
        """A connection for reads: the thread's open write transaction if any, else a fresh read. With
        ``snapshot`` every statement of the read sees the same committed state (REPEATABLE READ where the
        server default is READ COMMITTED; SQLite's WAL read transaction already does), for reads in pages."""
        tx: MetastoreTransaction | None = getattr(self._local, "tx", None)
        if tx is not None:
            yield tx.conn
            return
        # A snapshot needs a transaction (REPEATABLE READ holds its snapshot until the transaction ends);
        # other reads run without one on PostgreSQL (``database.reads``).
        with (self.engine if snapshot else self.read_engine).connect() as conn:
            if snapshot and conn.dialect.name != "sqlite":
                conn.execution_options(isolation_level="REPEATABLE READ")
            yield conn

    def _append(
        self,
        conn: Connection,
        events: Sequence[PendingEvent],
        intents: IntentRows | None = None,
        docs_read: Mapping[str, str] | None = None,
    ) -> list[int]:
        now = int(time.time())
        rows: list[dict[str, Any]] = []
        for event in events:
            text, message_format = encode_message(
                event.body,
                compress=self.compress and not _moves_database(event),
                compress_min_bytes=self.compress_min_bytes,
                exact_floats=SPECS[event.event_type].floats,
            )
            rows.append(
                {
                    "event_type": str(event.event_type),
                    "db_name": event.db_name,
                    "tbl_name": event.table_name,
                    "message": text,
                    "message_format": message_format,
                }
            )
        one_statement = _one_statement_append(conn)
        if one_statement is not None:
            next_id = self._append_checked(
                one_statement.append_checked, conn, events, rows, now, intents, docs_read or {}
            )
        else:
            check_writable(conn, events)  # protected replicas and frozen sources refuse client writes
            next_id = self._take_ids(conn, len(events))
            for offset, row in enumerate(rows):
                row.update(event_id=next_id + offset, event_time=now, cat_name="hive")
            conn.execute(insert(notification_log), rows)
        return [next_id + offset for offset in range(len(rows))]

    @staticmethod
    def _append_checked(
        append_checked: AppendChecked,
        conn: Connection,
        events: Sequence[PendingEvent],
        rows: list[dict[str, Any]],
        now: int,
        intents: IntentRows | None,
        docs_read: Mapping[str, str],
    ) -> int:
        """The check, the ids and the rows (the file intents' too) in one statement (``pg_append``,
        ``mariadb_append``); when a database row is held by another transaction, the check that waits for it,
        then the append alone.

        The documents the transaction read of the databases to check (``docs_read``) are judged first, so a
        statement that can commit (MariaDB's) commits when the rows it locks still hold them; the rows it
        read otherwise are judged after it, and the transaction commits apart."""
        names = databases_to_check(events)
        judged = [docs_read.get(name) for name in names]
        judge_locked_rows(doc for doc in judged if doc is not None)  # before a request that may commit
        intent_rows = intents.rows if intents is not None else []
        first, docs, intent_ids = append_checked(conn, names, rows, now, intent_rows, judged)
        if first is None:
            for name in names:
                check_held_row(conn, name)
            first, docs, intent_ids = append_checked(conn, [], rows, now, intent_rows, [])
            if first is None:
                raise RuntimeError("the notification sequence row is missing; run 'hmsrepl schema upgrade'")
        # A refusal rolls the whole transaction back, its events with it; a row holding a judged document was
        # judged above.
        judge_locked_rows(doc for doc in docs if doc not in judged)
        if intents is not None:
            intents.take_ids(intent_ids)
        return first

    @staticmethod
    def _take_ids(conn: Connection, count: int) -> int:
        """Reserve ``count`` event ids (locking the sequence row until commit); returns the first.

        One statement on every backend. Where the database returns updated rows (PostgreSQL, SQLite) the
        update returns the new value; MariaDB has no ``UPDATE ... RETURNING``, so its update stores the new
        value with ``LAST_INSERT_ID(expr)``, which the server sends back with the statement's reply (the
        cursor's ``lastrowid``): a read ``FOR UPDATE`` before the update would cost a round trip of its own.
        The update locks the row until commit either way.
        """
        if conn.dialect.update_returning:
            return int(conn.execute(_ADVANCE_RETURNING, {"count": count}).scalar_one()) - count
        advanced = conn.execute(_ADVANCE_MYSQL, {"count": count})
        if advanced.rowcount != 1:
            raise RuntimeError("the notification sequence row is missing; run 'hmsrepl schema upgrade'")
        return int(advanced.lastrowid) - count

    def append(self, events: Sequence[PendingEvent]) -> list[int]:
        """Log events that have no catalog change of their own (e.g. fire_listener_event), in one batch."""
        with self.transaction() as tx:
            tx.events.extend(events)
        return tx.event_ids

    # -- reads -----------------------------------------------------------------------------------------
    def current_event_id(self) -> int:
        with self.read_engine.connect() as conn:
            return self._current(conn)

    @staticmethod
    def _current(conn: Connection) -> int:
        seq = notification_sequence
        return int(conn.execute(select(seq.c.next_event_id).where(seq.c.id == 1)).scalar_one()) - 1

    def next_events(
        self,
        after_event_id: int,
        max_events: int | None = None,
        *,
        db_name: str | None = None,
        table_name: str | None = None,
        event_types: Sequence[str] | None = None,
        to_event_id: int | None = None,
    ) -> list[NotificationEvent]:
        """Events with id > ``after_event_id`` in id order, optionally for one database or table.

        Raises EventsCleanedUpError when retention cleanup removed events the caller has not seen yet,
        since skipping them silently would make a replica miss changes.
        """
        return self._paged(
            _filtered(self._events_query(to_event_id), db_name, table_name, event_types),
            after_event_id,
            max_events,
        )

    def next_renames_into(
        self,
        db_name: str,
        after_event_id: int,
        max_events: int | None = None,
        *,
        to_event_id: int | None = None,
    ) -> list[NotificationEvent]:
        """ALTER_TABLE events logged under other databases that may rename a table into ``db_name``, in id
        order: a rename across databases is logged under the database the table leaves, as Hive logs it.

        A superset, narrowed in the database: such a rename is stored as plain JSON (``_moves_database``),
        which names the database as a string, so the few rows whose text names it are all a quiet database's
        dump reads of a busy log. The caller parses them (``replication.crossing``)."""
        log, name = notification_log, db_name.lower()
        query = self._events_query(to_event_id).where(
            log.c.event_type == str(EventType.ALTER_TABLE),
            or_(log.c.db_name.is_(None), log.c.db_name != name),
            log.c.message_format == JSON_FORMAT,
            log.c.message.contains(f'"{name}"', autoescape=True),
        )
        return self._paged(query, after_event_id, max_events)

    def _events_query(self, to_event_id: int | None) -> Select[Any]:
        log = notification_log
        query = select(*self._EVENT_COLUMNS).order_by(log.c.event_id)
        if to_event_id is not None:
            query = query.where(log.c.event_id <= to_event_id)
        return query

    def _paged(
        self, query: Select[Any], after_event_id: int, max_events: int | None
    ) -> list[NotificationEvent]:
        """The events ``query`` selects after ``after_event_id`` (at most ``max_events``), read in pages."""
        log = notification_log
        # One statement for every page, its bounds bound: built (and its cache key made) once per call.
        page = query.where(log.c.event_id > bindparam("after")).limit(bindparam("want"))
        limit = max_events if max_events is not None and max_events > 0 else None
        events: list[NotificationEvent] = []
        # Rows and events are built without the cyclic collector, whose passes otherwise take half of a
        # large read's CPU; they hold no cycles (``gc_pause``).
        with gc_paused(), self.read_engine.connect() as conn:
            self._check_not_cleaned(conn, after_event_id)
            after = after_event_id
            while True:
                want = self._PAGE if limit is None else min(self._PAGE, limit - len(events))
                rows = _driver_rows(conn, page, {"after": after, "want": want})
                events.extend(map(_make_event, rows))
                if len(rows) < want or len(events) == limit:
                    return events
                after = rows[-1][0]

    # Rows per statement: a large read (a dump reading 100k events) goes in keyset pages, each a plain
    # indexed range scan ``event_id > last`` that the driver buffers whole. Pages keep the driver's buffer
    # and the live rows small (libpq otherwise holds the whole result, ~130 MB for 100k events), and cost a
    # round trip per page, where a server-side cursor streaming 1,000 rows costs one per 1,000 (and more to
    # open and close it). A read of fewer events than a page is one statement.
    _PAGE = 5_000

    @staticmethod
    def _event_columns() -> tuple[Any, ...]:
        """The log's columns in NotificationEvent's field order, so each row builds an event positionally.

        Derived from the named tuple rather than listed, so reordering or adding a field cannot silently
        put values into the wrong attribute (a field without a column fails at import, loudly).
        """
        log = notification_log
        special = {
            "table_name": log.c.tbl_name,
            # Rows without a catalog belong to Hive's default one (as ``cat_name or "hive"`` did).
            "cat_name": func.coalesce(func.nullif(log.c.cat_name, ""), "hive"),
        }
        return tuple(special[name] if name in special else log.c[name] for name in NotificationEvent._fields)

    # Built once: constructing the expressions costs ~25 us, a tenth of a small read on SQLite.
    _EVENT_COLUMNS = _event_columns()

    def _check_not_cleaned(self, conn: Connection, after_event_id: int) -> None:
        current = self._current(conn)
        if after_event_id >= current:
            return
        oldest = conn.execute(select(func.min(notification_log.c.event_id))).scalar()
        if oldest is None or oldest > after_event_id + 1:
            raise EventsCleanedUpError(after_event_id, oldest)

    def previous_events(
        self,
        before_event_id: int,
        max_events: int,
        *,
        db_name: str | None = None,
        table_name: str | None = None,
        event_types: Sequence[str] | None = None,
    ) -> list[NotificationEvent]:
        """Events with id < ``before_event_id``, newest first: for readers that walk the log backwards
        (a restore looks for the creation behind an object's state as of some event)."""
        log = notification_log
        query = (
            select(*self._EVENT_COLUMNS)
            .where(log.c.event_id < before_event_id)
            .order_by(log.c.event_id.desc())
            .limit(max_events)
        )
        query = _filtered(query, db_name, table_name, event_types)
        with self.read_engine.connect() as conn:
            return list(map(_make_event, conn.execute(query).all()))

    def oldest_event_id(self) -> int | None:
        """The oldest event the log still holds (None: empty), to tell a cleaned-up history from none."""
        with self.read_engine.connect() as conn:
            return conn.execute(select(func.min(notification_log.c.event_id))).scalar()

    def last_event_at(self, timestamp: int) -> int:
        """The id of the last event logged at or before ``timestamp`` (seconds), 0 when none was."""
        log = notification_log
        with self.read_engine.connect() as conn:
            found = conn.execute(
                select(func.max(log.c.event_id)).where(log.c.event_time <= timestamp)
            ).scalar()
        return int(found or 0)

    def count_events(self, from_event_id: int, db_name: str, to_event_id: int | None = None) -> int:
        """Number of events of ``db_name`` with from_event_id < id <= to_event_id (Hive's semantics)."""
        log = notification_log
        query = select(func.count()).where(log.c.event_id > from_event_id, log.c.db_name == db_name.lower())
        if to_event_id is not None:
            query = query.where(log.c.event_id <= to_event_id)
        with self.read_engine.connect() as conn:
            return conn.execute(query).scalar_one()

    def cleanup(self, ttl_seconds: int, now: float | None = None) -> int:
        """Delete events older than the TTL, in bounded batches; returns how many were deleted."""
        cutoff = int((time.time() if now is None else now) - ttl_seconds)
        log = notification_log
        deleted = 0
        while True:
            with self.write_engine.begin() as conn:
                upper = conn.execute(
                    select(log.c.event_id)
                    .where(log.c.event_time < cutoff)
                    .order_by(log.c.event_id)
                    .offset(DELETE_BATCH - 1)
                    .limit(1)
                ).scalar()
                stmt = delete(log).where(log.c.event_time < cutoff)
                if upper is not None:
                    stmt = stmt.where(log.c.event_id <= upper)
                count = conn.execute(stmt).rowcount
            deleted += count
            if upper is None or count == 0:
                return deleted


_make_event = LoggedEvent._make  # an event of this log from a row in NotificationEvent's field order


def _driver_rows(conn: Connection, statement: Select[Any], params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """All rows of ``statement`` as the driver's own tuples: the log's columns need no conversion on any
    backend, and skipping SQLAlchemy's row objects saves about a fifth of reading 100,000 events. The
    statement still goes through ``conn.execute`` (its events, so statement counts see it)."""
    result = conn.execute(statement, params)
    try:
        return list(result.cursor.fetchall())
    finally:
        result.close()


def _moves_database(event: PendingEvent) -> bool:
    """A rename across databases: stored uncompressed, so the dump of the database it enters finds it by its
    text in the database (``EventLog.next_renames_into``) instead of inflating every ALTER_TABLE."""
    own = (event.db_name or "").lower()
    return event.event_type == EventType.ALTER_TABLE and bool(named_databases(event) - {own})


def _filtered(
    query: Select[Any], db_name: str | None, table_name: str | None, event_types: Sequence[str] | None
) -> Select[Any]:
    """``query`` over the notification log narrowed to one database, table and event types (each optional)."""
    log = notification_log
    if db_name is not None:
        query = query.where(log.c.db_name == db_name.lower())
    if table_name is not None:
        query = query.where(log.c.tbl_name == table_name.lower())
    if event_types:
        query = query.where(log.c.event_type.in_(list(event_types)))
    return query
