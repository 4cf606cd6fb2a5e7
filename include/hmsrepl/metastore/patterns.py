"""Hive's name patterns for listing calls: ``*`` is any run of characters, ``|`` separates alternatives.

Matching is case-insensitive and in full, every other character literal. It runs without a regex engine:
a backtracking regex made ``*a*a*a*a*b`` against a 120-character name take seconds per name (and
``get_tables`` tries every table). An alternative is split at its stars into literal pieces; the first must
start the name, the last must end it, and each one between is found left to right (the leftmost place is
always as good as any later one), so a name is matched in about one pass per piece.
"""

from __future__ import annotations

from functools import lru_cache

from hmsrepl.exceptions import InvalidObjectError

MAX_PATTERN_CHARS = 10_000  # names are at most 128 characters; a longer pattern is a mistake or an attack


class _Alternative:
    __slots__ = ("exact", "middle", "prefix", "suffix")

    def __init__(self, text: str) -> None:
        pieces = text.lower().split("*")
        self.exact = len(pieces) == 1
        self.prefix = pieces[0]
        self.suffix = pieces[-1] if not self.exact else ""
        self.middle = [piece for piece in pieces[1:-1] if piece]

    def match(self, name: str) -> bool:
        if self.exact:
            return name == self.prefix
        if len(name) < len(self.prefix) + len(self.suffix) or not name.startswith(self.prefix):
            return False
        end = len(name) - len(self.suffix)
        if not name.endswith(self.suffix):
            return False
        pos = len(self.prefix)
        for piece in self.middle:
            found = name.find(piece, pos, end)
            if found < 0:
                return False
            pos = found + len(piece)
        return True


class HivePattern:
    """A compiled pattern: ``fullmatch(name)`` is true when some alternative matches the whole name."""

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_PATTERN_CHARS:
            raise InvalidObjectError(
                f"name pattern of {len(pattern)} characters is longer than {MAX_PATTERN_CHARS}; "
                "use a shorter pattern ('*' and '|' alternatives)"
            )
        self.pattern = pattern
        self._alternatives = [_Alternative(alt.strip()) for alt in pattern.split("|")]

    def fullmatch(self, name: str) -> bool:
        lowered = name.lower()
        return any(alt.match(lowered) for alt in self._alternatives)


@lru_cache(maxsize=256)
def compile_hive_pattern(pattern: str) -> HivePattern:
    return HivePattern(pattern)


def matches(pattern: str | None, name: str) -> bool:
    return pattern in (None, "", "*") or compile_hive_pattern(pattern).fullmatch(name)
