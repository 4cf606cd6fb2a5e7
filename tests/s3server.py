"""A real S3-protocol server for tests and benchmarks: moto's server mode as a separate process on loopback.

Requests go over HTTP to another process, as with any S3-compatible store; nothing is mocked in-process.
The server is started on a free port, its readiness taken from its own "Running on" log line (no polling
sleeps), and it is stopped and reaped afterwards. ``aws_environment`` points boto3 at it for the duration
of a test run only (dummy credentials, endpoint, region) and hides any developer AWS configuration.

Fixtures (``pytest_plugins = ["tests.s3server"]`` in a test module): ``s3_server`` (one per session), ``s3_env`` (the environment
set, default store reset), ``s3_client`` (a boto3 client for arranging data), ``s3_bucket`` and
``versioned_bucket`` (fresh uniquely named buckets).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.servers import free_port, stop_process

READY_MARK = b"Running on"
START_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    port: int
    log_path: Path


@contextmanager
def moto_s3_server(log_dir: Path) -> Iterator[S3Server]:
    """Run ``python -m moto.server`` on 127.0.0.1 at a free port until the block ends."""
    port = free_port()
    log_path = log_dir / f"moto-s3-{port}.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    ready = threading.Event()

    def drain() -> None:
        """Copy the server's output to its log (the pipe must never fill) and spot the ready line."""
        assert proc.stdout is not None
        with open(log_path, "wb") as log:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if READY_MARK in line:
                    ready.set()
        ready.set()  # the server exited: wake the waiter, which then sees the exit code

    reader = threading.Thread(target=drain, name=f"moto-log-{port}", daemon=True)
    reader.start()
    try:
        if not ready.wait(START_TIMEOUT_SECONDS) or proc.poll() is not None:
            raise RuntimeError(
                f"moto S3 server did not start on port {port} (exit {proc.poll()}); log:\n"
                + (log_path.read_text(errors="replace") if log_path.exists() else "(none)")
            )
        yield S3Server(f"http://127.0.0.1:{port}", port, log_path)
    finally:
        stop_process(proc)
        reader.join(timeout=20)


@dataclass
class ThrottlingProxy:
    endpoint_url: str
    throttled: int = 0
    forwarded: int = 0


SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


@contextmanager
def throttling_proxy(upstream: str, throttled_requests: int) -> Iterator[ThrottlingProxy]:
    """An HTTP proxy on loopback that answers the first requests with S3's 503 SlowDown, then forwards.

    It injects the one failure a server cannot be asked for (throttling) while every request still goes
    over a real socket and every forwarded one is answered by the real S3 server.
    """
    target = urlsplit(upstream)
    state = ThrottlingProxy("")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            with lock:
                throttle = state.throttled < throttled_requests
                if throttle:
                    state.throttled += 1
                else:
                    state.forwarded += 1
            if throttle:
                payload = b"" if self.command == "HEAD" else SLOW_DOWN
                self.send_response(503, "Slow Down")
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            connection = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=60)
            try:
                connection.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
                response = connection.getresponse()
                data = response.read()
            finally:
                connection.close()
            self.send_response(response.status, response.reason)
            for name, value in response.getheaders():
                skip = ("transfer-encoding", "connection") + (
                    () if self.command == "HEAD" else ("content-length",)
                )
                if name.lower() not in skip:
                    self.send_header(name, value)
            if self.command != "HEAD":  # a HEAD answer keeps the object's length and carries no body
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.endpoint_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="throttling-proxy", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=20)


@dataclass
class FaultyProxy:
    """Counters of a ``faulty_proxy``: what it forwarded and which faults it injected."""

    endpoint_url: str
    requests: int = 0
    resets: int = 0  # connections reset when a request arrived (nothing forwarded)
    cuts: int = 0  # object GET answers cut short (closed or reset) after some bytes
    lock: threading.Lock = field(default_factory=threading.Lock)


REQUEST_METHODS = (b"GET ", b"HEAD ", b"PUT ", b"POST ", b"DELETE ")
_DENIED_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b"<Message>Access Denied</Message></Error>"
)
ACCESS_DENIED = (
    b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\n"
    + f"Content-Length: {len(_DENIED_BODY)}\r\n\r\n".encode()
    + _DENIED_BODY
)


@contextmanager
def faulty_proxy(
    upstream: str,
    *,
    seed: int,
    reset_rate: float = 0.05,
    cut_rate: float = 0.35,
    max_cut: int = 256 * 1024,
    cut_heads: bool = False,
    deny_versioning: bool = False,
) -> Iterator[FaultyProxy]:
    """A TCP proxy on loopback that breaks connections at random, the way networks and stores do.

    Bytes pass through unchanged, over real sockets to the real S3 server. Per request, with
    ``reset_rate`` the client's connection is reset (RST) before anything is forwarded (botocore retries
    the request); and the answer to an object GET (not a listing) is, with ``cut_rate``, cut after a random
    number of bytes up to ``max_cut`` (headers included), by a close (a truncated body) or a reset, half of
    each. Only object GETs are cut (and object HEADs, with ``cut_heads``): answers to writes cannot be cut
    without making their retries act twice. With ``deny_versioning`` it answers GetBucketVersioning itself
    with S3's 403 AccessDenied, as for credentials without ``s3:GetBucketVersioning``.
    """
    import random as _random
    import socket
    import struct

    target = urlsplit(upstream)
    rng = _random.Random(seed)
    rng_lock = threading.Lock()
    listener = socket.create_server(("127.0.0.1", 0))
    state = FaultyProxy(f"http://127.0.0.1:{listener.getsockname()[1]}")
    stopping = threading.Event()

    def reset(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()

    def serve(client: socket.socket) -> None:
        try:
            upstream_sock = socket.create_connection((target.hostname or "127.0.0.1", target.port or 80))
        except OSError:
            reset(client)
            return
        plan: dict[str, Any] = {"cut": None, "sent": 0, "rst": False}

        def downstream() -> None:
            try:
                while True:
                    data = upstream_sock.recv(65536)
                    if not data:
                        break
                    cut = plan["cut"]
                    if cut is not None and plan["sent"] + len(data) > cut:
                        client.sendall(data[: cut - plan["sent"]])
                        with state.lock:
                            state.cuts += 1
                        # The other thread is blocked reading this socket: a close alone would wait for it,
                        # so wake it with a shutdown; for a reset, no FIN first (the close then sends RST).
                        if plan["rst"]:
                            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                            client.shutdown(socket.SHUT_RD)
                        else:
                            client.shutdown(socket.SHUT_RDWR)
                        break
                    client.sendall(data)
                    plan["sent"] += len(data)
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    upstream_sock.close()
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_RD)  # the serving thread closes the client socket

        pump = threading.Thread(target=downstream, daemon=True)
        pump.start()
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                if data.startswith(REQUEST_METHODS):
                    line = data.split(b"\r\n", 1)[0]
                    with rng_lock:
                        roll_reset, roll_cut = rng.random(), rng.random()
                        cut_at, rst = rng.randrange(0, max_cut), rng.random() < 0.5
                    with state.lock:
                        state.requests += 1
                        if roll_reset < reset_rate:
                            state.resets += 1
                    if roll_reset < reset_rate:
                        reset(client)
                        break
                    path = line.split(b" ")[1] if b" " in line else b""
                    if deny_versioning and line.startswith(b"GET ") and b"?versioning" in path:
                        client.sendall(ACCESS_DENIED)
                        continue
                    readers = (b"GET ", b"HEAD ") if cut_heads else (b"GET ",)
                    object_get = (
                        line.startswith(readers) and b"list-type" not in path and path.count(b"/") >= 2
                    )
                    plan.update(cut=cut_at if object_get and roll_cut < cut_rate else None, sent=0, rst=rst)
                upstream_sock.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                upstream_sock.shutdown(socket.SHUT_RDWR)
            pump.join(timeout=60)
            with contextlib.suppress(OSError):
                client.close()

    def accept() -> None:
        listener.settimeout(0.2)  # a close from another thread would not wake a blocked accept
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            threading.Thread(target=serve, args=(client,), daemon=True).start()

    thread = threading.Thread(target=accept, name="faulty-proxy", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stopping.set()
        thread.join(timeout=20)
        listener.close()


def aws_test_environment(endpoint_url: str, home: Path) -> dict[str, str]:
    """Environment that makes boto3 use the test server with dummy credentials and nothing else."""
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_CONFIG_FILE": str(home / "aws-config-absent"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "aws-credentials-absent"),
    }


AWS_VARIABLES_TO_HIDE = ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS")


def new_bucket_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:20]}"


def create_bucket(client: Any, name: str, *, versioned: bool) -> str:
    client.create_bucket(Bucket=name)
    if versioned:
        client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with moto_s3_server(tmp_path_factory.mktemp("s3server")) as server:
        yield server


@pytest.fixture(scope="session")
def s3_env(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """AWS variables pointing at the test server, for the S3 tests only; restored afterwards."""
    from hmsrepl.storage.s3 import reset_default_s3_filesystem

    with pytest.MonkeyPatch.context() as patch:
        for name in AWS_VARIABLES_TO_HIDE:
            patch.delenv(name, raising=False)
        home = tmp_path_factory.mktemp("aws-home")
        for name, value in aws_test_environment(s3_server.endpoint_url, home).items():
            patch.setenv(name, value)
        reset_default_s3_filesystem()
        yield s3_server
        reset_default_s3_filesystem()


@pytest.fixture(scope="session")
def s3_client(s3_env: S3Server) -> Any:
    """A plain boto3 client, as another writer (Spark, a user) would use, for arranging test data."""
    import boto3

    return boto3.client("s3")


@pytest.fixture
def s3_bucket(s3_client: Any) -> str:
    """A fresh bucket without versioning."""
    return create_bucket(s3_client, new_bucket_name("plain"), versioned=False)


@pytest.fixture
def versioned_bucket(s3_client: Any) -> str:
    """A fresh bucket with versioning on."""
    return create_bucket(s3_client, new_bucket_name("versioned"), versioned=True)


@contextmanager
def counting(client: Any) -> Iterator[Counter[str]]:
    """Count the S3 operations a client sends (botocore's own event hook: real requests, nothing faked)."""
    calls: Counter[str] = Counter()

    def record(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    client.meta.events.register("before-call.s3.*", record)
    try:
        yield calls
    finally:
        client.meta.events.unregister("before-call.s3.*", record)
