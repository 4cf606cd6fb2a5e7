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
from collections.abc import Callable, Iterator, Mapping
from itertools import islice
from typing import Any, final

import orjson

_SORTED = orjson.OPT_SORT_KEYS
#: Items of a long array encoded per piece by ``dumps_sorted_pieces`` (a file listing: about 1.6 MB a piece).
PIECE_ITEMS = 10_000


@final
class LazyArray:
    """A JSON array too long to hold (the listing of a new version of 1,000,000 files, some 180 MB of text),
    whose ``count`` items ``make`` makes again each time it is iterated: only ``dumps_sorted_pieces`` writes
    it, a piece at a time, so its text and its items are never held whole. One class, not a base to extend:
    msgspec passes exactly the types it is told of through unchanged (``payloads.encode``)."""

    def __init__(self, make: Callable[[], Iterator[Any]], count: int) -> None:
        self._make = make
        self._count = count

    def __iter__(self) -> Iterator[Any]:
        return self._make()

    def __len__(self) -> int:
        return self._count


def dumps_sorted(body: Any, *, exact_floats: bool = False) -> bytes:
    """``body`` as compact JSON with sorted keys, UTF-8 encoded.

    ``exact_floats``: the body may hold NaN or infinities, which only the standard library spells out.
    """
    if not exact_floats:
        try:
            return orjson.dumps(body, default=_held, option=_SORTED)
        except TypeError:  # a value orjson refuses (orjson.JSONEncodeError is a TypeError)
            pass
    return json.dumps(body, separators=(",", ":"), sort_keys=True, default=_held).encode()


def _held(value: Any) -> list[Any]:
    """A ``LazyArray`` in a document written whole (a short one: a long one is written in pieces)."""
    if isinstance(value, LazyArray):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps_sorted_pieces(
    body: Any, *, exact_floats: bool = False, piece_items: int | None = None
) -> Iterator[bytes]:
    """``dumps_sorted(body)`` in pieces, for a document too big to hold as one text (a listing of 1,000,000
    files is 160 MB of JSON): objects are written key by key in sorted order, arrays longer than
    ``piece_items`` ``piece_items`` items at a time, and arrays holding objects or arrays (one partition's
    change in a list of them) item by item; everything else is one ``dumps_sorted`` piece.

    The pieces joined read back as the same document. They are the same bytes as ``dumps_sorted``'s, except
    where that falls back to the standard library for the whole document (a value orjson refuses): here
    only the piece holding the value does. ``piece_items``: ``PIECE_ITEMS`` as it is when called.
    """
    piece_items = piece_items or PIECE_ITEMS
    if isinstance(body, Mapping) and all(isinstance(key, str) for key in body):
        yield b"{"
        for index, key in enumerate(sorted(body)):
            yield (b',"' if index else b'"') + _key_text(key) + b'":'
            yield from dumps_sorted_pieces(body[key], exact_floats=exact_floats, piece_items=piece_items)
        yield b"}"
    elif isinstance(body, LazyArray) or (isinstance(body, list | tuple) and len(body) > piece_items):
        yield b"["
        items = iter(body)
        first = True
        while chunk := list(islice(items, piece_items)):
            text = dumps_sorted(chunk, exact_floats=exact_floats)
            yield (b"" if first else b",") + text[1:-1]
            first = False
        yield b"]"
    elif isinstance(body, list | tuple) and any(isinstance(item, Mapping | list | tuple) for item in body):
        yield b"["
        for index, item in enumerate(body):
            if index:
                yield b","
            yield from dumps_sorted_pieces(item, exact_floats=exact_floats, piece_items=piece_items)
        yield b"]"
    else:
        yield dumps_sorted(body, exact_floats=exact_floats)


def _key_text(key: str) -> bytes:
    """An object key as JSON writes it between its quotes."""
    return dumps_sorted(key)[1:-1]


def loads(data: bytes | str) -> Any:
    """One JSON document; ``json.JSONDecodeError`` when it is not one (as the standard library raises).

    Documents orjson refuses (NaN, infinities, broken ones) are parsed again by the standard library, which
    reads the first and raises its usual error for the others.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
