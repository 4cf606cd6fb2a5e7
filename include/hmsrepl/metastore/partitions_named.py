"""Statements over one table's partitions picked by name, each built once per backend family.

Every look-up of partitions by name (their ids before a page is added, their documents before a load
changes them, their recorded listings in a bootstrap dump) binds the table as ``:tbl_id`` and the names as
one list parameter ``:names`` (``list_parameter``: one statement text for any count of names).

On PostgreSQL the names are not matched with ``part_name = ANY(:names)``: for a table that grows faster than
its statistics follow (a client adding pages of partitions to a new table; autovacuum analyses a minute
later at best) the planner chose to scan the table's rows, each compared with every name: 1.6 ms a page of
500 names at 5,000 partitions, 700 ms at 22,000, so adding 100,000 partitions grew quadratically. There the
names are unnested and each one probes the unique (table, name) index in a fenced (``OFFSET 0``) lateral
subquery, an equality on both columns of a unique index, which the planner answers with the index at any
size and with any statistics. Other backends keep ``tbl_id = :tbl_id AND part_name IN (...)``, which
SQLite and MariaDB answer from the same index.

A statement is written once, as a function of ``NamedPartitions`` (where the rows come from, their columns,
and the condition that picks them), and ``ByBackend`` holds it compiled for both shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Executable,
    FromClause,
    String,
    bindparam,
    func,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY

from hmsrepl.metastore.list_parameter import in_list_parameter
from hmsrepl.metastore.schema import partitions

S = TypeVar("S", bound=Executable)


class NamedPartitions(NamedTuple):
    """Where a statement reads the partitions named ``:names`` of the table ``:tbl_id`` from."""

    source: FromClause  # what to select from (and join further tables to)
    rows: FromClause  # the partitions' columns, as ``partitions.c`` names them
    picked: ColumnElement[bool]  # the condition that keeps only the named partitions of the table


def _indexed() -> NamedPartitions:
    picked = (partitions.c.tbl_id == bindparam("tbl_id")) & in_list_parameter(partitions.c.part_name, "names")
    return NamedPartitions(partitions, partitions, picked)


def _probed_per_name() -> NamedPartitions:
    wanted = (
        func.unnest(bindparam("names", type_=ARRAY(String()))).table_valued("name").render_derived("wanted")
    )
    probe = (
        select(partitions)
        .where(
            partitions.c.tbl_id == bindparam("tbl_id", type_=BigInteger()),
            partitions.c.part_name == wanted.c.name,
        )
        .offset(0)
        .lateral("p")
    )
    return NamedPartitions(wanted.join(probe, true()), probe, true())


class ByBackend(Generic[S]):
    """One statement over named partitions, built once in each shape; ``for_`` picks a connection's."""

    def __init__(self, build: Callable[[NamedPartitions], S]) -> None:
        self._postgres = build(_probed_per_name())
        self._others = build(_indexed())

    def for_(self, conn: Connection) -> S:
        return self.for_dialect(conn.dialect.name)

    def for_dialect(self, name: str) -> S:
        """The statement as built for the backend ``name`` (a SQLAlchemy dialect's name)."""
        return self._postgres if name == "postgresql" else self._others
