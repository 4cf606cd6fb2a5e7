"""The databases and tables around many new locations, read on PostgreSQL with key ranges bound as arrays.

Elsewhere the read is one statement per 64 locations, each location a key range of its own in an ``OR``
(``location_policy._DATABASES_AND_TABLES_AROUND``). PostgreSQL plans that statement again at each run (its
parameters change what it reads), and a plan of 64 ranges over three relations took 2.6 ms, as long as the
read itself; a load creating tables 50 at a time paid it for every 50. Here the ranges travel as two arrays
(their starts and their ends) and the tables are joined to them: the statement text is the same for any
number of locations, so it stays prepared, plans in a fraction of that, and reads each range through the
location key's index.

The keys are compared in the ``C`` collation, the column's own (code point order, as ``key_range_end``
computes the ends).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text

_AROUND = text(
    """
SELECT 'database' AS kind, dbs.name, dbs.doc AS stored, dbs.name AS db_name
FROM dbs
WHERE dbs.location_key = ANY(CAST(:above AS VARCHAR[]) COLLATE "C")
    OR dbs.managed_location_key = ANY(CAST(:above AS VARCHAR[]) COLLATE "C")
    OR EXISTS (
        SELECT 1 FROM unnest(CAST(:froms AS VARCHAR[]), CAST(:tos AS VARCHAR[])) AS r(f, t)
        WHERE (dbs.location_key >= r.f COLLATE "C" AND dbs.location_key < r.t COLLATE "C")
            OR (dbs.managed_location_key >= r.f COLLATE "C" AND dbs.managed_location_key < r.t COLLATE "C")
    )
UNION ALL
SELECT 'table', tbls.tbl_name, tbls.location, dbs.name
FROM tbls JOIN dbs ON dbs.db_id = tbls.db_id
WHERE tbls.location_key = ANY(CAST(:above AS VARCHAR[]) COLLATE "C")
UNION ALL
SELECT 'table', tbls.tbl_name, tbls.location, dbs.name
FROM unnest(CAST(:froms AS VARCHAR[]), CAST(:tos AS VARCHAR[])) AS r(f, t)
JOIN tbls ON tbls.location_key >= r.f COLLATE "C" AND tbls.location_key < r.t COLLATE "C"
JOIN dbs ON dbs.db_id = tbls.db_id
"""
)


def databases_and_tables_around(
    conn: Connection, ranges: Sequence[tuple[str, str]], above: Sequence[str]
) -> Sequence[Any]:
    """Rows (kind, name, stored, db_name) of the databases and tables whose location key lies in one of
    ``ranges`` (start included, end excluded) or equals one of ``above``; a table in two ranges is read twice
    (the caller keeps each once)."""
    return conn.execute(
        _AROUND,
        {"froms": [start for start, _ in ranges], "tos": [end for _, end in ranges], "above": list(above)},
    ).all()
