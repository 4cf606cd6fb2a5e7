"""New partitions and their key values inserted on MariaDB in one request of one shape.

Elsewhere a page of new partitions costs two statements: a multi-row ``INSERT ... RETURNING`` of the
partitions and an ``executemany`` of their key values. On MariaDB both are costly on the client: mysqlclient
writes every parameter into the statement's text in Python (a call per value, ten per partition and more),
which a bootstrap paid for each of its partitions. Here the page travels as one JSON document (``json_rows``),
each partition carrying its key values as a nested array, expanded by the server (``JSON_TABLE``): the driver
escapes one string, and the insert of the partitions, the insert of their key values and the read of the new
ids run in one anonymous compound statement (``BEGIN NOT ATOMIC ... END``, as in ``mariadb_append``), one
round trip. Its last ``SELECT`` answers the ids, so an error in any step is raised before an answer is read.

The key values join their new partition by name (unique within its table), the way ``pg_partitions`` joins
them. A name compares as its stored column's collation says, and the document's name column must be declared
with that collation: with another one the server either refuses the comparison (two implicit collations) or
applies the document's, which can match two stored names or none (a case-insensitive column holding ``p=A``
and a binary document asking for ``p=a``) and cannot use the ``(tbl_id, part_name)`` index. The collation is
the database's, chosen where the metastore's schema was created, so it is read from ``information_schema``
once per engine, never assumed.

The document's text columns are ``LONGTEXT`` whatever the column they fill: a value too long for
``JSON_TABLE``'s own column would become NULL there, while the insert into the real column refuses it as any
other insert does. The partitions are inserted in their given order (``ORDER BY`` their position), so their
ids grow in that order as with the multi-row insert.
"""

from __future__ import annotations

import functools
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine, TextClause, text

from hmsrepl.metastore.json_rows import json_rows

# A character set or collation name as information_schema spells it; anything else is not written into SQL.
_SQL_NAME = re.compile(r"[A-Za-z0-9_]+")

_NAME_COLUMN = text(
    """
SELECT character_set_name, collation_name FROM information_schema.columns
WHERE table_schema = DATABASE() AND table_name = 'partitions' AND column_name = 'part_name'
"""
)


class Collation(NamedTuple):
    """A text column's character set and collation, as the server names them."""

    charset: str
    collation: str


_known: weakref.WeakKeyDictionary[Engine, Collation] = weakref.WeakKeyDictionary()
_known_lock = threading.Lock()


def name_collation(conn: Connection) -> Collation:
    """The character set and collation of the stored partition names, read once per engine."""
    with _known_lock:
        known = _known.get(conn.engine)
    if known is not None:
        return known
    row = conn.execute(_NAME_COLUMN).first()
    if row is None or not all(isinstance(v, str) and _SQL_NAME.fullmatch(v) for v in row):
        raise RuntimeError(
            f"the metastore's partitions.part_name column has no readable collation ({row}); "
            "check that the metastore schema is created in this database"
        )
    found = Collation(row[0], row[1])
    with _known_lock:
        _known[conn.engine] = found
    return found


@functools.lru_cache(maxsize=8)
def _statement(names: Collation) -> TextClause:
    """The insert for stored names in collation ``names``: the same text for any number of partitions."""
    name = f"LONGTEXT CHARACTER SET {names.charset} COLLATE {names.collation} PATH '$.n'"
    utf8 = "LONGTEXT CHARACTER SET utf8mb4"
    return text(
        f"""
BEGIN NOT ATOMIC
    DECLARE page LONGTEXT DEFAULT :rows;
    INSERT INTO partitions (tbl_id, part_name, location, location_key, doc, write_id)
    SELECT :tbl_id, part.n, part.l, part.k, part.d, part.w
    FROM JSON_TABLE(page, '$[*]' COLUMNS (
        i FOR ORDINALITY,
        n {name},
        l {utf8} PATH '$.l',
        k {utf8} PATH '$.k',
        d {utf8} PATH '$.d',
        w BIGINT PATH '$.w'
    )) AS part
    ORDER BY part.i;
    INSERT INTO partition_key_vals (part_id, tbl_id, idx, value)
    SELECT added.part_id, :tbl_id, val.i - 1, val.v
    FROM JSON_TABLE(page, '$[*]' COLUMNS (
        n {name},
        NESTED PATH '$.v[*]' COLUMNS (i FOR ORDINALITY, v {utf8} PATH '$')
    )) AS val
    JOIN partitions AS added ON added.tbl_id = :tbl_id AND added.part_name = val.n;
    SELECT added.part_name, added.part_id
    FROM JSON_TABLE(page, '$[*]' COLUMNS (n {name})) AS part
    JOIN partitions AS added ON added.tbl_id = :tbl_id AND added.part_name = part.n;
END
"""
    )


def insert_partitions(
    conn: Connection, tbl_id: int, rows: Sequence[dict[str, Any]], values: Sequence[Sequence[str]]
) -> dict[str, int]:
    """Insert ``rows`` (the partitions table's columns but the id and ``tbl_id``) and each one's key
    ``values`` (in key order, the same order as ``rows``) under table ``tbl_id``; their new ids by name:
    ``pg_partitions.insert_partitions``'s contract, on MariaDB."""
    page = json_rows(
        {
            "n": row["part_name"],
            "l": row["location"],
            "k": row["location_key"],
            "d": row["doc"],
            "w": row["write_id"],
            "v": list(part_values),
        }
        for row, part_values in zip(rows, values, strict=True)
    )
    found = conn.execute(_statement(name_collation(conn)), {"tbl_id": tbl_id, "rows": page})
    return {row.part_name: row.part_id for row in found}
