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

from hmsrepl.exceptions import MetastoreError


class BudgetExceeded(MetastoreError):
    """Memory for this work could not be had in time; its text is the client's (retriable) error.

    A ``MetastoreError``: raised inside a handler call, the client gets it as the method's MetaException."""


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

    def take(self, size: int) -> None:
        """Count ``size`` bytes that must be had, even past the limit: bytes that already exist (a reply's
        encoded page) or the next page of a reply already begun, which can no longer be refused without
        breaking the connection. What is over the limit makes new work wait or be refused until it is given
        back; a begun reply's excess is at most a page's growth plus its connection's unsent bytes."""
        if size <= 0:
            return
        with self._cond:
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


class CallMemory:
    """The memory one call's handler work holds in the server's budget (structs decoded from the database,
    results built), charged before the work by ``charge`` and given back when the call ends (``end``) or
    earlier by ``give_back`` (a reply page once written). Without a server (in-process callers) nothing is
    charged."""

    _current = threading.local()

    def __init__(self, budget: MemoryBudget, wait_seconds: float) -> None:
        self.budget = budget
        self.wait_seconds = wait_seconds
        self.held = 0

    @classmethod
    def begin(cls, budget: MemoryBudget, wait_seconds: float) -> CallMemory:
        """Make a new call's account current in this (worker) thread."""
        memory = cls(budget, wait_seconds)
        cls._current.memory = memory
        return memory

    @classmethod
    def current(cls) -> CallMemory | None:
        memory: CallMemory | None = getattr(cls._current, "memory", None)
        return memory

    def charge(self, size: int, *, committed: bool = False) -> int:
        """Hold ``size`` bytes for this call's work before doing it (``BudgetExceeded`` when they never come);
        ``committed`` work (a page of a reply already begun) is never refused (``MemoryBudget.take``)."""
        if size <= 0:
            return 0
        if committed:
            self.budget.take(size)
        else:
            self.budget.reserve(size, self.wait_seconds)
        self.held += size
        return size

    def give_back(self, size: int) -> None:
        """Return bytes ``charge`` took; nothing once the call has ended (``end`` gave them all back)."""
        size = min(size, self.held)
        if size > 0:
            self.held -= size
            self.budget.release(size)

    def end(self) -> None:
        """Give back whatever the call still holds; no longer current."""
        held, self.held = self.held, 0
        self.budget.release(held)
        if getattr(self._current, "memory", None) is self:
            self._current.memory = None


def charge(size: int) -> int:
    """Hold ``size`` bytes for the current call's work before doing it, waiting briefly for them;
    ``BudgetExceeded`` (the method's MetaException naming the limit) when they never come. Returns what was
    charged (0 outside a server call), for ``give_back``."""
    memory = CallMemory.current()
    return memory.charge(size) if memory is not None else 0


def give_back(size: int) -> None:
    """Return bytes ``charge`` took once the work they covered is gone (before the call ends)."""
    memory = CallMemory.current()
    if memory is not None:
        memory.give_back(size)


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


__all__ = [
    "BudgetExceeded",
    "CallMemory",
    "MemoryBudget",
    "budget_message",
    "charge",
    "give_back",
    "return_freed_memory",
]
