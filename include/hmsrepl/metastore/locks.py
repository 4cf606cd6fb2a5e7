"""Hive's lock manager: shared and exclusive locks on databases, tables and partitions, kept in the database.

Semantics follow Hive's DbTxnManager/TxnHandler, so Hive ACID writers and Iceberg's Hive catalog (which
takes an exclusive table lock around every commit) behave as on a Hive Metastore:

- A request's components are granted together or not at all. A request is queued (``WAITING``) behind
  every earlier request (lower lock id) that holds or waits for a conflicting lock, so a writer waiting for
  readers is not starved by readers arriving later. ``check_lock`` retries; ``unlock`` withdraws it.
- Conflicts: locks on different databases, different tables, or different partitions of a table never
  conflict; a database lock meets every lock in the database and a table lock every partition lock of the
  table. Types conflict as in Hive 3/4 (``EXCL_WRITE`` is Hive 4's): shared reads coexist with every type
  but ``EXCLUSIVE``; shared writes with reads and shared writes; ``EXCL_WRITE`` with reads only.
- A lock tied to a txn lives until the txn commits or aborts (a txn timeout aborts it and so releases its
  locks). A standalone lock lives while its holder heartbeats it (``heartbeat`` or ``check_lock``): one
  silent for the txn timeout is released, by the housekeeping thread and before any lock decision.

Every decision locks one sequence row ``FOR UPDATE`` inside a single database transaction, so metastore
instances sharing a database decide one at a time and never grant two conflicting locks (on SQLite the
writer transaction's ``BEGIN IMMEDIATE`` does the same).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, delete, insert, select, update

from hmsrepl.exceptions import (
    InvalidObjectError,
    NoSuchDatabaseError,
    NoSuchLockError,
    NoSuchTxnError,
    TxnAbortedError,
    TxnNotOpenError,
    TxnOpenError,
)
from hmsrepl.metastore.eventlog import EventLog
from hmsrepl.metastore.protection import check_write_locks
from hmsrepl.metastore.schema import dbs, hive_locks, lock_sequence, txns

# Hive's single-character encodings (LockTypeUtil), stored in hive_locks.lock_type.
LOCK_TYPES = {"SHARED_READ": "r", "SHARED_WRITE": "w", "EXCL_WRITE": "x", "EXCLUSIVE": "e"}
TYPE_NAMES = {code: name for name, code in LOCK_TYPES.items()}
LEVELS = ("DB", "TABLE", "PARTITION")
ACQUIRED, WAITING, NOT_ACQUIRED = "ACQUIRED", "WAITING", "NOT_ACQUIRED"
_STATE_CODES = {"a": ACQUIRED, "w": WAITING}

# Pairs of lock types that may be held at once on overlapping objects (the relation is symmetric).
_COMPATIBLE = frozenset({("r", "r"), ("r", "w"), ("r", "x"), ("w", "r"), ("w", "w"), ("x", "r")})


def compatible(requested: str, held: str) -> bool:
    """Whether lock type codes ``requested`` and ``held`` may coexist on overlapping objects."""
    return (requested, held) in _COMPATIBLE


@dataclass(frozen=True)
class LockComponent:
    """One object of a lock request: a database, a table, or a partition (by name, ``p=1/q=a``)."""

    lock_type: str
    db_name: str
    table_name: str | None = None
    partition_name: str | None = None
    operation: str | None = None

    def overlaps(self, db: str, table: str | None, partition: str | None) -> bool:
        """Whether this component and the other object share data (Hive's db > table > partition rules)."""
        if db != self.db_name:
            return False
        if table is None or self.table_name is None:
            return True
        if table != self.table_name:
            return False
        if partition is None or self.partition_name is None:
            return True
        return partition == self.partition_name


@dataclass(frozen=True)
class LockResult:
    lock_id: int
    state: str
    message: str | None = None


@dataclass(frozen=True)
class LockInfo:
    """A row of show_locks: one component of one lock."""

    lock_id: int
    component: int
    txn_id: int
    db_name: str
    table_name: str | None
    partition_name: str | None
    state: str
    lock_type: str
    last_heartbeat: int
    acquired_at: int | None
    user: str
    host: str
    agent_info: str | None
    heartbeat_count: int
    blocked_by: int | None


def _now_ms() -> int:
    return int(time.time() * 1000)


class LockService:
    def __init__(self, events: EventLog, *, timeout_seconds: int = 300) -> None:
        self.events = events
        self.timeout_seconds = timeout_seconds

    # -- requests ---------------------------------------------------------------------------------------
    def lock(
        self,
        components: Sequence[LockComponent],
        *,
        txn_id: int | None = None,
        user: str = "hive",
        host: str = "localhost",
        agent_info: str | None = None,
        zero_wait: bool = False,
    ) -> LockResult:
        """Enqueue a lock request and try to acquire it at once.

        ``WAITING`` leaves it queued (ask again with ``check_lock``); with ``zero_wait`` (Hive 4's
        zeroWaitReadEnabled) a request that would wait is withdrawn and answered ``NOT_ACQUIRED``.
        """
        if not components:
            raise InvalidObjectError("lock request has no components; name at least one database or table")
        parts = [self._normalised(c) for c in components]
        txn = txn_id or 0
        with self.events.transaction() as tx:
            conn = tx.conn
            lock_id = self._next_lock_id(conn)
            self._expire(conn)
            for name in sorted({c.db_name for c in parts}):
                if conn.execute(select(dbs.c.db_id).where(dbs.c.name == name)).first() is None:
                    raise NoSuchDatabaseError(name)
            check_write_locks(conn, (c.db_name for c in parts if c.lock_type != "SHARED_READ"))
            if txn:
                self._require_open_txn(conn, txn)
            now = _now_ms()
            conn.execute(
                insert(hive_locks),
                [
                    {
                        "lock_id": lock_id,
                        "component": index,
                        "txn_id": txn,
                        "db_name": c.db_name,
                        "tbl_name": c.table_name,
                        "part_name": c.partition_name,
                        "state": "w",
                        "lock_type": LOCK_TYPES[c.lock_type],
                        "operation": c.operation,
                        "last_heartbeat": now,
                        "acquired_at": None,
                        "user_name": (user or "unknown")[:128],
                        "host_name": (host or "unknown")[:128],
                        "agent_info": (agent_info or "")[:256] or None,
                        "heartbeat_count": 0,
                        "blocked_by": None,
                    }
                    for index, c in enumerate(parts, start=1)
                ],
            )
            state = self._try_acquire(conn, lock_id, txn, parts)
            if state == WAITING and zero_wait:
                conn.execute(delete(hive_locks).where(hive_locks.c.lock_id == lock_id))
                return LockResult(lock_id, NOT_ACQUIRED, "a conflicting lock is held and zero-wait was asked")
        return LockResult(lock_id, state)

    def check_lock(self, lock_id: int, txn_id: int | None = None) -> LockResult:
        """Try again to acquire a waiting lock (and heartbeat it); raises NoSuchLockError if it is gone."""
        with self.events.transaction() as tx:
            conn = tx.conn
            self._next_lock_id(conn, advance=False)
            self._expire(conn)
            rows = self._rows(conn, lock_id)
            if not rows:
                raise NoSuchLockError(lock_id)
            txn = rows[0].txn_id
            if txn:
                self._require_open_txn(conn, txn)
            else:
                self._touch(conn, lock_id)
            if all(r.state == "a" for r in rows):
                return LockResult(lock_id, ACQUIRED)
            parts = [
                LockComponent(TYPE_NAMES[r.lock_type], r.db_name, r.tbl_name, r.part_name, r.operation)
                for r in rows
            ]
            return LockResult(lock_id, self._try_acquire(conn, lock_id, txn, parts))

    def unlock(self, lock_id: int) -> None:
        """Release (or withdraw, if waiting) a standalone lock; a txn's locks go with its commit or abort."""
        with self.events.transaction() as tx:
            conn = tx.conn
            rows = self._rows(conn, lock_id)
            if not rows:
                raise NoSuchLockError(lock_id)
            if rows[0].txn_id:
                raise TxnOpenError(
                    f"lock {lock_id} belongs to transaction {rows[0].txn_id}: it is released when that "
                    "transaction commits or aborts; commit or abort it instead of unlocking"
                )
            conn.execute(delete(hive_locks).where(hive_locks.c.lock_id == lock_id))

    def heartbeat(self, lock_id: int | None = None, txn_id: int | None = None) -> None:
        """Keep a standalone lock (by ``lock_id``) and/or a txn and its locks (by ``txn_id``) alive."""
        with self.events.transaction() as tx:
            conn = tx.conn
            if lock_id:
                if not self._rows(conn, lock_id):
                    raise NoSuchLockError(lock_id)
                self._touch(conn, lock_id)
            if txn_id:
                self._require_open_txn(conn, txn_id)
                now = _now_ms()
                conn.execute(update(txns).where(txns.c.txn_id == txn_id).values(last_heartbeat=now // 1000))
                conn.execute(
                    update(hive_locks)
                    .where(hive_locks.c.txn_id == txn_id)
                    .values(last_heartbeat=now, heartbeat_count=hive_locks.c.heartbeat_count + 1)
                )

    def show_locks(
        self,
        db_name: str | None = None,
        table_name: str | None = None,
        partition_name: str | None = None,
        txn_id: int | None = None,
    ) -> list[LockInfo]:
        h = hive_locks
        query = select(h).order_by(h.c.lock_id, h.c.component)
        if db_name:
            query = query.where(h.c.db_name == db_name.lower())
        if table_name:
            query = query.where(h.c.tbl_name == table_name.lower())
        if partition_name:
            query = query.where(h.c.part_name == partition_name)
        if txn_id:
            query = query.where(h.c.txn_id == txn_id)
        with self.events.reader() as conn:
            return [
                LockInfo(
                    r.lock_id,
                    r.component,
                    r.txn_id,
                    r.db_name,
                    r.tbl_name,
                    r.part_name,
                    _STATE_CODES[r.state],
                    TYPE_NAMES[r.lock_type],
                    r.last_heartbeat,
                    r.acquired_at,
                    r.user_name,
                    r.host_name,
                    r.agent_info,
                    r.heartbeat_count,
                    r.blocked_by,
                )
                for r in conn.execute(query)
            ]

    # -- housekeeping and txn hooks ---------------------------------------------------------------------
    def release_timed_out(self, now: float | None = None) -> int:
        """Release standalone locks silent for the timeout (their holder died); returns how many locks."""
        with self.events.transaction() as tx:
            self._next_lock_id(tx.conn, advance=False)
            return self._expire(tx.conn, now)

    @staticmethod
    def release_txn_locks(conn: Connection, txn_id: int) -> None:
        """Drop a txn's locks, inside the transaction that commits or aborts it."""
        conn.execute(delete(hive_locks).where(hive_locks.c.txn_id == txn_id))

    # -- internals --------------------------------------------------------------------------------------
    @staticmethod
    def _normalised(c: LockComponent) -> LockComponent:
        if c.lock_type not in LOCK_TYPES:
            raise InvalidObjectError(
                f"lock type '{c.lock_type}' is not one of {', '.join(LOCK_TYPES)}; send a Hive LockType"
            )
        if not c.db_name:
            raise InvalidObjectError("lock component has no database name; every component names one")
        if c.partition_name and not c.table_name:
            raise InvalidObjectError(
                f"lock component for partition '{c.partition_name}' has no table name; name its table"
            )
        return LockComponent(
            c.lock_type,
            c.db_name.lower(),
            c.table_name.lower() if c.table_name else None,
            c.partition_name or None,
            c.operation,
        )

    @staticmethod
    def _next_lock_id(conn: Connection, *, advance: bool = True) -> int:
        """Lock the sequence row (serialising lock decisions across instances); take an id if asked."""
        seq = lock_sequence
        value = conn.execute(select(seq.c.next_lock_id).where(seq.c.id == 1).with_for_update()).scalar_one()
        if advance:
            conn.execute(update(seq).where(seq.c.id == 1).values(next_lock_id=value + 1))
        return value

    @staticmethod
    def _rows(conn: Connection, lock_id: int) -> list:
        h = hive_locks
        return list(conn.execute(select(h).where(h.c.lock_id == lock_id).order_by(h.c.component)))

    @staticmethod
    def _touch(conn: Connection, lock_id: int) -> None:
        h = hive_locks
        conn.execute(
            update(h)
            .where(h.c.lock_id == lock_id)
            .values(last_heartbeat=_now_ms(), heartbeat_count=h.c.heartbeat_count + 1)
        )

    def _expire(self, conn: Connection, now: float | None = None) -> int:
        cutoff = int(((time.time() if now is None else now) - self.timeout_seconds) * 1000)
        h = hive_locks
        stale = select(h.c.lock_id).distinct().where(h.c.txn_id == 0, h.c.last_heartbeat < cutoff)
        ids = list(conn.execute(stale).scalars())
        if ids:
            conn.execute(delete(h).where(h.c.lock_id.in_(ids)))
        return len(ids)

    @staticmethod
    def _require_open_txn(conn: Connection, txn_id: int) -> None:
        state = conn.execute(select(txns.c.state).where(txns.c.txn_id == txn_id)).scalar()
        if state is None:
            raise NoSuchTxnError(txn_id)
        if state == "a":
            raise TxnAbortedError(txn_id)
        if state != "o":
            raise TxnNotOpenError(txn_id, "committed")

    @staticmethod
    def _try_acquire(conn: Connection, lock_id: int, txn_id: int, parts: Sequence[LockComponent]) -> str:
        """Grant the whole request unless an earlier request on an overlapping object conflicts with it."""
        h = hive_locks
        query = select(
            h.c.lock_id, h.c.txn_id, h.c.db_name, h.c.tbl_name, h.c.part_name, h.c.lock_type
        ).where(h.c.lock_id < lock_id, h.c.db_name.in_(sorted({c.db_name for c in parts})))
        if txn_id:
            query = query.where(h.c.txn_id != txn_id)  # a txn's own locks never block it
        for other in conn.execute(query.order_by(h.c.lock_id)):
            for c in parts:
                if not compatible(LOCK_TYPES[c.lock_type], other.lock_type) and c.overlaps(
                    other.db_name, other.tbl_name, other.part_name
                ):
                    conn.execute(update(h).where(h.c.lock_id == lock_id).values(blocked_by=other.lock_id))
                    return WAITING
        conn.execute(
            update(h).where(h.c.lock_id == lock_id).values(state="a", acquired_at=_now_ms(), blocked_by=None)
        )
        return ACQUIRED
