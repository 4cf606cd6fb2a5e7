"""Hive's basic statistics parameters (numFiles, totalSize, numRows) as a client write leaves them.

Hive's metastore gathers ``numFiles`` and ``totalSize`` itself when a client creates or alters a table or
partition (``hive.stats.autogather``), by listing its location; readers (Trino, Impala, Hive) plan with them
and with ``numRows``. This metastore records every write's files already (``metastore.listings``), so the
two are the recorded listing's file count and byte total, hidden files left out as Hive leaves them out.
The listing's summary keeps both up to date from each write's diff (the files it added, replaced or
removed, an overwrite's excluded files included), so reading them costs one row, not a count of the files.
Where a client's INSERT event records a table's files after its alter (Hive's loadTable), the counts
follow in the INSERT's own transaction and its event's table snapshot (``DataCatalog.insert``): no
alter is logged for them, and a replica's load of the INSERT puts that snapshot.

``numRows`` is only known to whoever counted the rows. A client write keeps the count it sends, except:

- a new partition with files but Hive 2/3's placeholder count (``numRows`` and ``rawDataSize`` of ``0``,
  which Spark's Hive client sends) gets ``-1``: unknown, where ``0`` would tell readers it is empty;
- an alter after which the recorded files differ from those ``numFiles``/``totalSize`` described, and whose
  count is the one the object had, gets ``-1``: the count described other files (Hive clears the
  ``BASIC_STATS`` mark then and leaves the number; Trino reads the number and ignores the mark).

Either way ``BASIC_STATS`` leaves ``COLUMN_STATS_ACCURATE``. Trino and Impala read a negative count as
unknown. Views, Iceberg tables (their counts live in Iceberg's metadata) and transactional tables (whose
counts Hive keeps per write id) are left as their writers leave them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from sqlalchemy import Connection

from hmsrepl.metastore import listings
from hmsrepl.metastore.listings import ObjectKey
from hmsrepl.metastore.model import Table, TableType

ACCURATE = "COLUMN_STATS_ACCURATE"
NUM_FILES = "numFiles"
TOTAL_SIZE = "totalSize"
NUM_ROWS = "numRows"
RAW_DATA_SIZE = "rawDataSize"
UNKNOWN = "-1"


def gathers(table: Table) -> bool:
    """Whether writes of this table (and its partitions) get gathered basic statistics."""
    return (
        table.table_type != TableType.VIRTUAL_VIEW
        and table.parameters.get("table_type", "").upper() != "ICEBERG"
        and not table.is_transactional
    )


def recorded_totals(conn: Connection, key: ObjectKey) -> tuple[int, int]:
    """The object's recorded file count and byte total, as its listing's summary keeps them per diff
    (``listings.totals``): an append into a 100,000-file partition reads one row, not its files."""
    return listings.totals(conn, key)


def gather(
    conn: Connection,
    key: ObjectKey,
    table: Table,
    before: Mapping[str, str] | None,
    params: Mapping[str, str],
) -> dict[str, str] | None:
    """The parameters a client write of the object leaves (``gathered``), or None where they stay as sent
    (an object of a table whose counts are not gathered, or nothing to change)."""
    if not gathers(table):
        return None
    out = gathered(before, params, *recorded_totals(conn, key))
    return out if out != params else None


def gathered(
    before: Mapping[str, str] | None, after: Mapping[str, str], files: int, size: int
) -> dict[str, str]:
    """``after`` with the recorded file count and size, and a row count that says no more than is known
    (``before``: the object's parameters before an alter; None for a new object)."""
    out = dict(after)
    out[NUM_FILES], out[TOTAL_SIZE] = str(files), str(size)
    if before is None:
        return without_placeholder_rows(out)
    described = (before.get(NUM_FILES), before.get(TOTAL_SIZE))
    rows = out.get(NUM_ROWS)
    moved = described[0] is not None and described != (out[NUM_FILES], out[TOTAL_SIZE])
    if moved and rows is not None and rows != UNKNOWN and rows == before.get(NUM_ROWS):
        return _unknown_rows(out)
    return out


def without_placeholder_rows(params: Mapping[str, str]) -> dict[str, str]:
    """Parameters with Hive 2/3's placeholder row count (``0`` beside files) made unknown."""
    out = dict(params)
    placeholder = out.get(NUM_ROWS) == "0" and out.get(RAW_DATA_SIZE, "0") == "0"
    if placeholder and _positive(out.get(NUM_FILES)):
        return _unknown_rows(out)
    return out


def _unknown_rows(params: dict[str, str]) -> dict[str, str]:
    params[NUM_ROWS] = UNKNOWN
    if RAW_DATA_SIZE in params:
        params[RAW_DATA_SIZE] = UNKNOWN
    return mark_accurate(params, False)


def _positive(value: str | None) -> bool:
    try:
        return value is not None and int(value) > 0
    except ValueError:
        return False


def mark_accurate(params: dict[str, str], basic: bool) -> dict[str, str]:
    """Set or clear BASIC_STATS in COLUMN_STATS_ACCURATE, keeping its column marks."""
    try:
        state = json.loads(params.get(ACCURATE) or "{}")
    except ValueError:
        state = {}
    if not isinstance(state, dict):
        state = {}
    if basic:
        state["BASIC_STATS"] = "true"
    else:
        state.pop("BASIC_STATS", None)
    params[ACCURATE] = json.dumps(state, separators=(",", ":"))
    return params
