"""Event ids stay gap-free, duplicate-free and in commit order when separate OS processes write at once.

Several metastore instances share one database in production (HA), so threads in one process are not
enough: each writer here is a spawned process with its own engine, connection pool and EventLog, racing
through both write paths (raw ``EventLog.append`` batches and catalog changes that emit their event in the
same transaction). Every event carries a (worker, sequence) marker so the log can be checked against what
each process issued, in the order it issued it.
"""

from __future__ import annotations

import itertools
import multiprocessing
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.database import make_engine, upgrade_schema
from hmsrepl.metastore.eventlog import EventLog
from hmsrepl.metastore.events import EventType, NotificationEvent, PendingEvent
from hmsrepl.metastore.model import Database, FieldSchema, StorageDescriptor, Table
from hmsrepl.metastore.payloads import DatabaseBody, DatabaseSnapshot, InsertBody, TableSnapshot
from hmsrepl.metastore.schema import dbs, notification_log, notification_sequence

WORKERS = 3
TABLES_PER_WORKER = 40  # catalog path: one event per create_table transaction
BATCH_SIZES = (1, 7, 25, 50)  # raw path: batches cycle through these sizes, one per table created
WORKER_MARK = "hmsrepl.test.worker"
SEQ_MARK = "hmsrepl.test.seq"
# Generous: only reached when a worker dies before the barrier or hangs on a lock.
BARRIER_TIMEOUT = 120.0
RESULT_TIMEOUT = 300.0


def _marks(worker: int, seq: int) -> dict[str, str]:
    return {WORKER_MARK: str(worker), SEQ_MARK: str(seq)}


def _run_worker(worker: int, db_url: str, root: str, barrier: Any, report: Connection) -> None:
    """Body of one writer process: sends what it wrote, or its traceback, to the parent."""
    try:
        outcome = _write_events(worker, db_url, Path(root), barrier)
    except BaseException:
        outcome = {"worker": worker, "error": traceback.format_exc()}
    report.send(outcome)
    report.close()


def _write_events(worker: int, db_url: str, root: Path, barrier: Any) -> dict[str, Any]:
    """Interleave catalog writes and raw batches, numbering every event in issue order.

    Returns the number of events written and, for raw batches, the ids ``append`` returned, so the test
    can check the ids handed back to callers match where the events actually landed.
    """
    engine = make_engine(db_url)
    config = MetastoreConfig(db_url=db_url, warehouse=str(root / "warehouse"), cmroot=str(root / "cmroot"))
    store = Metastore(config, engine=engine)
    log: EventLog = store.events
    db_name = f"worker{worker}"
    with engine.connect():  # open the first connection now so connecting is not part of the race
        pass
    barrier.wait()
    started = time.time()  # wall clock: comparable across processes

    seq = 0
    raw_ids: dict[int, int] = {}
    store.catalog.create_database(Database(name=db_name, parameters=_marks(worker, seq)))
    seq += 1
    for number in range(TABLES_PER_WORKER):
        size = BATCH_SIZES[number % len(BATCH_SIZES)]
        batch = [
            PendingEvent(EventType.INSERT, db_name, None, {"files": [], **_marks(worker, seq + i)})
            for i in range(size)
        ]
        ids = log.append(batch)
        raw_ids.update({seq + i: event_id for i, event_id in enumerate(ids)})
        seq += size
        store.catalog.create_table(
            Table(
                db_name=db_name,
                table_name=f"t{number}",
                sd=StorageDescriptor(cols=[FieldSchema(name="id", type="bigint")]),
                parameters=_marks(worker, seq),
            )
        )
        seq += 1
    store.close()
    finished = time.time()
    return {
        "worker": worker,
        "count": seq,
        "raw_ids": raw_ids,
        "started": started,
        "finished": finished,
        "error": None,
    }


def _marker(event: NotificationEvent) -> tuple[int, int]:
    """The (worker, seq) an event was issued with, whichever write path produced it."""
    body = event.body()
    if event.event_type == EventType.CREATE_DATABASE:
        marks = body["database"]["parameters"]
    elif event.event_type == EventType.CREATE_TABLE:
        marks = body["table"]["parameters"]
    else:
        marks = body
    return int(marks[WORKER_MARK]), int(marks[SEQ_MARK])


def _run_writers(db_url: str, root: Path) -> list[dict[str, Any]]:
    """Start the writer processes behind one barrier and collect their reports.

    Each writer reports on a pipe of its own; the parent holds no write end, so a writer that dies
    without reporting shows up at once as end-of-file instead of a long timeout.
    """
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS, timeout=BARRIER_TIMEOUT)
    pending: dict[Connection, multiprocessing.process.BaseProcess] = {}
    for worker in range(WORKERS):
        reader, writer = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_run_worker, args=(worker, db_url, str(root), barrier, writer))
        process.start()
        writer.close()
        pending[reader] = process
    processes = list(pending.values())
    reports: list[dict[str, Any]] = []
    failure: str | None = None
    deadline = time.monotonic() + RESULT_TIMEOUT
    try:
        while pending and failure is None:
            ready = wait(list(pending), timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                failure = f"writers did not finish within {RESULT_TIMEOUT:.0f} s"
            for reader in ready:
                process = pending.pop(reader)
                try:
                    report = reader.recv()
                except EOFError:
                    process.join(timeout=10)
                    failure = f"writer process died without a report (exit code {process.exitcode})"
                    continue
                reports.append(report)
                if report["error"]:
                    failure = f"writer {report['worker']} failed:\n{report['error']}"
    finally:
        for process in processes:
            if failure is not None and process.is_alive():
                process.kill()  # its peers failed: do not leave it waiting on the barrier or a lock
            process.join(timeout=RESULT_TIMEOUT)
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    return sorted(reports, key=lambda report: report["worker"])


def test_concurrent_processes_get_gap_free_ordered_event_ids(
    backend: str, db_url: str, tmp_path: Path
) -> None:
    upgrade_schema(db_url)
    reports = _run_writers(db_url, tmp_path)
    total = sum(report["count"] for report in reports)

    engine = make_engine(db_url)
    try:
        log = EventLog(engine)
        events = log.next_events(0)
        with engine.connect() as conn:
            next_id = conn.execute(
                select(notification_sequence.c.next_event_id).where(notification_sequence.c.id == 1)
            ).scalar_one()
    finally:
        engine.dispose()

    ids = [event.event_id for event in events]
    assert len(ids) == total, f"{len(ids)} events in the log, writers reported {total}"
    assert ids == list(range(1, total + 1)), "event ids have gaps, duplicates or are out of order"
    assert next_id == total + 1

    markers = [_marker(event) for event in events]
    for report in reports:
        worker = report["worker"]
        seqs = [seq for owner, seq in markers if owner == worker]
        assert seqs == list(range(report["count"])), f"worker {worker}'s events are not in issue order"
        landed = {
            seq: event.event_id
            for event, (owner, seq) in zip(events, markers, strict=True)
            if owner == worker
        }
        assert all(landed[seq] == event_id for seq, event_id in report["raw_ids"].items()), (
            f"worker {worker}: ids returned by append() differ from where the events are in the log"
        )

    # Without overlap the test would prove nothing: every writer was still writing when the last one began.
    last_start = max(report["started"] for report in reports)
    first_finish = min(report["finished"] for report in reports)
    assert last_start < first_finish, "writers did not run at the same time; the race was not exercised"
    if backend != "sqlite":
        # Row-lock waiters queue fairly on PostgreSQL and InnoDB, so the log itself shows the interleaving.
        # (SQLite's busy handler polls with back-off, so one writer may legitimately take every turn.)
        switches = sum(1 for before, after in itertools.pairwise(markers) if before[0] != after[0])
        assert switches >= WORKERS, f"writers barely interleaved ({switches} switches in the log)"


class _Boom(RuntimeError):
    """Raised on purpose inside a metastore transaction."""


def _fail_after_emit(log: EventLog) -> None:
    """A catalog change and its events are written, then the caller's code fails before commit."""
    with log.transaction() as tx:
        tx.conn.execute(insert(dbs).values(name="doomed", doc="{}", create_time=0))
        tx.emit(
            EventType.CREATE_DATABASE, "doomed", None, DatabaseBody(database=DatabaseSnapshot(name="doomed"))
        )
        tx.emit(EventType.INSERT, "doomed", None, InsertBody(table=TableSnapshot(db_name="doomed"), files=[]))
        raise _Boom("failure after emit")


def _fail_while_appending(log: EventLog) -> None:
    """The failure comes after the sequence row is locked and read, while the events are being encoded."""
    log.append(
        [
            PendingEvent(EventType.INSERT, "doomed", None, {"files": []}),
            PendingEvent(EventType.INSERT, "doomed", None, {"not_json": _Boom("unencodable")}),
        ]
    )


@pytest.mark.parametrize(
    ("fail", "error"),
    [(_fail_after_emit, _Boom), (_fail_while_appending, TypeError)],
    ids=["raise-after-emit", "fail-inside-append"],
)
def test_failed_transaction_leaves_no_event_and_no_gap(
    db_url: str, tmp_path: Path, fail: Callable[[EventLog], None], error: type[Exception]
) -> None:
    upgrade_schema(db_url)
    engine = make_engine(db_url)
    try:
        store = Metastore(
            MetastoreConfig(
                db_url=db_url, warehouse=str(tmp_path / "warehouse"), cmroot=str(tmp_path / "cmroot")
            ),
            engine=engine,
        )
        log = store.events
        assert log.append([PendingEvent(EventType.INSERT, None, None, {"n": 1})]) == [1]

        with pytest.raises(error):
            fail(log)

        assert log.current_event_id() == 1
        assert [event.event_id for event in log.next_events(0)] == [1]
        with engine.connect() as conn:
            assert conn.execute(select(dbs.c.name).where(dbs.c.name == "doomed")).first() is None
            assert (
                conn.execute(select(notification_log.c.event_id).where(notification_log.c.event_id > 1)).all()
                == []
            )

        # The rolled-back transaction released the sequence row and consumed no id: both paths continue at 2.
        assert log.append([PendingEvent(EventType.INSERT, None, None, {"n": 2})]) == [2]
        store.catalog.create_database(Database(name="after"))
        events = log.next_events(0)
        assert [event.event_id for event in events] == [1, 2, 3]
        assert events[-1].event_type == EventType.CREATE_DATABASE
        assert events[-1].db_name == "after"
        assert log.current_event_id() == 3
    finally:
        engine.dispose()
