"""Tests for Hive's ValidTxnList / ValidWriteIdList string codecs and snapshot comparison.

Expected values come from the Hive format description or from brute-force set arithmetic over small
watermarks, never from the code under test.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hmsrepl.formats.writeids import (
    MAX_ID,
    MalformedWriteIdListError,
    ValidTxnList,
    ValidWriteIdList,
    compare_committed,
)

# --------------------------------------------------------------------------------------------------------
# Helpers that model the format and the semantics independently of the module.


def brute_committed(hwm: int, open_ids: set[int], aborted_ids: set[int]) -> set[int]:
    return set(range(1, hwm + 1)) - open_ids - aborted_ids


def truncate(partition: tuple[int, set[int], set[int]], limit: int) -> tuple[int, set[int], set[int]]:
    """Cut a (hwm, open, aborted) triple down to ``limit`` so brute force stays cheap."""
    hwm, open_ids, aborted_ids = partition
    if hwm <= limit:
        return partition
    return limit, {i for i in open_ids if i <= limit}, {i for i in aborted_ids if i <= limit}


def brute_compare(x: set[int], y: set[int]) -> int | None:
    if x == y:
        return 0
    if x < y:
        return -1
    if x > y:
        return 1
    return None


def hive_write_id_string(name: str, hwm: int, open_ids: set[int], aborted_ids: set[int]) -> str:
    """The string as Hive's ValidReaderWriteIdList writes it, built by hand from the format description."""
    min_open = min(open_ids) if open_ids else 9223372036854775807
    open_csv = ",".join(map(str, sorted(open_ids)))
    aborted_csv = ",".join(map(str, sorted(aborted_ids)))
    return f"{name}:{hwm}:{min_open}:{open_csv}:{aborted_csv}"


@st.composite
def id_partition(draw: st.DrawFn, max_small_hwm: int = 30) -> tuple[int, set[int], set[int]]:
    """A high watermark plus disjoint open and aborted sets within 1..hwm; sometimes a huge watermark."""
    if draw(st.booleans()):
        hwm = draw(st.integers(0, max_small_hwm))
        ids = draw(st.sets(st.integers(1, hwm), max_size=hwm)) if hwm else set()
    else:
        hwm = draw(st.integers(1, MAX_ID))
        ids = draw(st.sets(st.integers(1, hwm), max_size=12))
        # Add some consecutive runs near the watermark, which is where ranges matter.
        start = draw(st.integers(1, hwm))
        ids |= set(range(start, min(hwm, start + draw(st.integers(0, 6))) + 1))
    open_ids = {i for i in ids if draw(st.booleans())}
    return hwm, open_ids, ids - open_ids


table_names = st.builds(
    lambda db, tbl: f"{db}.{tbl}",
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
)


@st.composite
def write_id_lists(draw: st.DrawFn) -> ValidWriteIdList:
    hwm, open_ids, aborted_ids = draw(id_partition())
    name = draw(st.one_of(st.none(), table_names))
    return ValidWriteIdList(name, hwm, frozenset(open_ids), frozenset(aborted_ids))


@st.composite
def txn_lists(draw: st.DrawFn) -> ValidTxnList:
    hwm, open_ids, aborted_ids = draw(id_partition())
    return ValidTxnList(hwm, frozenset(open_ids), frozenset(aborted_ids))


def encode_with_ranges(draw: st.DrawFn, ids: set[int]) -> str:
    """A csv where consecutive runs are written as 'a-b' or as singles, chosen at random, as Hive 4 may."""
    items: list[str] = []
    ordered = sorted(ids)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        # Split the run [i, j] into random contiguous chunks.
        k = i
        while k <= j:
            end = draw(st.integers(k, j))
            if end > k or draw(st.booleans()):
                items.append(f"{ordered[k]}-{ordered[end]}")  # includes degenerate 'a-a'
            else:
                items.append(str(ordered[k]))
            k = end + 1
        i = j + 1
    if draw(st.booleans()):
        items = draw(st.permutations(items))
    return ",".join(items)


# --------------------------------------------------------------------------------------------------------
# The literal examples from the format description.


def test_write_id_list_example_fields_and_validity():
    wl = ValidWriteIdList.parse("db.t:12:7:7,8:12")
    assert wl.table_name == "db.t"
    assert wl.high_watermark == 12
    assert wl.open_write_ids == frozenset({7, 8})
    assert wl.aborted_write_ids == frozenset({12})
    assert wl.min_open_write_id == 7
    assert wl.exceptions == frozenset({7, 8, 12})
    valid = {w for w in range(1, 40) if wl.is_write_id_valid(w)}
    assert valid == {1, 2, 3, 4, 5, 6, 9, 10, 11}
    assert wl.committed_ids() == {1, 2, 3, 4, 5, 6, 9, 10, 11}
    assert wl.to_string() == "db.t:12:7:7,8:12"


def test_write_id_list_nothing_open_with_and_without_trailing_fields():
    full = ValidWriteIdList.parse("db.t:5:9223372036854775807::")
    short = ValidWriteIdList.parse("db.t:5:9223372036854775807")
    one_colon = ValidWriteIdList.parse("db.t:5:9223372036854775807:")
    assert full == short == one_colon == ValidWriteIdList("db.t", 5)
    assert full.min_open_write_id == MAX_ID == 9223372036854775807
    assert short.to_string() == "db.t:5:9223372036854775807::"
    assert full.committed_ids() == {1, 2, 3, 4, 5}


def test_write_id_list_only_aborted_keeps_empty_open_field():
    wl = ValidWriteIdList.parse("db.t:5:9223372036854775807::3")
    assert wl.open_write_ids == frozenset()
    assert wl.aborted_write_ids == frozenset({3})
    assert wl.to_string() == "db.t:5:9223372036854775807::3"
    assert [wl.is_write_id_valid(w) for w in range(1, 7)] == [True, True, False, True, True, False]


def test_write_id_list_open_without_aborted_field():
    wl = ValidWriteIdList.parse("db.t:9:4:4,6")
    assert wl.open_write_ids == frozenset({4, 6})
    assert wl.aborted_write_ids == frozenset()
    assert wl.to_string() == "db.t:9:4:4,6:"


def test_txn_list_example_with_range():
    tl = ValidTxnList.parse("10:3:3-5,7:8")
    assert tl.high_watermark == 10
    assert tl.open_txns == frozenset({3, 4, 5, 7})
    assert tl.aborted_txns == frozenset({8})
    assert tl.min_open_txn == 3
    assert {t for t in range(1, 20) if tl.is_txn_valid(t)} == {1, 2, 6, 9, 10}
    # Written back with plain ids, which every Hive release can read.
    assert tl.to_string() == "10:3:3,4,5,7:8"


def test_txn_list_trailing_fields_dropped():
    assert ValidTxnList.parse("5:9223372036854775807") == ValidTxnList.parse("5:9223372036854775807::")
    assert ValidTxnList.parse("5:9223372036854775807") == ValidTxnList(5)
    assert ValidTxnList(5).to_string() == "5:9223372036854775807::"
    assert ValidTxnList.parse("0:9223372036854775807::") == ValidTxnList(0)


def test_txn_list_aborted_ranges_and_single_element_range():
    tl = ValidTxnList.parse("20:9223372036854775807::2-4,6-6,10-12")
    assert tl.open_txns == frozenset()
    assert tl.aborted_txns == frozenset({2, 3, 4, 6, 10, 11, 12})
    assert tl.min_open_txn == MAX_ID


def test_null_table_name_round_trips():
    wl = ValidWriteIdList.parse("null:3:2:2:")
    assert wl.table_name is None
    assert wl.open_write_ids == frozenset({2})
    assert wl.to_string() == "null:3:2:2:"
    assert ValidWriteIdList.parse("NULL:3:9223372036854775807").table_name is None
    assert ValidWriteIdList(None, 0).to_string() == "null:0:9223372036854775807::"


def test_table_name_is_lower_cased():
    wl = ValidWriteIdList.parse("Sales.Orders:2:9223372036854775807::")
    assert wl.table_name == "sales.orders"
    assert wl.to_string() == "sales.orders:2:9223372036854775807::"
    assert ValidWriteIdList("Sales.ORDERS", 2) == wl


def test_constructor_accepts_any_iterable_and_freezes():
    wl = ValidWriteIdList("db.t", 10, [3, 4], (5,))
    assert wl.open_write_ids == frozenset({3, 4})
    assert isinstance(wl.open_write_ids, frozenset)
    assert isinstance(wl.aborted_write_ids, frozenset)
    assert hash(wl) == hash(ValidWriteIdList("db.t", 10, frozenset({3, 4}), frozenset({5})))
    with pytest.raises(AttributeError):
        wl.high_watermark = 11  # type: ignore[misc]
    tl = ValidTxnList(10, {3}, [4])
    assert tl.exceptions == frozenset({3, 4})


# --------------------------------------------------------------------------------------------------------
# Malformed input.

MALFORMED_WRITE_ID_LISTS = [
    ("db.t:x:1", "high watermark 'x' is not an integer"),
    ("db.t:5:abc::", "minOpenWriteId"),
    ("db.t:5:9223372036854775807:1,x:", "'x'"),
    ("db.t:5:9223372036854775807::2,,3", "aborted write ids"),
    ("db.t:5:9223372036854775807::2.5", "'2.5'"),
    ("db.t:5: 3:3:", "minOpenWriteId"),
    ("db.t:5:6:6:", "above the high watermark"),
    ("db.t:5:9223372036854775807::9", "above the high watermark"),
    ("db.t:12:8:7,8:12", "minOpenWriteId 8"),
    ("db.t:12:9223372036854775807:7:", "minOpenWriteId"),
    ("db.t:12:7::", "minOpenWriteId 7"),
    ("", "empty"),
    ("db.t", "missing high watermark, minOpenWriteId"),
    ("db.t:5", "missing minOpenWriteId"),
    ("db.t:5::", "missing minOpenWriteId"),
    (":5:9223372036854775807::", "table name"),
    ("db.t:12:7:7,8:12:1", "at most 5"),
    ("db.t:12:7:7,8:12:1:", "at most 5"),
    ("db.t:-1:9223372036854775807::", "negative"),
    ("db.t:5:-3:-3:", "not positive"),
    ("db.t:5:9223372036854775807::0", "not positive"),
    ("db.t:5:3:3:3", "both open and aborted"),
    ("db.t:5:3:3,3:", "repeats"),
    ("db.t:5:3:3-4:", "not an integer"),
    ("tbl:5:9223372036854775807::", "db.table"),
    ("db.t:9223372036854775808:9223372036854775807::", "largest Java long"),
    ("db.t:+5:9223372036854775807::", "not an integer"),
    ("db.t:" + "9" * 5000 + ":9223372036854775807::", "out of range"),
]


@pytest.mark.parametrize(("text", "reason"), MALFORMED_WRITE_ID_LISTS)
def test_malformed_write_id_list_raises_with_string_and_reason(text: str, reason: str):
    with pytest.raises(MalformedWriteIdListError) as info:
        ValidWriteIdList.parse(text)
    message = str(info.value)
    assert message.startswith("malformed ValidWriteIdList ")
    assert text[:100] in message
    assert reason in message
    assert "expected '<db.tbl>:<hwm>:<minOpenWriteId>:<open>:<aborted>'" in message


def test_write_id_list_error_message_matches_documented_shape():
    with pytest.raises(MalformedWriteIdListError) as info:
        ValidWriteIdList.parse("db.t:x:1")
    assert str(info.value) == (
        "malformed ValidWriteIdList 'db.t:x:1': high watermark 'x' is not an integer; "
        "expected '<db.tbl>:<hwm>:<minOpenWriteId>:<open>:<aborted>'"
    )


MALFORMED_TXN_LISTS = [
    ("x:9223372036854775807::", "high watermark 'x'"),
    ("5:y::", "minOpenTxn 'y'"),
    ("10:3:3-5,7:x", "'x'"),
    ("10:3:3-5-7:", "'3-5-7'"),
    ("10:5:5-3:", "backwards"),
    ("10:3:3-12:", "above the high watermark"),
    ("10:4:3-5,7:8", "minOpenTxn 4"),
    ("10:9223372036854775807::8-11", "above the high watermark"),
    ("", "empty"),
    ("5", "missing minOpenTxn"),
    ("10:3:3:8:1", "at most 4"),
    ("-1:9223372036854775807::", "negative"),
    ("10:9223372036854775807::0-2", "not positive"),
    ("10:3:3-5:4", "both open and aborted"),
    ("10:3:3-5,4:", "repeats"),
    ("10:9223372036854775807::1-99999999999", "expand to more than"),
]


@pytest.mark.parametrize(("text", "reason"), MALFORMED_TXN_LISTS)
def test_malformed_txn_list_raises_with_string_and_reason(text: str, reason: str):
    with pytest.raises(MalformedWriteIdListError) as info:
        ValidTxnList.parse(text)
    message = str(info.value)
    assert message.startswith("malformed ValidTxnList ")
    assert repr(text) in message
    assert reason in message
    assert "expected '<hwm>:<minOpenTxn>:<open>:<aborted>'" in message


@pytest.mark.parametrize("parse", [ValidTxnList.parse, ValidWriteIdList.parse])
@pytest.mark.parametrize("value", [None, b"db.t:5:9223372036854775807::", 5])
def test_non_string_input_is_rejected(parse, value):
    with pytest.raises(MalformedWriteIdListError) as info:
        parse(value)
    assert repr(value) in str(info.value)


def test_error_is_a_value_error():
    assert issubclass(MalformedWriteIdListError, ValueError)
    with pytest.raises(ValueError):
        ValidTxnList.parse("")


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"high_watermark": -1}, "negative"),
        ({"high_watermark": MAX_ID + 1}, "largest Java long"),
        ({"high_watermark": 5, "open_write_ids": frozenset({6})}, "above the high watermark"),
        ({"high_watermark": 5, "aborted_write_ids": frozenset({0})}, "not positive"),
        ({"high_watermark": 5, "open_write_ids": {2}, "aborted_write_ids": {2}}, "both open and aborted"),
        ({"high_watermark": 5, "open_write_ids": {"2"}}, "not an integer"),
        ({"high_watermark": 5, "open_write_ids": {True}}, "not an integer"),
        ({"high_watermark": 5, "open_write_ids": "12"}, "collection of integers"),
        ({"high_watermark": "5"}, "not an integer"),
        ({"high_watermark": 5, "table_name": "t"}, "db.table"),
        ({"high_watermark": 5, "table_name": "db.t:x"}, "':'"),
        ({"high_watermark": 5, "table_name": "db.t$x"}, "'$'"),
        ({"high_watermark": 5, "table_name": ""}, "db.table"),
        ({"high_watermark": 5, "table_name": "null"}, "db.table"),
    ],
)
def test_invalid_write_id_list_construction(kwargs, reason):
    kwargs = {"table_name": "db.t", **kwargs}
    with pytest.raises(MalformedWriteIdListError) as info:
        ValidWriteIdList(**kwargs)
    assert "invalid ValidWriteIdList" in str(info.value)
    assert reason in str(info.value)


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ((-1,), "negative"),
        ((5, {6}), "above the high watermark"),
        ((5, set(), {0}), "not positive"),
        ((5, {1}, {1}), "both open and aborted"),
        ((5.0,), "not an integer"),
    ],
)
def test_invalid_txn_list_construction(args, reason):
    with pytest.raises(MalformedWriteIdListError) as info:
        ValidTxnList(*args)
    assert "invalid ValidTxnList" in str(info.value)
    assert reason in str(info.value)


# --------------------------------------------------------------------------------------------------------
# Round trips and semantics (property based).


@given(write_id_lists())
def test_write_id_list_round_trip(wl: ValidWriteIdList):
    text = wl.to_string()
    assert ValidWriteIdList.parse(text) == wl
    name = "null" if wl.table_name is None else wl.table_name
    assert text == hive_write_id_string(
        name, wl.high_watermark, set(wl.open_write_ids), set(wl.aborted_write_ids)
    )


@given(id_partition(), table_names)
def test_write_id_list_parses_hand_built_strings(partition, name):
    hwm, open_ids, aborted_ids = partition
    text = hive_write_id_string(name, hwm, open_ids, aborted_ids)
    wl = ValidWriteIdList.parse(text)
    assert (wl.table_name, wl.high_watermark) == (name, hwm)
    assert wl.open_write_ids == open_ids
    assert wl.aborted_write_ids == aborted_ids
    assert wl.min_open_write_id == (min(open_ids) if open_ids else 9223372036854775807)
    # Java's split drops trailing empty fields; such strings must mean the same list.
    assert ValidWriteIdList.parse(text.rstrip(":")) == wl


@given(txn_lists())
def test_txn_list_round_trip(tl: ValidTxnList):
    assert ValidTxnList.parse(tl.to_string()) == tl


@given(st.data())
def test_txn_list_reads_ranges(data):
    hwm, open_ids, aborted_ids = data.draw(id_partition())
    min_open = min(open_ids) if open_ids else 9223372036854775807
    open_csv = encode_with_ranges(data.draw, open_ids)
    aborted_csv = encode_with_ranges(data.draw, aborted_ids)
    text = f"{hwm}:{min_open}:{open_csv}:{aborted_csv}"
    if data.draw(st.booleans()):
        text = text.rstrip(":")
    tl = ValidTxnList.parse(text)
    assert tl == ValidTxnList(hwm, frozenset(open_ids), frozenset(aborted_ids))
    assert ValidTxnList.parse(tl.to_string()) == tl
    assert tl.min_open_txn == min_open


@given(id_partition(max_small_hwm=30))
def test_validity_matches_brute_force(partition):
    hwm, open_ids, aborted_ids = truncate(partition, 30)
    committed = brute_committed(hwm, open_ids, aborted_ids)
    wl = ValidWriteIdList("db.t", hwm, frozenset(open_ids), frozenset(aborted_ids))
    tl = ValidTxnList(hwm, frozenset(open_ids), frozenset(aborted_ids))
    probe = range(1, hwm + 5)
    assert {w for w in probe if wl.is_write_id_valid(w)} == committed
    assert {t for t in probe if tl.is_txn_valid(t)} == committed
    assert wl.committed_ids() == committed
    for low in range(1, hwm + 4):
        for high in range(low, hwm + 4):
            assert wl.is_write_id_range_valid(low, high) == set(range(low, high + 1)).issubset(committed)


def test_range_validity_rejects_reversed_range():
    with pytest.raises(ValueError):
        ValidWriteIdList("db.t", 5).is_write_id_range_valid(4, 3)


def test_committed_ids_refuses_huge_watermark():
    with pytest.raises(ValueError, match="compare_committed"):
        ValidWriteIdList("db.t", 10**12).committed_ids()


# --------------------------------------------------------------------------------------------------------
# compare_committed.


@st.composite
def comparable_pairs(draw: st.DrawFn) -> tuple[ValidWriteIdList, ValidWriteIdList]:
    """Pairs built around a shared committed set so equal, subset, superset and incomparable all occur,
    including equal sets written with different watermarks."""
    limit = 30
    base = draw(st.sets(st.integers(1, limit), max_size=limit))
    lists = []
    for _ in range(2):
        committed = set(base)
        if draw(st.booleans()):
            committed -= draw(st.sets(st.integers(1, limit), max_size=3))
        if draw(st.booleans()):
            committed |= draw(st.sets(st.integers(1, limit), max_size=3))
        hwm = draw(st.integers(max(committed, default=0), limit))
        not_committed = set(range(1, hwm + 1)) - committed
        open_ids = {i for i in not_committed if draw(st.booleans())}
        lists.append(ValidWriteIdList("db.t", hwm, frozenset(open_ids), frozenset(not_committed - open_ids)))
    return lists[0], lists[1]


def check_compare(a: ValidWriteIdList, b: ValidWriteIdList) -> None:
    set_a = brute_committed(a.high_watermark, set(a.open_write_ids), set(a.aborted_write_ids))
    set_b = brute_committed(b.high_watermark, set(b.open_write_ids), set(b.aborted_write_ids))
    ab, ba = compare_committed(a, b), compare_committed(b, a)
    assert ab == brute_compare(set_a, set_b)
    assert (ab == 0) == (set_a == set_b)
    assert (ab is None) == (not set_a <= set_b and not set_b <= set_a)
    if ab is None:
        assert ba is None
    else:
        assert ba == -ab


@settings(max_examples=400)
@given(comparable_pairs())
def test_compare_committed_matches_brute_force(pair):
    check_compare(*pair)


@given(id_partition(max_small_hwm=30), id_partition(max_small_hwm=30))
def test_compare_committed_independent_lists(p, q):
    lists = []
    for hwm, open_ids, aborted_ids in (truncate(p, 30), truncate(q, 30)):
        lists.append(ValidWriteIdList("db.t", hwm, frozenset(open_ids), frozenset(aborted_ids)))
    check_compare(*lists)


def all_small_lists(max_hwm: int) -> list[ValidWriteIdList]:
    out = []
    for hwm in range(max_hwm + 1):
        for states in itertools.product("coa", repeat=hwm):
            open_ids = frozenset(i + 1 for i, s in enumerate(states) if s == "o")
            aborted_ids = frozenset(i + 1 for i, s in enumerate(states) if s == "a")
            out.append(ValidWriteIdList("db.t", hwm, open_ids, aborted_ids))
    return out


def test_compare_committed_exhaustive_small():
    lists = all_small_lists(4)
    outcomes = set()
    for a, b in itertools.product(lists, repeat=2):
        check_compare(a, b)
        outcomes.add(compare_committed(a, b))
    assert outcomes == {-1, 0, 1, None}


def test_compare_committed_examples():
    behind = ValidWriteIdList.parse("db.t:10:9223372036854775807::")
    ahead = ValidWriteIdList.parse("db.t:12:9223372036854775807::")
    assert compare_committed(behind, ahead) == -1
    assert compare_committed(ahead, behind) == 1
    # 11 and 12 aborted: same committed set as hwm 10, despite the different watermark.
    assert compare_committed(behind, ValidWriteIdList.parse("db.t:12:9223372036854775807::11,12")) == 0
    assert compare_committed(behind, ValidWriteIdList.parse("db.t:12:11:11:12")) == 0
    # Diverged: one committed 3, the other aborted 3 but committed 11. Hive's compare would say +-1 here.
    diverged = ValidWriteIdList.parse("db.t:11:9223372036854775807::3")
    assert compare_committed(behind, diverged) is None
    assert compare_committed(diverged, behind) is None
    empty = ValidWriteIdList("db.t", 0)
    assert compare_committed(empty, ValidWriteIdList("db.t", 3, aborted_write_ids={1, 2, 3})) == 0
    assert compare_committed(empty, behind) == -1


def test_compare_committed_requires_same_table():
    with pytest.raises(ValueError, match="different tables"):
        compare_committed(ValidWriteIdList("db.a", 1), ValidWriteIdList("db.b", 1))
    with pytest.raises(ValueError):
        compare_committed(ValidWriteIdList(None, 1), ValidWriteIdList("db.b", 1))
    assert compare_committed(ValidWriteIdList(None, 1), ValidWriteIdList(None, 1)) == 0


def test_huge_watermarks_reason_over_exceptions_only():
    """Materialising 1..hwm would exhaust memory here; the comparison must use hwm and exceptions."""
    big = 10**12
    a = ValidWriteIdList.parse(f"db.t:{big}:{big - 5}:{big - 5}:{big - 1},{big}")
    b = ValidWriteIdList("db.t", big - 2, frozenset({big - 5}))
    c = ValidWriteIdList(
        "db.t", big + 3, frozenset({big - 5}), frozenset({big - 1, big, big + 1, big + 2, big + 3})
    )
    d = ValidWriteIdList("db.t", big, frozenset({big - 5, 17}), frozenset({big - 1, big}))
    # a commits everything below the watermark except big-5, big-1 and big.
    assert compare_committed(a, b) == 0
    assert compare_committed(a, c) == 0
    assert compare_committed(a, ValidWriteIdList("db.t", big)) == -1
    assert compare_committed(d, a) == -1
    assert compare_committed(a, d) == 1
    assert compare_committed(d, ValidWriteIdList("db.t", big - 2, aborted_write_ids={3})) is None
    assert a.is_write_id_range_valid(1, big - 6)
    assert not a.is_write_id_range_valid(1, big - 5)
    assert not a.is_write_id_range_valid(big - 4, big + 10)
    assert a.is_write_id_range_valid(big - 4, big - 2)
    assert ValidWriteIdList.parse(a.to_string()) == a
    tl = ValidTxnList.parse(f"{MAX_ID}:{MAX_ID}:{MAX_ID}:1-3")
    assert tl.open_txns == frozenset({MAX_ID})
    assert not tl.is_txn_valid(MAX_ID)
    assert tl.is_txn_valid(MAX_ID - 1)
