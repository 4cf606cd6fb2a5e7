"""Whether a table's partitions all sit at their level: what reduces the sibling check to an equality look-up.

A managed partition may not be at, inside or around another partition of its table (``LocationPolicy``):
checking that against the stored partitions with ranges of lookup keys costs a scan of index ranges for
every batch added, which a bootstrap of a 100,000-partition table pays hundreds of times. Most tables never
need them. A partition at its *level* lies exactly as many directories below its table as the table has
partition keys (its name's segment count: names escape ``/``, ``make_partition_name``): Hive's default place
``<table>/<name>`` is one such place, and so is a replica's version directory ``<table>/<name>.hmsrepl-vN``
(``replication.filecopy``). Two locations at the same depth below the same directory overlap only when they
are equal, so a partition at its level can overlap another one at its level only when their lookup keys are
equal: the check becomes an equality look-up on the indexed key, not a range scan.

"At its level" is decided on the stored lookup keys (``locations.key_of``, canonical and compared exactly): a
partition is *odd* when it has a location whose key is not its table's key followed by as many segments as
its name has, each ending in ``/``. A key of ``LOCATION_KEY_CHARS`` characters may have been cut, so it
counts as odd (the range query then decides). Each table row keeps the number of its odd partitions
(``odd_partitions``; NULL: unknown, every check queries ranges), kept exact in the catalog's one write path:
added, altered and dropped partitions adjust it in the transaction that writes them, holding the table's row
locked, and a change of the table's location (or a rename, which rewrites the partitions) counts it again.
The SQL form of the rule (``_odd_condition``) counts it in the database, for a table or for all of them
(migration ``0014_versiondirs``); the tests compare the two forms on the three backends.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    ScalarSelect,
    and_,
    bindparam,
    func,
    not_,
    or_,
    select,
    update,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from hmsrepl.metastore.locations import LOCATION_KEY_CHARS
from hmsrepl.metastore.schema import partitions, tbls


@dataclass(frozen=True)
class Placement:
    """What a table's row says about its partitions' places: its location's lookup key and how many of its
    partitions are odd (``None``: not known)."""

    table_key: str | None
    odd: int | None

    def is_odd(self, name: str, key: str | None) -> bool:
        """Whether a partition named ``name`` with the location key ``key`` (None: no location) is odd: not
        at its level, ``name.count("/") + 1`` whole segments below its table (module docstring)."""
        return self.count_odd(((name, key),)) == 1

    def count_odd(self, named_keys: Iterable[tuple[str, str | None]]) -> int:
        """How many of the partitions (name, location key) are odd (``is_odd``): one loop, the table's key
        measured once (a bootstrap counts every partition it adds, 100,000 for one table)."""
        table_key = self.table_key
        if table_key is None:  # no key to be at a level below: every located partition is odd
            return sum(1 for _, key in named_keys if key is not None)
        start = len(table_key)
        odd = 0
        for name, key in named_keys:
            # Keys are canonical (no empty segment) and end in "/": as many "/" as segments below the table.
            if key is not None and (
                len(key) >= LOCATION_KEY_CHARS
                or not key.startswith(table_key)
                or key.count("/", start) != name.count("/") + 1
            ):
                odd += 1
        return odd

    @property
    def all_level(self) -> bool:
        """Whether every stored partition is known to be at its level."""
        return self.odd == 0

    def is_level(self, new: Iterable[tuple[str, str | None]]) -> bool:
        """Whether the stored partitions and the ``new`` ones (name, key) are all at their levels: then two
        of them overlap only when their keys are equal."""
        return self.all_level and self.count_odd(new) == 0


class _Chars(FunctionElement[int]):
    """A string's length in characters: ``char_length`` (``length`` counts bytes on MariaDB), ``length`` on
    SQLite, which has no ``char_length``."""

    type = Integer()
    inherit_cache = True


@compiles(_Chars)
def _char_length(element: _Chars, compiler: SQLCompiler, **kw: Any) -> str:
    return f"char_length({compiler.process(element.clauses, **kw)})"


@compiles(_Chars, "sqlite")
def _sqlite_length(element: _Chars, compiler: SQLCompiler, **kw: Any) -> str:
    return f"length({compiler.process(element.clauses, **kw)})"


def _slashes(text: ColumnElement[str]) -> ColumnElement[int]:
    """How many ``/`` ``text`` holds."""
    return _Chars(text) - _Chars(func.replace(text, "/", ""))


def _odd_condition() -> ColumnElement[bool]:
    """The SQL form of ``Placement.is_odd`` for a partition row against its table's row."""
    key, table_key = partitions.c.location_key, tbls.c.location_key
    level = and_(
        _Chars(key) < LOCATION_KEY_CHARS,
        func.substr(key, 1, _Chars(table_key)) == table_key,
        _slashes(key) - _slashes(table_key) == _slashes(partitions.c.part_name) + 1,
    )
    return and_(key.is_not(None), or_(table_key.is_(None), not_(level)))


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
#: Recounts every table: the migrations that introduce the counter and change its rule.
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
