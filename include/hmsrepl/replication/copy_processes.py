"""The copies of big partitions staged by worker processes, each handed slices of a file list.

Staging one verified copy of a small file costs tens of microseconds of Python (open, hash, write, the
rooted checks of every path) under one interpreter lock: in the load's own threads, a partition of 1,000,000
files kept one core busy for minutes, the load's other work waiting behind it. Here the files of each partition
above a threshold go to worker processes instead, ``SLICE_FILES`` at a time and a few slices in flight (the
file list is never copied whole to a worker, nor held twice).

A partition's slices all go to one process (its *lane*; partitions are dealt to the lanes in turn). Processes
creating files in one directory take turns on that directory's lock in the kernel, and each spins while the
other holds it: two processes staging one partition used about twice the system time of one for no shorter
wall time (100,000 files, three alternating rounds: workers' CPU 34 / 66 / 71 -> 21 / 38 / 38 s, load 36 / 50
/ 52 -> 33 / 54 / 56 s; 1,000,000 files, one pair: 471 -> 259 s, load 370 -> 375 s). Partitions in different
directories still stage side by side, one process each.

Each worker opens its own rooted file systems on the same roots (``CopyRunner``), so every path it touches
is checked as the load's own copies are; it starts from a fresh interpreter (the ``forkserver`` method: no
database connection or lock of the load is inherited) with the load's environment, and dies with the load.
Workers skip the per-file sync and hand the directories they wrote to the load's sync batch: one ``syncfs``
for all copies still makes them durable before the load's first change. A worker that stops (killed, out of
memory) fails the load with ``CopyProcessError`` naming the slice it was copying; the load then removes every
copy staged, as on any failure before its first change.

Settings: ``HMSREPL_COPY_PROCESSES`` (1 to ``MAX_PROCESSES``; default the CPUs this process may use; 1: no
pool), ``HMSREPL_COPY_PROCESS_THRESHOLD`` (files a partition must have for the pool; default
``DEFAULT_THRESHOLD``: below it, starting processes costs more than they save). Only local replicas use the
pool: object stores and HDFS wait on the network, which the thread pool already overlaps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from hmsrepl.concurrency import bounded_futures
from hmsrepl.exceptions import FileLostError
from hmsrepl.faults import fault_point
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.replication.failures import LoadFailedError
from hmsrepl.replication.filecopy import CopyResult, CopyRunner, CopyTask
from hmsrepl.replication.replications import count_setting
from hmsrepl.storage.base import parent_uri
from hmsrepl.storage.local import sync_handed_over, sync_later
from hmsrepl.storage.rooted import RootedFileSystem
from hmsrepl.worker_processes import start_forkserver, usable_cpus, worker_pool

PROCESSES_ENV = "HMSREPL_COPY_PROCESSES"
THRESHOLD_ENV = "HMSREPL_COPY_PROCESS_THRESHOLD"
MAX_PROCESSES = 64
#: Starting the pool costs about a second of CPU once per load process (the forkserver imports what the
#: workers need) and a worker copies a small file in about 50 us: below some 50,000 files it does not pay.
DEFAULT_THRESHOLD = 50_000
SLICE_FILES = 1_000  # files per slice: a slice's round trip is paid once per 1,000 copies
SLICES_PER_PROCESS = 2  # in flight per worker: one being copied, one waiting
FAULT_POINT = "copy_process_file"  # test-only: HMSREPL_FAULT_POINT=copy_process_file@n kills a worker

Outcome = CopyResult | FileLostError
#: What a worker tells of one staged copy: its size, whether it came from cmroot, whether it was there already.
Kind = tuple[int, bool, bool]
#: What a worker tells of one slice: each copy's kind (or its FileLostError), and the directories it wrote.
SliceOutcome = tuple[list[Kind | FileLostError], list[str]]


class CopyProcessError(LoadFailedError):
    """A copy process stopped before it finished its slice of a partition's files (killed, out of memory):
    nothing was applied, and the copies staged so far are removed."""


@dataclass(frozen=True)
class CopyProcessSettings:
    """How many processes copy a big partition's files, and from how many files a partition is big."""

    processes: int
    threshold: int

    def may_pool(self, files: int) -> bool:
        """Whether a page of ``files`` copies can hold a partition big enough for the processes."""
        return self.processes > 1 and files >= self.threshold


def copy_process_settings() -> CopyProcessSettings:
    """The settings from the environment; a bad value is refused (ReplicationConfigError, one line)."""
    processes = count_setting(
        PROCESSES_ENV,
        usable_cpus(MAX_PROCESSES),
        MAX_PROCESSES,
        f"a number of copy processes from 1 to {MAX_PROCESSES}",
    )
    threshold = count_setting(
        THRESHOLD_ENV,
        DEFAULT_THRESHOLD,
        2**62,
        "a number of files (at least 1) from which a partition's copies are spread over processes",
    )
    return CopyProcessSettings(processes, threshold)


def big_directories(
    fs: RootedFileSystem, directories: Sequence[str], settings: CopyProcessSettings
) -> frozenset[str]:
    """Target directories (partitions) named at least ``threshold`` times in ``directories`` (each task's, the
    caller's one look a task), in stores whose copies are CPU-bound here (``fs``: the replica's): their copies
    go to the processes. None with one process, or when no partition is that big."""
    if not settings.may_pool(len(directories)):
        return frozenset()
    counts = Counter(directories)
    return frozenset(
        directory
        for directory, files in counts.items()
        if files >= settings.threshold and fs.traits(directory).cpu_bound
    )


def start_early(settings: CopyProcessSettings, files: int, objects: int) -> None:
    """Start the workers' forkserver now when a pool is sure to be needed: ``files`` over ``objects`` (a
    dump's) average at least the threshold, so some partition has that many. It imports the modules the
    workers need (about a second) while the load checks the dump's files, instead of after."""
    if objects > 0 and settings.may_pool(files // objects):
        start_forkserver()


class CopyPool:
    """The worker processes of one load's staging, one a lane, started when a page first needs them and kept for
    the pages after it (``stage``); stopped when the ``with`` block ends, after the slices running finish."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._lanes: list[ProcessPoolExecutor] = []
        self._lane_of: dict[str, ProcessPoolExecutor] = {}  # a big partition's directory -> its lane

    def __enter__(self) -> CopyPool:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        lanes, self._lanes = self._lanes, []
        self._lane_of.clear()
        for lane in lanes:
            lane.shutdown(wait=True, cancel_futures=error is not None)

    def stage(
        self, indexed: Iterable[tuple[int, CopyTask, str]], files: int, fresh: frozenset[str]
    ) -> Iterator[tuple[int, Outcome]]:
        """Stage verified copies of the ``files`` tasks of ``indexed`` (index, task, its target directory) in
        the worker processes; yields (index, outcome) in the order of ``indexed``. ``fresh``: directories the
        load made (``CopyRunner``). Raises the first error a worker raised (FileLostError is an outcome, not an
        error), or CopyProcessError when a worker stopped; slices not started then are dropped, and those
        running finish before the pool stops."""
        # A partition just above the threshold is still cut into a few slices: at most SLICE_FILES each.
        per_slice = max(1, min(SLICE_FILES, files // (self.processes * SLICES_PER_PROCESS)))
        shared: dict[Kind, CopyResult] = {}

        def submit(slice_: tuple[str, list[int], list[CopyTask]]) -> Future[SliceOutcome]:
            directory, _, tasks = slice_
            return self._lane(directory).submit(_copy_slice, tasks, fresh)

        window = self.processes * SLICES_PER_PROCESS
        for (_, indices, tasks), future in bounded_futures(_slices(indexed, per_slice), submit, window):
            yield from _taken(indices, tasks[0], future, shared)

    def _lane(self, directory: str) -> ProcessPoolExecutor:
        """The one-process pool that stages ``directory``'s copies: the next lane in turn for a directory not
        seen yet, started when first used (workers forked from a process that never opened a database)."""
        lane = self._lane_of.get(directory)
        if lane is None:
            turn = len(self._lane_of) % self.processes
            if turn == len(self._lanes):
                self._lanes.append(worker_pool(1))
            lane = self._lane_of[directory] = self._lanes[turn]
        return lane


def _taken(
    indices: list[int], first: CopyTask, future: Future[SliceOutcome], shared: dict[Kind, CopyResult]
) -> Iterator[tuple[int, Outcome]]:
    try:
        outcomes, written = future.result()
    except BrokenProcessPool:
        source = EncodedFileUri.decode(first.encoded).file_uri
        raise CopyProcessError(
            f"a copy process stopped (killed, or out of memory) while copying '{source}' or one of the "
            f"{len(indices) - 1} files after it into '{parent_uri(first.target_uri)}'; nothing was applied and "
            "the staged copies were removed: run the same REPL LOAD again (HMSREPL_COPY_PROCESSES=1 copies "
            "in the load's own process)"
        ) from None
    sync_later(written)
    for index, outcome in zip(indices, outcomes, strict=True):
        if isinstance(outcome, FileLostError):
            yield index, outcome
            continue
        result = shared.get(outcome)
        if result is None:  # one object per kind of outcome: the load holds one per file until it publishes
            result = shared[outcome] = CopyResult("", "", *outcome)
        yield index, result


def _slices(
    indexed: Iterable[tuple[int, CopyTask, str]], size: int
) -> Iterator[tuple[str, list[int], list[CopyTask]]]:
    """The tasks in slices of at most ``size``, each of one target directory (its lane's): (directory,
    indices, tasks)."""
    directory = ""
    indices: list[int] = []
    tasks: list[CopyTask] = []
    for index, task, parent in indexed:
        if tasks and (len(tasks) >= size or parent != directory):
            yield directory, indices, tasks
            indices, tasks = [], []
        directory = parent
        indices.append(index)
        tasks.append(task)
    if tasks:
        yield directory, indices, tasks


# -- in the worker processes ----------------------------------------------------------------------------------
def _copy_slice(tasks: list[CopyTask], fresh: frozenset[str]) -> SliceOutcome:
    """Stage verified copies of ``tasks``; returns each one's kind (or its FileLostError) and the directories
    written, which the load syncs. Any other error is raised to the load as it is (its type and message)."""
    outcomes: list[Kind | FileLostError] = []
    with CopyRunner(fresh=fresh) as runner, sync_handed_over() as batch:
        for task in tasks:
            fault_point(FAULT_POINT)
            try:
                result = runner(task)
            except FileLostError as exc:  # reported with the others, as the thread pool does
                outcomes.append(exc)
                continue
            outcomes.append((result.bytes_copied, result.from_cmroot, result.prefetched))
        return outcomes, batch.written()
