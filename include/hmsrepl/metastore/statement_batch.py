"""Statements sent to MariaDB as one request, their result sets read in order.

On a busy machine each exchange with the server costs far more than a small statement (the server's thread
must be scheduled to answer, then the client's): a single ``create_table`` inserting its row and then reading
what lies around its location paid a round trip for each. MariaDB takes several statements separated by ``;``
in one request (mysqlclient enables the multi-statement protocol by default) and answers a result set per
statement. Carrying the read inside the insert instead (a JSON aggregate in its ``RETURNING``, as on
PostgreSQL) costs MariaDB two to three times the read's own time, more than the round trip it saves.

The statements are compiled together, so their parameters are one set; they run in order, in the caller's
transaction, and a failing one stops those after it (the server reports its error for the request).

A batch runs on every single create, and SQLAlchemy's own work to run it (its cache key, the expansion of its
``IN`` lists, the result's set-up) cost the client three times the driver's: its text as the driver takes it
is kept per dialect and per length of each list, and sent through ``exec_driver_sql``, which still reports
the statement to the engine's listeners and wraps the driver's errors.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ClauseElement, Connection, CursorResult, Executable
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.exc import CompileError, InvalidRequestError
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
    result = _execute(conn, batch, params)
    cursor = result.cursor
    try:
        sets: list[Sequence[Any]] = [cursor.fetchall()]
        while cursor.nextset():
            sets.append(cursor.fetchall())
        return sets
    finally:
        result.close()


@dataclass(frozen=True)
class _DriverText:
    """A batch's text as the driver takes it, for lists of given lengths: ``expanded`` names, for each list
    parameter, the parameters its values take in the text, in order."""

    statement: str
    expanded: Mapping[str, Sequence[str]]

    def parameters(self, params: Mapping[str, Any]) -> dict[str, Any]:
        values = {name: value for name, value in params.items() if name not in self.expanded}
        for name, names in self.expanded.items():
            values.update(zip(names, params[name], strict=True))
        return values


# Per dialect (weakly: an engine disposed takes its texts with it): each batch's list parameters, and its
# driver texts by batch, parameter names and list lengths; None where SQLAlchemy must run it. Batches are built
# once, at import.
_LISTS: weakref.WeakKeyDictionary[Dialect, dict[StatementBatch, tuple[str, ...]]] = (
    weakref.WeakKeyDictionary()
)
_TextKey = tuple[StatementBatch, frozenset[str], tuple[int, ...]]
_TEXTS: weakref.WeakKeyDictionary[Dialect, dict[_TextKey, _DriverText | None]] = weakref.WeakKeyDictionary()


def _execute(conn: Connection, batch: StatementBatch, params: Mapping[str, Any]) -> CursorResult[Any]:
    """Run ``batch`` through its driver text (see the module's docstring), or as SQLAlchemy runs it where the
    text would differ from what SQLAlchemy sends (``_driver_text``)."""
    dialect = conn.dialect
    lists = _LISTS.setdefault(dialect, {})
    if batch not in lists:
        compiled = _compiled(batch, dialect, params)
        lists[batch] = tuple(bind.key for bind in compiled.binds.values() if bind.expanding)
    key = (batch, frozenset(params), tuple(len(params[name]) for name in lists[batch]))
    texts = _TEXTS.setdefault(dialect, {})
    if key not in texts:
        texts[key] = _driver_text(batch, dialect, params)
    text = texts[key]
    if text is None:
        return conn.execute(batch, params)
    return conn.exec_driver_sql(text.statement, text.parameters(params))


def _compiled(batch: StatementBatch, dialect: Dialect, params: Mapping[str, Any]) -> SQLCompiler:
    """``batch`` compiled as SQLAlchemy compiles it to run with ``params`` (an INSERT's columns are those
    given)."""
    compiled = batch.compile(dialect=dialect, column_keys=sorted(params))
    assert isinstance(compiled, SQLCompiler)  # a batch of statements compiles to SQL
    return compiled


def _driver_text(batch: StatementBatch, dialect: Dialect, params: Mapping[str, Any]) -> _DriverText | None:
    """``batch``'s driver text for ``params`` (their names and their lists' lengths); None when SQLAlchemy
    would convert a value, compute a default, send a parameter the caller does not give (one with a value of
    its own) or refuse one missing."""
    compiled = _compiled(batch, dialect, params)
    if compiled.insert_prefetch or compiled.update_prefetch:  # defaults computed in Python before it runs
        return None
    try:
        state = compiled.construct_expanded_state(dict(params))
    except InvalidRequestError:  # a parameter missing: SQLAlchemy's own run says which
        return None
    expanded = {name: tuple(names) for name, names in (state.parameter_expansion or {}).items()}
    given = set(params) - set(expanded) | {name for names in expanded.values() for name in names}
    if state.processors or set(state.parameters) - given:
        return None
    return _DriverText(state.statement, expanded)
