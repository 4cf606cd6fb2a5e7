"""Bounded reading of messages that come from outside: gzip inflated in a stream with a cap, JSON with a depth cap.

A stock metastore's ``gzip(json-2.0)`` events, this metastore's own compressed events, dump files and Iceberg
metadata are all written by someone else. A 0.68 MB gzip member can inflate to gigabytes (a decompression
bomb), and JSON nested 100,000 levels deep exhausts the parser's stack or the walk that follows. So:

- gzip is inflated piece by piece (``zlib.decompressobj`` with ``max_length``), and refused as soon as the
  output passes ``max_inflated_bytes`` or, beyond 1 MB, ``max_ratio`` times the compressed size; memory stays
  within the cap, never the bomb's size;
- a JSON document nesting deeper than ``max_json_depth`` is refused; the walk that measures it is a loop, and
  one whose text has fewer openers than the limit is not walked at all.

Limits come from ``HMSREPL_MESSAGE_MAX_INFLATED_BYTES`` (default 64 MB), ``HMSREPL_MESSAGE_MAX_INFLATE_RATIO``
(500) and ``HMSREPL_MESSAGE_MAX_JSON_DEPTH`` (100).
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from typing import Any, BinaryIO

from hmsrepl.exceptions import HmsReplError
from hmsrepl.formats.json_text import loads

MB = 1024 * 1024
_CHUNK = 1 * MB  # inflated bytes produced per step
_RATIO_FREE_BYTES = 1 * MB  # small messages may compress well (a run of zeros): the ratio applies beyond this
GZIP_MAGIC = b"\x1f\x8b"


class MessageLimitError(HmsReplError):
    """A message from outside inflates or nests beyond the configured limits: refused, nothing was read into it."""


@dataclass(frozen=True)
class MessageLimits:
    max_inflated_bytes: int = 64 * MB
    max_ratio: int = 500
    max_json_depth: int = 100

    @classmethod
    def from_environment(cls) -> MessageLimits:
        default = cls()
        return cls(
            max_inflated_bytes=_env_int("HMSREPL_MESSAGE_MAX_INFLATED_BYTES", default.max_inflated_bytes),
            max_ratio=_env_int("HMSREPL_MESSAGE_MAX_INFLATE_RATIO", default.max_ratio),
            max_json_depth=_env_int("HMSREPL_MESSAGE_MAX_JSON_DEPTH", default.max_json_depth),
        )


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise MessageLimitError(
            f"{name}={raw!r} is not a whole number; set it to a positive integer"
        ) from None
    if value <= 0:
        raise MessageLimitError(f"{name}={raw!r} must be positive")
    return value


def inflate_gzip(data: bytes, what: str, limits: MessageLimits | None = None) -> bytes:
    """The inflated content of gzip ``data`` (one or more members), refused past the limits.

    Raises MessageLimitError naming ``what`` when the output would pass the cap, ``zlib.error`` (a ValueError
    for callers: ``OSError``-like corruption is reported as such) when the data is no valid gzip.
    """
    limits = limits or MessageLimits.from_environment()
    cap = min(limits.max_inflated_bytes, max(_RATIO_FREE_BYTES, len(data) * limits.max_ratio))
    out: list[bytes] = []
    size = 0
    rest = data
    while rest:
        inflater = zlib.decompressobj(wbits=31)
        pending = rest
        while True:
            piece = inflater.decompress(pending, min(_CHUNK, cap - size + 1))
            size += len(piece)
            if size > cap:
                raise MessageLimitError(
                    f"{what} inflates beyond {cap} bytes from {len(data)} compressed (a decompression bomb?); "
                    f"refused: raise HMSREPL_MESSAGE_MAX_INFLATED_BYTES or HMSREPL_MESSAGE_MAX_INFLATE_RATIO "
                    "if such messages are expected"
                )
            out.append(piece)
            pending = inflater.unconsumed_tail
            if inflater.eof or (not pending and not piece):
                break
        if not inflater.eof:
            raise zlib.error(f"{what}: gzip data ends early (truncated)")
        rest = inflater.unused_data.lstrip(b"\x00")  # several members, as gzip.decompress reads them
    return b"".join(out)


def read_capped(stream: BinaryIO, what: str, limits: MessageLimits | None = None) -> bytes:
    """A whole file from ``stream``, refused when it is larger than the inflated-size cap; gzip (by its magic
    bytes) comes back inflated within the same cap."""
    limits = limits or MessageLimits.from_environment()
    data = stream.read(limits.max_inflated_bytes + 1)
    if len(data) > limits.max_inflated_bytes:
        raise MessageLimitError(
            f"{what} is larger than {limits.max_inflated_bytes} bytes; refused (HMSREPL_MESSAGE_MAX_INFLATED_BYTES)"
        )
    return inflate_gzip(data, what, limits) if data.startswith(GZIP_MAGIC) else data


def json_depth(document: Any, limit: int) -> int:
    """Nesting depth of a parsed JSON document, level by level (no recursion); stops past ``limit``."""
    containers = (dict, list)
    level = [document] if type(document) in containers else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return depth
        below = []
        for node in level:
            for child in node.values() if type(node) is dict else node:
                if type(child) in containers:
                    below.append(child)
        level = below
    return depth


def loads_bounded(data: bytes | str, what: str, limits: MessageLimits | None = None) -> Any:
    """One JSON document, refused (MessageLimitError) when it nests deeper than the limit; a document that
    is no JSON raises ``json.JSONDecodeError`` as usual."""
    limit = (limits or MessageLimits.from_environment()).max_json_depth
    try:
        body = loads(data)
    except RecursionError:
        body = None
    openers = (
        data.count(b"{") + data.count(b"[") if isinstance(data, bytes) else data.count("{") + data.count("[")
    )
    if body is None or (openers > limit and json_depth(body, limit) > limit):
        raise MessageLimitError(
            f"{what} nests JSON deeper than {limit} levels; refused (HMSREPL_MESSAGE_MAX_JSON_DEPTH)"
        )
    return body
