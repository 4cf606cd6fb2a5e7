"""Replication policies: ``db``, ``db.['include', ...]``, ``db.['include', ...].['exclude', ...]``, ``db.[]``.

Table names match case-insensitively and in full (``'T[0-9]+'`` matches ``t3`` but not ``t3x``); an empty
include list (``db.[]``) replicates the database's functions only. The textual form round-trips, so a dump
records the policy it was made with.

Patterns are regular expressions from an operator (or from a dump), run against every table name of the
database, so a catastrophically backtracking one (``(a+)+``) could hang a dump. A pattern with a variable
repeat inside a variable repeat, or longer than ``MAX_PATTERN_CHARS``, is refused when the policy is built,
before a dump starts or records anything; every match also runs with a time limit (the ``regex`` engine's
timeout), which stops what the static check cannot see (overlapping alternatives such as ``(a|aa)+``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from re import _constants as sre  # the parse tree of ``re`` is what tells nested repeats apart
from re import _parser as sre_parse
from typing import Any

import regex

from hmsrepl.exceptions import HmsReplError

MAX_PATTERN_CHARS = 1_000
MATCH_TIMEOUT_SECONDS = 1.0
_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT)


class PolicyMatchTimeoutError(HmsReplError):
    """A policy pattern took too long on a table name (catastrophic backtracking)."""


@dataclass(frozen=True)
class ReplicationPolicy:
    db_name: str
    include: tuple[str, ...] | None = None  # None: every table
    exclude: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "db_name", self.db_name.lower())
        for pattern in (*(self.include or ()), *self.exclude):
            check_pattern(self.db_name, pattern)

    @cached_property
    def _include(self) -> list[Any] | None:
        return None if self.include is None else [_compile(p) for p in self.include]

    @cached_property
    def _exclude(self) -> list[Any]:
        return [_compile(p) for p in self.exclude]

    def includes_table(self, table_name: str) -> bool:
        name = table_name.lower()
        if self._include is not None and not any(self._fullmatch(p, name) for p in self._include):
            return False
        return not any(self._fullmatch(p, name) for p in self._exclude)

    def _fullmatch(self, pattern: Any, name: str) -> bool:
        try:
            return pattern.fullmatch(name, timeout=MATCH_TIMEOUT_SECONDS) is not None
        except TimeoutError:
            raise PolicyMatchTimeoutError(
                f"policy for '{self.db_name}': pattern '{pattern.pattern}' took over {MATCH_TIMEOUT_SECONDS:g} s "
                f"on table name '{name}' (catastrophic backtracking); rewrite it without overlapping repeats"
            ) from None

    @property
    def functions_only(self) -> bool:
        return self.include == ()

    def to_text(self) -> str:
        if self.include is None and not self.exclude:
            return self.db_name
        include = ", ".join(quote_pattern(p) for p in (self.include if self.include is not None else (".*",)))
        text = f"{self.db_name}.[{include}]"
        if self.exclude:
            text += ".[" + ", ".join(quote_pattern(p) for p in self.exclude) + "]"
        return text


def check_pattern(db_name: str, pattern: str) -> None:
    """Refuse (ValueError, one line naming the pattern) what is not a regex, too long, or backtracks badly."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(
            f"policy for '{db_name}': a pattern of {len(pattern)} characters is longer than {MAX_PATTERN_CHARS}; "
            "use shorter patterns"
        )
    try:
        parsed = sre_parse.parse(pattern)
    except re.error as exc:
        raise ValueError(f"policy for '{db_name}': '{pattern}' is not a valid regex: {exc}") from exc
    if _nested_repeat(list(parsed), inside=False):
        raise ValueError(
            f"policy for '{db_name}': '{pattern}' repeats a repeat (like '(a+)+'), which can take exponential "
            "time on a table name; write it with one repeat (e.g. 'a+' instead of '(a+)+')"
        )


def _nested_repeat(items: list[Any], inside: bool) -> bool:
    """True if a repeat of variable count (``+``, ``*``, ``{1,5}``) holds another one, at any depth."""
    for op, av in items:
        if op in _REPEATS:
            low, high, body = av
            variable = high != low and high > 1
            if variable and inside:
                return True
            if _nested_repeat(list(body), inside or variable):
                return True
        elif op is sre.POSSESSIVE_REPEAT or op is sre.ATOMIC_GROUP:
            continue  # no backtracking into these
        elif op is sre.SUBPATTERN:
            if _nested_repeat(list(av[3]), inside):
                return True
        elif op is sre.BRANCH:
            if any(_nested_repeat(list(branch), inside) for branch in av[1]):
                return True
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            if _nested_repeat(list(av[1]), inside):
                return True
        elif op is sre.GROUPREF_EXISTS and any(
            _nested_repeat(list(branch), inside) for branch in av[1:] if branch is not None
        ):
            return True
    return False


def _compile(pattern: str) -> Any:
    """The pattern for the ``regex`` engine (``re``'s syntax and meaning), which can stop a match in time."""
    return regex.compile(pattern, regex.IGNORECASE | regex.VERSION0)


def quote_pattern(pattern: str) -> str:
    """A regex as a quoted string of the REPL grammar (backslashes and quotes escaped)."""
    return "'" + pattern.replace("\\", "\\\\").replace("'", "\\'") + "'"
