"""The rows of a query folded into one JSON value, so that a statement which must return something else (an
``INSERT ... RETURNING``) can carry a read's rows along.

A single ``create_table`` inserts its row and reads what lies around its location in one round trip: the
read rides in the insert's ``RETURNING`` as a scalar subquery, which must be one value. Each backend spells
the aggregate differently (``json_agg``, ``JSON_ARRAYAGG``, ``json_group_array``), so the choice is made when
the statement is compiled for its backend, as ``list_parameter`` does for lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, CompoundSelect, ScalarSelect, Select, Text, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.visitors import InternalTraversal

from hmsrepl.formats.json_text import loads


class JsonRows(ColumnElement[str]):
    """An aggregate: the rows of ``columns`` as a JSON array of arrays (NULL or ``[]`` for no row)."""

    type = Text()
    inherit_cache = True
    _traverse_internals = [("columns", InternalTraversal.dp_clauseelement_list)]

    def __init__(self, columns: Sequence[ColumnElement[Any]]) -> None:
        self.columns = list(columns)


def json_rows_of(query: CompoundSelect[Any] | Select[Any]) -> ScalarSelect[str]:
    """A scalar subquery: every row of ``query`` as one JSON text (``decode_rows`` reads it back)."""
    rows = query.subquery()
    return select(JsonRows(list(rows.c))).select_from(rows).scalar_subquery()


def decode_rows(value: str | None) -> list[list[Any]]:
    """The rows of a ``JsonRows`` value, each a list in the query's column order."""
    if value is None:
        return []
    rows: list[list[Any]] = loads(value)
    return rows


def _render(compiler: SQLCompiler, element: JsonRows, aggregate: str, row: str, **kw: Any) -> str:
    columns = ", ".join(compiler.process(column, **kw) for column in element.columns)
    return f"{aggregate}({row}({columns}))"


@compiles(JsonRows)
def _sqlite(element: JsonRows, compiler: SQLCompiler, **kw: Any) -> str:
    return _render(compiler, element, "json_group_array", "json_array", **kw)


@compiles(JsonRows, "postgresql")
def _postgresql(element: JsonRows, compiler: SQLCompiler, **kw: Any) -> str:
    # As text, as elsewhere: psycopg would parse a JSON value itself, more slowly than ``decode_rows``.
    return f"CAST({_render(compiler, element, 'json_agg', 'json_build_array', **kw)} AS TEXT)"


@compiles(JsonRows, "mysql")
@compiles(JsonRows, "mariadb")
def _mariadb(element: JsonRows, compiler: SQLCompiler, **kw: Any) -> str:
    return _render(compiler, element, "JSON_ARRAYAGG", "JSON_ARRAY", **kw)
