"""Every event type has one spec, and both message formats parse to the same data change."""

from __future__ import annotations

from hmsrepl.formats import listing_digest
from hmsrepl.metastore.event_specs import SPECS, TXN_KINDS, parse
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.messages import DataChange, MessageBuilder

TABLE = {"table_name": "t", "partition_keys": [{"name": "p", "type": "string"}], "sd": {"location": "/w/t"}}
PART = {"values": ["1"], "sd": {"location": "/w/t/p=1"}}


def uri(name: str, checksum: str = "crc32c-00000001-3") -> str:
    return f"/w/t/p=1/{name}#{checksum}#/cm#"


def test_every_event_type_has_exactly_one_spec() -> None:
    assert set(EventType) == set(SPECS)
    assert all(spec.kind == kind for kind, spec in SPECS.items())


def test_type_groups_come_from_the_specs() -> None:
    assert {
        EventType.OPEN_TXN,
        EventType.COMMIT_TXN,
        EventType.ABORT_TXN,
        EventType.ALLOC_WRITE_ID,
        EventType.ACID_WRITE,
    } == TXN_KINDS


def test_format_1_listing_and_format_2_delta_rebuild_the_same_listing() -> None:
    before = {"a": uri("a")}
    v1 = parse(
        "ALTER_PARTITION",
        {"table": TABLE, "before": PART, "after": PART, "files": [uri("a"), uri("b")]},
    )
    change = DataChange(
        added=(uri("b"),),
        count=2,
        digest=listing_digest.of([("a", "crc32c-00000001-3"), ("b", "crc32c-00000001-3")]),
    )
    v2 = parse(
        "ALTER_PARTITION",
        MessageBuilder({"table": TABLE, "before": PART, "after": PART}).with_data(change),
    )
    (one,) = v1.objects()
    (two,) = v2.objects()
    assert one.change.complete and not two.change.complete
    assert one.change.apply(before) == two.change.apply(before)
    two.change.check(two.change.apply(before), "p=1")
    assert v2.files() == [uri("b")]


def test_a_missing_delta_is_detected_by_count_and_digest() -> None:
    change = DataChange(added=(uri("c"),), count=3, digest=listing_digest.of([("x", "y")]))
    rebuilt = change.apply({"a": uri("a")})
    try:
        change.check(rebuilt, "partition p=1")
    except Exception as exc:
        assert "missing" in str(exc)
    else:
        raise AssertionError("a listing with a lost event passed the check")


def test_metadata_only_alter_has_no_data_in_either_format() -> None:
    v1 = parse("ALTER_PARTITION", {"table": TABLE, "before": PART, "after": PART, "files": []})
    v2 = parse(
        "ALTER_PARTITION", MessageBuilder({"table": TABLE, "before": PART, "after": PART}).with_data(None)
    )
    assert v1.objects() == [] and v2.objects() == []
    truncate = parse(
        "ALTER_PARTITION", {"table": TABLE, "before": PART, "after": PART, "files": [], "is_truncate": True}
    )
    assert truncate.objects()[0].change.complete and truncate.objects()[0].change.apply({"a": "x"}) == {}
