"""Partition filter expressions (``get_partitions_by_filter``) parsed by a grammar and pushed down to SQL.

The language is the one Hive's metastore accepts and Spark generates: comparisons of a partition key with a
string or number literal (``=``, ``!=``, ``<>``, ``<``, ``>``, ``<=``, ``>=``, ``LIKE``), combined with
AND/OR/NOT and parentheses. Each comparison becomes an EXISTS over the partition key values table, so the
database does the filtering and only matching partitions are loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lark import Lark, Token, Transformer, UnexpectedInput
from sqlalchemy import BigInteger, ColumnElement, and_, cast, exists, not_, or_, select

from hmsrepl.exceptions import InvalidObjectError
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

_PARSER = Lark(GRAMMAR, parser="lalr")
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


class _ToAst(Transformer):
    def literal(self, items: list[Token]) -> tuple[str, bool]:
        token = items[0]
        if token.type == "STRING":
            body = token[1:-1]
            return body.encode("utf-8").decode("unicode_escape"), False
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
    """Parse a filter; raises InvalidObjectError pointing at the offending column."""
    try:
        return _ToAst().transform(_PARSER.parse(text))
    except UnexpectedInput as exc:
        raise InvalidObjectError(
            f"cannot parse partition filter '{text}' at column {exc.column}: expected comparisons like "
            'key = "value" or key > 3 joined by AND/OR'
        ) from exc


def filter_to_sql(node: Comparison | BoolOp, table: Table) -> ColumnElement[bool]:
    """A WHERE clause over ``partitions`` for the table's partitions matching the filter."""
    keys = {key.name: (idx, key.type.lower()) for idx, key in enumerate(table.partition_keys)}
    return _to_sql(node, keys, table)


def _to_sql(node: Comparison | BoolOp, keys: dict[str, tuple[int, str]], table: Table) -> ColumnElement[bool]:
    if isinstance(node, BoolOp):
        parts = [_to_sql(arg, keys, table) for arg in node.args]
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
    kv = partition_key_vals.alias()
    column: ColumnElement[Any] = kv.c.value
    value: Any = node.value
    if node.numeric and key_type in INTEGRAL_TYPES and node.op != "like":
        column, value = cast(kv.c.value, BigInteger), int(float(node.value))
    condition = {
        "=": column == value,
        "!=": column != value,
        "<": column < value,
        ">": column > value,
        "<=": column <= value,
        ">=": column >= value,
        "like": column.like(value),
    }[node.op]
    return exists(
        select(kv.c.part_id).where(kv.c.part_id == partitions.c.part_id, kv.c.idx == idx, condition)
    )
