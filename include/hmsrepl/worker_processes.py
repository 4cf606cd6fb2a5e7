"""Worker processes for work that one interpreter lock holds back: a pool that inherits nothing of the caller.

Copying a big partition's files (``replication.copy_processes``) and reading thousands of tables into a
bootstrap dump (``replication.dump_processes``) cost Python per object under one interpreter lock, so threads
do not add up. Their workers start from a ``forkserver``: a process that never opened a database, so no
connection, lock or thread of the caller is inherited; the project's modules the caller had imported are
imported once there, and each worker gets the caller's environment as it is when the pool starts. A worker
dies with its caller (``PR_SET_PDEATHSIG``), so a killed load or dump leaves none copying on.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import forkserver
from typing import Any, TypeVar

T = TypeVar("T")


def usable_cpus(most: int) -> int:
    """The CPUs this process may run on (at most ``most``, at least 1)."""
    try:
        return max(1, min(most, len(os.sched_getaffinity(0))))
    except AttributeError:  # not Linux
        return max(1, min(most, os.cpu_count() or 1))


def worker_pool(processes: int) -> ProcessPoolExecutor:
    """A pool of ``processes`` workers forked from the forkserver (started now if it is not running)."""
    context = multiprocessing.get_context("forkserver")
    start_forkserver()
    return ProcessPoolExecutor(
        processes, mp_context=context, initializer=_start_worker, initargs=(dict(os.environ),)
    )


def submit_soon(pool: ProcessPoolExecutor, fn: Callable[..., T], *args: Any) -> Future[T]:
    """``pool.submit(fn, *args)`` made by a thread of its own, its answer in the future returned at once.

    A pool's submit that starts a worker waits until the forkserver has imported the project and forked it
    (a second or two on a busy machine, most of it the forkserver's CPU, not the caller's): a caller that
    has its own share of the work to do (a dump reading a range of a big table itself) does it meanwhile.
    The future settles as the worker's task does; a pool that refuses the task (broken, shut down) fails it
    with that error, so the caller reads a stopped worker as it would from ``submit``."""
    answer: Future[T] = Future()

    def submit() -> None:
        try:
            task = pool.submit(fn, *args)
        except BaseException as exc:  # told to the caller through the answer, as the task's own errors are
            answer.set_exception(exc)
            return
        task.add_done_callback(lambda done: _settle(answer, done))

    threading.Thread(target=submit, name="worker-submit", daemon=True).start()
    return answer


def _settle(answer: Future[T], done: Future[T]) -> None:
    """Give ``answer`` the outcome of the task ``done``."""
    if done.cancelled():
        answer.cancel()
    elif done.exception() is not None:
        answer.set_exception(done.exception())
    else:
        answer.set_result(done.result())


def start_forkserver() -> None:
    """Start the forkserver, importing from this process's ``sys.path``: Python 3.11's forkserver ignores
    the path its parent sends and sees ``PYTHONPATH`` only (a script that put the project on its path made
    workers that could not import the project). Its imports take about a second: a caller sure to need a
    pool soon may start it early, while it does other work."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_preload())
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    try:
        forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def _preload() -> list[str]:
    """Modules the forkserver imports once: the project's modules this process imported. Each worker runs
    the main module again (every start method does): its imports are then found done. The main module
    itself is not among them when run by name (``python -m hmsrepl.cli``): it is run, not imported."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    return sorted(m for m in sys.modules if m.startswith("hmsrepl.") and m != name)


def _start_worker(environ: dict[str, str]) -> None:
    """The caller's environment (the forkserver's is as old as the first pool), and death with the caller."""
    os.environ.clear()
    os.environ.update(environ)
    _die_with_parent()


def _die_with_parent() -> None:
    """A worker whose caller was killed must not work on, nor wait forever for work: SIGKILL it when its
    parent (the forkserver, which ends with the caller) goes."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):  # not Linux: the pool's own shutdown is all there is
        pass
