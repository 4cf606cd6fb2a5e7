"""Compact, key-sorted JSON for the notification log and dump segments, encoded and parsed by orjson.

Every event is encoded once when it is logged, parsed and encoded again by a dump, and parsed once more by
a load: with the standard library's encoder that was the largest single cost of a metadata replay. orjson
does the same work several times faster. Where it would disagree with the standard library, the standard
library decides: values orjson refuses to encode (integers beyond 64 bits, lone surrogates, non-string keys)
and documents it refuses to parse (NaN, infinities) go through the standard library, so documents written
before still read the same. orjson writes NaN and infinities as ``null``: a document that may hold them
(column statistics) is encoded with ``exact_floats``.

One difference is left: orjson reads an integer beyond 64 bits as a float. No field of an event holds one
(Hive's widest integer is Thrift's i64); a dump from elsewhere holding one has it read as the nearest float,
which validation refuses where it wants an integer (event and write ids), as the database would refuse it.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_SORTED = orjson.OPT_SORT_KEYS


def dumps_sorted(body: Any, *, exact_floats: bool = False) -> bytes:
    """``body`` as compact JSON with sorted keys, UTF-8 encoded.

    ``exact_floats``: the body may hold NaN or infinities, which only the standard library spells out.
    """
    if not exact_floats:
        try:
            return orjson.dumps(body, option=_SORTED)
        except TypeError:  # a value orjson refuses (orjson.JSONEncodeError is a TypeError)
            pass
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def loads(data: bytes | str) -> Any:
    """One JSON document; ``json.JSONDecodeError`` when it is not one (as the standard library raises).

    Documents orjson refuses (NaN, infinities, broken ones) are parsed again by the standard library, which
    reads the first and raises its usual error for the others.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
