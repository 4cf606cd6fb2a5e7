"""The compaction queue's history is purged as Hive purges COMPLETED_COMPACTIONS: per table or partition, the
last 3 succeeded, 3 failed, 2 not initiated and 3 refused rows stay; older failures go once a later
compaction succeeded and they are past the retention timeout; active rows are never touched."""

from __future__ import annotations

import pytest

import hmsrepl.acid.initiator as initiator
from hmsrepl.acid import InsertOnlyWriter
from hmsrepl.acid.compaction_cycle import run_cycle
from hmsrepl.acid.compaction_history import HistoryRetention, purge_history
from hmsrepl.acid.compaction_queue import (
    DID_NOT_INITIATE,
    FAILED,
    INITIATED,
    REFUSED,
    SUCCEEDED,
    CompactionQueue,
)
from hmsrepl.acid.compaction_requests import ShowFilter, show_compactions
from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.integration.test_insert_only import create_table, put

DAY_MS = 24 * 3600 * 1000


def ended(queue: CompactionQueue, table: str, part: str | None, state: str) -> int:
    """One ended row of ``state`` for the location, as a worker, cleaner or initiator leaves it."""
    if state == DID_NOT_INITIATE:
        return queue.record_not_initiated("sales", table, part, "cannot list: PermissionError")
    queued = queue.enqueue("sales", table, part)
    assert queued is not None
    queue.finish(queued, state, None if state == SUCCEEDED else f"{state} here")
    return queued


def states(store: Metastore, table: str) -> list[tuple[int, str]]:
    return [
        (row.id, row.state) for row in show_compactions(store, ShowFilter(db_name="sales", table_name=table))
    ]


@pytest.fixture
def store(metastore: Metastore) -> Metastore:
    metastore.catalog.create_database(Database(name="sales"))
    create_table(metastore, "events")
    create_table(metastore, "daily", partition_keys=("ds",))
    return metastore


def test_the_compaction_pass_keeps_the_last_rows_of_each_state_per_location(store: Metastore) -> None:
    queue = CompactionQueue(store.events)
    made = {state: [ended(queue, "events", None, state) for _ in range(5)] for state in (FAILED, REFUSED)}
    made[DID_NOT_INITIATE] = [ended(queue, "events", None, DID_NOT_INITIATE) for _ in range(3)]
    made[SUCCEEDED] = [ended(queue, "events", None, SUCCEEDED) for _ in range(5)]
    daily = [ended(queue, "daily", "ds=1", SUCCEEDED) for _ in range(2)]  # another location: its own counts
    daily += [ended(queue, "daily", "ds=2", SUCCEEDED) for _ in range(4)]

    report = run_cycle(store)
    assert report.history_purged == 2 + 2 + 1 + 2 + 1
    expected = sorted(
        [(i, FAILED) for i in made[FAILED][-3:]]
        + [(i, REFUSED) for i in made[REFUSED][-3:]]
        + [(i, DID_NOT_INITIATE) for i in made[DID_NOT_INITIATE][-2:]]
        + [(i, SUCCEEDED) for i in made[SUCCEEDED][-3:]]
    )
    assert states(store, "events") == expected
    assert [i for i, _ in states(store, "daily")] == daily[:2] + daily[-3:]
    assert run_cycle(store).history_purged == 0  # what is kept stays kept


def test_old_failures_go_after_a_later_success_and_active_rows_stay(store: Metastore) -> None:
    queue = CompactionQueue(store.events)
    old_failure = ended(queue, "events", None, FAILED)
    ended(queue, "events", None, REFUSED)  # old, before the success
    success = ended(queue, "events", None, SUCCEEDED)
    new_failure = ended(queue, "events", None, FAILED)  # after the success: still news
    lonely = ended(queue, "daily", "ds=1", FAILED)  # no success ever: kept by count alone
    active = queue.enqueue("sales", "daily", "ds=2")
    newest = max(queue.get(i).enqueued_at for i in (old_failure, lonely))
    assert purge_history(store.events, HistoryRetention(), now=newest + DAY_MS) == 0  # within the timeout
    assert purge_history(store.events, HistoryRetention(), now=newest + 8 * DAY_MS) == 2
    assert states(store, "events") == [(success, SUCCEEDED), (new_failure, FAILED)]
    assert states(store, "daily") == [(lonely, FAILED), (active, INITIATED)]
    # Counts of 0 keep no ended row at all, and still never an active one.
    assert purge_history(store.events, HistoryRetention(succeeded=0, failed=0)) == 3
    assert states(store, "daily") == [(active, INITIATED)]


def test_retention_comes_from_the_environment_and_a_location_the_initiator_cannot_read_is_recorded(
    store: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HMSREPL_COMPACTION_HISTORY_RETENTION_DID_NOT_INITIATE", "1")
    monkeypatch.setenv("HMSREPL_COMPACTION_HISTORY_RETENTION_TIMEOUT_SECONDS", "60")
    retention = HistoryRetention.of(MetastoreConfig(db_url=store.config.db_url))
    assert (retention.did_not_initiate, retention.timeout_seconds, retention.succeeded) == (1, 60, 3)
    with InsertOnlyWriter(store, "sales", "events", heartbeat=False) as writer:
        put(writer.target_uri, "part-0", ["a"])

    def unreadable(reader: object, location: str) -> object:
        raise PermissionError(13, "Permission denied", location)

    monkeypatch.setattr(initiator, "location_shape", unreadable)
    for _ in range(3):  # the store was opened before the environment changed: the default, 2, is kept
        run_cycle(store)
    rows = show_compactions(store, ShowFilter(db_name="sales", table_name="events"))
    assert [row.state for row in rows] == [DID_NOT_INITIATE] * 2
    assert "Permission denied" in (rows[0].error or "")
    fresh = Metastore.open(
        MetastoreConfig(**{k: getattr(store.config, k) for k in ("db_url", "warehouse", "cmroot")})
    )
    try:
        assert run_cycle(fresh).history_purged == 2  # the environment's 1: only this pass's row stays
    finally:
        fresh.close()
    assert [row.id for row in show_compactions(store, ShowFilter(table_name="events"))] == [rows[-1].id + 1]
