"""Compaction planning on event summaries: what may be skipped, and what must never be."""

from __future__ import annotations

from hmsrepl.metastore.events import EventType as E
from hmsrepl.replication.compaction import DATA, META, EventSummary, compact, summarize_body

BOTH = frozenset({META, DATA})


def ev(event_id: int, kind: str, table: str | None, **kw: object) -> EventSummary:
    return EventSummary(event_id, kind, table, **kw)  # type: ignore[arg-type]


def test_table_born_and_dropped_through_renames_is_skipped_entirely() -> None:
    steps = [
        ev(1, E.CREATE_TABLE, "a", effects=BOTH),
        ev(2, E.INSERT, "a", effects=BOTH),
        ev(3, E.ALTER_TABLE, "a", new_name="b", effects=frozenset({META})),
        ev(4, E.DROP_TABLE, "b"),
        ev(5, E.CREATE_TABLE, "a", effects=BOTH),  # a new table under the freed name: kept
    ]
    assert compact(steps).skipped == {1, 2, 3, 4}


def test_dropping_an_older_table_keeps_its_renames_and_drop() -> None:
    # The target must rename 'a' to 'b', or the drop of 'b' would not find it and 'a' would stay.
    steps = [
        ev(1, E.INSERT, "a", effects=BOTH),
        ev(2, E.ALTER_TABLE, "a", new_name="b", effects=frozenset({META})),
        ev(3, E.ALTER_TABLE, "b", new_name="b", effects=frozenset({META})),
        ev(4, E.DROP_TABLE, "b"),
    ]
    assert compact(steps).skipped == {1, 3}


def test_last_listing_wins_but_metadata_only_changes_are_kept() -> None:
    steps = [
        ev(1, E.INSERT, "t", partitions=("p=1",), effects=frozenset({DATA})),
        ev(2, E.ALTER_PARTITION, "t", partitions=("p=1",), effects=frozenset({META})),
        ev(3, E.INSERT, "t", partitions=("p=1",), effects=frozenset({DATA})),
        ev(4, E.ALTER_TABLE, "t", new_name="t", effects=frozenset({META})),
        ev(5, E.ALTER_TABLE, "t", new_name="t", effects=frozenset({META})),
    ]
    assert compact(steps).skipped == {1, 4}
    assert compact(steps, with_data=False).skipped == set()


def test_partition_added_and_dropped_is_trimmed_from_shared_events() -> None:
    steps = [
        ev(1, E.ADD_PARTITION, "t", partitions=("p=1", "p=2"), effects=BOTH),
        ev(2, E.INSERT, "t", partitions=("p=1",), effects=frozenset({DATA})),
        ev(3, E.DROP_PARTITION, "t", partitions=("p=1", "p=0")),
    ]
    plan = compact(steps)
    assert plan.skipped == {2}
    assert plan.trimmed == {1: frozenset({"p=1"}), 3: frozenset({"p=1"})}


def test_acid_tables_and_windows_with_a_database_drop_are_barriers() -> None:
    txn = [
        ev(1, E.CREATE_TABLE, "acid", effects=BOTH),
        ev(2, E.ALLOC_WRITE_ID, "acid", transactional=True),
        ev(3, E.COMMIT_TXN, None, transactional=True, txn_tables=("acid",)),
        ev(4, E.DROP_TABLE, "acid"),
    ]
    assert compact(txn).skipped == set()
    named_by_commit = [
        ev(1, E.CREATE_TABLE, "t", effects=BOTH),
        ev(2, E.ABORT_TXN, None, transactional=True, txn_tables=("t",)),
        ev(3, E.DROP_TABLE, "t"),
    ]
    assert compact(named_by_commit).skipped == set()
    dropped_db = [
        ev(1, E.CREATE_TABLE, "t", effects=BOTH),
        ev(2, E.DROP_TABLE, "t"),
        ev(3, E.DROP_DATABASE, None),
    ]
    assert compact(dropped_db).skipped == set()


def test_a_table_is_transactional_for_compaction_as_for_the_metastore() -> None:
    # Table.is_transactional reads 'transactional' trimmed and case-insensitively; compaction must agree.
    table = {"table_name": "t", "parameters": {"transactional": " TRUE "}, "partition_keys": []}
    assert summarize_body(1, E.CREATE_TABLE, "t", {"table": table}).transactional
