"""Statements sent to MariaDB as one request, their result sets read in order.

On a busy machine each exchange with the server costs far more than a small statement (the server's thread
must be scheduled to answer, then the client's): a single ``create_table`` inserting its row and then reading
what lies around its location paid a round trip for each. MariaDB takes several statements separated by ``;``
in one request (mysqlclient enables the multi-statement protocol by default) and answers a result set per
statement. Carrying the read inside the insert instead (a JSON aggregate in its ``RETURNING``, as on
PostgreSQL) costs MariaDB two to three times the read's own time, more than the round trip it saves.

The statements are compiled together, so their parameters are one set; they run in order, in the caller's
transaction, and a failing one stops those after it (the server reports its error for the request).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import ClauseElement, Connection, Executable
from sqlalchemy.exc import CompileError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.visitors import InternalTraversal


class StatementBatch(Executable, ClauseElement):
    """``statements`` as one request (MariaDB only): see the module's docstring."""

    inherit_cache = True
    # Read by SQLAlchemy's compiler when a statement of the batch is an INSERT: it then takes the batch for
    # the INSERT's own statement, which always has the attribute.
    _inline = False
    _traverse_internals = [("statements", InternalTraversal.dp_clauseelement_list)]

    def __init__(self, *statements: ClauseElement) -> None:
        self.statements = list(statements)


@compiles(StatementBatch, "mysql")
@compiles(StatementBatch, "mariadb")
def _joined(element: StatementBatch, compiler: SQLCompiler, **kw: Any) -> str:
    return "; ".join(compiler.process(statement, **kw) for statement in element.statements)


@compiles(StatementBatch)
def _refused(element: StatementBatch, compiler: SQLCompiler, **kw: Any) -> str:
    raise CompileError(
        f"a batch of statements is sent as one request on MariaDB only, not {compiler.dialect.name}"
    )


def result_sets(conn: Connection, batch: StatementBatch, params: Mapping[str, Any]) -> list[Sequence[Any]]:
    """Run ``batch`` and return each statement's rows as the driver gives them (tuples), in order; a
    statement that returns none (an INSERT without ``RETURNING``) has an empty entry.

    Every result set is read before returning: the server sends them all, and the connection accepts no
    other request until they are read.
    """
    result = conn.execute(batch, params)
    cursor = result.cursor
    try:
        sets: list[Sequence[Any]] = [cursor.fetchall()]
        while cursor.nextset():
            sets.append(cursor.fetchall())
        return sets
    finally:
        result.close()
