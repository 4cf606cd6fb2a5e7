"""A GetObject body whose first answer was cut inside its headers reads back whole (``ResumingBody``)."""

from __future__ import annotations

import gc
import http.client
import io
from typing import Any

from hmsrepl.storage.s3 import ResumingBody

DATA = bytes(range(256)) * 400  # 102,400 bytes


class _Client:
    """Answers ranged re-requests of ``DATA``; the first ``cuts`` of them fail inside a header's value (as
    ``http.client`` reports a connection ended there)."""

    def __init__(self, cuts: int) -> None:
        self.cuts = cuts
        self.ranges: list[str] = []

    def get_object(self, *, Range: str, **_pin: Any) -> dict[str, Any]:
        self.ranges.append(Range)
        if self.cuts:
            self.cuts -= 1
            raise ValueError("invalid literal for int() with base 10: ''")
        start = int(Range.removeprefix("bytes=").rstrip("-"))
        return {
            "Body": io.BytesIO(DATA[start:]),
            "ContentRange": f"bytes {start}-{len(DATA) - 1}/{len(DATA)}",
        }


class _CutAnswer(io.RawIOBase):
    """A first answer whose connection ended inside its headers: reading its body fails, and the failure
    keeps the caller's buffer in a reference cycle, as a failed read inside a library can until the
    garbage collector runs."""

    def readinto(self, buffer: Any) -> int:
        held: dict[str, Any] = {"buffer": buffer}
        held["cycle"] = held
        raise http.client.IncompleteRead(b"", 10)


class _FileSystem:
    def __init__(self, client: _Client) -> None:
        self.client = client


def _cut_body(cuts: int, first: io.RawIOBase | None = None) -> tuple[ResumingBody, _Client]:
    """A body whose first answer said Content-Length ``10`` (its digits cut) and brought no byte
    (``first``: that answer's body; by default an empty one)."""
    client = _Client(cuts)
    response = {"Body": first or io.BytesIO(b""), "ContentLength": "10", "ETag": '"e"'}
    body = ResumingBody(_FileSystem(client), "s3://bucket/key", {"Bucket": "bucket", "Key": "key"}, response)
    return body, client


def test_a_body_cut_in_its_headers_reads_whole_while_a_failed_read_still_holds_its_buffer() -> None:
    """A failed read may keep a view of the read's buffer alive until the garbage collector runs; growing
    the buffer to the object's real size must not need it gone. The collector is paused so the view is
    surely alive when the size grows."""
    body, client = _cut_body(cuts=2, first=_CutAnswer())
    gc.disable()
    try:
        assert body.readall() == DATA
    finally:
        gc.enable()
    assert client.ranges == ["bytes=0-"] * 3
    assert body.retries == 3


def test_a_body_cut_in_its_headers_reads_whole_after_one_re_request() -> None:
    body, client = _cut_body(cuts=0)
    assert body.read() == DATA
    assert client.ranges == ["bytes=0-"]
