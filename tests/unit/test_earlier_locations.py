"""A batch's earlier locations overlapping a new one, found by key, are exactly those a comparison with each
earlier one finds, in the same order: the batch create refuses the same tables it refused one by one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hmsrepl.metastore.earlier_locations import EarlierLocations
from hmsrepl.metastore.locations import LOCATION_KEY_CHARS, Location

#: Few segment names, so that locations often hold one another; one long enough to cut keys.
SEGMENTS = st.sampled_from(["a", "b", "ab", "a.b", "x" * (LOCATION_KEY_CHARS // 2)])
LOCATIONS = st.builds(
    lambda store, parts: Location(*store, "/" + "/".join(parts)),
    st.sampled_from([("file", ""), ("s3", "bucket"), ("s3", "other")]),
    st.lists(SEGMENTS, max_size=4),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(LOCATIONS, min_size=1, max_size=25))
def test_overlapping_is_the_one_by_one_comparison(locations: list[Location]) -> None:
    earlier = EarlierLocations()
    for index, location in enumerate(locations):
        found = [(e.order, e.location) for e in earlier.overlapping(location)]
        expected = [(i, other) for i, other in enumerate(locations[:index]) if other.overlaps(location)]
        assert found == expected, location
        earlier.add(f"t{index}", location)


def test_a_sibling_with_a_longer_name_is_not_inside() -> None:
    earlier = EarlierLocations()
    earlier.add("ab", Location("file", "", "/w/ab"))
    earlier.add("root", Location("file", "", "/"))
    earlier.add("a", Location("file", "", "/w/a"))
    assert [e.name for e in earlier.overlapping(Location("file", "", "/w/a/x"))] == ["root", "a"]
    assert [e.name for e in earlier.overlapping(Location("file", "", "/w"))] == ["ab", "root", "a"]
