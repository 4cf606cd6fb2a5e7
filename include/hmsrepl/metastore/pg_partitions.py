"""New partitions and their key values inserted on PostgreSQL in one statement of one shape.

Elsewhere a page of new partitions costs two statements: a multi-row ``INSERT ... VALUES`` of the partitions
(returning their ids) and an ``executemany`` of their key values. On PostgreSQL both are costly on the client
rather than the server: the multi-row insert's text changes with the page's size, and past 50 parameters
psycopg neither caches its parsing nor keeps it prepared, so every table of a bootstrap paid the parse again
(about a millisecond); the ``executemany`` sends one statement per key value in a pipeline. Here the rows
travel as arrays (``unnest``), so the statement is the same text for any number of partitions: parsed once,
prepared once per connection, and one round trip, the key values inserted by a data-modifying CTE that joins
the new ids by name (unique within the table).

The partitions are inserted in their given order (``ORDER BY`` position), so their ids grow in that order as
with the multi-row insert.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text

_INSERT = text(
    """
WITH added AS (
    INSERT INTO partitions (tbl_id, part_name, location, location_key, doc, write_id)
    SELECT :tbl_id, row.part_name, row.location, row.location_key, row.doc, row.write_id
    FROM unnest(
        CAST(:names AS VARCHAR[]), CAST(:locations AS TEXT[]), CAST(:location_keys AS VARCHAR[]),
        CAST(:docs AS TEXT[]), CAST(:write_ids AS BIGINT[])
    ) WITH ORDINALITY AS row(part_name, location, location_key, doc, write_id, position)
    ORDER BY row.position
    RETURNING part_id, part_name
), vals AS (
    INSERT INTO partition_key_vals (part_id, tbl_id, idx, value)
    SELECT added.part_id, :tbl_id, val.idx, val.value
    FROM unnest(
        CAST(:val_names AS VARCHAR[]), CAST(:val_idx AS INTEGER[]), CAST(:vals AS VARCHAR[])
    ) AS val(part_name, idx, value)
    JOIN added ON added.part_name = val.part_name
)
SELECT part_name, part_id FROM added
"""
)


def insert_partitions(
    conn: Connection, tbl_id: int, rows: Sequence[dict[str, Any]], values: Sequence[Sequence[str]]
) -> dict[str, int]:
    """Insert ``rows`` (the partitions table's columns but the id and ``tbl_id``) and each one's key
    ``values`` (in key order, the same order as ``rows``) under table ``tbl_id``; their new ids by name."""
    val_names: list[str] = []
    val_idx: list[int] = []
    vals: list[str] = []
    for row, part_values in zip(rows, values, strict=True):
        for idx, value in enumerate(part_values):
            val_names.append(row["part_name"])
            val_idx.append(idx)
            vals.append(value)
    found = conn.execute(
        _INSERT,
        {
            "tbl_id": tbl_id,
            "names": [row["part_name"] for row in rows],
            "locations": [row["location"] for row in rows],
            "location_keys": [row["location_key"] for row in rows],
            "docs": [row["doc"] for row in rows],
            "write_ids": [row["write_id"] for row in rows],
            "val_names": val_names,
            "val_idx": val_idx,
            "vals": vals,
        },
    )
    return {row.part_name: row.part_id for row in found}
