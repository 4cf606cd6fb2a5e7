"""Runs ``hmsrepl metastore serve`` as a separate OS process on a free loopback port.

Used by the main job, the tests and the benchmarks: a real server process (Spark's JVM connects to it over
TCP), stopped and reaped afterwards so nothing is left running.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

START_TIMEOUT_SECONDS = 60.0


class ServerProcess(Protocol):
    """What starting and stopping a server needs of its process: ``subprocess.Popen``'s calls (the tests run
    servers in children forked from a process that imported the project, with handles of the same shape)."""

    returncode: int | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop_process(proc: ServerProcess) -> None:
    """Terminate a process and reap it; kill it if it does not stop within 20 s."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_listening(port: int, proc: ServerProcess, log_path: Path) -> None:
    """Return once ``proc`` accepts connections on ``port``; its log in the error if it exits first."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"metastore server exited with {proc.returncode}; log {log_path}:\n{log_path.read_text()}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)  # waiting for the port to open
    raise RuntimeError(
        f"metastore server did not listen on {port} within {START_TIMEOUT_SECONDS} s; log {log_path}"
    )


@contextmanager
def metastore_process(
    settings: Mapping[str, str],
    log_path: Path,
    *,
    cwd: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> Iterator[tuple[str, int]]:
    """Serve a metastore configured by ``HMSREPL_*`` ``settings``; yields (thrift URI, port)."""
    port = free_port()
    env = {**os.environ, **settings, **(extra_env or {})}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hmsrepl.cli", "metastore", "serve", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
        )
    try:
        wait_listening(port, proc, log_path)
        yield f"thrift://127.0.0.1:{port}", port
    finally:
        stop_process(proc)
