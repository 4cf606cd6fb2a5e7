"""Hive's rules for the names and partition values a client may create, checked before anything is written.

A name or value becomes a directory: one that no file system accepts (longer than a path segment may be, a
control character, ``..``) would commit metadata whose directory can never be made. Hive's rules, which these
follow:

- database, table and function names match ``[A-Za-z0-9_]+`` (Java's ``\\w`` in ``MetaStoreUtils.validateName``)
  and fit the metastore schema's name columns, 128 characters; Hive answers InvalidObjectException.
- a partition value fits Hive's ``PART_KEY_VAL`` column, 256 characters, and Hive answers MetaException for a
  value it refuses (``validatePartitionNameCharacters``). Beyond Hive's default (anything goes), a value may not
  contain ``/``, a NUL or another control character, nor be ``.`` or ``..``: each is a directory a reader
  would resolve to somewhere else. The escaped ``key=value`` directory must also fit one path segment (255
  bytes, NAME_MAX on Linux and the limit of HDFS and S3 tools alike).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hmsrepl.exceptions import InvalidObjectError, InvalidPartitionValueError
from hmsrepl.formats.partition_names import (
    DEFAULT_PARTITION_NAME,
    escape_path_name,
    make_partition_name,
    partition_namer,
)
from hmsrepl.metastore.schema import PART_NAME

MAX_IDENTIFIER_CHARS = 128
MAX_PARTITION_VALUE_CHARS = 256
MAX_PATH_SEGMENT_BYTES = 255
_IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DOTS = (".", "..")  # relative directory names
_SHOWN_CHARS = 60  # names in messages are the client's: show enough to recognise them, never 5,000 characters


def shown(text: str) -> str:
    """``text`` as a message quotes it: control characters visible, long ones cut with their length."""
    visible = repr(text[:_SHOWN_CHARS])[1:-1]
    return visible if len(text) <= _SHOWN_CHARS else f"{visible}... ({len(text)} characters)"


def check_identifier(name: str, kind: str) -> None:
    """Refuse a database, table or function name Hive would refuse (InvalidObjectException)."""
    problem = identifier_problem(name)
    if problem:
        raise InvalidObjectError(f"{kind} name '{shown(name)}' {problem}")


def identifier_problem(name: str) -> str | None:
    """Why Hive refuses ``name`` as a database, table or function name, or None."""
    if len(name) > MAX_IDENTIFIER_CHARS:
        return f"is too long ({len(name)} characters); use at most {MAX_IDENTIFIER_CHARS}"
    if not _IDENTIFIER.fullmatch(name):
        return "is invalid: use ASCII letters, digits and '_' only"
    return None


def check_partition_values(table: str, keys: Sequence[str], values: Sequence[str]) -> None:
    """Refuse partition values that would make an unusable or misleading directory, or a partition name longer
    than the metastore stores (MetaException)."""
    problem = partition_problem(keys, values, f"of table '{table}'")
    if problem:
        raise InvalidPartitionValueError(problem)


class CheckedPartitionNames:
    """The names of one table's partitions, each made once and its values checked as ``check_partition_values``
    checks them, with what depends on the keys alone worked out once: a load adds a table's partitions by the
    thousand a call. Values ``_plain`` for their keys in a name that fits the column pass every rule of
    ``partition_problem`` on sight; any other partition takes ``check_partition_values`` itself, so every
    refusal and its message stay its own."""

    def __init__(self, table: str, keys: Sequence[str]) -> None:
        """``table``: the qualified name messages give; ``keys``: its partition keys' names."""
        self.table = table
        self.keys = list(keys)
        self._name = partition_namer(self.keys)
        self._most = [_plain_chars(key) for key in self.keys]  # the longest plain value of each key
        self._one = self._most[0] if len(self._most) == 1 else None

    def name(self, values: Sequence[str]) -> str:
        """The partition's name (``make_partition_name``; InvalidObjectError naming the table if the counts
        differ), once ``check_partition_values`` would accept its values (else InvalidPartitionValueError)."""
        try:
            name = self._name(values)
        except ValueError as exc:
            raise InvalidObjectError(f"table '{self.table}': {exc}") from exc
        if len(name) <= PART_NAME:  # the name fits the column: ``partition_problem``'s last rule passes
            if self._one is not None:  # most tables have one key: no ``map`` and ``all``
                if _plain(values[0], self._one):
                    return name
            elif all(map(_plain, values, self._most)):
                return name
        check_partition_values(self.table, self.keys, values)
        return name


def _plain(value: str, most: int) -> bool:
    """Whether ``value`` passes ``partition_value_problem`` on sight for a key whose plain values have at most
    ``most`` characters (``_plain_chars``): not empty, printable characters only (so no control character), no
    ``/``, neither ``.`` nor ``..``."""
    return 0 < len(value) <= most and value.isprintable() and "/" not in value and value not in _DOTS


def _plain_chars(key: str) -> int:
    """The longest plain value (``_plain``) of partition key ``key`` that passes ``partition_value_problem``:
    it fits the column, and its ``key=value`` segment one path segment however it is escaped and encoded
    (``_escaped_at_most`` in bytes, so no value need be escaped to be measured)."""
    fits_segment = (MAX_PATH_SEGMENT_BYTES - 1) // 4 - len(key.lower())
    return max(0, min(MAX_PARTITION_VALUE_CHARS, fits_segment))


def partition_problem(keys: Sequence[str], values: Sequence[str], owner: str = "") -> str | None:
    """Why these values cannot make a partition (one value, or the name they make together), or None;
    ``owner`` (e.g. "of table 'db.t'") goes into the message."""
    at = f" {owner}" if owner else ""
    longest = len(keys) - 1  # the name's length at most, once escaped (``_escaped_at_most``)
    for key, value in zip(keys, values, strict=False):
        problem = partition_value_problem(key, value)
        if problem:
            return f"partition value '{shown(value)}' for key '{key}'{at} {problem}"
        longest += _escaped_at_most(key, value, 3)
    if longest <= PART_NAME and len(keys) == len(values):
        return None  # short enough however it is escaped: the name is not built to be measured
    name = make_partition_name(keys, values)
    if len(name) > PART_NAME:
        return (
            f"partition '{shown(name)}'{at} has a name of {len(name)} characters once escaped; the metastore "
            f"stores at most {PART_NAME}: use shorter values"
        )
    return None


def _escaped_at_most(key: str, value: str, per_char: int) -> int:
    """An upper bound of the length of ``key=value`` once escaped (``escape_path_name``): at most 3
    characters per character (``%XX``), and at most 4 UTF-8 bytes per character (``per_char`` 4: a bound in
    bytes); an empty value is Hive's default partition name. Most values are far below every limit, so
    their escaped form is never built just to be measured."""
    return (
        per_char * (len(key.lower()) + len(value)) + 1
        if value
        else per_char * len(key.lower()) + 1 + len(DEFAULT_PARTITION_NAME)
    )


def partition_value_problem(key: str, value: str) -> str | None:
    """Why ``value`` cannot be the value of partition key ``key``, or None."""
    if len(value) > MAX_PARTITION_VALUE_CHARS:
        return f"is too long ({len(value)} characters); use at most {MAX_PARTITION_VALUE_CHARS}"
    if value in _DOTS:
        return "is a relative directory name; choose another value"
    if "/" in value:
        return "contains '/'; partition values may not contain a path separator"
    if _CONTROL.search(value):
        return "contains a NUL or control character; remove it"
    if _escaped_at_most(key, value, 4) <= MAX_PATH_SEGMENT_BYTES:
        return None  # fits however it is escaped and encoded: not escaped to be measured
    segment = f"{escape_path_name(key.lower())}={escape_path_name(value)}"
    if len(segment.encode("utf-8")) > MAX_PATH_SEGMENT_BYTES:
        return (
            f"makes a directory name of {len(segment.encode('utf-8'))} bytes once escaped; "
            f"file systems allow {MAX_PATH_SEGMENT_BYTES}: use a shorter value"
        )
    return None
