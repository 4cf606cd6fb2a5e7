"""Partition names and directory names escaped the way Hive escapes them (``p=k%3Av/q=1``).

Hive turns a partition spec into a path segment by percent-encoding a fixed set of characters in keys and
values; the same string is the partition's name in the metastore. Directory names written by Spark and Hive
therefore contain literal ``%XX`` sequences, which must never be decoded when a location is used as a path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

# Characters Hive's FileUtils escapes in path names (control characters are escaped too).
_ESCAPED = frozenset("\"#%'*/:=?\\\x7f{[]^")
# One translation table (C speed): a load names every partition it applies, thousands a second.
_ESCAPES = {code: f"%{code:02X}" for code in [*map(ord, _ESCAPED), *range(0x20)]}
DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"


def escape_path_name(value: str) -> str:
    if value == "":
        return DEFAULT_PARTITION_NAME
    return value.translate(_ESCAPES)


def unescape_path_name(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "%" and _is_hex(text[i + 1 : i + 3]):
            out.append(chr(int(text[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _is_hex(pair: str) -> bool:
    return len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair)


def make_partition_name(keys: Sequence[str], values: Sequence[str]) -> str:
    """``k1=v1/k2=v2`` for the given key names and values; raises if the counts differ."""
    if len(keys) != len(values):
        raise ValueError(_count_mismatch(keys, values))
    if len(keys) == 1:  # most tables: no join (a bootstrap names each of a million partitions several times)
        return f"{escape_path_name(keys[0].lower())}={escape_path_name(values[0])}"
    return "/".join(
        [f"{escape_path_name(k.lower())}={escape_path_name(v)}" for k, v in zip(keys, values, strict=True)]
    )


def partition_namer(keys: Sequence[str]) -> Callable[[Sequence[str]], str]:
    """``make_partition_name`` for one table's keys, each key escaped once: a load names a table's partitions by
    the thousand a call (``values -> name``; raises as ``make_partition_name`` does if the counts differ)."""
    heads = [f"{escape_path_name(key.lower())}=" for key in keys]
    if len(heads) == 1:
        head = heads[0]

        def one(values: Sequence[str]) -> str:
            if len(values) != 1:
                raise ValueError(_count_mismatch(keys, values))
            return head + escape_path_name(values[0])

        return one

    def many(values: Sequence[str]) -> str:
        if len(values) != len(heads):
            raise ValueError(_count_mismatch(keys, values))
        return "/".join([head + escape_path_name(value) for head, value in zip(heads, values, strict=True)])

    return many


def _count_mismatch(keys: Sequence[str], values: Sequence[str]) -> str:
    return f"partition spec has {len(values)} values but the table has {len(keys)} keys {list(keys)}"


def parse_partition_name(name: str) -> list[tuple[str, str]]:
    """Split ``k1=v1/k2=v2`` into unescaped (key, value) pairs; raises on a segment without '='."""
    pairs = []
    for segment in name.split("/"):
        key, sep, value = segment.partition("=")
        if not sep or not key:
            raise ValueError(f"malformed partition name '{name}': segment '{segment}' is not 'key=value'")
        pairs.append((unescape_path_name(key), unescape_path_name(value)))
    return pairs
