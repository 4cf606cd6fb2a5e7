"""Rows sent to a database server as one JSON document, expanded there into rows: ``json_to_recordset`` on
PostgreSQL (``pg_partitions``, ``pg_append``), ``JSON_TABLE`` on MariaDB (``mariadb_append``,
``mariadb_partitions``).

A statement that must keep one shape for any number of rows (so psycopg keeps it prepared, and MariaDB's
driver escapes one string, not every value) can take them as one array per column or as one JSON document.
Arrays are costly for text full of quotes, which is what the catalog stores (each partition's and each
event's document is JSON): psycopg writes an array parameter's text in Python, one regular-expression
substitution for every quote of every element, which cost a fifth of a PostgreSQL bootstrap's client CPU.
orjson escapes the same text in C, and the server parses it in C.

On PostgreSQL, ``json_to_recordset`` cannot number its rows (``WITH ORDINALITY`` does not take a column
definition list), so rows whose order matters carry their position as a field of their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson


def json_rows(rows: Iterable[dict[str, Any] | list[Any]]) -> str:
    """``rows`` as one JSON array of objects, for ``json_to_recordset(CAST(:param AS JSON)) AS r(...)`` or
    ``JSON_TABLE(:param, '$[*]' COLUMNS (...))``; or of arrays, for ``JSON_TABLE`` with ``PATH '$[0]'``..."""
    return orjson.dumps(list(rows)).decode()
