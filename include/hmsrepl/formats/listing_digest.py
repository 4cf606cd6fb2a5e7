"""An order-free digest of a file listing that a change updates in O(files added + removed).

A data event of message format 2 carries only the files a write added and removed. A reader that rebuilds an
object's listing by applying those deltas to the listing it already holds must be able to tell that it got
exactly the source's listing as of the event, without the event carrying that listing. The digest does that:
each file contributes ``H(relative path, checksum)`` and the digest is the sum of the contributions modulo
2**128, so adding or removing a file adds or subtracts one term. Two listings with the same digest and count
are the same listing unless a 128-bit collision happened; a lost, repeated or reordered event shows at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

MODULUS = 1 << 128
EMPTY = "0" * 32


def term(relative_path: str, checksum: str) -> int:
    """One file's contribution: the first 16 bytes of SHA-256 over its place and content identity."""
    text = f"{relative_path}\x00{checksum}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:16], "big")


def combine(
    digest: str, added: Iterable[tuple[str, str]] = (), removed: Iterable[tuple[str, str]] = ()
) -> str:
    """``digest`` with the (relative path, checksum) pairs of ``added`` counted in and ``removed`` out."""
    value = int(digest, 16)
    for rel, checksum in added:
        value += term(rel, checksum)
    for rel, checksum in removed:
        value -= term(rel, checksum)
    return f"{value % MODULUS:032x}"


def of(entries: Iterable[tuple[str, str]]) -> str:
    """The digest of a whole listing of (relative path, checksum) pairs."""
    return combine(EMPTY, entries)
