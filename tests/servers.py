"""Real metastore server processes for tests: started on a free loopback port, stopped (and reaped) after."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Terminate a server process and reap it; kill it if it does not stop within 20 s."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class RunningMetastore:
    uri: str
    port: int
    db_url: str
    warehouse: str
    cmroot: str
    log_path: Path


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log_path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"metastore server exited with {proc.returncode}:\n{log_path.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)  # polling for a port to open, not timing behaviour under test
    raise RuntimeError(
        f"metastore server did not listen on {port} within {timeout} s:\n{log_path.read_text()}"
    )


@contextmanager
def metastore_server(root: Path, db_url: str, **env: str) -> Iterator[RunningMetastore]:
    """Run ``hmsrepl metastore serve`` as a separate process with its warehouse and cmroot under ``root``."""
    port = free_port()
    warehouse, cmroot = root / "warehouse", root / "cmroot"
    log_path = root / f"metastore-{port}.log"
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "include"), os.environ.get("PYTHONPATH")])),
        "HMSREPL_DB_URL": db_url,
        "HMSREPL_WAREHOUSE": str(warehouse),
        "HMSREPL_CMROOT": str(cmroot),
        **env,
    }
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hmsrepl.cli", "metastore", "serve", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=root,
        )
    try:
        _wait_listening(port, proc, log_path)
        yield RunningMetastore(
            f"thrift://127.0.0.1:{port}", port, db_url, str(warehouse), str(cmroot), log_path
        )
    finally:
        stop_process(proc)
