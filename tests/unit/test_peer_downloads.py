"""Downloads from Maven Central: a pinned file takes its final name only once it equals the SHA-1 Central
publishes; a locked jar set downloads exactly the jars its lock pins, side by side, and nothing that differs
from them; a big file downloads in ranges and is the same file. Each against a server that answers ranges, one
that answers whole files only, and one that fails each request once (each is tried again); an answer that will
not change (404) is not asked again."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import re
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from tests.peers import central_file, maven
from tests.peers.central_file import FetchError, download, fetch_file
from tests.peers.lock import JAR_SETS
from tests.peers.maven import JarSet, LockedJar, read_lock, save_lock


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Whole files, as some mirrors answer even a range request; no request log on the test's output."""

    def log_message(self, *args: object) -> None:
        pass


class RangingHandler(QuietHandler):
    """Central's behaviour this needs: a ``Range: bytes=a-b`` request answered 206 with that slice."""

    ranges: list[str] = []

    def do_GET(self) -> None:
        asked = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        path = Path(self.translate_path(self.path))
        if not asked or not path.is_file():
            return super().do_GET()
        data = path.read_bytes()
        start, end = int(asked.group(1)), min(int(asked.group(2)), len(data) - 1)
        self.ranges.append(f"{start}-{end}")
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        self.wfile.write(data[start : end + 1])


class FlakyHandler(RangingHandler):
    """A network that fails each request once before it answers: every other first try is a reset connection,
    the rest a 503. ``asked`` counts the tries of each (path, range)."""

    asked: dict[tuple[str, str], int] = {}

    def do_GET(self) -> None:
        key = (self.path, self.headers.get("Range", ""))
        self.asked[key] = self.asked.get(key, 0) + 1
        if self.asked[key] == 1 and (self.path.endswith(".sha1") or len(self.asked) % 2):
            self.send_error(503)
            return
        if self.asked[key] == 1:
            self.close_connection = True  # no reply at all: the client's read fails
            self.connection.shutdown(2)
            return
        super().do_GET()


@pytest.fixture(params=["ranging", "whole files only", "failing each request once"])
def central(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Path]]:
    """A loopback HTTP server in Central's layout, which answers ranges, or (as some mirrors) whole files, or
    ranges after failing each request once (a network with blips)."""
    RangingHandler.ranges, FlakyHandler.asked = [], {}
    handler = {"ranging": RangingHandler, "whole files only": QuietHandler}.get(request.param, FlakyHandler)
    monkeypatch.setattr(central_file, "RETRY_WAIT_SECONDS", 0.01)
    with serving(handler, tmp_path / "central") as url:
        yield url, tmp_path / "central"


@contextlib.contextmanager
def serving(handler: type[QuietHandler], root: Path) -> Iterator[str]:
    """A loopback HTTP server of ``root`` (made here) answering through ``handler``; its base URL."""
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_every_jar_set_has_a_lock_resolved_from_its_current_pins() -> None:
    for jar_set in JAR_SETS:
        jars = read_lock(jar_set)
        assert jars, f"{jar_set.name}: its lock is missing or stale: run python -m tests.peers.lock"
        names = [jar.name for jar in jars]
        assert len(set(names)) == len(names), f"{jar_set.name}: two locked jars share a file name"
        for jar in jars:
            assert re.fullmatch(r"[0-9a-f]{40}", jar.sha1) and jar.size > 0, jar
            group_path, artifact, version, name = jar.path.rsplit("/", 3)
            assert group_path and name.startswith(f"{artifact}-{version}") and name.endswith(".jar"), jar


def publish(root: Path, path: str, data: bytes) -> LockedJar:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_bytes(data)
    return LockedJar(path, hashlib.sha1(data).hexdigest(), len(data))


@pytest.fixture
def locked_set(
    central, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[JarSet, Path, list[LockedJar]]:
    """A set of three jars published on the loopback Central and locked, with a cache of its own."""
    url, root = central
    monkeypatch.setattr(maven, "PEERS", tmp_path / "peers")
    monkeypatch.setattr(maven, "LOCKS", tmp_path / "locks")
    monkeypatch.setattr(maven, "CENTRAL_URL", url)
    monkeypatch.setattr(central_file, "RANGE_BYTES", 4096)
    jar_set = JarSet("demo", ("org.example:a:1",), transitive=True)
    jars = [
        publish(root, "org/example/a/1/a-1.jar", b"a" * 10_000 + b"end"),
        publish(root, "org/example/b/2/b-2.jar", b"b" * 100),
        publish(root, "com/example/c/3/c-3-tests.jar", bytes(range(256)) * 50),
    ]
    save_lock(jar_set, tuple(jars))
    return jar_set, root, jars


def test_a_locked_set_downloads_each_locked_jar_and_a_second_fetch_needs_no_network(locked_set) -> None:
    jar_set, root, jars = locked_set
    result = maven.fetch(jar_set)
    assert result.downloaded and result.count == 3
    for jar in jars:
        assert (result.jars / jar.name).read_bytes() == (root / jar.path).read_bytes()
    assert sorted(p.name for p in result.jars.iterdir()) == sorted(jar.name for jar in jars)  # no .part left
    for jar in jars:
        (root / jar.path).unlink()
    again = maven.fetch(jar_set)
    assert not again.downloaded and again.count == 3


def test_a_jar_that_differs_from_its_lock_is_refused_and_the_set_is_not_complete(locked_set) -> None:
    jar_set, root, jars = locked_set
    (root / jars[0].path).write_bytes(b"a" * 10_000 + b"END")  # same size, other bytes
    with pytest.raises(FetchError, match=r"/org/example/a/1/a-1\.jar: SHA-1 differs from the lock's"):
        maven.fetch(jar_set)
    assert not jar_set.is_cached()
    assert not (jar_set.jars() / jars[0].name).exists()
    assert not list(jar_set.jars().glob("*.part"))


def test_a_lock_resolved_from_other_pins_is_not_used(locked_set) -> None:
    jar_set, _, _ = locked_set
    repinned = JarSet("demo", ("org.example:a:2",), transitive=True)
    assert read_lock(jar_set) is not None
    assert read_lock(repinned) is None  # a fetch resolves it through Maven and says so


def test_a_file_larger_than_a_range_downloads_in_ranges_as_the_same_bytes(
    central, tmp_path, monkeypatch
) -> None:
    url, root = central
    monkeypatch.setattr(central_file, "RANGE_BYTES", 1000)
    data = hashlib.sha256(b"seed").digest() * 400  # 12,800 bytes: 13 ranges
    (root / "server.tar.gz").write_bytes(data)
    dest = tmp_path / "cache" / "server.tar.gz"
    download(f"{url}/server.tar.gz", dest, hashlib.sha1(data).hexdigest(), source="the lock's")
    assert dest.read_bytes() == data
    if RangingHandler.ranges:  # the ranging servers: every range answered once, the last one short
        assert sorted(RangingHandler.ranges) == sorted(
            f"{s}-{min(s + 999, 12_799)}" for s in range(0, 12_800, 1000)
        )
    if FlakyHandler.asked:  # the failing one: each request answered at its second try
        assert len(FlakyHandler.asked) == 13 and set(FlakyHandler.asked.values()) == {2}


def publish_with_sha1(root: Path, name: str, data: bytes, sha1: str | None = None) -> None:
    (root / name).write_bytes(data)
    digest = sha1 or hashlib.sha1(data).hexdigest()
    (root / f"{name}.sha1").write_text(f"{digest}  {name}\n")  # Central's files sometimes name the file


def test_a_verified_download_takes_its_name_and_a_second_fetch_is_a_no_op(central, tmp_path: Path) -> None:
    url, root = central
    publish_with_sha1(root, "server.tar.gz", b"x" * 3_000_000)
    dest = tmp_path / "cache" / "server.tar.gz"
    assert fetch_file(f"{url}/server.tar.gz", dest) == dest
    assert dest.read_bytes() == b"x" * 3_000_000
    (root / "server.tar.gz").unlink()  # no network needed any more
    assert fetch_file(f"{url}/server.tar.gz", dest) == dest


def test_a_download_that_differs_from_its_sha1_is_refused_and_leaves_nothing(central, tmp_path: Path) -> None:
    url, root = central
    publish_with_sha1(root, "server.tar.gz", b"tampered", sha1="0" * 40)
    dest = tmp_path / "cache" / "server.tar.gz"
    with pytest.raises(FetchError, match=r"server\.tar\.gz: SHA-1 differs from Maven Central's"):
        fetch_file(f"{url}/server.tar.gz", dest)
    assert list(dest.parent.iterdir()) == []


def test_a_missing_artifact_is_named(central, tmp_path: Path) -> None:
    url, _ = central
    with pytest.raises(FetchError, match=r"absent\.jar\.sha1: HTTP Error 404"):
        fetch_file(f"{url}/absent.jar", tmp_path / "absent.jar")
    assert not (tmp_path / "absent.jar").exists()


def test_an_answer_that_will_not_change_is_not_asked_again(tmp_path: Path) -> None:
    FlakyHandler.asked = {("/absent.jar.sha1", ""): 1}  # past its one failure: the server answers 404
    failure = pytest.raises(FetchError, match=r"absent\.jar\.sha1: HTTP Error 404")
    with serving(FlakyHandler, tmp_path / "central") as url, failure:
        fetch_file(f"{url}/absent.jar", tmp_path / "absent.jar")
    assert FlakyHandler.asked[("/absent.jar.sha1", "")] == 2  # one request: no retry of a 404
