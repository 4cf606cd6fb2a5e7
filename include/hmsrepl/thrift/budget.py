"""One memory budget for the whole Thrift server: requests being received and decoded, replies being written.

Per-request limits alone let eight 99 MB requests take 3.5 GB between them. Every byte a request brings (and
what decoding it will allocate, ``frames.MessageScanner.decoded_estimate``) and every page of a reply is
charged here as it arrives or is built, never for a size merely declared; work that does not fit waits
briefly for others to finish and is then refused with a retriable error naming the limit.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
import time
from collections.abc import Callable


class BudgetExceeded(Exception):
    """Memory for this work could not be had in time; ``message`` is the client's (retriable) error."""


def budget_message(budget: int, wanted: int) -> str:
    """What the client is told: Hive's MetaException style, naming the limit and what to do."""
    return (
        f"the metastore's memory budget of {budget} bytes (HMSREPL_THRIFT_MEMORY_BUDGET_BYTES) "
        f"cannot take another {wanted} bytes now; retry later or send smaller requests"
    )


class MemoryBudget:
    """Bytes reserved by work in flight, at most ``limit`` in total; thread-safe."""

    def __init__(self, limit: int, on_release: Callable[[], None] | None = None) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._cond = threading.Condition()
        #: Told (outside the lock) when bytes were given back, so a front end can retry waiting work.
        self.on_release = on_release

    def try_reserve(self, size: int) -> bool:
        """Take ``size`` bytes if they fit now."""
        if size <= 0:
            return True
        with self._cond:
            if self.used + size > self.limit:
                return False
            self.used += size
            self.peak = max(self.peak, self.used)
            return True

    def reserve(self, size: int, wait_seconds: float) -> None:
        """Take ``size`` bytes, waiting up to ``wait_seconds`` for them; ``BudgetExceeded`` when they never came."""
        if size <= 0:
            return
        if size > self.limit:
            raise BudgetExceeded(budget_message(self.limit, size))
        deadline = time.monotonic() + wait_seconds
        with self._cond:
            while self.used + size > self.limit:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BudgetExceeded(budget_message(self.limit, size))
                self._cond.wait(left)
            self.used += size
            self.peak = max(self.peak, self.used)

    def release(self, size: int) -> None:
        if size <= 0:
            return
        with self._cond:
            self.used = max(0, self.used - size)
            self._cond.notify_all()
        if self.on_release is not None:
            self.on_release()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        trim: Callable[[int], int] | None = ctypes.CDLL(name).malloc_trim if name else None
        return trim
    except (OSError, AttributeError):  # not glibc
        return None


def return_freed_memory() -> None:
    """Give the heap pages freed by a large request back to the system (glibc keeps them in its per-thread
    arenas otherwise: a 60 MB request left the process 63 MB larger while idle)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


__all__ = ["BudgetExceeded", "MemoryBudget", "budget_message", "return_freed_memory"]
