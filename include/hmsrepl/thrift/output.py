"""A connection's reply bytes its client has not taken yet, held in the server's memory budget until sent.

A worker writing a reply with blocking sends was held as long as its client took to read it: a few clients
reading slowly held every worker. Replies are written without blocking instead; what the socket does not take
at once waits here and the front end's event loop sends it as the client reads (``frontend``), so the worker
is free when its last page is queued. The bytes stay charged to the memory budget until sent; a worker only
waits for its client when the connection holds more than ``held_max`` unsent bytes (a huge reply to a slow
reader), so one connection cannot take the whole budget.
"""

from __future__ import annotations

import collections
import select
import ssl
import time
from typing import Any

from hmsrepl.thrift.budget import MemoryBudget

_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantWriteError, ssl.SSLWantReadError)


class OutputBuffer:
    """Unsent reply bytes of one connection, in order; used by one thread at a time (the worker running the
    connection's call, then the front end)."""

    def __init__(self, budget: MemoryBudget) -> None:
        self.budget = budget
        self.size = 0
        self._chunks: collections.deque[bytes | memoryview] = collections.deque()

    def __bool__(self) -> bool:
        return self.size > 0

    def add(self, data: bytes | memoryview) -> None:
        """Queue ``data`` after what is queued, counted in the budget. Never refused: the bytes exist already,
        and refusing part of a reply begun would break the connection; the writer bounds them instead by
        waiting for its client above ``held_max``."""
        if not data:
            return
        self.budget.take(len(data))
        self._chunks.append(data)
        self.size += len(data)

    def send(self, sock: Any) -> int:
        """Send what a non-blocking ``sock`` takes now; returns the bytes sent (``OSError`` when it failed).

        A TLS write the socket could not take is retried with the same bytes, as OpenSSL requires."""
        sent = 0
        chunks = self._chunks
        while chunks:
            head = chunks[0]
            try:
                count = sock.send(head)
            except _WOULD_BLOCK:
                break
            if count <= 0:
                break
            sent += count
            if count < len(head):
                chunks[0] = memoryview(head)[count:]
                break
            chunks.popleft()
        if sent:
            self.size -= sent
            self.budget.release(sent)
        return sent

    def write(self, sock: Any, data: bytes | memoryview) -> None:
        """Send ``data`` now as far as the socket takes it, queue the rest (after anything queued)."""
        if not self._chunks:
            try:
                count = sock.send(data)
            except _WOULD_BLOCK:
                count = 0
            if count >= len(data):
                return
            data = memoryview(data)[count:] if count else data
        self.add(data)
        self.send(sock)

    def wait_below(self, sock: Any, limit: int, timeout: float | None) -> None:
        """Block until at most ``limit`` bytes are queued, sending as the client reads; ``TimeoutError`` when
        the client took nothing for ``timeout`` seconds."""
        poller = select.poll()  # not select.select: descriptors above 1023 are common here
        poller.register(sock, select.POLLOUT)
        last_progress = time.monotonic()
        while self.size > limit:
            if self.send(sock):
                last_progress = time.monotonic()
                continue
            if timeout is not None and time.monotonic() - last_progress > timeout:
                raise TimeoutError(f"the client read nothing of its reply for {timeout:g} s")
            poller.poll(200)

    def clear(self) -> None:
        """Drop what was not sent (the connection is closing) and give its bytes back to the budget."""
        size, self.size = self.size, 0
        self._chunks.clear()
        self.budget.release(size)


__all__ = ["OutputBuffer"]
