"""Hostile clients for admission tests: many idle, silent, trickling or reconnecting connections held by one
child process (``selectors``; its own process so the measured client does not share a GIL with it), from their
own loopback address so the server tells them from the legitimate client."""

from __future__ import annotations

import contextlib
import multiprocessing
import selectors
import socket
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class Flood:
    """``count`` connections to ``port`` from ``source``; each is opened again when the server closes it
    (``reconnect``) and, when ``trickle`` is set, sends those bytes one at a time every ``interval`` seconds."""

    port: int
    source: str
    count: int
    reconnect: bool = True
    trickle: bytes = b""
    interval: float = 0.5
    _counts: Any = None  # shared (opened, closed by the server)
    _stop: Any = None
    _process: Any = None

    @property
    def opened(self) -> int:
        return int(self._counts[0])

    @property
    def closed_by_server(self) -> int:
        return int(self._counts[1])

    def __enter__(self) -> Flood:
        context = multiprocessing.get_context("fork")
        self._counts = context.Array("q", 2, lock=False)
        self._stop = context.Event()
        self._process = context.Process(target=self._run, daemon=True)
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._process is not None:
            self._process.join(10)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()

    def _connect(self, selector: selectors.BaseSelector) -> None:
        sock = socket.socket()
        try:
            sock.bind((self.source, 0))
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                sock.connect(("127.0.0.1", self.port))
            selector.register(sock, selectors.EVENT_READ, [0, 0.0])  # [bytes of trickle sent, last send]
            self._counts[0] += 1
        except OSError:
            sock.close()

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        for _ in range(self.count):
            self._connect(selector)
        while not self._stop.is_set():
            for key, _ in selector.select(timeout=0.05):
                sock = key.fileobj
                try:
                    data = sock.recv(65536)  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:  # closed by the server: gone, or back at once
                    selector.unregister(sock)
                    sock.close()  # type: ignore[union-attr]
                    self._counts[1] += 1
                    if self.reconnect and not self._stop.is_set():
                        self._connect(selector)
            if self.trickle:
                now = time.monotonic()
                for key in list(selector.get_map().values()):
                    state = key.data
                    if state[0] < len(self.trickle) and now - state[1] >= self.interval:
                        with contextlib.suppress(OSError):
                            key.fileobj.send(self.trickle[state[0] : state[0] + 1])  # type: ignore[union-attr]
                            state[0] += 1
                            state[1] = now
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
