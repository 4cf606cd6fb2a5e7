"""Properties of the cache's freshness rule (hmsrepl.cache.freshness), checked against brute-force set logic.

Expected answers come from materialised committed-id sets over small watermarks, never from the code under
test. The safety property that matters: an entry is never served to a reader who must see a write the
entry's tag does not mark committed.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from hmsrepl.cache.freshness import Freshness, Verdict, compare, may_serve
from hmsrepl.formats.writeids import ValidWriteIdList

TABLE = "db.t"
MIRROR = {
    Verdict.SAME: Verdict.SAME,
    Verdict.CACHE_NEWER: Verdict.CACHE_BEHIND,
    Verdict.CACHE_BEHIND: Verdict.CACHE_NEWER,
    Verdict.INCOMPARABLE: Verdict.INCOMPARABLE,
}


@st.composite
def write_id_lists(draw: st.DrawFn, max_hwm: int = 12) -> ValidWriteIdList:
    hwm = draw(st.integers(0, max_hwm))
    states = draw(st.lists(st.sampled_from("coa"), min_size=hwm, max_size=hwm))  # committed/open/aborted
    open_ids = {i + 1 for i, s in enumerate(states) if s == "o"}
    aborted_ids = {i + 1 for i, s in enumerate(states) if s == "a"}
    return ValidWriteIdList(TABLE, hwm, open_ids, aborted_ids)


def committed(ids: ValidWriteIdList) -> set[int]:
    return set(range(1, ids.high_watermark + 1)) - set(ids.open_write_ids) - set(ids.aborted_write_ids)


def brute_verdict(cached: ValidWriteIdList, query: ValidWriteIdList) -> Verdict:
    c, q = committed(cached), committed(query)
    if c == q:
        return Verdict.SAME
    if c > q:
        return Verdict.CACHE_NEWER
    if c < q:
        return Verdict.CACHE_BEHIND
    return Verdict.INCOMPARABLE


@settings(max_examples=400)
@given(write_id_lists(), write_id_lists())
def test_verdict_matches_set_containment(cached: ValidWriteIdList, query: ValidWriteIdList) -> None:
    assert compare(cached, query) is brute_verdict(cached, query)


@settings(max_examples=400)
@given(write_id_lists(), write_id_lists())
def test_comparison_is_antisymmetric(a: ValidWriteIdList, b: ValidWriteIdList) -> None:
    assert compare(b, a) is MIRROR[compare(a, b)]


@settings(max_examples=400)
@given(write_id_lists(), write_id_lists())
def test_same_exactly_when_committed_sets_are_equal(a: ValidWriteIdList, b: ValidWriteIdList) -> None:
    assert (compare(a, b) is Verdict.SAME) == (committed(a) == committed(b))


@settings(max_examples=400)
@given(write_id_lists(), write_id_lists(), st.sampled_from(list(Freshness)))
def test_served_entries_show_every_write_the_reader_must_see(
    cached: ValidWriteIdList, query: ValidWriteIdList, policy: Freshness
) -> None:
    if may_serve(compare(cached, query), policy):
        assert committed(query) <= committed(cached)
        if policy is Freshness.EQUAL:
            assert committed(query) == committed(cached)


@settings(max_examples=400)
@given(write_id_lists(), write_id_lists())
def test_incomparable_lists_are_never_a_hit(a: ValidWriteIdList, b: ValidWriteIdList) -> None:
    incomparable = not (committed(a) <= committed(b) or committed(b) <= committed(a))
    assert (compare(a, b) is Verdict.INCOMPARABLE) == incomparable
    if incomparable:
        assert not any(may_serve(compare(a, b), policy) for policy in Freshness)


@given(write_id_lists(), st.data())
def test_a_reader_marking_its_own_open_write_committed_always_misses(
    cached: ValidWriteIdList, data: st.DataObject
) -> None:
    """Read-your-writes: Hive marks the reader's own txn committed in its list; no cached tag does yet."""
    new_id = cached.high_watermark + 1
    in_flight = data.draw(st.sampled_from(sorted(cached.open_write_ids | {new_id})))
    own = ValidWriteIdList(
        TABLE,
        max(cached.high_watermark, in_flight),
        cached.open_write_ids - {in_flight},
        cached.aborted_write_ids,
    )
    for policy in Freshness:
        assert not may_serve(compare(cached, own), policy)


def test_policies_differ_only_on_newer_entries() -> None:
    for verdict in Verdict:
        equal, contains = may_serve(verdict, Freshness.EQUAL), may_serve(verdict, Freshness.CONTAINS)
        assert equal == (verdict is Verdict.SAME)
        assert contains == (verdict in (Verdict.SAME, Verdict.CACHE_NEWER))


def test_examples_from_the_design() -> None:
    # HIVE-21637: the cached [11:7,8] and a query's [12:7,8,12] commit the same ids (1..6, 9..11).
    cached = ValidWriteIdList.parse("db.t:11:7:7,8:")
    assert compare(cached, ValidWriteIdList.parse("db.t:12:7:7,8,12:")) is Verdict.SAME
    # Cached [12:7,12] has 8 committed where the reader's [12:7,8,12] does not: newer, not equal.
    newer = ValidWriteIdList.parse("db.t:12:7:7,12:")
    assert compare(newer, ValidWriteIdList.parse("db.t:12:7:7,8,12:")) is Verdict.CACHE_NEWER


def test_hive_24975_incomparable_lists_do_not_pass_for_newer() -> None:
    """Hive's TxnIdUtils.compare returns +-1 for these; each side commits an id the other does not."""
    pairs = [
        ("db.t:5:3:3:", "db.t:5:4:4:"),  # {1,2,4,5} vs {1,2,3,5}
        ("db.t:6:9223372036854775807::2", "db.t:4:9223372036854775807::"),  # {1,3..6} vs {1..4}
        ("db.t:3:2:2:", "db.t:3:9223372036854775807::3"),  # {1,3} vs {1,2}
    ]
    for left, right in pairs:
        a, b = ValidWriteIdList.parse(left), ValidWriteIdList.parse(right)
        assert compare(a, b) is Verdict.INCOMPARABLE and compare(b, a) is Verdict.INCOMPARABLE
        assert not may_serve(compare(a, b), Freshness.CONTAINS)


def test_exhaustive_small_watermarks_agree_with_brute_force() -> None:
    lists = [
        ValidWriteIdList(
            TABLE,
            hwm,
            {i + 1 for i, s in enumerate(states) if s == "o"},
            {i + 1 for i, s in enumerate(states) if s == "a"},
        )
        for hwm in range(4)
        for states in itertools.product("coa", repeat=hwm)
    ]
    for a, b in itertools.product(lists, repeat=2):
        assert compare(a, b) is brute_verdict(a, b)
