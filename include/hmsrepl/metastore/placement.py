"""Whether a table's partitions all sit at Hive's default place: what lets the sibling check skip its query.

A managed partition may not be at, inside or around another partition of its table (``LocationPolicy``):
checking that against the stored partitions costs indexed look-ups for every batch added, which a bootstrap
of a 100,000-partition table pays hundreds of times. Most tables never need them: a partition at its
default place, ``<table location>/<partition name>``, lies exactly as many directories below the table as
the table has partition keys (names escape ``/``, ``make_partition_name``), so two such partitions overlap
only when their names are equal, which is the same partition.

"At the default place" is decided on the stored lookup keys (``locations.key_of``, canonical and compared
exactly): a partition is *odd* when it has a location whose key is not its table's key followed by its name
and ``/``. A key cut to its fixed length never equals such a longer string, so a long location counts as
odd (the query then decides). Each table row keeps the number of its odd partitions (``odd_partitions``;
NULL: unknown, every check queries), kept exact in the catalog's one write path: added, altered and dropped
partitions adjust it in the transaction that writes them, holding the table's row locked, and a change of the
table's location (or a rename, which rewrites the partitions) counts it again. With no odd partition stored
and none among those added, the stored ones cannot overlap the new ones, and the check needs no query.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Connection, ScalarSelect, and_, bindparam, func, select, update

from hmsrepl.metastore.schema import partitions, tbls


@dataclass(frozen=True)
class Placement:
    """What a table's row says about its partitions' places: its location's lookup key and how many of its
    partitions are odd (``None``: not known)."""

    table_key: str | None
    odd: int | None

    def is_odd(self, name: str, key: str | None) -> bool:
        """Whether a partition named ``name`` with the location key ``key`` (None: no location) is odd."""
        return key is not None and (self.table_key is None or key != f"{self.table_key}{name}/")

    def count_odd(self, named_keys: Iterable[tuple[str, str | None]]) -> int:
        return sum(1 for name, key in named_keys if self.is_odd(name, key))

    @property
    def all_default(self) -> bool:
        """Whether every stored partition is known to be at its default place."""
        return self.odd == 0

    def is_apart(self, new: Iterable[tuple[str, str | None]]) -> bool:
        """Whether no stored partition can overlap the ``new`` ones (name, key): all are at their default
        places, stored and new."""
        return self.all_default and self.count_odd(new) == 0


def _odd_condition() -> ColumnElement[bool]:
    """The SQL form of ``Placement.is_odd`` for a partition row against its table's row."""
    default_key = tbls.c.location_key + partitions.c.part_name + "/"
    return and_(
        partitions.c.location_key.is_not(None),
        (tbls.c.location_key.is_(None)) | (partitions.c.location_key != default_key),
    )


def _odd_count(*where: ColumnElement[bool]) -> ScalarSelect[int]:
    return (
        select(func.count())
        .select_from(partitions)
        .where(partitions.c.tbl_id == tbls.c.tbl_id, _odd_condition(), *where)
        .scalar_subquery()
    )


# Built once, with bound parameters (they run in every write of partitions of a table with odd ones).
_ADJUST = (
    update(tbls)
    .where(tbls.c.tbl_id == bindparam("b_tbl_id"), tbls.c.odd_partitions.is_not(None))
    .values(odd_partitions=tbls.c.odd_partitions + bindparam("b_delta"))
)
_RECOUNT = update(tbls).where(tbls.c.tbl_id == bindparam("b_tbl_id")).values(odd_partitions=_odd_count())
#: Recounts every table: the migration that introduces the counter.
RECOUNT_ALL = update(tbls).values(odd_partitions=_odd_count())


def adjust(conn: Connection, tbl_id: int, delta: int) -> None:
    """Add ``delta`` odd partitions to the table's count (an unknown count stays unknown)."""
    if delta:
        conn.execute(_ADJUST, {"b_tbl_id": tbl_id, "b_delta": delta})


def recount(conn: Connection, tbl_id: int) -> None:
    """Count the table's odd partitions again: after its location changed (one scan of its partitions)."""
    conn.execute(_RECOUNT, {"b_tbl_id": tbl_id})


def forget_odd(conn: Connection, tbl_id: int, names: Sequence[str]) -> None:
    """Take partitions about to be dropped out of the table's count (called before they are deleted)."""
    gone = _odd_count(partitions.c.part_name.in_(names))
    conn.execute(
        update(tbls)
        .where(tbls.c.tbl_id == tbl_id, tbls.c.odd_partitions.is_not(None))
        .values(odd_partitions=tbls.c.odd_partitions - gone)
    )
