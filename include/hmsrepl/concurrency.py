"""``Executor.map`` with a bounded number of tasks in flight, and a small priority pool of worker threads.

``ThreadPoolExecutor.map`` submits every item before the first result is taken: one ``Future`` (with its lock
and condition, about 1 KB) per item, so describing or copying a partition of 1,000,000 files held a GB of
futures. ``bounded_map`` keeps a few tasks per worker submitted and yields results in order, as ``map`` does, and
raises the first failure when its result is reached (later tasks already submitted still finish when the pool
shuts down, as with ``map``).
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
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
    for _, future in bounded_futures(items, lambda item: pool.submit(fn, item), window):
        yield future.result()


def bounded_futures(
    items: Iterable[T], submit: Callable[[T], Future[R]], window: int
) -> Iterator[tuple[T, Future[R]]]:
    """Each item with the future ``submit`` made of it, in the items' order, with at most ``window`` submitted
    and not yet taken: ``bounded_map`` for a caller that must know which item a failure belongs to (a worker
    process that died names the slice it was given)."""
    pending: deque[tuple[T, Future[R]]] = deque()
    for item in items:
        pending.append((item, submit(item)))
        if len(pending) >= window:
            yield pending.popleft()
    while pending:
        yield pending.popleft()


class PriorityWorkers:
    """A fixed number of daemon threads running submitted tasks, lower ``priority`` first, then in order.

    The Thrift server's workers: calls of authenticated admin principals go before queued calls of others, so
    a crowd of clients cannot keep an operator waiting. Threads start as work arrives, up to ``workers``.
    """

    def __init__(self, workers: int, name: str) -> None:
        self._queue: queue.PriorityQueue[tuple[int, int, Callable[[], object] | None]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._workers = max(1, workers)
        self._name = name

    def submit(self, task: Callable[[], object], priority: int = 1) -> None:
        self._queue.put((priority, next(self._order), task))
        with self._lock:
            if self._queue.qsize() > self._idle and len(self._threads) < self._workers:
                thread = threading.Thread(
                    target=self._run, name=f"{self._name}-{len(self._threads) + 1}", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            _, _, task = self._queue.get()
            with self._lock:
                self._idle -= 1
            if task is None:
                return
            try:
                task()
            except Exception:  # a task reports its own failures; a worker must outlive any of them
                logging.getLogger(__name__).exception("%s task failed", self._name)
            task = None  # what it holds (a request's bytes) goes now, not when the next task comes

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    def stop(self) -> None:
        """Let running tasks finish; the threads end once the queue is empty."""
        for _ in list(self._threads):
            self._queue.put((1 << 30, next(self._order), None))
