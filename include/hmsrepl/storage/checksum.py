"""File checksums as they appear in events and ``_files``: ``crc32c-<8 hex digits>-<size in bytes>``.

CRC32C is the default because it hashes at ~10 GB/s on one core (far faster than any copy), and it is what
HDFS uses and what S3 and GCS can store and return per object without a download. The size is part of the
token so that two versions of a file with an equal CRC but different lengths never compare equal. The token
holds no ':' or '#', so it is safe in file names (cmroot) and in the ``#``-separated file URI.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from typing import BinaryIO

import google_crc32c

ALGORITHM = "crc32c"
CHUNK_BYTES = 4 * 1024 * 1024
_TOKEN = re.compile(rf"{ALGORITHM}-[0-9a-f]{{8}}-(0|[1-9][0-9]{{0,18}})")


def checksum_token(crc: int, size: int) -> str:
    return f"{ALGORITHM}-{crc:08x}-{size}"


def parse_checksum_token(token: str) -> tuple[int, int]:
    """Return (crc, size); raise ValueError naming the token when it is not ours."""
    parts = token.split("-")
    if len(parts) != 3 or parts[0] != ALGORITHM:
        raise ValueError(f"checksum '{token}' is not of the form '{ALGORITHM}-<8 hex>-<size>'")
    try:
        return int(parts[1], 16), int(parts[2])
    except ValueError as exc:
        raise ValueError(f"checksum '{token}' is not of the form '{ALGORITHM}-<8 hex>-<size>'") from exc


def is_checksum_token(token: object) -> bool:
    """Whether ``token`` is exactly a token ``checksum_token`` writes (lower-case hex, plain decimal size).

    Stricter than ``parse_checksum_token`` (which ``int`` makes lenient: ``0x1f``, `` 1``, ``+1``): a
    load uses it to refuse dump entries whose checksum would not identify their content.
    """
    return isinstance(token, str) and _TOKEN.fullmatch(token) is not None


def checksum_size(token: str) -> int:
    """The size a token records, or -1 when the token is not one of ours (so no size can match it)."""
    try:
        return parse_checksum_token(token)[1]
    except ValueError:
        return -1


def checksum_stream(stream: BinaryIO | io.RawIOBase) -> str:
    running = RunningChecksum()
    while chunk := stream.read(CHUNK_BYTES):
        running.update(chunk)
    return running.token


def checksum_bytes(data: bytes) -> str:
    return checksum_token(google_crc32c.value(data), len(data))


def token_from_s3_crc32c(value: str, size: int) -> str:
    """Our token from S3's ``ChecksumCRC32C`` (base64 of the big-endian CRC) and the object's size.

    Raises ValueError for values that are not a full-object CRC32C (e.g. a composite ``<b64>-<parts>``).
    """
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"'{value}' is not a base64 CRC32C value") from exc
    if len(raw) != 4:
        raise ValueError(f"'{value}' is not a full-object CRC32C value (4 bytes, base64)")
    return checksum_token(int.from_bytes(raw, "big"), size)


def s3_crc32c_from_token(token: str) -> str:
    """S3's ``ChecksumCRC32C`` form of a token, e.g. to let S3 verify an upload against a known checksum."""
    crc, _ = parse_checksum_token(token)
    return base64.b64encode(crc.to_bytes(4, "big")).decode("ascii")


class RunningChecksum:
    """The token of bytes fed in pieces, so a copy hashes each chunk as it passes and reads its source once.

    ``update`` takes ``bytes`` (google-crc32c refuses memoryviews), and releases the GIL for chunks of 1 MB
    and more, so copies in several threads hash in parallel.
    """

    __slots__ = ("_crc", "size")

    def __init__(self) -> None:
        self._crc = google_crc32c.Checksum()
        self.size = 0

    def update(self, chunk: bytes) -> None:
        self._crc.update(chunk)
        self.size += len(chunk)

    @property
    def token(self) -> str:
        return checksum_token(int.from_bytes(self._crc.digest(), "big"), self.size)


class ChecksumReader(RunningChecksum):
    """Wraps a binary stream and hashes what is read through it, so a copy computes its token in one pass."""

    __slots__ = ("_stream",)

    def __init__(self, stream: BinaryIO) -> None:
        super().__init__()
        self._stream = stream

    def read(self, size: int = -1) -> bytes:
        chunk = self._stream.read(size)
        if chunk:
            self.update(chunk)
        return chunk
