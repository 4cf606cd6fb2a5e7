"""The compaction queue: what the initiator asked for, what a worker did, and what the cleaner still owes.

One row per compaction of one table or partition location, kept after it ends (Hive splits these rows into
COMPACTION_QUEUE and COMPLETED_COMPACTIONS; one table with terminal states answers ``show_compact`` the same
way). The states follow Hive's: ``initiated`` -> ``working`` -> ``ready for cleaning`` -> ``succeeded``, or
``failed`` (the error is kept), or ``refused`` (nothing to compact when the worker looked); a location the
initiator could not examine gets a ``did not initiate`` row. Ended rows are purged by ``compaction_history``.

A worker claims a row under a row lock, so two workers never compact the same location at once; a row left
``working`` by a killed worker is handed back once its txn is no longer open (the housekeeping aborts a txn
whose heartbeat stopped), see ``reclaim_abandoned``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, and_, insert, or_, select, update

from hmsrepl.metastore.eventlog import EventLog
from hmsrepl.metastore.schema import compaction_queue, txns

INITIATED = "initiated"
WORKING = "working"
READY_FOR_CLEANING = "ready for cleaning"
SUCCEEDED = "succeeded"
FAILED = "failed"
REFUSED = "refused"
DID_NOT_INITIATE = "did not initiate"
"""The initiator could not examine the location (the error is kept); Hive's state of the same name."""
ACTIVE_STATES = (INITIATED, WORKING, READY_FOR_CLEANING)
"""A location with a row in one of these states is not queued again (Hive's initiator does the same)."""
MAJOR = "major"
MINOR = "minor"
COMPACTION_TYPES = (MAJOR, MINOR)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class CompactionRecord:
    """One row of the queue (see the module docstring for the states)."""

    id: int
    db_name: str
    table_name: str
    part_name: str | None
    type: str
    state: str
    highest_write_id: int | None = None
    txn_id: int | None = None
    next_txn_id: int | None = None
    base_dir: str | None = None
    worker: str | None = None
    enqueued_at: int = 0
    started_at: int | None = None
    ended_at: int | None = None
    error: str | None = None

    @property
    def target(self) -> str:
        """``db.table`` or ``db.table/part=value``: how messages and ``show`` name the location."""
        name = f"{self.db_name}.{self.table_name}"
        return f"{name}/{self.part_name}" if self.part_name else name


@dataclass(frozen=True)
class QueuedRequest:
    """What a request to compact a location got: a new row (``accepted``) or the one already active there."""

    id: int
    state: str
    accepted: bool


def _record(row: object) -> CompactionRecord:
    m = row._mapping  # type: ignore[attr-defined]
    return CompactionRecord(
        id=m["id"],
        db_name=m["db_name"],
        table_name=m["tbl_name"],
        part_name=m["part_name"],
        type=m["type"],
        state=m["state"],
        highest_write_id=m["highest_write_id"],
        txn_id=m["txn_id"],
        next_txn_id=m["next_txn_id"],
        base_dir=m["base_dir"],
        worker=m["worker"],
        enqueued_at=m["enqueued_at"],
        started_at=m["started_at"],
        ended_at=m["ended_at"],
        error=m["error"],
    )


class CompactionQueue:
    """Reads and state changes of ``compaction_queue`` rows; every change is one short DB transaction (or
    joins the caller's, so a worker's commit and its row's new state are one)."""

    def __init__(self, events: EventLog) -> None:
        self.events = events

    def enqueue(self, db_name: str, table_name: str, part_name: str | None, type_: str = MAJOR) -> int | None:
        """Queue a compaction of one location; ``None`` when one is already queued, working or cleaning."""
        queued = self.request(db_name, table_name, part_name, type_)
        return queued.id if queued.accepted else None

    def request(
        self,
        db_name: str,
        table_name: str,
        part_name: str | None,
        type_: str = MAJOR,
        *,
        guard: Callable[[Connection], None] | None = None,
    ) -> QueuedRequest:
        """Queue a compaction of one location, or name the one already queued, working or cleaning there
        (Hive's ``compact2`` answer: accepted, or the existing id and state).

        ``guard`` runs first in the same DB transaction (a client request's protection check), so a refused
        request leaves no row.
        """
        if type_ not in COMPACTION_TYPES:
            raise ValueError(f"compaction type '{type_}' is not one of {', '.join(COMPACTION_TYPES)}")
        cq = compaction_queue
        with self.events.transaction() as tx:
            if guard is not None:
                guard(tx.conn)
            active = tx.conn.execute(
                select(cq.c.id, cq.c.state)
                .where(
                    cq.c.db_name == db_name.lower(),
                    cq.c.tbl_name == table_name.lower(),
                    cq.c.part_name.is_(None) if part_name is None else cq.c.part_name == part_name,
                    cq.c.state.in_(ACTIVE_STATES),
                )
                .with_for_update()
            ).first()
            if active is not None:
                return QueuedRequest(int(active.id), active.state, accepted=False)
            result = tx.conn.execute(
                insert(cq).values(
                    db_name=db_name.lower(),
                    tbl_name=table_name.lower(),
                    part_name=part_name,
                    type=type_,
                    state=INITIATED,
                    enqueued_at=now_ms(),
                )
            )
            key = result.inserted_primary_key
            assert key is not None  # an INSERT of one row always reports its key
            return QueuedRequest(int(key[0]), INITIATED, accepted=True)

    def record_not_initiated(self, db_name: str, table_name: str, part_name: str | None, error: str) -> int:
        """An ended ``did not initiate`` row: why the initiator could not look at this location."""
        now = now_ms()
        with self.events.transaction() as tx:
            result = tx.conn.execute(
                insert(compaction_queue).values(
                    db_name=db_name.lower(),
                    tbl_name=table_name.lower(),
                    part_name=part_name,
                    type=MAJOR,
                    state=DID_NOT_INITIATE,
                    enqueued_at=now,
                    ended_at=now,
                    error=error[:4000],
                )
            )
            key = result.inserted_primary_key
            assert key is not None
            return int(key[0])

    def claim(
        self, worker: str, *, db_name: str | None = None, table_name: str | None = None
    ) -> CompactionRecord | None:
        """Take the oldest ``initiated`` row (of one table if named) and mark it ``working`` by ``worker``."""
        cq = compaction_queue
        with self.events.transaction() as tx:
            query = select(cq).where(cq.c.state == INITIATED).order_by(cq.c.id).limit(1).with_for_update()
            if db_name is not None:
                query = query.where(cq.c.db_name == db_name.lower())
            if table_name is not None:
                query = query.where(cq.c.tbl_name == table_name.lower())
            row = tx.conn.execute(query).first()
            if row is None:
                return None
            started = now_ms()
            tx.conn.execute(
                update(cq)
                .where(cq.c.id == row.id)
                .values(state=WORKING, worker=worker[:128], started_at=started, error=None)
            )
        return self.get(row.id)

    def set_txn(self, compaction_id: int, txn_id: int) -> None:
        with self.events.transaction() as tx:
            tx.conn.execute(
                update(compaction_queue).where(compaction_queue.c.id == compaction_id).values(txn_id=txn_id)
            )

    def mark_compacted(
        self, conn: Connection, compaction_id: int, *, highest_write_id: int, next_txn_id: int, base_dir: str
    ) -> None:
        """In the worker's commit transaction: the base is visible, the cleaner may take over."""
        conn.execute(
            update(compaction_queue)
            .where(compaction_queue.c.id == compaction_id)
            .values(
                state=READY_FOR_CLEANING,
                highest_write_id=highest_write_id,
                next_txn_id=next_txn_id,
                base_dir=base_dir,
                ended_at=now_ms(),
            )
        )

    def finish(
        self, compaction_id: int, state: str, error: str | None = None, *, conn: Connection | None = None
    ) -> None:
        """End a row as ``succeeded``, ``failed`` or ``refused`` (in ``conn``'s transaction when given)."""
        statement = (
            update(compaction_queue)
            .where(compaction_queue.c.id == compaction_id)
            .values(state=state, error=None if error is None else error[:4000], ended_at=now_ms())
        )
        if conn is not None:
            conn.execute(statement)
            return
        with self.events.transaction() as tx:
            tx.conn.execute(statement)

    def get(self, compaction_id: int) -> CompactionRecord:
        with self.events.reader() as conn:
            row = conn.execute(select(compaction_queue).where(compaction_queue.c.id == compaction_id)).one()
        return _record(row)

    def records(
        self,
        *,
        states: Sequence[str] | None = None,
        db_name: str | None = None,
        table_name: str | None = None,
    ) -> list[CompactionRecord]:
        """Rows, oldest first (what ``show_compact`` and ``hmsrepl compact --show`` print)."""
        cq = compaction_queue
        query = select(cq).order_by(cq.c.id)
        if states is not None:
            query = query.where(cq.c.state.in_(list(states)))
        if db_name is not None:
            query = query.where(cq.c.db_name == db_name.lower())
        if table_name is not None:
            query = query.where(cq.c.tbl_name == table_name.lower())
        with self.events.reader() as conn:
            return [_record(row) for row in conn.execute(query)]

    def reclaim_abandoned(self, stale_before_ms: int) -> list[int]:
        """Hand back ``working`` rows whose worker is gone: its txn is no longer open (killed, then aborted
        by the timeout housekeeping), or it was killed before opening one and started before ``stale_before_ms``.

        The killed worker's base directory has a visibility suffix naming that aborted txn, so no reader
        ever takes it, and the cleaner removes it with the next compaction's obsolete directories.
        """
        cq = compaction_queue
        with self.events.transaction() as tx:
            rows = (
                tx.conn.execute(
                    select(cq.c.id)
                    .select_from(cq.outerjoin(txns, txns.c.txn_id == cq.c.txn_id))
                    .where(
                        cq.c.state == WORKING,
                        or_(
                            and_(cq.c.txn_id.is_not(None), txns.c.state.is_not(None), txns.c.state != "o"),
                            and_(cq.c.txn_id.is_(None), cq.c.started_at < stale_before_ms),
                        ),
                    )
                )
                .scalars()
                .all()
            )
            if rows:
                tx.conn.execute(
                    update(cq)
                    .where(cq.c.id.in_(rows), cq.c.state == WORKING)
                    .values(
                        state=INITIATED,
                        txn_id=None,
                        worker=None,
                        started_at=None,
                        error="worker lost; requeued",
                    )
                )
        return list(rows)
