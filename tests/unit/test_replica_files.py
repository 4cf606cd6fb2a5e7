"""The load's table of event handlers covers every replayed type, and composing data changes is exact."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hmsrepl.metastore.event_specs import kinds
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.messages import DataChange
from hmsrepl.replication.event_handlers import HANDLERS, NOT_YET_REPLAYED
from hmsrepl.replication.replica_files import compose


def test_the_load_has_one_handler_per_replayed_event_type() -> None:
    assert set(HANDLERS) == set(EventType) - kinds(replayed=False)
    assert kinds(replayed=False) == NOT_YET_REPLAYED


NAMES = st.sampled_from(["a", "b", "d/c", "e"])
CHANGES = st.builds(
    lambda added, removed, complete: DataChange(
        tuple(f"/w/{rel}#crc32c-{content:08x}-1#/cm#{rel.rpartition('/')[0]}" for rel, content in added),
        () if complete else tuple(removed),
        complete,
    ),
    st.lists(st.tuples(NAMES, st.integers(0, 3)), max_size=3, unique_by=lambda x: x[0]),
    st.lists(NAMES, max_size=2, unique=True),
    st.booleans(),
)


@given(st.lists(CHANGES, max_size=5), st.dictionaries(NAMES, st.integers(0, 3), max_size=4))
def test_composed_changes_equal_applying_them_one_by_one(changes: list[DataChange], start: dict) -> None:
    listing = {rel: f"/r/{rel}#crc32c-{content:08x}-1##" for rel, content in start.items()}
    one_by_one, composed = listing, None
    for change in changes:
        one_by_one = change.apply(one_by_one)
        composed = compose(composed, change)
    assert (composed.apply(listing) if composed is not None else listing) == one_by_one
