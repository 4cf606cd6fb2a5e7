"""Tables of a bootstrap load written over several connections at once.

A bootstrap writes each table and its partitions in one transaction of their own, independent of every other
table's, and the position (the replicated event id) only after the last one: so tables may commit in any
order, several at a time, and a load killed part way still leaves whole tables and a position that says the
bootstrap is not done (run again, it finishes the rest). On PostgreSQL and MariaDB a table's load waits on
the server for most of its time, and other tables' statements fill that wait; SQLite has one writer at a
time, so there it stays one table at a time.

``HMSREPL_LOAD_PARALLELISM`` sets the number of tables written at once (1 to ``MAX_PARALLELISM``); unset,
``DEFAULT_PARALLELISM`` on a database server and 1 on SQLite. Each table needs a connection of the
metastore's pool (5 by default, plus its overflow), so larger values wait for connections rather than help.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from hmsrepl.concurrency import bounded_map
from hmsrepl.metastore import Metastore
from hmsrepl.replication.apply_stats import ApplyStats
from hmsrepl.replication.replications import count_setting

if TYPE_CHECKING:
    from hmsrepl.replication.target import TargetWriter

PARALLELISM_ENV = "HMSREPL_LOAD_PARALLELISM"
DEFAULT_PARALLELISM = 4
MAX_PARALLELISM = 32

T = TypeVar("T")
R = TypeVar("R")


def load_parallelism(store: Metastore) -> int:
    """Tables a bootstrap load into ``store`` writes at once (the setting, else the backend's default)."""
    default = 1 if store.engine.dialect.name == "sqlite" else DEFAULT_PARALLELISM
    return count_setting(
        PARALLELISM_ENV,
        default,
        MAX_PARALLELISM,
        f"a number of tables from 1 to {MAX_PARALLELISM} (how many tables a bootstrap load writes at once; "
        "1 on SQLite)",
    )


def each_in_parallel(items: Iterable[T], load: Callable[[T], R], workers: int) -> Iterator[R]:
    """``load`` of each item, answers in the items' order, ``workers`` at a time (in this thread for 1).

    On the first failure no further item starts; those already running finish (each commits or rolls back
    its own transaction), then the failure is raised, as a load killed there would leave it."""
    if workers <= 1:
        yield from map(load, items)
        return
    # Each table runs in a copy of this thread's context, taken as it is handed out: the load's privilege to
    # write its protected replica (``metastore.protection``) is a context variable.
    handed = ((contextvars.copy_context(), item) for item in items)
    with ThreadPoolExecutor(workers, thread_name_prefix="load-table") as pool:
        try:
            yield from bounded_map(pool, lambda task: task[0].run(load, task[1]), handed, workers)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


class TableWriters:
    """The writer of each thread loading tables: the load's own in its thread, a new one in each pool thread.

    A writer holds what its open batch staged (version directories to name at commit or remove on failure), so
    threads never share one: a table that fails discards only its own directories."""

    def __init__(self, main: TargetWriter, make: Callable[[], TargetWriter]) -> None:
        self._main, self._make = main, make
        self._home = threading.get_ident()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._made: list[TargetWriter] = []

    def mine(self) -> TargetWriter:
        if threading.get_ident() == self._home:
            return self._main
        writer: TargetWriter | None = getattr(self._local, "writer", None)
        if writer is None:
            writer = self._make()
            writer.copied_ahead = self._main.copied_ahead  # files staged ahead, taken by whichever table
            writer.version = self._main.version
            self._local.writer = writer
            with self._lock:
                self._made.append(writer)
        return writer

    def add_stats_to(self, stats: ApplyStats) -> None:
        """What the pool threads' writers counted, into the load's result."""
        with self._lock:
            for writer in self._made:
                stats.add(writer.stats)
