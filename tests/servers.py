"""Real metastore server processes for tests: started on a free loopback port, stopped (and reaped) after."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hmsrepl.config import MetastoreConfig
from hmsrepl.thrift.process import free_port, stop_process, wait_listening
from tests import python_forks

REPO = Path(__file__).resolve().parents[1]

__all__ = ["REPO", "RunningMetastore", "answering", "free_port", "metastore_server", "stop_process"]


@dataclass(frozen=True)
class RunningMetastore:
    uri: str
    port: int
    db_url: str
    warehouse: str
    cmroot: str
    log_path: Path

    @property
    def config(self) -> MetastoreConfig:
        """The server's database, warehouse and cmroot: open a ``Metastore`` on it for in-process access."""
        return MetastoreConfig(db_url=self.db_url, warehouse=self.warehouse, cmroot=self.cmroot)


@contextmanager
def metastore_server(root: Path, db_url: str, **env: str) -> Iterator[RunningMetastore]:
    """Run ``hmsrepl metastore serve`` as a separate process (forked, ``tests.python_forks``) with its
    warehouse and cmroot under ``root`` (unless ``env`` names others: instances of one metastore share its
    database and its roots)."""
    warehouse = env.get("HMSREPL_WAREHOUSE", str(root / "warehouse"))
    cmroot = env.get("HMSREPL_CMROOT", str(root / "cmroot"))
    settings = {
        **os.environ,
        "PYTHONPATH": python_forks.PYTHONPATH,
        "HMSREPL_DB_URL": db_url,
        "HMSREPL_WAREHOUSE": str(warehouse),
        "HMSREPL_CMROOT": str(cmroot),
        **env,
    }
    log_path = root / f"metastore-{uuid.uuid4().hex[:8]}.log"
    with serving_process(root, settings, log_path) as (_, port, _):
        yield RunningMetastore(
            f"thrift://127.0.0.1:{port}", port, db_url, str(warehouse), str(cmroot), log_path
        )


@contextmanager
def serving_process(
    root: Path, settings: dict[str, str], log_path: Path | None = None, *, nofile: int | None = None
) -> Iterator[tuple[python_forks.ForkedProcess | subprocess.Popen[bytes], int, Path]]:
    """``hmsrepl metastore serve`` forked with exactly ``settings`` as its environment, working in ``root``,
    on a free port, logging to ``log_path`` (``root/metastore-PORT.log`` by default); yields the process
    once it listens, with its port and log; stops and reaps it afterwards (a test may have stopped it already)."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = log_path or root / f"metastore-{port}.log"
    args = ["metastore", "serve", "--port", str(port)]
    proc = python_forks.start_module("hmsrepl.cli", args, settings, output=log_path, cwd=root, nofile=nofile)
    try:
        wait_listening(port, proc, log_path)
        yield proc, port, log_path
    finally:
        stop_process(proc)


class Hive2Client:
    """hmsclient's generated client over a plain socket, as a Hive 2.x Java client would talk.

    ``timeout_ms`` bounds every call (a hung server thread fails the test instead of hanging it); with
    ``user`` the client identifies itself with ``set_ugi`` right away.
    """

    def __init__(self, port: int, *, timeout_ms: int | None = None, user: str | None = None) -> None:
        from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore as Hive2
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport

        sock = TSocket.TSocket("127.0.0.1", port)
        if timeout_ms is not None:
            sock.setTimeout(timeout_ms)
        self.transport = TTransport.TBufferedTransport(sock)
        self.client = Hive2.Client(TBinaryProtocol.TBinaryProtocol(self.transport))
        self.transport.open()
        if user is not None:
            self.client.set_ugi(user, [])

    def __getattr__(self, name: str):
        return getattr(self.client, name)

    def close(self) -> None:
        self.transport.close()


@contextmanager
def answering(banner: bytes) -> Iterator[int]:
    """A loopback server that answers every connection with ``banner`` (another protocol's reply)."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                with conn:
                    conn.settimeout(5)
                    with contextlib.suppress(OSError):
                        conn.recv(4096)
                        conn.sendall(banner)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (close alone does not)
        server.close()
        thread.join(5)
