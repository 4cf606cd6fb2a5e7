"""Hive's name patterns for listing calls: ``*`` is any run of characters, ``|`` separates alternatives."""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=256)
def compile_hive_pattern(pattern: str) -> re.Pattern[str]:
    alternatives = [re.escape(alt.strip()).replace(r"\*", ".*") for alt in pattern.split("|")]
    return re.compile("(?:" + "|".join(alternatives) + ")", re.IGNORECASE)


def matches(pattern: str | None, name: str) -> bool:
    return pattern in (None, "", "*") or compile_hive_pattern(pattern).fullmatch(name) is not None
