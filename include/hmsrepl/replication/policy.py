"""Replication policies: ``db``, ``db.['include', ...]``, ``db.['include', ...].['exclude', ...]``, ``db.[]``.

Table names match case-insensitively and in full (``'T[0-9]+'`` matches ``t3`` but not ``t3x``); an empty
include list (``db.[]``) replicates the database's functions only. The textual form round-trips, so a dump
records the policy it was made with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property


@dataclass(frozen=True)
class ReplicationPolicy:
    db_name: str
    include: tuple[str, ...] | None = None  # None: every table
    exclude: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "db_name", self.db_name.lower())
        for pattern in (*(self.include or ()), *self.exclude):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"policy for '{self.db_name}': '{pattern}' is not a valid regex: {exc}"
                ) from exc

    @cached_property
    def _include(self) -> list[re.Pattern[str]] | None:
        return None if self.include is None else [re.compile(p, re.IGNORECASE) for p in self.include]

    @cached_property
    def _exclude(self) -> list[re.Pattern[str]]:
        return [re.compile(p, re.IGNORECASE) for p in self.exclude]

    def includes_table(self, table_name: str) -> bool:
        name = table_name.lower()
        if self._include is not None and not any(p.fullmatch(name) for p in self._include):
            return False
        return not any(p.fullmatch(name) for p in self._exclude)

    @property
    def functions_only(self) -> bool:
        return self.include == ()

    def to_text(self) -> str:
        if self.include is None and not self.exclude:
            return self.db_name
        include = ", ".join(_quote(p) for p in (self.include if self.include is not None else (".*",)))
        text = f"{self.db_name}.[{include}]"
        if self.exclude:
            text += ".[" + ", ".join(_quote(p) for p in self.exclude) + "]"
        return text


def _quote(pattern: str) -> str:
    return "'" + pattern.replace("\\", "\\\\").replace("'", "\\'") + "'"
