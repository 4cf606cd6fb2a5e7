"""Hive's ACID directory names and the choice of directories a reader sees.

Expected names are spelled out by hand from Hive's format (``delta_%07d_%07d_%04d``, ``base_%07d``);
expected visibility comes from hand-worked cases and from a brute-force model that reasons over explicit
sets of committed write ids, never from the code under test.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hmsrepl.acid.directories import (
    DirKind,
    ParsedDirectory,
    base_dir_name,
    delta_dir_name,
    parse_directory_name,
    visible_directories,
)
from hmsrepl.formats.writeids import ValidTxnList, ValidWriteIdList

# -- names ------------------------------------------------------------------------------------------------


def test_names_are_hives() -> None:
    assert delta_dir_name(5) == "delta_0000005_0000005_0000"
    assert delta_dir_name(5, 5, 3) == "delta_0000005_0000005_0003"
    assert delta_dir_name(1, 20, None) == "delta_0000001_0000020"
    assert base_dir_name(5) == "base_0000005"
    # Ids wider than the padding are written in full, as Java's %07d does.
    assert delta_dir_name(12345678) == "delta_12345678_12345678_0000"
    assert base_dir_name(12345678) == "base_12345678"


@pytest.mark.parametrize(
    "call",
    [
        lambda: delta_dir_name(0),
        lambda: delta_dir_name(5, 4),
        lambda: delta_dir_name(1, 1, 10000),
        lambda: delta_dir_name(1, 1, -1),
        lambda: base_dir_name(0),
        lambda: base_dir_name(-3),
        lambda: base_dir_name(True),
    ],
)
def test_impossible_names_are_refused(call) -> None:
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("delta_0000005_0000005_0000", (DirKind.DELTA, 5, 5, 0, None)),
        ("delta_0000001_0000020", (DirKind.DELTA, 1, 20, None, None)),
        ("delta_1_2_7", (DirKind.DELTA, 1, 2, 7, None)),
        ("delete_delta_0000003_0000003_0001", (DirKind.DELETE_DELTA, 3, 3, 1, None)),
        ("base_0000005", (DirKind.BASE, 5, 5, None, None)),
        ("base_0000005_v0000123", (DirKind.BASE, 5, 5, None, 123)),
        ("delta_0000001_0000004_v0000042", (DirKind.DELTA, 1, 4, None, 42)),
    ],
)
def test_parse_acid_names(name: str, expected: tuple) -> None:
    parsed = parse_directory_name(name)
    assert parsed == expected
    assert isinstance(parsed, ParsedDirectory)
    assert parsed.kind is expected[0]


@pytest.mark.parametrize(
    "name",
    [
        "000000_0",
        "part-00000-abc.snappy.parquet",
        "ds=2024-01-01",
        "_SUCCESS",
        "delta_",
        "delta_5",
        "delta_0000005_0000004_0000",  # range runs backwards
        "delta_1_1_12345",  # more statements than Hive's 4 digits allow
        "base_x",
        "base_0000005.tmp",
        "delta_0000001_0000001_0000_extra",
        "base_99999999999999999999",  # beyond a Java long
    ],
)
def test_non_acid_or_malformed_names_parse_to_none(name: str) -> None:
    assert parse_directory_name(name) is None


@given(
    low=st.integers(1, 10**12),
    span=st.integers(0, 10**6),
    stmt=st.one_of(st.none(), st.integers(0, 9999)),
)
def test_delta_names_round_trip(low: int, span: int, stmt: int | None) -> None:
    parsed = parse_directory_name(delta_dir_name(low, low + span, stmt))
    assert parsed == (DirKind.DELTA, low, low + span, stmt, None)


@given(st.lists(st.integers(1, 9_999_999), min_size=2, max_size=20, unique=True))
def test_padded_names_sort_in_write_id_order(write_ids: list[int]) -> None:
    """Why Hive pads: a plain listing sorted by name is then in write-id order (below 10**7)."""
    by_name = sorted(delta_dir_name(w) for w in write_ids)
    assert [parse_directory_name(n).min_write_id for n in by_name] == sorted(write_ids)


# -- visibility: hand-worked cases ------------------------------------------------------------------------

D1, D2, D3, D4 = (f"delta_000000{i}_000000{i}_0000" for i in range(1, 5))


def wids(text: str) -> ValidWriteIdList:
    return ValidWriteIdList.parse(text)


def test_committed_deltas_are_visible_in_write_id_order() -> None:
    assert visible_directories([D3, D1, D2], wids("db.t:3:9223372036854775807::")) == [D1, D2, D3]


def test_open_and_aborted_deltas_are_invisible() -> None:
    # 2 is open, 3 aborted, 4 is above the reader's high watermark (started after the snapshot).
    assert visible_directories([D1, D2, D3, D4], wids("db.t:3:2:2:3")) == [D1]


def test_overwrite_base_hides_earlier_deltas_but_not_later_ones() -> None:
    names = [D1, D2, "base_0000003", D4]
    assert visible_directories(names, wids("db.t:4:9223372036854775807::")) == ["base_0000003", D4]


def test_aborted_or_open_overwrite_hides_nothing() -> None:
    names = [D1, D2, "base_0000003", D4]
    assert visible_directories(names, wids("db.t:4:9223372036854775807::3")) == [D1, D2, D4]
    assert visible_directories(names, wids("db.t:4:3:3:")) == [D1, D2, D4]


def test_newest_valid_base_wins() -> None:
    names = ["base_0000001", "base_0000002", "base_0000004", D3]
    # base 4 aborted: base 2 is the newest valid one, delta 3 above it is visible.
    assert visible_directories(names, wids("db.t:4:9223372036854775807::4")) == ["base_0000002", D3]


def test_old_snapshot_ignores_later_base() -> None:
    names = [D1, D2, "base_0000003"]
    assert visible_directories(names, wids("db.t:2:9223372036854775807::")) == [D1, D2]


def test_originals_visible_only_without_a_valid_base() -> None:
    names = ["000000_0", "000001_0_copy_1", D1]
    assert visible_directories(names, wids("db.t:1:9223372036854775807::")) == [
        "000000_0",
        "000001_0_copy_1",
        D1,
    ]
    with_base = [*names, "base_0000002"]
    assert visible_directories(with_base, wids("db.t:2:9223372036854775807::")) == ["base_0000002"]
    # The overwrite aborted: the originals are still the table's data.
    assert visible_directories(with_base, wids("db.t:2:9223372036854775807::2")) == [
        "000000_0",
        "000001_0_copy_1",
        D1,
    ]


def test_hidden_names_are_never_visible() -> None:
    names = ["_SUCCESS", ".hive-staging_1", "_tmp.delta_0000001_0000001_0000", "._SUCCESS.crc", D1]
    assert visible_directories(names, wids("db.t:1:9223372036854775807::")) == [D1]


def test_statements_of_one_txn_are_all_read() -> None:
    names = ["delta_0000001_0000001_0000", "delta_0000001_0000001_0001", "delta_0000001_0000001_0002"]
    assert visible_directories(names, wids("db.t:1:9223372036854775807::")) == names


def test_compacted_delta_replaces_its_inputs() -> None:
    names = [D1, D2, "delta_0000001_0000002", D3]
    assert visible_directories(names, wids("db.t:3:9223372036854775807::")) == ["delta_0000001_0000002", D3]


def test_a_writers_delta_with_any_invalid_write_id_is_skipped_whole() -> None:
    names = [D1, D2, "delta_0000001_0000002_0000"]  # several write ids with a statement id: not a compactor's
    assert visible_directories(names, wids("db.t:2:9223372036854775807::2")) == [D1]
    assert visible_directories(names, wids("db.t:2:2:2:")) == [D1]


def test_a_compactors_delta_may_span_aborted_write_ids_but_no_open_one() -> None:
    """A minor compaction merges committed rows only: an aborted id inside its range hides nothing."""
    for merged in ("delta_0000001_0000003", "delta_0000001_0000003_v0000020"):
        names = [D1, D3, merged]
        committed = ValidTxnList(30)
        aborted_2 = wids("db.t:3:9223372036854775807::2")
        assert visible_directories(names, aborted_2, valid_txns=committed) == [merged]
        open_2 = wids("db.t:3:2:2:")
        assert visible_directories(names, open_2, valid_txns=committed) == [D1, D3]
        all_aborted = wids("db.t:3:9223372036854775807::1,2,3")
        assert visible_directories(names, all_aborted, valid_txns=committed) == []
    # Not yet committed compaction: its inputs are read.
    pending = ValidTxnList(30, open_txns=frozenset({20}))
    names = [D1, D3, "delta_0000001_0000003_v0000020"]
    assert visible_directories(names, wids("db.t:3:9223372036854775807::2"), valid_txns=pending) == [D1, D3]


def test_compactor_output_needs_its_txn_committed() -> None:
    names = [D1, D2, "base_0000002_v0000010"]
    snapshot = wids("db.t:2:9223372036854775807::")
    assert visible_directories(names, snapshot, valid_txns=ValidTxnList(10)) == ["base_0000002_v0000010"]
    assert visible_directories(names, snapshot, valid_txns=ValidTxnList(10, {10})) == [D1, D2]
    assert visible_directories(names, snapshot, valid_txns=ValidTxnList(9)) == [D1, D2]
    with pytest.raises(ValueError, match="valid_txns"):
        visible_directories(names, snapshot)


def test_compacted_base_needs_no_open_write_id_below_it() -> None:
    # The reader's snapshot took write id 1 for open; it committed later and a compactor put its rows into
    # base_2. Hive's isValidBase refuses that base to the reader, which must keep reading its deltas (an
    # overwrite's base at the same id holds only its own rows and stays valid).
    snapshot = wids("db.t:2:1:1:")
    committed = ValidTxnList(10)
    assert visible_directories([D1, D2, "base_0000002_v0000010"], snapshot, valid_txns=committed) == [D2]
    assert visible_directories([D1, D2, "base_0000002"], snapshot, valid_txns=committed) == ["base_0000002"]
    # An open id above the base does not matter, nor an aborted one below it.
    later = wids("db.t:3:3:3:1")
    assert visible_directories([D1, D2, "base_0000002_v0000010", D3], later, valid_txns=committed) == [
        "base_0000002_v0000010"
    ]


def test_malformed_acid_like_name_fails_instead_of_reading_it_as_original() -> None:
    with pytest.raises(ValueError, match="delta_0000002_0000001_0000"):
        visible_directories([D1, "delta_0000002_0000001_0000"], wids("db.t:2:9223372036854775807::"))


def test_nothing_written_yet() -> None:
    assert visible_directories([], wids("db.t:0:9223372036854775807::")) == []


# -- visibility: brute-force model ------------------------------------------------------------------------


def model_visible(entries: list[tuple], hwm: int, open_ids: set[int], aborted_ids: set[int]) -> set[str]:
    """What a reader should see, by set arithmetic over explicit write-id sets."""
    committed = set(range(1, hwm + 1)) - open_ids - aborted_ids
    bases = [e for e in entries if e[0] == "base" and e[1] in committed]
    best = max((e[1] for e in bases), default=None)

    def readable(e: tuple) -> bool:
        ids = set(range(e[1], e[2] + 1))
        if e[1] < e[2] and e[3].count("_") == 2:  # a compactor's (statement-less) delta
            return e[2] <= hwm and not ids & open_ids and not ids <= aborted_ids
        return ids <= committed

    candidates = [e for e in entries if e[0] == "delta" and readable(e) and e[1] > (best or 0)]
    covered = {
        e[3]
        for e in candidates
        for other in candidates
        if set(range(other[1], other[2] + 1)) > set(range(e[1], e[2] + 1))
    }
    visible = {e[3] for e in candidates} - covered
    if best is not None:
        visible.add(next(e[3] for e in bases if e[1] == best))
    else:
        visible |= {e[1] for e in entries if e[0] == "original"}
    return visible


@st.composite
def snapshots(draw: st.DrawFn) -> tuple[int, set[int], set[int]]:
    hwm = draw(st.integers(0, 10))
    states = draw(st.lists(st.sampled_from("cccoa"), min_size=hwm, max_size=hwm))
    open_ids = {i + 1 for i, s in enumerate(states) if s == "o"}
    aborted_ids = {i + 1 for i, s in enumerate(states) if s == "a"}
    return hwm, open_ids, aborted_ids


@st.composite
def directory_entries(draw: st.DrawFn) -> list[tuple]:
    """Entries as ("base", w, w, name) / ("delta", lo, hi, name) / ("original", name) / ("hidden", name)."""
    out: list[tuple] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["base", "delta", "delta", "delta", "wide", "original", "hidden"]))
        if kind == "base":
            w = draw(st.integers(1, 13))
            out.append(("base", w, w, f"base_{w:07d}"))
        elif kind == "delta":
            w = draw(st.integers(1, 13))
            stmt = draw(st.integers(0, 2))
            out.append(("delta", w, w, f"delta_{w:07d}_{w:07d}_{stmt:04d}"))
        elif kind == "wide":  # a compactor's multi-write-id delta
            lo = draw(st.integers(1, 12))
            hi = draw(st.integers(lo, 13))
            out.append(("delta", lo, hi, f"delta_{lo:07d}_{hi:07d}"))
        elif kind == "original":
            out.append(("original", draw(st.sampled_from(["000000_0", "000001_0", "000000_0_copy_1"]))))
        else:
            out.append(("hidden", draw(st.sampled_from(["_SUCCESS", ".part-0.crc", "_tmp.base_0000001"]))))
    return out


def entry_name(entry: tuple) -> str:
    return entry[-1] if entry[0] != "original" else entry[1]


@settings(max_examples=400)
@given(entries=directory_entries(), snapshot=snapshots())
def test_visibility_matches_brute_force_model(entries: list[tuple], snapshot: tuple) -> None:
    hwm, open_ids, aborted_ids = snapshot
    names = [entry_name(e) for e in entries]
    got = visible_directories(names, ValidWriteIdList("db.t", hwm, open_ids, aborted_ids))
    assert set(got) == model_visible(entries, hwm, open_ids, aborted_ids)
    assert len(got) == len(set(got))


@settings(max_examples=200)
@given(entries=directory_entries(), snapshot=snapshots())
def test_read_order_is_originals_then_base_then_deltas_by_write_id(
    entries: list[tuple], snapshot: tuple
) -> None:
    hwm, open_ids, aborted_ids = snapshot
    got = visible_directories(
        [entry_name(e) for e in entries], ValidWriteIdList("db.t", hwm, open_ids, aborted_ids)
    )
    rank = {"original": 0, "base": 1, "delta": 2}
    kinds = []
    for name in got:
        parsed = parse_directory_name(name)
        kinds.append(rank["original"] if parsed is None else rank[parsed.kind.value])
    assert kinds == sorted(kinds)
    ranges = [
        (p.min_write_id, p.max_write_id) for p in map(parse_directory_name, got) if p and p.kind == "delta"
    ]
    assert ranges == sorted(ranges)


@settings(max_examples=200)
@given(entries=directory_entries(), snapshot=snapshots(), later=directory_entries())
def test_later_writes_never_change_an_old_snapshot(
    entries: list[tuple], snapshot: tuple, later: list[tuple]
) -> None:
    """Snapshot isolation: directories of write ids above the reader's watermark change nothing."""
    hwm, open_ids, aborted_ids = snapshot
    snap = ValidWriteIdList("db.t", hwm, open_ids, aborted_ids)
    before = visible_directories([entry_name(e) for e in entries], snap)
    newer = [entry_name(e) for e in later if e[0] in ("base", "delta") and e[1] > hwm]
    assert visible_directories([entry_name(e) for e in entries] + newer, snap) == before
