"""Partition filter expressions (``get_partitions_by_filter``) parsed by a grammar and pushed down to SQL.

The language is the one Hive's metastore accepts and Spark generates: comparisons of a partition key with a
string or number literal (``=``, ``!=``, ``<>``, ``<``, ``>``, ``<=``, ``>=``, ``LIKE``), combined with
AND/OR/NOT and parentheses. Each key the filter names is joined from the partition key values table, so the
database does the filtering and only matching partitions are loaded.

A filter is client input that costs database time, so it is bounded (``hmsrepl.bounds``): its length, its
number of comparisons and its nesting are checked before any SQL is built, and the query runs under a
statement timeout on the database (PostgreSQL ``statement_timeout``, MariaDB ``max_statement_time``,
MySQL ``max_execution_time``, SQLite a progress handler), so a pathological filter cannot hold a backend.
"""

from __future__ import annotations

import functools
import operator
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lark import Lark, Token, Transformer, Tree, UnexpectedInput
from lark.exceptions import VisitError
from sqlalchemy import BigInteger, ColumnElement, Connection, Select, and_, cast, not_, or_
from sqlalchemy.exc import DBAPIError

from hmsrepl.bounds import resource_bounds
from hmsrepl.exceptions import InvalidObjectError, LimitExceededError
from hmsrepl.metastore.database import in_transaction
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.schema import partition_key_vals, partitions

GRAMMAR = r"""
?start: or_expr
?or_expr: and_expr (_OR and_expr)*
?and_expr: not_expr (_AND not_expr)*
?not_expr: _NOT not_expr -> negation
         | atom
?atom: "(" or_expr ")"
     | comparison
comparison: IDENT OP literal      -> key_first
          | literal OP IDENT      -> literal_first
          | IDENT _LIKE literal   -> like
literal: STRING | NUMBER
OP: "<=" | ">=" | "<>" | "!=" | "=" | "<" | ">"
_AND.2: /and\b/i
_OR.2: /or\b/i
_NOT.2: /not\b/i
_LIKE.2: /like\b/i
IDENT: /[A-Za-z_][A-Za-z0-9_]*/ | /`[^`]+`/
STRING: /"(\\.|[^"\\])*"/ | /'(\\.|[^'\\])*'/
NUMBER: /-?\d+(\.\d+)?/
%import common.WS
%ignore WS
"""


@functools.cache
def _parser() -> Lark:
    """Built on first use (~30 ms): every process that imports the catalog would pay it, most never filter."""
    return Lark(GRAMMAR, parser="lalr")


_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "!=": "!=", "<>": "<>"}
INTEGRAL_TYPES = {"tinyint", "smallint", "int", "integer", "bigint"}


@dataclass(frozen=True)
class Comparison:
    key: str
    op: str  # one of = != < > <= >= like
    value: str
    numeric: bool


@dataclass(frozen=True)
class BoolOp:
    op: str  # and / or / not
    args: tuple[Any, ...]


class _ToAst(Transformer[Token, Any]):
    def literal(self, items: list[Token]) -> tuple[str, bool]:
        token = items[0]
        if token.type == "STRING":
            body = token[1:-1]
            try:
                return body.encode("utf-8").decode("unicode_escape"), False
            except UnicodeDecodeError as exc:
                raise InvalidObjectError(
                    f"partition filter literal {_shortened(str(token))} has a malformed escape ({exc.reason}); "
                    "write a backslash as '\\\\' and \\x escapes with two hex digits"
                ) from None
        return str(token), True

    @staticmethod
    def _key(token: Token) -> str:
        return token.strip("`").lower()

    def key_first(self, items: list[Any]) -> Comparison:
        key, op, (value, numeric) = items
        return Comparison(self._key(key), "!=" if op == "<>" else str(op), value, numeric)

    def literal_first(self, items: list[Any]) -> Comparison:
        (value, numeric), op, key = items
        flipped = _FLIP[str(op)]
        return Comparison(self._key(key), "!=" if flipped == "<>" else flipped, value, numeric)

    def like(self, items: list[Any]) -> Comparison:
        key, (value, _) = items
        return Comparison(self._key(key), "like", value, False)

    def and_expr(self, items: list[Any]) -> BoolOp:
        return BoolOp("and", tuple(items))

    def or_expr(self, items: list[Any]) -> BoolOp:
        return BoolOp("or", tuple(items))

    def negation(self, items: list[Any]) -> BoolOp:
        return BoolOp("not", tuple(items))


def parse_filter(text: str) -> Comparison | BoolOp:
    """Parse a filter; raises InvalidObjectError pointing at the offending column, LimitExceededError when
    it is longer, has more comparisons or nests deeper than the configured bounds."""
    bounds = resource_bounds()
    if len(text) > bounds.filter_max_chars:
        raise LimitExceededError(
            f"partition filter of {len(text)} characters is longer than the limit of {bounds.filter_max_chars} "
            "(HMSREPL_FILTER_MAX_CHARS); use a shorter filter, e.g. ranges instead of lists of values"
        )
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        raise InvalidObjectError(
            f"cannot parse partition filter '{_shortened(text)}' at column {exc.column}: expected comparisons "
            'like key = "value" or key > 3 joined by AND/OR'
        ) from exc
    terms, depth = _size(tree)
    if terms > bounds.filter_max_terms:
        raise LimitExceededError(
            f"partition filter has {terms} comparisons, more than the limit of {bounds.filter_max_terms} "
            "(HMSREPL_FILTER_MAX_TERMS); use ranges (key >= a AND key <= b) instead of lists of values"
        )
    if depth > bounds.filter_max_depth:
        raise LimitExceededError(
            f"partition filter nests {depth} levels deep, more than the limit of {bounds.filter_max_depth} "
            "(HMSREPL_FILTER_MAX_DEPTH); remove redundant parentheses and NOTs"
        )
    try:
        node: Comparison | BoolOp = _ToAst().transform(tree)
        return node
    except VisitError as exc:  # a literal the grammar admits but cannot be decoded
        if isinstance(exc.orig_exc, InvalidObjectError):
            raise exc.orig_exc from None
        raise


def _size(tree: Tree[Token]) -> tuple[int, int]:
    """Comparisons and nesting depth of a parse tree, walked without recursion (it is not bounded yet)."""
    terms = depth = 0
    stack: list[tuple[Any, int]] = [(tree, 1)]
    while stack:
        node, level = stack.pop()
        if not isinstance(node, Tree):
            continue
        if node.data in ("key_first", "literal_first", "like"):
            terms += 1
            continue
        depth = max(depth, level)
        stack.extend((child, level + 1) for child in node.children)
    return terms, depth


def _shortened(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


@contextmanager
def statement_time_limit(conn: Connection, what: str) -> Iterator[None]:
    """Run the block's queries under the database's statement timeout; a timeout is a LimitExceededError
    naming ``what``. The setting is scoped to these queries: the connection returns to the pool without it."""
    seconds = resource_bounds().filter_statement_timeout_seconds
    if not seconds:
        yield
        return
    dialect = conn.dialect
    if dialect.name == "postgresql":
        with in_transaction(conn):  # SET LOCAL outside a transaction would set nothing
            conn.exec_driver_sql(f"SET LOCAL statement_timeout = {max(1, int(seconds * 1000))}")
            try:
                yield
            except DBAPIError as exc:
                if getattr(exc.orig, "sqlstate", None) == "57014":  # query_canceled
                    raise _timed_out(what, seconds) from exc
                raise
            conn.exec_driver_sql("SET LOCAL statement_timeout TO DEFAULT")
    elif dialect.name in ("mysql", "mariadb"):
        mariadb = getattr(dialect, "is_mariadb", False)
        variable = "max_statement_time" if mariadb else "max_execution_time"
        value = f"{seconds:g}" if mariadb else str(max(1, int(seconds * 1000)))
        conn.exec_driver_sql(f"SET SESSION {variable} = {value}")
        try:
            yield
        except DBAPIError as exc:
            code = exc.orig.args[0] if exc.orig is not None and exc.orig.args else None
            if code in (1969, 3024):  # ER_STATEMENT_TIMEOUT (MariaDB), ER_QUERY_TIMEOUT (MySQL)
                raise _timed_out(what, seconds) from exc
            raise
        finally:
            try:
                conn.exec_driver_sql(f"SET SESSION {variable} = DEFAULT")
            except DBAPIError:
                conn.invalidate()  # never hand the setting to the pool's next user
    elif dialect.name == "sqlite":
        raw: Any = conn.connection.dbapi_connection  # sqlite3.Connection: its progress handler is SQLite's
        deadline = time.monotonic() + seconds
        raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            yield
        except DBAPIError as exc:
            if "interrupted" in str(exc.orig):
                raise _timed_out(what, seconds) from exc
            raise
        finally:
            raw.set_progress_handler(None, 0)
    else:
        yield


def _timed_out(what: str, seconds: float) -> LimitExceededError:
    return LimitExceededError(
        f"{what} took longer than the limit of {seconds:g} s (HMSREPL_FILTER_STATEMENT_TIMEOUT_SECONDS) and was "
        "cancelled; use a narrower or simpler filter"
    )


def apply_filter(query: Select[Any], node: Comparison | BoolOp, table: Table) -> Select[Any]:
    """``query`` over ``partitions`` narrowed to the table's partitions matching the filter.

    Each partition key the filter names is joined once (a partition has one value per key), so a comparison
    is a plain column test: the statement grows by a few bytes per comparison, not by a subquery each, and
    both building it here and planning it in the database stay proportional to the filter.
    """
    keys = {key.name: (idx, key.type.lower()) for idx, key in enumerate(table.partition_keys)}
    joined: dict[int, Any] = {}
    where = _to_sql(node, keys, table, joined)
    for idx, kv in sorted(joined.items()):
        query = query.join(kv, and_(kv.c.part_id == partitions.c.part_id, kv.c.idx == idx))
    return query.where(where)


_OPERATORS: dict[str, Callable[[Any, Any], ColumnElement[bool]]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
    "like": lambda column, value: column.like(value),
}


def _to_sql(
    node: Comparison | BoolOp, keys: dict[str, tuple[int, str]], table: Table, joined: dict[int, Any]
) -> ColumnElement[bool]:
    if isinstance(node, BoolOp):
        parts = [_to_sql(arg, keys, table, joined) for arg in node.args]
        if node.op == "and":
            return and_(*parts)
        if node.op == "or":
            return or_(*parts)
        return not_(parts[0])
    if node.key not in keys:
        raise InvalidObjectError(
            f"partition filter names '{node.key}', which is not a partition key of '{table.qualified_name}' "
            f"(keys: {', '.join(keys) or 'none'})"
        )
    idx, key_type = keys[node.key]
    kv = joined.get(idx)
    if kv is None:
        kv = joined[idx] = partition_key_vals.alias(f"filter_key{idx}")
    column: ColumnElement[Any] = kv.c.value
    value: Any = node.value
    if node.numeric and key_type in INTEGRAL_TYPES and node.op != "like":
        column, value = cast(kv.c.value, BigInteger), int(float(node.value))
    return _OPERATORS[node.op](column, value)
