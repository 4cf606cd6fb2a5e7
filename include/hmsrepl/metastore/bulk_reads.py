"""Reading a database's tables with their partitions in a few statements, for a bootstrap dump.

Read one table at a time, a dump of 1,000 tables sends three statements and a transaction per table; on
PostgreSQL or MariaDB those round trips are most of its time. Here the tables come in one statement and their
partitions in keyset-ordered pages over ``(tbl_id, part_name)`` (the unique index), for groups of tables:
a page never re-reads rows the way an OFFSET would, and a connection is held for one group only.

Each group is read when the caller asks for it, so the objects are as current as a table-by-table read
would give (a dump consolidates later changes from the notification log either way).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

from sqlalchemy import Connection, and_, bindparam, or_, select

from hmsrepl.metastore.catalog.rows import _partition_from_row, _table_from_row
from hmsrepl.metastore.eventlog import EventLog
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.metastore.schema import dbs, partitions, tbls

#: Tables whose partitions one connection reads (page after page) before it is returned to the pool.
TABLES_PER_GROUP = 200
#: Partition rows per statement.
PAGE_ROWS = 5_000

_TABLES = (
    select(tbls.c.tbl_id, tbls.c.tbl_name, tbls.c.doc, tbls.c.write_id)
    .join(dbs, dbs.c.db_id == tbls.c.db_id)
    .where(dbs.c.name == bindparam("db_name"))
    .order_by(tbls.c.tbl_name)
)
_PAGE = (
    select(partitions.c.tbl_id, partitions.c.doc, partitions.c.write_id, partitions.c.part_name)
    .where(
        partitions.c.tbl_id.in_(bindparam("ids", expanding=True)),
        or_(
            partitions.c.tbl_id > bindparam("after_tbl"),
            and_(
                partitions.c.tbl_id == bindparam("after_tbl"),
                partitions.c.part_name > bindparam("after_name"),
            ),
        ),
    )
    .order_by(partitions.c.tbl_id, partitions.c.part_name)
    .limit(bindparam("rows"))
)


def tables_with_partitions(
    events: EventLog, db_name: str, names: Collection[str]
) -> Iterator[tuple[str, tuple[Table, list[Partition]] | None]]:
    """``(name, (table, its partitions by name))`` for each of ``names``, in their order; ``(name, None)`` for
    a table that no longer exists. Partitions come only for partitioned tables."""
    with events.reader() as conn:
        found = {
            row.tbl_name: _table_from_row(row) for row in conn.execute(_TABLES, {"db_name": db_name.lower()})
        }
    ordered = list(dict.fromkeys(name.lower() for name in names))
    for start in range(0, len(ordered), TABLES_PER_GROUP):
        group = ordered[start : start + TABLES_PER_GROUP]
        tables = {name: found[name] for name in group if name in found}
        ids = [table.id for table in tables.values() if table.partition_keys and table.id is not None]
        parts = _partitions_of(events, ids) if ids else {}
        for name in group:
            table = tables.get(name)
            if table is None:
                yield name, None
            else:
                yield name, (table, parts.get(table.id, []) if table.id is not None else [])


def _partitions_of(events: EventLog, ids: list[int]) -> dict[int, list[Partition]]:
    out: dict[int, list[Partition]] = {}
    with events.reader() as conn:
        for tbl_id, part in _pages(conn, ids):
            out.setdefault(tbl_id, []).append(part)
    return out


def _pages(conn: Connection, ids: list[int]) -> Iterator[tuple[int, Partition]]:
    after_tbl, after_name = -1, ""
    while True:
        rows = conn.execute(
            _PAGE, {"ids": ids, "after_tbl": after_tbl, "after_name": after_name, "rows": PAGE_ROWS}
        ).all()
        for row in rows:
            yield row.tbl_id, _partition_from_row(row)
        if len(rows) < PAGE_ROWS:
            return
        after_tbl, after_name = rows[-1].tbl_id, rows[-1].part_name
