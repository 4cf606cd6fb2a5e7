"""Partition values are measured once escaped only when they could be too long: the answer (which value, or
the whole name, is refused and why) must be the one a full escape gives, for every value."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hmsrepl.formats.partition_names import escape_path_name, make_partition_name
from hmsrepl.metastore.names import MAX_PATH_SEGMENT_BYTES, PART_NAME, partition_problem

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
