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
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import forkserver


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
