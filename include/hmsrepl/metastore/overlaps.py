"""Stored locations that break the ownership rule: what ``hmsrepl metastore check`` lists.

The rule: no database's, table's or partition's location is at, inside or around another object's, except an
object's own children in Hive's layout (a table inside its own database's directory, a partition inside its
own table's or its database's). The catalog enforces it for every write since it has existed; rows written
before (or by hand, or by an older version) may still break it, and such an object's drop would recycle
another object's files. This pass finds them without holding every row: tables and partitions come in the
order of their indexed lookup keys (an ancestor's key is a prefix of its descendants' and sorts just before
them), so one stack of the enclosing locations finds every nesting in one read; databases, few, are merged
in. The keys decide (``_nesting``); only keys cut to their fixed length are confirmed on the locations.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import select

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.locations import LOCATION_KEY_CHARS, canonical_or_none, location_key
from hmsrepl.metastore.schema import dbs, partitions, tbls


@dataclass(frozen=True)
class Holder:
    """One object with a location: its kind, display name, and the database / table it belongs to."""

    kind: str  # "database", "table" or "partition"
    name: str
    db_id: int
    tbl_id: int | None
    location: str
    #: Hive's ``default`` database, whose directory is the warehouse root: every other database's directory
    #: lies in it by design.
    is_warehouse: bool = False

    def may_hold(self, inner: Holder) -> bool:
        """Whether ``inner`` inside this object's location is Hive's own layout (never at the same place)."""
        if self.kind == "database":
            return self.is_warehouse or (inner.kind != "database" and inner.db_id == self.db_id)
        return self.kind == "table" and inner.kind == "partition" and inner.tbl_id == self.tbl_id


@dataclass(frozen=True)
class Overlap:
    outer: Holder
    inner: Holder
    at: bool  # the same location, not only inside it

    def describe(self) -> str:
        where = "at" if self.at else "inside"
        return (
            f"{self.inner.kind} {self.inner.name} ('{self.inner.location}') is {where} "
            f"{self.outer.kind} {self.outer.name} ('{self.outer.location}')"
        )


def find_overlaps(store: Metastore) -> Iterator[Overlap]:
    """Every pair of stored objects whose locations nest (or coincide) against the ownership rule."""
    with store.events.reader() as conn:
        db_names: dict[int, str] = dict(conn.execute(select(dbs.c.db_id, dbs.c.name)).tuples().all())
        databases = sorted(_databases(store, db_names))
        tables = conn.execute(
            select(tbls.c.location_key, tbls.c.db_id, tbls.c.tbl_id, tbls.c.tbl_name, tbls.c.location)
            .where(tbls.c.location_key.is_not(None))
            .order_by(tbls.c.location_key)
        )
        table_rows = (
            (key, Holder("table", f"{db_names[db]}.{name}", db, tbl, loc))
            for key, db, tbl, name, loc in tables
        )
        parts = conn.execute(
            select(
                partitions.c.location_key,
                tbls.c.db_id,
                tbls.c.tbl_id,
                tbls.c.tbl_name,
                partitions.c.part_name,
                partitions.c.location,
            )
            .join(tbls, tbls.c.tbl_id == partitions.c.tbl_id)
            .where(partitions.c.location_key.is_not(None))
            .order_by(partitions.c.location_key)
        )
        part_rows = (
            (key, Holder("partition", f"{db_names[db]}.{table}/{part}", db, tbl, loc))
            for key, db, tbl, table, part, loc in parts
        )
        yield from _nestings(heapq.merge(databases, table_rows, part_rows, key=lambda row: row[0]))


def _databases(store: Metastore, names: dict[int, str]) -> Iterator[tuple[str, Holder]]:
    for db_id, name in names.items():
        location = store.catalog.get_database(name).location_uri
        key = location_key(location)
        if key is not None and location:
            # Hive's default database lives at the warehouse root, whatever this process's settings say
            yield key, Holder("database", name, db_id, None, location, is_warehouse=name.lower() == "default")


def _nestings(rows: Iterator[tuple[str, Holder]]) -> Iterator[Overlap]:
    """Overlaps in a stream sorted by lookup key: the stack holds the locations enclosing the current one."""
    enclosing: list[tuple[str, Holder]] = []
    for key, holder in rows:
        while enclosing and not key.startswith(enclosing[-1][0]):
            enclosing.pop()
        for outer_key, outer in enclosing:
            nesting = _nesting(key, holder, outer_key, outer)
            if nesting is not None and (nesting.at or not outer.may_hold(holder)):
                yield nesting
        enclosing.append((key, holder))


def _nesting(key: str, inner: Holder, outer_key: str, outer: Holder) -> Overlap | None:
    """``inner`` in ``outer`` (given that ``outer_key`` starts ``key``), or None.

    A whole key is the canonical location with one trailing ``/``, so its prefix is the location's nesting
    and its equality the same place, as the catalog decided them when it stored the rows; only a key cut at
    ``LOCATION_KEY_CHARS`` needs the locations themselves (read from the file system again).
    """
    if len(key) < LOCATION_KEY_CHARS and len(outer_key) < LOCATION_KEY_CHARS:
        return Overlap(outer, inner, at=key == outer_key)
    a, b = canonical_or_none(inner.location), canonical_or_none(outer.location)
    if a is None or b is None or not a.is_within(b):
        return None
    return Overlap(outer, inner, at=a == b)
