"""A list of values bound as one parameter, so that a statement has one shape whatever the list's length.

An expanding ``IN`` renders a placeholder per value: every length is another statement text, which
SQLAlchemy renders again at each run, and which psycopg neither caches nor prepares once it has more than
50 parameters. On PostgreSQL ``= ANY(array)`` binds the list as one array parameter instead: the text is
the same for one value and for a thousand, so it stays prepared (``database.PG_CONNECT_ARGS``). Other
backends have no array type and keep the expanding ``IN``. The choice is made when the statement is compiled
for its backend, so a statement built once at import serves every backend.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, ColumnElement, any_, bindparam
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.visitors import InternalTraversal


class InListParameter(ColumnElement[bool]):
    """``column`` is one of the values of the list parameter ``name`` (see the module's docstring)."""

    type = Boolean()
    inherit_cache = True
    # A comparison, not a boolean value: without this, backends lacking a boolean type render it inside an
    # OR as ``x IN (...) = 1``, which no index serves (a full scan of the table per statement).
    _is_implicitly_boolean = True
    _traverse_internals = [
        ("column", InternalTraversal.dp_clauseelement),
        ("name", InternalTraversal.dp_string),
    ]

    def __init__(self, column: ColumnElement[Any], name: str) -> None:
        self.column = column
        self.name = name


def in_list_parameter(column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
    """``column IN (:name...)``: ``= ANY(:name)`` on PostgreSQL, an expanding ``IN`` elsewhere."""
    return InListParameter(column, name)


@compiles(InListParameter)
def _expanding_in(element: InListParameter, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.column.in_(bindparam(element.name, expanding=True)), **kw)


@compiles(InListParameter, "postgresql")
def _any_of_array(element: InListParameter, compiler: SQLCompiler, **kw: Any) -> str:
    array = bindparam(element.name, type_=ARRAY(element.column.type))
    return compiler.process(element.column == any_(array), **kw)
