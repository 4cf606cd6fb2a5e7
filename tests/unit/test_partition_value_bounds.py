"""Partition values are measured once escaped only when they could be too long: the answer (which value, or
the whole name, is refused and why) must be the one a full escape gives, for every value."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from hmsrepl.exceptions import InvalidObjectError, InvalidPartitionValueError
from hmsrepl.formats.partition_names import escape_path_name, make_partition_name, partition_namer
from hmsrepl.metastore.catalog.rows import _partition_name
from hmsrepl.metastore.names import (
    MAX_PATH_SEGMENT_BYTES,
    PART_NAME,
    CheckedPartitionNames,
    check_partition_values,
    partition_problem,
)
from tests.helpers import make_table

# Characters Hive escapes (3 characters each once escaped), multi-byte ones (up to 4 UTF-8 bytes), plain ones.
CHARS = st.sampled_from(list("ab1_-") + list("%/:=#{") + ["é", "€", "𝄞", "İ"])
VALUES = st.one_of(
    st.just(""), st.text(CHARS, min_size=1, max_size=90), st.text(CHARS, min_size=60, max_size=256)
)
KEYS = st.sampled_from(["p", "day", "K" * 40, "İd"])


def exact(keys: list[str], values: list[str]) -> str | None:
    """The limits measured on the escaped forms themselves."""
    for key, value in zip(keys, values, strict=True):
        segment = f"{escape_path_name(key.lower())}={escape_path_name(value)}"
        if len(segment.encode("utf-8")) > MAX_PATH_SEGMENT_BYTES:
            return f"segment {key}"
    return "name" if len(make_partition_name(keys, values)) > PART_NAME else None


@settings(max_examples=300)
@given(st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=5, unique_by=lambda kv: kv[0]))
def test_a_value_or_name_is_refused_exactly_when_its_escaped_form_is_too_long(
    pairs: list[tuple[str, str]],
) -> None:
    keys, values = [k for k, _ in pairs], [v.replace("/", "%") for _, v in pairs]  # '/' is refused first
    problem = partition_problem(keys, values)
    expected = exact(keys, values)
    if expected is None:
        assert problem is None
    elif expected == "name":
        assert problem is not None and "once escaped" in problem and "the metastore stores" in problem
    else:
        assert problem is not None and "file systems allow" in problem


def test_values_at_the_limits_are_measured_escaped() -> None:
    """Four-byte characters (a segment over 255 bytes with fewer than 85 characters) and escaped ones (a name
    over the column's length with short values) are refused; one character less fits."""
    assert "file systems allow" in (partition_problem(["p"], ["𝄞" * 64]) or "")
    assert partition_problem(["p"], ["𝄞" * 63]) is None
    keys = ["a", "b", "c", "d"]
    assert "the metastore stores" in (partition_problem(keys, ["%" * 80] * 4) or "")
    assert partition_problem(keys[:2], ["%" * 80] * 2) is None


# Values around every rule: dots, separators, control and other unprintable characters, escaped and multi-byte
# ones, the empty value (Hive's default partition), and lengths on both sides of the plain bound.
ODD_CHARS = st.sampled_from(
    list("ab1_-.") + list("%/:=#{") + ["é", "𝄞", "\x00", "\x1f", "\x7f", "\x85", "\u2028"]
)
ANY_VALUE = st.one_of(
    st.sampled_from(["", ".", "..", "...", "a/b", "x" * 62, "x" * 63, "x" * 256, "x" * 257]),
    st.text(ODD_CHARS, max_size=90),
    st.text(ODD_CHARS, min_size=55, max_size=260),
)


def _outcome(action: Callable[[], object]) -> tuple[str, str]:
    try:
        return "ok", str(action())
    except (InvalidObjectError, InvalidPartitionValueError) as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=400)
@given(
    keys=st.lists(KEYS, min_size=1, max_size=4, unique=True),
    values=st.lists(ANY_VALUE, min_size=0, max_size=5),
)
def test_checked_names_refuse_what_the_checks_refuse_with_their_messages(
    keys: list[str], values: list[str]
) -> None:
    """A table's names made once a call (``CheckedPartitionNames``) are ``make_partition_name``'s, and refused
    exactly when ``_partition_name`` or ``check_partition_values`` refuse them, with the same error."""

    table = make_table("db", "t", partition_keys=tuple(keys))
    names = (
        table.partition_key_names
    )  # as a table holds them (lower-cased), and as ``add_partitions`` passes them

    def separately() -> str:
        name = _partition_name(table, values)
        check_partition_values("db.t", names, values)
        return name

    assert _outcome(lambda: CheckedPartitionNames("db.t", names).name(values)) == _outcome(separately)


@given(keys=st.lists(KEYS, min_size=0, max_size=4), values=st.lists(VALUES, min_size=0, max_size=4))
def test_a_namer_names_as_make_partition_name(keys: list[str], values: list[str]) -> None:
    expected = _outcome_of_name(lambda: make_partition_name(keys, values))
    assert _outcome_of_name(lambda: partition_namer(keys)(values)) == expected


def _outcome_of_name(action: Callable[[], str]) -> tuple[str, str]:
    try:
        return "ok", action()
    except ValueError as exc:
        return "ValueError", str(exc)
