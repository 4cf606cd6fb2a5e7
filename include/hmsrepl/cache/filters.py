"""Partition filters evaluated on cached partitions, only where the result cannot differ from the database's.

The database evaluates filters in SQL (``metastore.partition_filter``), and some outcomes depend on the
backend: LIKE is case-insensitive on SQLite, string ordering follows the collation, and casting a
non-numeric value to an integer fails on PostgreSQL but yields 0 on SQLite. The cache answers the rest
(string equality and integer comparisons on integer keys) and raises ``UnsupportedFilter`` for these, so
such reads go to the database and get exactly its answer or error.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence

from hmsrepl.metastore.model import Table
from hmsrepl.metastore.partition_filter import INTEGRAL_TYPES, BoolOp, Comparison, parse_filter

Predicate = Callable[[Sequence[str]], bool]

_NUMERIC_OPS: dict[str, Callable[[int, int], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
}
_PLAIN_INT = re.compile(r"-?[0-9]+")


class UnsupportedFilter(Exception):
    """The cache cannot evaluate this filter exactly as every backend would; ask the database."""


def compile_filter(text: str, table: Table) -> Predicate:
    """A predicate over a partition's values; raises InvalidObjectError for unparsable text, as the database."""
    keys = {key.name: (idx, key.type.lower()) for idx, key in enumerate(table.partition_keys)}
    return _compile(parse_filter(text), keys)


def _compile(node: Comparison | BoolOp, keys: dict[str, tuple[int, str]]) -> Predicate:
    if isinstance(node, BoolOp):
        parts = [_compile(arg, keys) for arg in node.args]
        if node.op == "and":
            return lambda values: all(part(values) for part in parts)
        if node.op == "or":
            return lambda values: any(part(values) for part in parts)
        return lambda values: not parts[0](values)
    if node.key not in keys or node.op == "like":
        raise UnsupportedFilter(f"filter on '{node.key}' with {node.op}")  # the database words the error
    idx, key_type = keys[node.key]
    if node.numeric and key_type in INTEGRAL_TYPES:
        compare, target = _NUMERIC_OPS[node.op], int(float(node.value))

        def numeric(values: Sequence[str]) -> bool:
            if not _PLAIN_INT.fullmatch(values[idx]):
                raise UnsupportedFilter(f"value {values[idx]!r} of integer key '{node.key}'")
            return compare(int(values[idx]), target)

        return numeric
    if node.op not in ("=", "!="):
        raise UnsupportedFilter(f"string comparison {node.op} depends on the database's collation")
    wanted, equal = node.value, node.op == "="
    return lambda values: (values[idx] == wanted) is equal
