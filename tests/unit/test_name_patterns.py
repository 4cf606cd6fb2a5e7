"""Hive name patterns (``*``, ``|``, case-insensitive, whole name) matched in linear time."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore.patterns import MAX_PATTERN_CHARS, matches


def regex_reference(pattern: str, name: str) -> bool:
    """Hive's meaning written as a (backtracking) regex: only safe on the tiny inputs generated here."""
    alternatives = [re.escape(alt.strip()).replace(r"\*", ".*") for alt in pattern.split("|")]
    return re.fullmatch("(?:" + "|".join(alternatives) + ")", name, re.IGNORECASE) is not None


@settings(max_examples=500, deadline=None)
@given(st.text("aAb*|. ", max_size=10), st.text("aAb.", max_size=8))
def test_same_answers_as_the_regex(pattern: str, name: str) -> None:
    expected = pattern in ("", "*") or regex_reference(pattern, name)  # no pattern lists every name
    assert matches(pattern, name) == expected


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("sales*", "SALES_2024", True),
        ("*_tmp|staging", "staging", True),
        ("*_tmp | staging", "x_tmp", True),
        ("a.b", "axb", False),  # '.' is literal
        ("t*", "xt", False),
        ("*", "anything", True),
        ("ab*b", "ab", False),
    ],
)
def test_hive_semantics(pattern: str, name: str, expected: bool) -> None:
    assert matches(pattern, name) is expected


def test_backtracking_pattern_answers_in_milliseconds() -> None:
    name = "a" * 120
    started = time.perf_counter()
    for _ in range(100):
        assert not matches("*a*a*a*a*b", name)
        assert not matches("*a*a*a*a*a*a*a*a*a*a*a*a*b|" * 20 + "x", name)
    assert (time.perf_counter() - started) / 100 < 0.005


def test_overlong_pattern_is_refused() -> None:
    with pytest.raises(InvalidObjectError, match="longer than 10000; use a shorter pattern"):
        matches("a" * (MAX_PATTERN_CHARS + 1), "a")
