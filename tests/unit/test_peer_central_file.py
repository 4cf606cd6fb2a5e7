"""A pinned file from Maven Central takes its final name only once it equals the SHA-1 Central publishes."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from tests.peers.central_file import fetch_file
from tests.peers.maven import FetchError


@pytest.fixture
def central(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A loopback HTTP server over a directory, standing in for Central's layout (file and ``.sha1``)."""
    root = tmp_path / "central"
    root.mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def publish(root: Path, name: str, data: bytes, sha1: str | None = None) -> None:
    (root / name).write_bytes(data)
    digest = sha1 or hashlib.sha1(data).hexdigest()
    (root / f"{name}.sha1").write_text(f"{digest}  {name}\n")  # Central's files sometimes name the file


def test_a_verified_download_takes_its_name_and_a_second_fetch_is_a_no_op(central, tmp_path: Path) -> None:
    url, root = central
    publish(root, "server.tar.gz", b"x" * 3_000_000)
    dest = tmp_path / "cache" / "server.tar.gz"
    assert fetch_file(f"{url}/server.tar.gz", dest) == dest
    assert dest.read_bytes() == b"x" * 3_000_000
    (root / "server.tar.gz").unlink()  # no network needed any more
    assert fetch_file(f"{url}/server.tar.gz", dest) == dest


def test_a_download_that_differs_from_its_sha1_is_refused_and_leaves_nothing(central, tmp_path: Path) -> None:
    url, root = central
    publish(root, "server.tar.gz", b"tampered", sha1="0" * 40)
    dest = tmp_path / "cache" / "server.tar.gz"
    with pytest.raises(FetchError, match=r"server\.tar\.gz: SHA-1 differs from Maven Central's"):
        fetch_file(f"{url}/server.tar.gz", dest)
    assert list(dest.parent.iterdir()) == []


def test_a_missing_artifact_is_named(central, tmp_path: Path) -> None:
    url, _ = central
    with pytest.raises(FetchError, match=r"absent\.jar\.sha1: HTTP Error 404"):
        fetch_file(f"{url}/absent.jar", tmp_path / "absent.jar")
    assert not (tmp_path / "absent.jar").exists()
