"""The notification API: reads after an id, filters, counts, retention and who may call it."""

from __future__ import annotations

import time

import pytest

from hmsrepl.exceptions import AccessDeniedError, EventsCleanedUpError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.helpers import make_table


def _populate(store: Metastore) -> int:
    start = store.get_current_notification_event_id()
    for db in ("a", "b"):
        store.catalog.create_database(Database(name=db))
        for i in range(3):
            store.catalog.create_table(make_table(db, f"t{i}"))
    return start


def test_next_events_paging_and_filters(metastore: Metastore) -> None:
    start = _populate(metastore)
    everything = metastore.get_next_notification(start)
    assert len(everything) == 8
    paged = []
    last = start
    while page := metastore.get_next_notification(last, 3):
        assert len(page) <= 3
        paged.extend(page)
        last = page[-1].event_id
    assert [e.event_id for e in paged] == [e.event_id for e in everything]
    only_b = metastore.get_next_notification(start, db_name="B")
    assert {e.db_name for e in only_b} == {"b"} and len(only_b) == 4
    one_table = metastore.get_next_notification(start, db_name="a", table_name="t1")
    assert [(e.event_type, e.table_name) for e in one_table] == [("CREATE_TABLE", "t1")]
    creates = metastore.get_next_notification(start, event_types=["CREATE_DATABASE"])
    assert [e.db_name for e in creates] == ["a", "b"]


def test_count_events_for_a_database(metastore: Metastore) -> None:
    start = _populate(metastore)
    assert metastore.get_notification_events_count(start, "a") == 4
    assert metastore.get_notification_events_count(start, "b") == 4
    # FROM is exclusive, TO inclusive: the first event of 'a' is start+1.
    assert metastore.get_notification_events_count(start + 1, "a") == 3
    assert metastore.get_notification_events_count(start, "a", start + 2) == 2


def test_cleaned_up_events_demand_a_bootstrap(metastore: Metastore) -> None:
    start = _populate(metastore)
    current = metastore.get_current_notification_event_id()
    # Everything written so far is older than a zero TTL one second from now.
    deleted = metastore.events.cleanup(ttl_seconds=0, now=time.time() + 1)
    assert deleted == current
    with pytest.raises(EventsCleanedUpError, match="run a bootstrap"):
        metastore.get_next_notification(start)
    # A reader that has seen everything is not affected, and new events keep their numbering.
    assert metastore.get_next_notification(current) == []
    metastore.catalog.create_database(Database(name="c"))
    [event] = metastore.get_next_notification(current)
    assert event.event_id == current + 1


def test_cleanup_keeps_recent_events(metastore: Metastore) -> None:
    _populate(metastore)
    assert metastore.events.cleanup(ttl_seconds=3600) == 0
    assert len(metastore.get_next_notification(0)) == metastore.get_current_notification_event_id()


def test_remote_callers_must_be_admins(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    with pytest.raises(AccessDeniedError, match="user 'mallory'"):
        store.get_next_notification(0, caller="mallory")
    with pytest.raises(AccessDeniedError):
        store.get_current_notification_event_id(caller="mallory")
    with pytest.raises(AccessDeniedError):
        store.get_notification_events_count(0, "default", caller="mallory")
    assert store.get_current_notification_event_id(caller="hive") >= 1
    assert store.get_next_notification(0, caller=None)  # embedded use skips the check


def test_large_messages_are_compressed_and_decoded(metastore: Metastore) -> None:
    metastore.catalog.create_database(Database(name="big"))
    table = make_table("big", "t", partition_keys=("p",))
    metastore.catalog.create_table(table)
    from tests.helpers import make_partition

    before = metastore.get_current_notification_event_id()
    metastore.catalog.add_partitions("big", "t", [make_partition(table, str(i)) for i in range(300)])
    [event] = metastore.get_next_notification(before)
    assert event.message_format == "gzip(json-1)"
    assert [p["values"][0] for p in event.body()["partitions"]] == [str(i) for i in range(300)]
