"""``Executor.map`` with a bounded number of tasks in flight.

``ThreadPoolExecutor.map`` submits every item before the first result is taken: one ``Future`` (with its lock
and condition, about 1 KB) per item, so describing or copying a partition of 1,000,000 files held a GB of
futures. ``bounded_map`` keeps a few tasks per worker submitted and yields results in order, as ``map`` does, and
raises the first failure when its result is reached (later tasks already submitted still finish when the pool
shuts down, as with ``map``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

WINDOW_PER_WORKER = 4


def bounded_map(pool: Executor, fn: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """``pool.map(fn, items)`` over a pool of ``workers`` threads, with at most ``WINDOW_PER_WORKER`` tasks per
    worker submitted and not yet taken (enough to keep every worker busy)."""
    window = max(1, workers) * WINDOW_PER_WORKER
    pending: deque[Future[R]] = deque()
    for item in items:
        pending.append(pool.submit(fn, item))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()
