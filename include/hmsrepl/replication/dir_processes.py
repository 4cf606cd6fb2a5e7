"""Empty version directories of a load batch made by a worker process while the load goes on.

A bootstrap publishes every partition as a version directory of its own (``replica_versions``), even one with
no file: a ``mkdir`` each. On a local disk that is kernel work (the directory's inode and block, its entry in
a parent holding 100,000 others): about 80 us of CPU a partition, some 8 s of a 100,000-partition table, in
the load's one process, where nothing else can happen meanwhile. A thread cannot take it over: each directory
still needs the interpreter lock between two ``mkdir`` calls, which the load's Python holds. So once a load
has made a threshold of directories itself, the empty ones (nothing to link or copy into them) go to one worker
process, ``SLICE_DIRS`` at a time, and the load goes on with the metadata of the same partitions.

Nothing changes for readers or for a crash: the directories are still made before the batch commits (the
batch waits for them in ``settle``, before its publish intent and its commit), none is named by metadata
before then, and one the worker made for a batch that fails is removed with the batch's others
(``VersionPublisher.discard_batch`` waits for the worker first). A load killed part way leaves unnamed
version directories, as before, which the next load's sweep removes; the worker dies with the load
(``worker_processes``). The worker makes each directory through a rooted file system on the replica's
roots, as the load's own copies are checked (``filecopy.bound``), and tells for each whether it was there
already: an interrupted attempt's, which the load empties in ``settle`` as it would have done itself.

Settings: ``HMSREPL_DIR_PROCESS_THRESHOLD`` (directories a load makes itself before the worker takes the
empty ones; default ``DEFAULT_THRESHOLD``); ``HMSREPL_COPY_PROCESSES=1`` keeps this work in the load's own
process too (no worker process at all). Only local replicas use the worker: an HDFS ``mkdir`` waits on the
name node, not on this host's CPU, and an object store makes no directories.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from hmsrepl.faults import fault_point
from hmsrepl.replication.copy_processes import copy_process_settings
from hmsrepl.replication.failures import LoadFailedError
from hmsrepl.replication.filecopy import bound
from hmsrepl.replication.replications import count_setting
from hmsrepl.worker_processes import start_forkserver, worker_pool

THRESHOLD_ENV = "HMSREPL_DIR_PROCESS_THRESHOLD"
#: Directories a load makes itself before it hands the rest to the worker: starting the worker costs about a
#: second of CPU (in the forkserver, once per load process); below some 10,000 directories it does not pay.
DEFAULT_THRESHOLD = 10_000
#: Directories per slice: a slice's round trip (about 0.1 ms) is paid once per 100 ``mkdir`` calls, and a
#: batch of small tables (a few hundred partitions) still hands several slices over before it commits.
SLICE_DIRS = 100
FAULT_POINT = "dir_process_slice"  # test-only: HMSREPL_FAULT_POINT=dir_process_slice@n kills the worker

_pool_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None


class DirectoryProcessError(LoadFailedError):
    """The directory process stopped (killed, out of memory) before it made a slice of a batch's version
    directories: the batch failed and what it made is removed."""


def dir_process_threshold() -> int | None:
    """``HMSREPL_DIR_PROCESS_THRESHOLD``, or None when no worker process may be used
    (``HMSREPL_COPY_PROCESSES=1``); a bad value is refused (ReplicationConfigError, one line)."""
    threshold = count_setting(
        THRESHOLD_ENV,
        DEFAULT_THRESHOLD,
        2**62,
        "a number of directories (at least 1) a load makes itself before a worker process makes the rest",
    )
    return threshold if copy_process_settings().processes > 1 else None


def start_early(partitions: int) -> None:
    """Start the worker's forkserver now when a load is sure to hand directories to it: a table of its has
    ``partitions``, more than the threshold, and one writer makes all of a table's versions. Its imports
    (about a second of its own CPU) then run while the load makes the threshold's directories itself,
    instead of holding the load up at its first slice, which waits for the forkserver to fork the worker.
    Many smaller tables may get there too, spread over the writers or not: no start is paid ahead for them."""
    threshold = dir_process_threshold()
    if threshold is not None and partitions > threshold:
        start_forkserver()


class DirectoriesAhead:
    """The empty version directories of one writer's batches, made by the worker process once the writer has
    made the threshold's number itself. Not shared between threads (each writer has its own)."""

    def __init__(self, roots: Sequence[str], purpose: str) -> None:
        """``roots``: the replica's roots every directory must lie below, checked again in the worker, whose
        refusals name ``purpose`` (the replica file system's: they read as the load's own)."""
        self.roots = tuple(roots)
        self.purpose = purpose
        self.made_here = 0  # directories this writer made in its own process
        self._slice: list[str] = []
        self._sent: list[tuple[list[str], Future[list[bool]]]] = []
        self._threshold = dir_process_threshold()

    def take(self, uri: str) -> bool:
        """Whether the worker makes empty directory ``uri`` (settled before the batch commits); False: the
        caller makes it now, itself."""
        if self._threshold is None or self.made_here < self._threshold:
            self.made_here += 1
            return False
        self._slice.append(uri)
        if len(self._slice) >= SLICE_DIRS:
            self._send()
        return True

    @property
    def pending(self) -> bool:
        """Whether directories were taken since the last ``settle`` or ``abandon``."""
        return bool(self._slice or self._sent)

    def settle(self) -> list[str]:
        """Wait until every directory taken is made; answers those that were there already (an interrupted
        attempt's, to be emptied). Raises the first error the worker met (its own type and message), once
        every slice has ended, or DirectoryProcessError when the worker stopped."""
        self._send()
        sent, self._sent = self._sent, []
        existing: list[str] = []
        failure: BaseException | None = None
        for uris, future in sent:
            try:
                made = future.result()
            except BrokenProcessPool:
                _drop_pool()
                failure = failure or DirectoryProcessError(
                    f"the directory process stopped (killed, or out of memory) while making '{uris[0]}' or "
                    f"one of the {len(uris) - 1} version directories after it; nothing of the batch was applied: "
                    "run the same REPL LOAD again (HMSREPL_COPY_PROCESSES=1 makes them in the load's own process)"
                )
                continue
            except Exception as exc:  # raised below, once every slice has ended
                failure = failure or exc
                continue
            existing.extend(uri for uri, new in zip(uris, made, strict=True) if not new)
        if failure is not None:
            raise failure
        return existing

    def abandon(self) -> None:
        """The batch failed: wait for the slices sent (so none is made after the batch removed its
        directories), ignoring their errors; drop the slice not sent."""
        self._slice = []
        for _, future in self._sent:
            if not future.cancel():
                future.exception()
        self._sent = []

    def _send(self) -> None:
        if not self._slice:
            return
        try:
            future = _shared_pool().submit(make_slice, self._slice, self.roots, self.purpose)
        except BrokenProcessPool as exc:
            # The worker died before: told as this slice's outcome, in ``settle``.
            future = Future()
            future.set_exception(exc)
        self._sent.append((self._slice, future))
        self._slice = []


def _shared_pool() -> ProcessPoolExecutor:
    """The load process's one directory worker, started on first use and kept for the process's later
    batches and loads (a worker forked per batch cost more than its slices saved)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = worker_pool(1)
        return _pool


def _drop_pool() -> None:
    """Forget a broken pool: the next slice starts a new worker (a pool another writer started since is kept)."""
    global _pool
    with _pool_lock:
        if _pool is None or not getattr(_pool, "_broken", False):
            return
        broken, _pool = _pool, None
    broken.shutdown(wait=False, cancel_futures=True)


# -- in the worker process ------------------------------------------------------------------------------------
def make_slice(uris: list[str], roots: tuple[str, ...], purpose: str) -> list[bool]:
    """Make each of ``uris`` below ``roots``; whether each was made now (False: it was there already, a
    directory). Any error is raised to the load as it is (its type and message)."""
    fs = bound(roots, purpose).batch()  # the slice's parents resolved once
    made = []
    for uri in uris:
        fault_point(FAULT_POINT)
        made.append(fs.make_directory(uri))
    return made
