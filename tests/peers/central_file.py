"""Pinned files from Maven Central (a server tarball, a locked set's jars), each checked against its SHA-1.

A download goes to a ``.part`` file, is compared with the SHA-1 it must have (Central's ``.sha1`` next to it,
or the one a lock pins), and only then takes its final name: a file under its final name is always a verified
one, and a second fetch is a no-op.

Central answers one stream at some 10-25 MB/s but many at once far faster, and a fresh machine's set-up waits
for the slowest download: so files are fetched side by side (``fetch_many``), and a file larger than
``RANGE_BYTES`` in ranges side by side, written at their offsets (Trino's 820 MB tarball took 50 s as one
stream). A server that ignores ``Range`` answers the whole file, which is then read as one stream.

A fresh machine's network fails now and then for a moment (a name that does not resolve once, a reset
connection, a 503): each request is tried again after a short wait, ``ATTEMPTS`` times in all, so that a blip
does not fail a whole set-up. An answer that will not change (404, 403) fails at once.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

CENTRAL_URL = "https://repo.maven.apache.org/maven2"
#: Files larger than this download in ranges of this size, side by side.
RANGE_BYTES = 32 << 20
#: Downloads (or ranges of one) in flight at once.
WORKERS = 8
TIMEOUT = 60
_BLOCK = 1 << 20
#: Tries of one request, and the wait before the first retry (doubled before each next one).
ATTEMPTS = 4
RETRY_WAIT_SECONDS = 1.0

_T = TypeVar("_T")


class FetchError(RuntimeError):
    """A peer could not be fetched or verified; the message names the artifact or the cause."""


def artifact_url(group: str, artifact: str, version: str, suffix: str) -> str:
    """Central's URL of ``artifact-version<suffix>`` (``suffix`` such as ``.tar.gz`` or ``-executable.jar``)."""
    return f"{CENTRAL_URL}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}{suffix}"


def published_sha1(url: str) -> str:
    """The SHA-1 Central publishes for ``url`` (its ``.sha1`` file holds the hex digest, maybe a name after it)."""

    def read() -> str:
        with urllib.request.urlopen(url + ".sha1", timeout=TIMEOUT) as reply:
            return reply.read().decode().split()[0].strip().lower()

    try:
        return with_retries(read)
    except OSError as error:
        raise FetchError(f"{url}.sha1: {error}") from error


def fetch_file(url: str, dest: Path) -> Path:
    """``dest``, downloaded from ``url`` unless already there, and equal to Central's SHA-1 (raise otherwise)."""
    if dest.exists():
        return dest
    return download(url, dest, published_sha1(url), source="Maven Central's")


def fetch_many(files: Iterable[tuple[str, Path, str]]) -> None:
    """Each ``(url, dest, sha1)``'s ``dest`` downloaded and verified, side by side; the first failure raised
    once every download has ended (the verified ones are kept)."""
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(download, url, dest, sha1, source="the lock's") for url, dest, sha1 in files]
    for future in futures:
        future.result()


def download(url: str, dest: Path, sha1: str, *, source: str) -> Path:
    """``dest``, downloaded from ``url`` unless already there, whose SHA-1 must be ``sha1`` (``source`` names
    where that sum comes from, for the error)."""
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    try:
        _write(url, part)
    except OSError as error:
        part.unlink(missing_ok=True)
        raise FetchError(f"{url}: {error}") from error
    if file_sha1(part) != sha1.lower():
        part.unlink()
        raise FetchError(f"{url}: SHA-1 differs from {source}; fetch again")
    part.rename(dest)
    return dest


def with_retries(request: Callable[[], _T]) -> _T:
    """``request()``, tried again after a growing wait when it fails in a way that may pass (see the module)."""
    wait = RETRY_WAIT_SECONDS
    for _ in range(ATTEMPTS - 1):
        try:
            return request()
        except urllib.error.HTTPError as error:
            if error.code < 500:
                raise
        except OSError:
            pass
        time.sleep(wait)
        wait *= 2
    return request()


def file_sha1(path: Path) -> str:
    digest = hashlib.sha1()  # Maven Central publishes SHA-1 sums: a check, not a secret
    with path.open("rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _write(url: str, part: Path) -> None:
    """``url``'s bytes into ``part``: its first range, then, when the server ranges and more is left, the other
    ranges side by side (each request tried again on its own when it fails)."""
    total = with_retries(lambda: _write_first(url, part))
    if total is None or total <= RANGE_BYTES:
        return
    ranges = [(start, min(start + RANGE_BYTES, total)) for start in range(RANGE_BYTES, total, RANGE_BYTES)]
    with part.open("r+b") as out, ThreadPoolExecutor(WORKERS) as pool:
        fd = out.fileno()
        list(pool.map(lambda span: with_retries(lambda: _write_range(url, fd, *span)), ranges))
    if part.stat().st_size != total:
        raise OSError(f"{part.stat().st_size} bytes written of {total}")


def _write_first(url: str, part: Path) -> int | None:
    """The first range of ``url`` (or the whole file, from a server that ignores ranges) written into a new
    ``part``; the file's whole size when the server ranges."""
    request = urllib.request.Request(url, headers={"Range": f"bytes=0-{RANGE_BYTES - 1}"})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as reply, part.open("wb") as out:
        total = _ranged_total(reply.status, reply.headers.get("Content-Range"))
        for block in iter(lambda: reply.read(_BLOCK), b""):
            out.write(block)
    return total


def _ranged_total(status: int, content_range: str | None) -> int | None:
    """The file's whole size when the reply is a range of it (206 with ``bytes a-b/total``), else ``None``."""
    matched = re.fullmatch(r"bytes \d+-\d+/(\d+)", (content_range or "").strip())
    return int(matched.group(1)) if status == 206 and matched else None


def _write_range(url: str, fd: int, start: int, end: int) -> None:
    """Bytes ``[start, end)`` of ``url`` written at their offset in ``fd`` (raise when fewer come)."""
    request = urllib.request.Request(url, headers={"Range": f"bytes={start}-{end - 1}"})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as reply:
        if reply.status != 206:
            raise OSError(f"the server answered {reply.status} to a range request")
        offset = start
        for block in iter(lambda: reply.read(_BLOCK), b""):
            view = memoryview(block)
            while view:  # a write may take part of a block
                written = os.pwrite(fd, view, offset)
                offset, view = offset + written, view[written:]
    if offset != end:
        raise OSError(f"range {start}-{end - 1} ended after {offset - start} bytes")
