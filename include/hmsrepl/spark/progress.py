"""How far a copy on Spark executors got, in the driver's log while it runs (the orchestrator's task log).

Why a socket and not Spark's accumulators or status tracker: both only learn of a task when it ends, and a
copy is one task per executor core (``spark.copy``), so they would say "0 %" until the copy is done. Instead
the driver listens on a TCP port of its own host (``spark.driver.host``, which executors reach already);
each task connects once and sends ``<files> <bytes> <failed>`` lines (deltas, at most one a second and a last
one at its end); a driver thread logs the totals every ``HMSREPL_SPARK_PROGRESS_SECONDS`` (30) while they
change. Progress is best effort: a task that cannot reach the driver copies all the same and the copy's own
result is unchanged; its files then show up only in the final counts.
"""

from __future__ import annotations

import logging
import os
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

PROGRESS_SECONDS_ENV = "HMSREPL_SPARK_PROGRESS_SECONDS"
DEFAULT_PROGRESS_SECONDS = 30.0
#: Least time between two reports of one task (a task copying thousands of small files sends ~1 line/s).
SEND_INTERVAL = 1.0
#: Longest the driver waits, once the tasks have ended, for their last counts (a task that could not reach it
#: never sends them).
FINAL_WAIT_SECONDS = 1.0


def progress_interval() -> float:
    """Seconds between two progress lines (``HMSREPL_SPARK_PROGRESS_SECONDS``; malformed or < 0.1: 30)."""
    try:
        value = float(os.environ.get(PROGRESS_SECONDS_ENV, DEFAULT_PROGRESS_SECONDS))
    except ValueError:
        return DEFAULT_PROGRESS_SECONDS
    return value if value >= 0.1 else DEFAULT_PROGRESS_SECONDS


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"  # pragma: no cover - the loop returns at GiB


@dataclass(frozen=True)
class ProgressAddress:
    """Where executors report to; shipped to each Spark task."""

    host: str
    port: int


class _Totals:
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.files = self.bytes = self.failed = 0
        self.finished_senders = 0

    def add(self, files: int, nbytes: int, failed: int) -> None:
        with self.lock:
            self.files += files
            self.bytes += nbytes
            self.failed += failed

    def sender_finished(self) -> None:
        with self.lock:
            self.finished_senders += 1
            self.lock.notify_all()

    def wait_for_senders(self, count: int, timeout: float) -> None:
        with self.lock:
            self.lock.wait_for(lambda: self.finished_senders >= count, timeout)

    def read(self) -> tuple[int, int, int]:
        with self.lock:
            return self.files, self.bytes, self.failed


class CopyProgress:
    """The driver's side: receives executors' counts and logs them periodically; a context manager.

    ``total_files``/``total_bytes`` are what the copy plans (for percentages); ``interval`` defaults to
    ``progress_interval()``. On exit one last line gives the counts received, after waiting (briefly) for the
    ``senders`` tasks' connections to end.
    """

    def __init__(
        self,
        description: str,
        total_files: int,
        total_bytes: int,
        host: str,
        interval: float | None = None,
        logger: logging.Logger = log,
        senders: int = 0,
    ) -> None:
        self.description = description
        self.senders = senders
        self.total_files, self.total_bytes = total_files, total_bytes
        self.interval = interval if interval is not None else progress_interval()
        self.logger = logger
        self.totals = _Totals()
        self.host = host
        self.address: ProgressAddress | None = None
        self._server: socketserver.ThreadingTCPServer | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = 0.0

    def __enter__(self) -> CopyProgress:
        totals = self.totals

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    for line in self.rfile:
                        try:
                            files, nbytes, failed = (int(x) for x in line.split())
                        except ValueError:
                            return  # not ours: drop the connection
                        totals.add(files, nbytes, failed)
                finally:
                    totals.sender_finished()

        try:
            server = socketserver.ThreadingTCPServer((self.host, 0), Handler)
        except OSError as exc:  # no progress, the copy itself goes on
            self.logger.warning(
                "%s: no progress reports (cannot listen on %s: %s)", self.description, self.host, exc
            )
            return self
        server.daemon_threads = True
        self._server = server
        self.address = ProgressAddress(self.host, server.server_address[1])
        self._started = time.monotonic()
        self._threads = [
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True),
            threading.Thread(target=self._report, daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def _report(self) -> None:
        shown = None
        while not self._stop.wait(self.interval):
            now = self.totals.read()
            if now != shown:
                self.logger.info("%s", self.line())
                shown = now

    def line(self, final: bool = False) -> str:
        files, nbytes, failed = self.totals.read()
        elapsed = max(1e-6, time.monotonic() - self._started)
        share = f" ({100 * nbytes / self.total_bytes:.0f}%)" if self.total_bytes else ""
        return (
            f"{self.description}: {'done, ' if final else ''}{files} of {self.total_files} files, "
            f"{human_bytes(nbytes)} of {human_bytes(self.total_bytes)} copied{share}"
            + (f", {failed} failed" if failed else "")
            + f", {human_bytes(nbytes / elapsed)}/s"
        )

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._server is None:
            return
        # The tasks have ended; their last counts may still be on the way: the final line must have them.
        self.totals.wait_for_senders(self.senders, FINAL_WAIT_SECONDS)
        self._server.shutdown()
        self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self.logger.info("%s", self.line(final=True))


def _encode(counts: list[int]) -> bytes:
    return (" ".join(map(str, counts)) + "\n").encode()


class ProgressSender:
    """An executor task's side: counts its finished files and sends the deltas to the driver."""

    def __init__(self, address: ProgressAddress | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.pending = [0, 0, 0]
        self.last_sent = clock()
        self.sock: socket.socket | None = None
        if address is not None:
            try:
                self.sock = socket.create_connection((address.host, address.port), timeout=5)
            except OSError:
                self.sock = None

    def add(self, files: int, nbytes: int, failed: int = 0) -> None:
        if self.sock is None:
            return
        with self.lock:
            for i, value in enumerate((files, nbytes, failed)):
                self.pending[i] += value
            if self.clock() - self.last_sent >= SEND_INTERVAL:
                self._send()

    def _send(self) -> None:
        if self.sock is None or not any(self.pending):
            return
        try:
            self.sock.sendall(_encode(self.pending))
        except OSError:  # the driver went away: stop reporting, keep copying
            self.sock.close()
            self.sock = None
            return
        self.pending = [0, 0, 0]
        self.last_sent = self.clock()

    def close(self) -> None:
        """Send what is left and close (idempotent)."""
        with self.lock:
            if self.sock is not None:
                sock, self.sock = self.sock, None
                try:
                    if any(self.pending):
                        sock.sendall(_encode(self.pending))
                except OSError:
                    pass
                finally:
                    sock.close()

    def __enter__(self) -> ProgressSender:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
