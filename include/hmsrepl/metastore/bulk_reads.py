"""Reading a database's tables with their partitions in a few statements, for a bootstrap dump.

Read one table at a time, a dump of 1,000 tables sends three statements and a transaction per table; on
PostgreSQL or MariaDB those round trips are most of its time. Here the tables come in one statement and their
partitions in keyset-ordered pages over ``(tbl_id, part_name)`` (the unique index), for groups of tables:
a page never re-reads rows the way an OFFSET would, and a connection is held for one group only.

Each group is read when the caller asks for it, so the objects are as current as a table-by-table read
would give (a dump consolidates later changes from the notification log either way).

One big table's partitions can also be cut into keyset ranges of names (``partition_ranges``) and each range
read on its own (``range_pages``): several dump processes then share one table.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

from sqlalchemy import Row, and_, bindparam, or_, select

from hmsrepl.metastore.catalog.rows import _partition_from_row, _table_from_row
from hmsrepl.metastore.eventlog import EventLog
from hmsrepl.metastore.list_parameter import in_list_parameter
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
_NAMED_TABLES = _TABLES.where(in_list_parameter(tbls.c.tbl_name, "names"))
#: At most this many names are read by name (one parameter each on SQLite and MariaDB); more, with all tables.
NAMED_TABLES = 500
_PAGE = (
    select(partitions.c.tbl_id, partitions.c.doc, partitions.c.write_id, partitions.c.part_name)
    .where(
        in_list_parameter(partitions.c.tbl_id, "ids"),
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


_RANGE_BOUND = (
    select(partitions.c.part_name)
    .where(partitions.c.tbl_id == bindparam("tbl_id"), partitions.c.part_name > bindparam("after"))
    .order_by(partitions.c.part_name)
    .offset(bindparam("skip"))
    .limit(1)
)
_TAIL_PAGE = (
    select(partitions.c.doc, partitions.c.write_id, partitions.c.part_name)
    .where(partitions.c.tbl_id == bindparam("tbl_id"), partitions.c.part_name > bindparam("after"))
    .order_by(partitions.c.part_name)
    .limit(bindparam("rows"))
)
_RANGE_PAGE = _TAIL_PAGE.where(partitions.c.part_name <= bindparam("upto"))

#: A run of a table's partitions by name: those after the first name ("" for the first run) up to and
#: including the second (None: every one after the first).
NameRange = tuple[str, str | None]


def partition_ranges(events: EventLog, tbl_id: int, size: int) -> list[NameRange]:
    """The table's partitions cut into runs of ``size`` by name, in name order, the last one open-ended (it
    also takes partitions added after the cut). One indexed statement per run, each skipping ``size`` index
    entries from the previous bound: the names themselves are never all read."""
    ranges: list[NameRange] = []
    after = ""
    with events.reader() as conn:
        while True:
            bound = conn.execute(_RANGE_BOUND, {"tbl_id": tbl_id, "after": after, "skip": size - 1}).scalar()
            if bound is None:
                ranges.append((after, None))
                return ranges
            ranges.append((after, bound))
            after = bound


def range_pages(events: EventLog, tbl_id: int, names: NameRange) -> Iterator[list[Partition]]:
    """The table's partitions in the run ``names``, a page of ``PAGE_ROWS`` at a time in name order (a
    connection per page, none held while the caller works on one)."""
    after, upto = names
    statement, bound = (_TAIL_PAGE, {}) if upto is None else (_RANGE_PAGE, {"upto": upto})
    while True:
        params = {"tbl_id": tbl_id, "after": after, "rows": PAGE_ROWS, **bound}
        with events.reader() as conn:
            rows = conn.execute(statement, params).all()
        if rows:
            yield [_partition_from_row(row) for row in rows]
        if len(rows) < PAGE_ROWS:
            return
        after = rows[-1].part_name


def tables_with_partitions(
    events: EventLog, db_name: str, names: Collection[str]
) -> Iterator[tuple[str, tuple[Table, list[Partition]] | None]]:
    """``(name, (table, its partitions by name))`` for each of ``names``, in their order; ``(name, None)`` for
    a table that no longer exists. Partitions come only for partitioned tables."""
    found = list(table_pages(events, db_name, names))
    order = {name: index for index, name in enumerate(dict.fromkeys(name.lower() for name in names))}
    for name, table, pages in sorted(found, key=lambda item: order[item[0]]):
        yield name, None if table is None else (table, [part for page in pages for part in page])


def table_pages(
    events: EventLog, db_name: str, names: Collection[str]
) -> Iterator[tuple[str, Table | None, Iterator[list[Partition]]]]:
    """``(name, table, its partitions in pages)`` for each of ``names`` (``table`` None: it no longer exists),
    a group's tables in id order, so a bootstrap dump holds one page of partitions, never a table's.

    A group's partitions are read by one keyset scan, a page per statement and a connection per page (no
    connection is held while the caller works on a page). Consume a table's pages before the next table's:
    pages left unread are skipped (a partitioned table's pages come only from the scan of its group).
    """
    ordered = list(dict.fromkeys(name.lower() for name in names))
    # A few of a database's tables (a dump process's slice) are read by name, not with all of their database.
    by_name = len(ordered) <= NAMED_TABLES
    statement, params = (_NAMED_TABLES, {"names": ordered}) if by_name else (_TABLES, {})
    with events.reader() as conn:
        found = {
            row.tbl_name: _table_from_row(row)
            for row in conn.execute(statement, {"db_name": db_name.lower(), **params})
        }
    for start in range(0, len(ordered), TABLES_PER_GROUP):
        group = ordered[start : start + TABLES_PER_GROUP]
        for name in group:
            if name not in found:
                yield name, None, iter(())
        tables = sorted((found[name] for name in group if name in found), key=lambda t: t.id or 0)
        ids = [table.id for table in tables if table.partition_keys and table.id is not None]
        scan = _GroupScan(events, ids)
        for table in tables:
            if table.partition_keys and table.id is not None:
                yield table.table_name, table, scan.pages_of(table.id)
            else:
                yield table.table_name, table, iter(())


class _GroupScan:
    """One keyset scan over a group of tables' partitions, handed out table by table in id order."""

    def __init__(self, events: EventLog, ids: list[int]) -> None:
        self.events, self.ids = events, ids
        self.after: tuple[int, str] = (-1, "")
        self.rows: list[Row[Any]] = []  # the fetched page's rows (ordered by table id, then name)
        self.next = 0  # the first of ``rows`` not handed out yet
        self.done = not ids

    def _fetch(self) -> None:
        with self.events.reader() as conn:
            params = {
                "ids": self.ids,
                "after_tbl": self.after[0],
                "after_name": self.after[1],
                "rows": PAGE_ROWS,
            }
            rows = conn.execute(_PAGE, params).all()
        self.rows, self.next = list(rows), 0
        self.done = len(rows) < PAGE_ROWS
        if rows:
            self.after = (rows[-1].tbl_id, rows[-1].part_name)

    def pages_of(self, tbl_id: int) -> Iterator[list[Partition]]:
        """The table's partitions, a page at a time. The page's rows are walked by position (the table's
        rows are a run in them): filtering or slicing the page for each table cost a page-sized pass per
        table, which a group of many small tables paid hundreds of times per page."""
        while True:
            rows = self.rows
            if self.next >= len(rows):
                if self.done:
                    return
                self._fetch()
                continue
            start = self.next
            while start < len(rows) and rows[start].tbl_id < tbl_id:  # tables the caller did not read
                start += 1
            end = start
            while end < len(rows) and rows[end].tbl_id == tbl_id:
                end += 1
            self.next = end
            if start == end:
                if end < len(rows):  # the scan is past this table
                    return
                continue
            yield [_partition_from_row(row) for row in rows[start:end]]
            if end < len(rows):  # the next table's rows follow: this table's are all out
                return
