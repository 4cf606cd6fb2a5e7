"""Compaction planning on event summaries: what may be skipped, and what must never be."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hmsrepl.metastore.events import EventType as E
from hmsrepl.metastore.messages import DataChange, MessageBuilder
from hmsrepl.replication.commands import parse_policy
from hmsrepl.replication.compaction import (
    DATA,
    DELTA,
    META,
    EventSummary,
    compact,
    reuse_points,
    summarize_body,
)
from hmsrepl.replication.holds import Holds
from hmsrepl.replication.layout import DumpError, DumpMetadata
from hmsrepl.replication.replace import WindowPlanner

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


def test_renames_of_a_dropped_table_are_written_without_their_data_change() -> None:
    steps = [
        ev(1, E.INSERT, "t0", effects=frozenset({META, DELTA})),
        ev(2, E.ALTER_TABLE, "t0", new_name="t1", effects=frozenset({META, DELTA})),
        ev(3, E.ALTER_TABLE, "t1", new_name="t2", effects=frozenset({META})),
        ev(4, E.DROP_TABLE, "t2"),
    ]
    plan = compact(steps)
    assert plan.skipped == {1} and plan.stripped == {2}


def test_a_table_is_transactional_for_compaction_as_for_the_metastore() -> None:
    # Table.is_transactional reads 'transactional' trimmed and case-insensitively; compaction must agree.
    table = {"table_name": "t", "parameters": {"transactional": " TRUE "}, "partition_keys": []}
    assert summarize_body(1, E.CREATE_TABLE, "t", {"table": table}).transactional


# -- format-2 deltas ---------------------------------------------------------------------------------------------
def test_a_delta_covers_nothing_and_only_a_complete_change_supersedes_it() -> None:
    part = {"partitions": ("p=1",)}
    steps = [
        ev(1, E.INSERT, "t", effects=frozenset({DATA}), **part),  # overwrite
        ev(2, E.INSERT, "t", effects=frozenset({DELTA}), **part),  # append
        ev(3, E.INSERT, "t", effects=frozenset({DELTA}), **part),  # append: needs 1 and 2 before it
    ]
    assert compact(steps).skipped == set()
    steps.append(ev(4, E.INSERT, "t", effects=frozenset({DATA}), **part))  # overwrite: 1-3 are redundant
    steps.append(ev(5, E.INSERT, "t", effects=frozenset({DELTA}), **part))
    assert compact(steps).skipped == {1, 2, 3}
    # An ALTER whose metadata nothing later sets stays, and its delta reads the listing before it: the ALTER
    # before it stays too, although a later overwrite sets the whole listing.
    alters = [
        ev(1, E.ALTER_PARTITION, "t", effects=frozenset({META, DELTA}), **part),
        ev(2, E.ALTER_PARTITION, "t", effects=frozenset({META, DELTA}), **part),
        ev(3, E.INSERT, "t", effects=frozenset({DATA}), **part),
    ]
    assert compact(alters).skipped == set()
    alters.append(ev(4, E.ALTER_PARTITION, "t", effects=frozenset({META, DELTA}), **part))
    assert compact(alters).skipped == {1, 2}  # 4 sets the metadata again, 3 the listing 4 applies to


def test_a_kept_rename_reads_the_listing_so_earlier_overwrites_stay() -> None:
    """Overwrite, rename, overwrite: the rename checks the listing the first overwrite left behind."""
    steps = [
        ev(1, E.INSERT, "t0", effects=frozenset({META, DATA})),
        ev(2, E.ALTER_TABLE, "t0", new_name="t1", effects=frozenset({META, DELTA})),
        ev(3, E.INSERT, "t1", effects=frozenset({META, DATA})),
    ]
    assert compact(steps).skipped == set()
    steps.insert(1, ev(9, E.ALTER_TABLE, "t0", effects=frozenset({META, DELTA})))  # before the rename
    assert compact(steps).skipped == set()


def test_an_empty_change_that_carries_the_listing_digest_is_a_delta() -> None:
    table = {"table_name": "t", "partition_keys": [], "sd": {"location": "/w/t"}}
    checked = DataChange((), (), False, 1, "0" * 32)
    body = {"v": 2, "before": table, "after": {**table, "table_name": "u"}, "data": checked.to_json()}
    assert DELTA in summarize_body(1, E.ALTER_TABLE, "t", body).effects
    assert (
        DELTA not in summarize_body(1, E.ALTER_TABLE, "t", {"v": 2, "before": table, "after": table}).effects
    )


TABLE = {"table_name": "t", "partition_keys": [{"name": "p", "type": "string"}], "sd": {"location": "/w/t"}}
PART = {"values": ["1"], "sd": {"location": "/w/t/p=1"}}


def test_summaries_tell_deltas_from_complete_changes_in_both_formats() -> None:
    uri = "/w/t/p=1/a#crc32c-00000001-3#/cm#"
    base = {"table": TABLE, "partition": PART}

    def effects(body: dict[str, object]) -> frozenset[str]:
        return summarize_body(1, E.INSERT, "t", body).effects

    assert effects({**base, "files": [uri]}) == {DATA}  # format 1: always the full listing
    assert effects(MessageBuilder(base).with_data(DataChange(added=(uri,)))) == {DELTA}
    assert effects(MessageBuilder(base).with_data(DataChange.full([uri]))) == {DATA}
    assert effects(MessageBuilder(base).with_data(DataChange())) == frozenset()  # changed no file
    alter = {"table": TABLE, "before": PART, "after": PART}
    summary = summarize_body(
        2, E.ALTER_PARTITION, "t", MessageBuilder(alter).with_data(DataChange(removed=("a",)))
    )
    assert summary.effects == {META, DELTA} and summary.partitions == ("p=1",)


# Writes to two partitions: (partition, op, file): op 0 appends a file, 1 removes one, 2 overwrites with one.
writes = st.lists(
    st.tuples(st.sampled_from(["p=1", "p=2"]), st.integers(0, 2), st.integers(0, 4)), max_size=25
)


@settings(max_examples=300, deadline=None)
@given(ops=writes, cuts=st.lists(st.integers(1, 25), max_size=4))
def test_compacted_windows_of_deltas_rebuild_every_listing(
    ops: list[tuple[str, int, int]], cuts: list[int]
) -> None:
    """Whatever LIMIT cuts the log into windows, replaying each window's kept changes gives the full replay's
    listing at every window's end (model of dump + load: summaries, ``compact``, ``DataChange.apply``)."""
    events: list[tuple[EventSummary, str, DataChange]] = []
    held: dict[str, dict[str, str]] = {"p=1": {}, "p=2": {}}
    for event_id, (part, op, n) in enumerate(ops, start=1):
        name = f"f{n}"
        encoded = f"/w/t/{part}/{name}#crc32c-{event_id:08x}-3#/cm#"
        if op == 0:
            change = DataChange(added=(encoded,))
        elif op == 1:
            change = DataChange(removed=(name,))
        else:
            change = DataChange(added=(encoded,), complete=True)
        held[part] = change.apply(held[part])
        summary = summarize_body(
            event_id,
            E.INSERT,
            "t",
            MessageBuilder({"table": TABLE, "partition": {**PART, "values": [part[2:]]}}).with_data(change),
        )
        events.append((summary, part, change))
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    replica: dict[str, dict[str, str]] = {"p=1": {}, "p=2": {}}
    source: dict[str, dict[str, str]] = {"p=1": {}, "p=2": {}}
    for start, end in itertools.pairwise(bounds):
        window = events[start:end]
        plan = compact([summary for summary, _, _ in window])
        for summary, part, change in window:
            source[part] = change.apply(source[part])
            if summary.event_id not in plan.skipped:
                replica[part] = change.apply(replica[part])
        assert replica == source
    assert replica == held


# -- holds: where a load may commit inside a compacted window (holds.py) ----------------------------------------
def test_each_decision_holds_from_its_first_event_until_the_event_that_makes_it_redundant() -> None:
    part = {"partitions": ("p=1",)}
    steps = [
        ev(1, E.CREATE_TABLE, "tmp", effects=BOTH),  # born and dropped: held until its drop (4)
        ev(2, E.INSERT, "t", effects=frozenset({DATA}), **part),  # overwritten by 5
        ev(3, E.ADD_PARTITION, "t", partitions=("p=9",), effects=BOTH),  # added and dropped at 6
        ev(4, E.DROP_TABLE, "tmp"),
        ev(5, E.INSERT, "t", effects=frozenset({DATA}), **part),
        ev(6, E.DROP_PARTITION, "t", partitions=("p=9",)),
        ev(7, E.ALTER_TABLE, "t", new_name="t", effects=frozenset({META})),
    ]
    plan = compact(steps)
    assert plan.skipped == {1, 2, 3, 4, 6}
    assert sorted(plan.holds) == [(1, 4), (2, 5), (3, 6)]
    assert Holds.of(plan.holds).spans == ((1, 6),)


def test_no_hold_covers_a_drop_committed_before_its_name_is_reused() -> None:
    # 'tmp' is born and dropped around the drop and re-creation of 't': the load must commit the drop of
    # 't' before 't' is created again (event 4), at position 3 at the latest, so 'tmp' is not left out.
    steps = [
        ev(1, E.CREATE_TABLE, "tmp", effects=BOTH),
        ev(2, E.DROP_TABLE, "t"),
        ev(3, E.ALTER_TABLE, "x", new_name="x", effects=frozenset({META})),
        ev(4, E.CREATE_TABLE, "t", effects=BOTH),
        ev(5, E.DROP_TABLE, "tmp"),
    ]
    assert reuse_points(steps) == [4]
    plan = compact(steps)
    assert plan.skipped == set() and plan.holds == []
    # Once 'tmp' is dropped before the reuse, it is left out again.
    reordered = [steps[0], steps[1], ev(3, E.DROP_TABLE, "tmp"), steps[3]]
    assert compact(reordered).skipped == {1, 3}


def test_a_withdrawn_delta_withdraws_the_overwrite_it_was_applied_on() -> None:
    # 1 (an overwrite) and 2 (a delta on it) are made redundant by 6, but their holds cover the reuse at 4:
    # both stay (a delta written without the overwrite under it would apply to the wrong listing).
    part = {"partitions": ("p=1",)}
    steps = [
        ev(1, E.INSERT, "t", effects=frozenset({DATA}), **part),
        ev(2, E.INSERT, "t", effects=frozenset({DELTA}), **part),
        ev(3, E.DROP_TABLE, "u"),
        ev(4, E.CREATE_TABLE, "u", effects=BOTH),
        ev(6, E.INSERT, "t", effects=frozenset({DATA}), **part),
    ]
    plan = compact(steps)
    assert plan.skipped == set() and plan.holds == []


def test_a_commit_publishes_the_first_position_no_hold_covers() -> None:
    holds = Holds.of([(5, 8), (8, 9), (12, 14)])
    assert holds.spans == ((5, 9), (12, 14))
    assert holds.position(4, 6) == 4  # before any hold: the last applied event
    assert holds.position(6, 10) == 9  # inside: the hold's end, if no written event comes before it
    assert holds.position(6, 9) is None  # the next written event is inside the hold: no commit
    assert holds.position(14, 15) == 14
    assert Holds().position(6, 7) == 6


def test_holds_of_a_dump_are_checked_and_an_older_compacted_dump_is_held_whole() -> None:
    meta = DumpMetadata("incremental", "db", "db", 10, 20, 20, skipped_events=2)
    assert Holds.from_metadata(meta).spans == ((11, 20),)
    meta.holds = [[12, 15]]
    assert Holds.from_metadata(meta).spans == ((12, 15),)
    meta.holds = [[12, "x"]]  # type: ignore[list-item]
    with pytest.raises(DumpError, match="malformed holds"):
        Holds.from_metadata(meta, "file:///d")


def test_a_table_renamed_into_the_policy_is_held_until_the_replica_has_it() -> None:
    # x0 is outside the policy: renamed to t2 at 2, the dump skips t2's events and the replica lacks t2
    # until its drop (4); t3 renamed in at 5 is bootstrapped at the dump's end (9).
    planner = WindowPlanner(parse_policy("db.['t[0-9]+']"))
    for step in [
        ev(1, E.INSERT, "x0", effects=frozenset({DELTA})),
        ev(2, E.ALTER_TABLE, "x0", new_name="t2", effects=frozenset({META})),
        ev(3, E.INSERT, "t2", effects=frozenset({DELTA})),
        ev(4, E.DROP_TABLE, "t2"),
        ev(5, E.ALTER_TABLE, "x1", new_name="t3", effects=frozenset({META})),
    ]:
        planner.feed(step)
    plan = planner.plan(compacting=True, with_data=True, last=9)
    assert sorted(plan.holds) == [(2, 4), (5, 9)]
