"""Which MariaDB server a connection speaks to, for the statements only some of its versions read."""

from __future__ import annotations

from typing import Any

#: The first MariaDB version that reads ``JSON_TABLE`` and ``LOCK IN SHARE MODE SKIP LOCKED``.
JSON_TABLE_SINCE = (10, 6)


def mariadb_at_least(dialect: Any, version: tuple[int, int]) -> bool:
    """True when ``dialect`` speaks to MariaDB ``version`` or later; MySQL, whose syntax differs in the places
    this is asked for, and every other database answer False."""
    found = getattr(dialect, "server_version_info", None) or (0,)
    return bool(getattr(dialect, "is_mariadb", False)) and tuple(found[:2]) >= version
