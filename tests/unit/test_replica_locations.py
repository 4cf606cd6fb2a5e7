"""Where replicated objects go: each replica database's own directories, never another replica's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hmsrepl.formats.paths import InvalidPathError
from hmsrepl.replication.locations import (
    LocationMapper,
    default_external_root,
    legacy_external_root,
    relocated_legacy,
)
from hmsrepl.replication.snapshot_mapping import SnapshotMapper

SOURCE_WH, SOURCE_DB = "/src/wh", "/src/wh/sales.db"
TARGET_WH = "/dst/wh"

segment = st.text(alphabet="abcxyz09_=%-", min_size=1, max_size=6)
source_paths = st.one_of(
    st.lists(segment, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts)),  # external data
    st.lists(segment, min_size=1, max_size=4).map(lambda parts: "/".join([SOURCE_WH, *parts])),  # warehouse
    st.lists(segment, min_size=0, max_size=4).map(lambda parts: "/".join([SOURCE_DB, *parts])),  # database
    st.lists(segment, min_size=1, max_size=3).map(lambda parts: "s3://bucket/" + "/".join(parts)),
)


def mapper(replica: str, external_root: str | None = None) -> LocationMapper:
    root = external_root or default_external_root(TARGET_WH, replica)
    return LocationMapper(SOURCE_WH, SOURCE_DB, TARGET_WH, f"{TARGET_WH}/{replica}.db", root)


def below(location: str, root: str) -> bool:
    return location == root or location.startswith(root.rstrip("/") + "/")


@given(source_paths)
def test_two_replicas_of_one_source_never_share_a_directory(source: str) -> None:
    first, second = mapper("sales_dr").map(source), mapper("sales_dr2").map(source)
    assert first and second
    assert not below(first, second) and not below(second, first)
    for replica, location in (("sales_dr", first), ("sales_dr2", second)):
        owned = (f"{TARGET_WH}/{replica}.db", default_external_root(TARGET_WH, replica))
        assert any(below(location, root) for root in owned)


def test_external_data_keeps_its_full_source_path_below_the_replicas_own_root() -> None:
    m = mapper("sales_dr")
    assert m.map("/data/ext/e1/d=0") == "/dst/wh/_external/sales_dr/data/ext/e1/d=0"
    assert m.map("s3a://bucket/ext/e1") == "/dst/wh/_external/sales_dr/bucket/ext/e1"
    assert m.map("/src/wh/other/t") == "/dst/wh/_external/sales_dr/src/wh/other/t"  # outside its database
    assert m.map("/src/wh/sales.db/t/p=a%2Fb") == "/dst/wh/sales_dr.db/t/p=a%2Fb"


@given(st.lists(segment, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts)))
def test_a_shared_layout_location_moves_where_the_replica_would_put_it_now(source: str) -> None:
    """The move of an older replica lands each external object where a new load maps it."""
    old = mapper("sales_dr", legacy_external_root(TARGET_WH)).map(source)
    assert old is not None
    root = default_external_root(TARGET_WH, "sales_dr")
    assert relocated_legacy(old, TARGET_WH, root) == mapper("sales_dr").map(source)


def test_locations_outside_the_shared_layout_do_not_move() -> None:
    root = default_external_root(TARGET_WH, "sales_dr")
    assert relocated_legacy("/dst/wh/sales_dr.db/t", TARGET_WH, root) is None
    assert relocated_legacy("/dst/wh/_external", TARGET_WH, root) is None
    assert relocated_legacy("/elsewhere/t", TARGET_WH, root) is None


children = st.lists(
    st.sampled_from(["/", ".", "a", "=", "%", "\x1b", "sales.db", ".hmsrepl-v3"]), max_size=4
).map("".join)
parents = st.one_of(
    source_paths, st.sampled_from([SOURCE_WH, "file:/src/wh/sales.db/t", "/src/wh/t.hmsrepl-v2"])
)


@given(parents, children)
def test_a_partition_mapped_through_its_table_maps_as_on_its_own(parent: str, child: str) -> None:
    """A partition's location is mapped through its table's (the child of the table's mapping, with no
    parse) only where that is what mapping it on its own gives: the table's directory, a '/' and a plain
    name, the table in the source database's directory, no version mark (a replica as source). Around the
    cases that differ: a table above the database's directory, dotted and nested names, other spellings."""
    mapping = SnapshotMapper("sales_dr", mapper("sales_dr"))
    for source in (f"{parent}{child}", f"{parent}/{child}", f"{parent.rstrip('/')}/sales.db"):
        try:
            alone = mapping.location(source)
        except InvalidPathError:
            alone = None
        try:
            through = mapping.location(source, parent)
        except InvalidPathError:
            through = None
        assert through == alone, (source, parent)
