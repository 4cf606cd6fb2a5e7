"""New partitions and their key values inserted on PostgreSQL in one statement of one shape.

Elsewhere a page of new partitions costs two statements: a multi-row ``INSERT ... VALUES`` of the partitions
(returning their ids) and an ``executemany`` of their key values. On PostgreSQL both are costly on the client
rather than the server: the multi-row insert's text changes with the page's size, and past 50 parameters
psycopg neither caches its parsing nor keeps it prepared, so every table of a bootstrap paid the parse again
(about a millisecond); the ``executemany`` sends one statement per key value in a pipeline. Here the rows
travel as one JSON document for the partitions and one for their key values (``json_rows``), so the
statement is the same text for any number of partitions: parsed once, prepared once per connection, and one
round trip, the key values inserted by a data-modifying CTE that joins the new ids by name (unique within
the table).

The partitions are inserted in their given order (``ORDER BY`` their position in the document), so their
ids grow in that order as with the multi-row insert.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text

from hmsrepl.metastore.json_rows import json_rows

_INSERT = text(
    """
WITH added AS (
    INSERT INTO partitions (tbl_id, part_name, location, location_key, doc, write_id)
    SELECT :tbl_id, row.n, row.l, row.k, row.d, row.w
    FROM json_to_recordset(CAST(:rows AS JSON))
        AS row(i INTEGER, n VARCHAR, l TEXT, k VARCHAR, d TEXT, w BIGINT)
    ORDER BY row.i
    RETURNING part_id, part_name
), vals AS (
    INSERT INTO partition_key_vals (part_id, tbl_id, idx, value)
    SELECT added.part_id, :tbl_id, val.i, val.v
    FROM json_to_recordset(CAST(:vals AS JSON)) AS val(n VARCHAR, i INTEGER, v VARCHAR)
    JOIN added ON added.part_name = val.n
)
SELECT part_name, part_id FROM added
"""
)


def insert_partitions(
    conn: Connection, tbl_id: int, rows: Sequence[dict[str, Any]], values: Sequence[Sequence[str]]
) -> dict[str, int]:
    """Insert ``rows`` (the partitions table's columns but the id and ``tbl_id``) and each one's key
    ``values`` (in key order, the same order as ``rows``) under table ``tbl_id``; their new ids by name."""
    pages = [
        {
            "i": i,
            "n": row["part_name"],
            "l": row["location"],
            "k": row["location_key"],
            "d": row["doc"],
            "w": row["write_id"],
        }
        for i, row in enumerate(rows)
    ]
    vals = [
        {"n": row["part_name"], "i": idx, "v": value}
        for row, part_values in zip(rows, values, strict=True)
        for idx, value in enumerate(part_values)
    ]
    found = conn.execute(_INSERT, {"tbl_id": tbl_id, "rows": json_rows(pages), "vals": json_rows(vals)})
    return {row.part_name: row.part_id for row in found}
