"""Checksum-verified file copies on Spark executors: the load's copy (``spark_copy``) and a distcp (``spark_copy_tree``).

Why groups of files with a thread pool each, and not one Spark task (or one RDD element) per file: a Spark
task costs ~35 ms of scheduling and Python-worker round trip on these machines (200 empty tasks: 7 s), more
than copying a 4 KB file, while a copy spends its time in system calls and CRC32C, which release the GIL,
so several threads per task overlap them: object stores are latency bound, and on a local file system
file creations wait on the journal, which several in flight share. Durability is per task by default
(``durability="batch"``): a task's copies are synced with one ``syncfs`` before it reports them, so the
load never publishes a copy that is not on disk, at the cost of one journal commit per task instead of
one per file (``storage.local``; figures in ``bench/bench_copy.py``). Files are packed into one group
per executor core (more only when a group would exceed ``MAX_GROUP_ITEMS``), largest first onto the least
loaded group (LPT), with a per-file cost added to each size, so a group of thousands of small files counts
as the work it is and large files spread over the cores instead of queueing behind each other. More groups
per core only add task overhead (a Spark job of 4 empty tasks: 0.15-0.3 s here, as long as cp takes for
1 GB).

Between two ``hdfs://`` paths the copies run in the executors' JVMs through Hadoop's FileSystem API instead
(``spark.hadoop_copy``: block streaming over the DataNodes' RPC, composite CRCs from HDFS, Hadoop's own
Kerberos and delegation tokens); the driver checks every path against the copy's roots before handing the
tasks over and every reported checksum after. Local, S3 and mixed copies run in Python as described here.

Every file is staged under a hidden name, verified against a checksum known before the copy, and only then
published (the load publishes its own staged copies when it applies metadata; the tree copy renames each
file into place itself). A failed file never stops the others: all failures are collected and reported
together on the driver, naming each file and the reason.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import heapq
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from hmsrepl.exceptions import HmsReplError, StorageError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.replication.filecopy import CopyResult, CopyTask, bound, run_copy_task
from hmsrepl.spark import hadoop_copy
from hmsrepl.spark.progress import CopyProgress, ProgressAddress, ProgressSender
from hmsrepl.storage.base import FileStatus, base_name, join_uri, relative_to, store_traits
from hmsrepl.storage.checksum import parse_checksum_token
from hmsrepl.storage.local import Durability, deferred_sync
from hmsrepl.storage.rooted import RootedFileSystem, copy_between
from hmsrepl.storage.staging import STAGING_PREFIX, publish, staging_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from hmsrepl.metastore import Metastore
    from hmsrepl.replication.commands import LoadCommand

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: What opening, creating, renaming and stat-ing one file costs, in bytes of copying time (cp: ~1.2 GB/s and
#: 1,400-12,700 small files/s here, i.e. 0.1-0.9 ms per file).
FILE_COST_BYTES = 256 * 1024
#: Groups (Spark tasks) per executor core: LPT packing already balances known sizes; more groups add overhead.
GROUPS_PER_CORE = 1
#: Items per group at most, so a task stays small to ship (~150 bytes a copy task: 4,096 make ~0.6 MB; Spark
#: warns above 1 MB and its RPC limit is 128 MB): a million-file load on 8 cores becomes 248 tasks.
MAX_GROUP_ITEMS = 4096
#: Copies in flight per Spark task, at least (the store's ``io_parallelism`` when higher, e.g. S3's 16).
MIN_COPY_THREADS = 8


@dataclass(frozen=True)
class FileFailure:
    """A file (or location) the executors could not handle: which, where to (copies), and why, in one line."""

    uri: str
    reason: str
    target: str = ""


class SparkCopyError(StorageError):
    """Some copies failed on executors; nothing of theirs was published (a staged copy is reused or removed)."""

    def __init__(self, failures: Sequence[FileFailure], total: int, note: str = "") -> None:
        first = failures[0]
        super().__init__(
            f"{len(failures)} of {total} file copies failed; first: '{first.uri}' -> '{first.target}': "
            f"{first.reason}" + (f"; {note}" if note else "")
        )
        self.failures = list(failures)
        self.total = total


@dataclass(frozen=True)
class TreeCopyResult:
    files: int
    bytes: int


# -- the load's copy ------------------------------------------------------------------------------------------
def spark_copy(
    spark: SparkSession,
    tasks: Sequence[CopyTask],
    *,
    partitions: int | None = None,
    threads: int | None = None,
    durability: Durability = "batch",
) -> list[CopyResult]:
    """Stage a verified copy of every task's file on the executors; results in task order.

    Each file goes through ``filecopy.run_copy_task`` (original location, recorded version, then cmroot;
    the copy must match the event's checksum), so the load that follows finds verified staged copies and
    only publishes them. A task whose target already holds the right content (an earlier, interrupted load
    published it) is not copied again: its result has ``bytes_copied == 0`` and ``source_used`` equal to the
    target. Raises SparkCopyError naming the failed files if any copy fails.

    ``partitions`` defaults to one group per executor core, ``threads`` (copies in flight per group) to
    ``copy_threads`` of the target store; ``threads=1`` copies each group's files one after the other.
    ``durability`` (local targets): ``batch`` syncs each task's copies once before the task reports them,
    ``file`` syncs every copy on its own, ``none`` leaves them in the page cache (``storage.local``).
    """
    if not tasks:
        return []
    threads = threads or copy_threads(tasks[0].target_uri)
    outcomes: list[CopyResult | FileFailure | None] = [None] * len(tasks)
    on_jvm = _plan_on_hadoop(spark, tasks)
    for index, planned in on_jvm.items():
        if isinstance(planned, FileFailure):
            outcomes[index] = planned
    jvm_tasks = {i: p for i, p in on_jvm.items() if isinstance(p, hadoop_copy.HadoopTask)}
    if jvm_tasks:
        indexes = list(jvm_tasks)
        reported = _run_on_hadoop(
            spark,
            [jvm_tasks[i] for i in indexes],
            [_task_cost(tasks[i]) for i in indexes],
            partitions,
            threads,
            f"hmsrepl copy: {len(indexes)} files",
        )
        for index, reported_outcome in zip(indexes, reported, strict=True):
            outcomes[index] = _checked_load(tasks[index], jvm_tasks[index], reported_outcome)
    rest = [index for index in range(len(tasks)) if index not in on_jvm]
    if rest:
        copied = distribute(
            spark,
            [tasks[index] for index in rest],
            [_task_cost(tasks[index]) for index in rest],
            _copy_task_outcome,
            partitions,
            threads,
            f"hmsrepl copy: {len(rest)} files",
            durability=durability,
            failed=_copy_failure,
            progress_bytes=sum(_task_size(tasks[index]) for index in rest),
        )
        for index, outcome in zip(rest, copied, strict=True):
            outcomes[index] = outcome
    failures = [o for o in outcomes if isinstance(o, FileFailure)]
    if failures:
        raise SparkCopyError(failures, len(tasks))
    return outcomes  # type: ignore[return-value]


def load_copy_plan(target: Metastore, command: LoadCommand, source_roots: Any = None) -> list[CopyTask]:
    """The files ``LoadEngine.load(command)`` would copy, or none when that load would not run.

    ``LoadEngine.plan_copies`` lists files without checking the target's state, so a copier could stage a
    whole database for a load that ``load()`` then refuses (target not a replica, events skipped, bootstrap
    loaded before) and whose staged copies nothing would ever publish or remove. Here a refused load plans
    nothing, and ``load()`` raises its precise error without anything having been copied.
    """
    from hmsrepl.replication.layout import DumpDir  # the metastore's imports: not needed on executors
    from hmsrepl.replication.load import LoadEngine, repl_status

    meta = DumpDir(command.dump_dir).require_complete()
    target_db = (command.target_db or meta.db_name).lower()
    engine = LoadEngine(target, source_roots=source_roots)  # plan_copies validates the dump: refused, none
    last = repl_status(target, target_db)
    if meta.kind == "bootstrap":
        if last is not None and last >= meta.last_event_id:
            return []  # loaded before: load() does nothing
        # Raises what load() would. Private: LoadEngine has no public state check yet (core change requested:
        # plan_copies should make these checks itself, and then this function reduces to that call).
        engine._check_bootstrap_target(target_db, meta)
    elif last is None or meta.from_event_id > last:
        return []  # not a bootstrapped replica, or the dump would skip events: load() refuses it
    return engine.plan_copies(command)


def discard_unpublished(tasks: Sequence[CopyTask]) -> int:
    """``replication.prestage.discard_unpublished``, imported when called: executors never need it."""
    from hmsrepl.replication.prestage import discard_unpublished as discard

    return discard(tasks)


def _plan_on_hadoop(
    spark: SparkSession, tasks: Sequence[CopyTask]
) -> dict[int, hadoop_copy.HadoopTask | FileFailure]:
    """The tasks the Hadoop client copies (``spark.hadoop_copy``), by index: each checked against its roots
    here, on the driver (a refused one is a failure and reaches no executor); the others copy in Python."""
    planned: dict[int, hadoop_copy.HadoopTask | FileFailure] = {}
    if not any(hadoop_copy.on_hadoop(task.target_uri) for task in tasks):
        return planned
    for index, task in enumerate(tasks):
        try:
            jvm_task = hadoop_copy.load_task(task)
        except Exception as exc:
            planned[index] = _copy_failure(task, exc)
            continue
        if jvm_task is not None:
            planned[index] = jvm_task
    if any(isinstance(p, hadoop_copy.HadoopTask) for p in planned.values()) and not hadoop_copy.available(
        spark
    ):
        return {i: p for i, p in planned.items() if isinstance(p, FileFailure)}
    return planned


def _run_on_hadoop(
    spark: SparkSession,
    tasks: Sequence[hadoop_copy.HadoopTask],
    costs: Sequence[int],
    partitions: int | None,
    threads: int,
    description: str,
) -> list[hadoop_copy.HadoopOutcome]:
    """``hadoop_copy.run`` over balanced groups, as ``distribute`` groups the Python copies."""
    sc = spark.sparkContext
    groups = balance(costs, partitions or group_count(len(tasks), sc.defaultParallelism * GROUPS_PER_CORE))
    sc.setJobDescription(description)
    log.info(
        "%s through Hadoop's FileSystem API on the executors (engine %s) in %d Spark tasks, %d in flight per task",
        description,
        hadoop_copy.ENGINE,
        len(groups),
        threads,
    )
    try:
        return hadoop_copy.run(spark, tasks, groups, threads)
    finally:
        sc.setJobDescription(None)  # type: ignore[arg-type]


def _checked_load(
    task: CopyTask, jvm_task: hadoop_copy.HadoopTask, outcome: hadoop_copy.HadoopOutcome
) -> CopyResult | FileFailure:
    try:
        return hadoop_copy.check_load(task, jvm_task, outcome)
    except Exception as exc:
        return _copy_failure(task, exc)


def _copy_task_outcome(task: CopyTask) -> CopyResult | FileFailure:
    try:
        if _in_place(task):
            return CopyResult(task.target_uri, task.target_uri, 0, from_cmroot=False)
        return run_copy_task(task)
    except Exception as exc:  # reported with the file on the driver; one bad file must not hide the others
        return _copy_failure(task, exc)


def _copy_failure(task: CopyTask, exc: BaseException) -> FileFailure:
    return FileFailure(_source_of(task), failure_reason(exc), task.target_uri)


def _in_place(task: CopyTask) -> bool:
    """Whether the target already holds the task's content (same size, then same checksum)."""
    checksum = EncodedFileUri.decode(task.encoded).checksum
    try:
        size = parse_checksum_token(checksum)[1]
    except ValueError:  # no (or a foreign) checksum: nothing to compare with, so copy
        return False
    fs = bound(task.target_roots, "replica files of this load")
    for status in fs.list_files(task.target_uri):  # one stat (one LIST on S3), no error when absent
        if status.uri.rstrip("/") == task.target_uri.rstrip("/") and status.size == size:
            return fs.checksum(task.target_uri) == checksum
    return False


def _task_size(task: CopyTask) -> int:
    """The file's size from its recorded checksum; 0 when none is recorded."""
    try:
        return parse_checksum_token(EncodedFileUri.decode(task.encoded).checksum)[1]
    except ValueError:
        return 0


def _task_cost(task: CopyTask) -> int:
    size = _task_size(task)  # no checksum recorded: size unknown, count it as an average file
    return size + FILE_COST_BYTES if size else 4 * FILE_COST_BYTES


def _source_of(task: CopyTask) -> str:
    try:
        return EncodedFileUri.decode(task.encoded).file_uri
    except Exception:
        return task.encoded


# -- distcp ------------------------------------------------------------------------------------------------
def spark_copy_tree(
    spark: SparkSession,
    src_root: str,
    dst_root: str,
    *,
    partitions: int | None = None,
    threads: int | None = None,
    durability: Durability = "batch",
) -> TreeCopyResult:
    """Copy every file below ``src_root`` to the same relative path below ``dst_root`` (a distcp).

    The driver lists the source; executors copy. Each file's checksum is taken from the source first (one
    HEAD on S3, a read locally), the copy is hashed while it is written under a hidden staging name and
    compared with it (a mismatch deletes the copy: the source changed or the copy was damaged), and only a
    verified copy is renamed into place, replacing an older file of that name. Staged leftovers of an
    interrupted copy in the source are not copied. Raises SparkCopyError naming the failed files.
    ``durability`` as for ``spark_copy``.
    """
    src_fs = RootedFileSystem([src_root], purpose=f"copy from '{src_root}'")
    statuses = [s for s in src_fs.list_files(src_root) if not base_name(s.uri).startswith(STAGING_PREFIX)]
    pairs = [(s.uri, join_uri(dst_root, _relative(s.uri, src_root))) for s in statuses]
    if not pairs:
        return TreeCopyResult(0, 0)
    threads = threads or copy_threads(dst_root)
    if hadoop_copy.on_hadoop(src_root, dst_root) and hadoop_copy.available(spark):
        return _copy_tree_on_hadoop(spark, src_fs, dst_root, statuses, pairs, partitions, threads)
    outcomes = distribute(
        spark,
        pairs,
        [s.size + FILE_COST_BYTES for s in statuses],
        _CopyAndPublish(src_root, dst_root),
        partitions,
        threads,
        f"hmsrepl copy tree: {len(pairs)} files from {src_root}",
        durability=durability,
        failed=_pair_failure,
        progress_bytes=sum(s.size for s in statuses),
    )
    failures = [o for o in outcomes if isinstance(o, FileFailure)]
    if failures:
        raise SparkCopyError(failures, len(pairs))
    return TreeCopyResult(len(pairs), sum(o for o in outcomes if isinstance(o, int)))


def _copy_tree_on_hadoop(
    spark: SparkSession,
    src_fs: RootedFileSystem,
    dst_root: str,
    statuses: Sequence[FileStatus],
    pairs: Sequence[tuple[str, str]],
    partitions: int | None,
    threads: int,
) -> TreeCopyResult:
    """``spark_copy_tree`` through Hadoop's client: each pair admitted by the source's and the destination's
    roots here, each reported copy checked against the source's checksum here."""
    dst_fs = RootedFileSystem([dst_root], purpose=f"copy to '{dst_root}'")
    for src, dst in pairs:
        src_fs.check(src)
        dst_fs.check(dst)
    jvm_tasks = [
        hadoop_copy.tree_task(src, dst, s.size) for (src, dst), s in zip(pairs, statuses, strict=True)
    ]
    reported = _run_on_hadoop(
        spark,
        jvm_tasks,
        [s.size + FILE_COST_BYTES for s in statuses],
        partitions,
        threads,
        f"hmsrepl copy tree: {len(pairs)} files from {src_fs.roots[0]}",
    )
    failures, copied = [], 0
    for pair, jvm_task, outcome in zip(pairs, jvm_tasks, reported, strict=True):
        try:
            copied += hadoop_copy.check_tree(jvm_task, outcome, (dst_root,))
        except Exception as exc:
            failures.append(_pair_failure(pair, exc))
    if failures:
        raise SparkCopyError(failures, len(pairs))
    return TreeCopyResult(len(pairs), copied)


def _relative(uri: str, root: str) -> str:
    return base_name(uri) if uri.rstrip("/") == root.rstrip("/") else relative_to(uri, root)


@dataclass(frozen=True)
class _CopyAndPublish:
    """Executor side of ``spark_copy_tree``: one verified copy, read below ``src_root`` and written below
    ``dst_root`` only (picklable: the rooted file systems are made on the executor)."""

    src_root: str
    dst_root: str

    def __call__(self, pair: tuple[str, str]) -> int | FileFailure:
        src, dst = pair
        try:
            source = bound((self.src_root,), f"copy from '{self.src_root}'")
            target = bound((self.dst_root,), f"copy to '{self.dst_root}'")
            expected = source.checksum(src)
            copy_between(source, src, target, staging_name(dst), expected)
            publish(target, dst)
            return parse_checksum_token(expected)[1]
        except Exception as exc:  # reported with the file on the driver
            return _pair_failure(pair, exc)


def _pair_failure(pair: tuple[str, str], exc: BaseException) -> FileFailure:
    return FileFailure(pair[0], failure_reason(exc), pair[1])


def copy_threads(uri: str) -> int:
    """Copies worth keeping in flight per Spark task when writing to ``uri``'s store."""
    return max(MIN_COPY_THREADS, store_traits(uri).io_parallelism)


# -- distribution -------------------------------------------------------------------------------------------
def balance(costs: Sequence[int], groups: int) -> list[list[int]]:
    """Indexes of ``costs`` packed into at most ``groups`` groups of near-equal total cost.

    Longest-processing-time first: the largest item goes to the least loaded group, so big files spread
    over the groups before small ones fill the gaps (within 4/3 of the best packing).
    """
    heap = [(0, slot) for slot in range(max(1, groups))]
    packed: list[list[int]] = [[] for _ in heap]
    for index in sorted(range(len(costs)), key=costs.__getitem__, reverse=True):
        load, slot = heapq.heappop(heap)
        packed[slot].append(index)
        heapq.heappush(heap, (load + costs[index], slot))
    return [group for group in packed if group]


def distribute(
    spark: SparkSession,
    items: Sequence[T],
    costs: Sequence[int],
    work: Callable[[T], R],
    partitions: int | None,
    threads: int,
    description: str,
    *,
    durability: Durability = "file",
    failed: Callable[[T, BaseException], R] | None = None,
    progress_bytes: int | None = None,
) -> list[R]:
    """Run ``work`` on every item on the executors, one balanced group per Spark task; outcomes in item order.

    ``work`` must be a module-level function (shipped by reference) that returns its failures instead of
    raising them, so one bad item does not fail, retry and hide the rest of its group. Local files a group
    writes are durable as ``durability`` says before its task returns (``storage.local.deferred_sync``);
    when the group's sync fails, ``failed(item, error)`` is every item's outcome (else the task fails).
    With ``progress_bytes`` (the bytes the items hold) the items are copies: files and bytes done so far are
    logged while they run (``spark.progress``; ``work`` returns a ``CopyResult``, a byte count or a
    ``FileFailure``).
    """
    sc = spark.sparkContext
    groups = balance(costs, partitions or group_count(len(items), sc.defaultParallelism * GROUPS_PER_CORE))
    payload = [[(index, items[index]) for index in group] for group in groups]
    sc.setJobDescription(description)
    log.info("%s in %d Spark tasks, %d in flight per task", description, len(payload), threads)
    progress = (
        CopyProgress(
            description.split(":")[0],
            len(items),
            progress_bytes,
            sc.getConf().get("spark.driver.host", "127.0.0.1"),
            senders=len(payload),
        )
        if progress_bytes is not None
        else contextlib.nullcontext()
    )
    try:
        with progress:
            address = progress.address if isinstance(progress, CopyProgress) else None
            run = functools.partial(
                _run_group, work=work, threads=threads, durability=durability, failed=failed, progress=address
            )
            collected = sc.parallelize(payload, len(payload)).map(run).collect()
    finally:
        sc.setJobDescription(None)  # type: ignore[arg-type]
    outcomes: list[Any] = [None] * len(items)
    for group in collected:
        for index, outcome in group:
            outcomes[index] = outcome
    return outcomes


def group_count(items: int, slots: int) -> int:
    """``slots`` groups, or a multiple of it when that many would exceed ``MAX_GROUP_ITEMS`` items each.

    A multiple, so the last wave of tasks still fills every core.
    """
    waves = -(-items // (MAX_GROUP_ITEMS * slots))
    return slots * max(1, waves)


def _run_group(
    group: list[tuple[int, T]],
    work: Callable[[T], R],
    threads: int,
    durability: Durability = "file",
    failed: Callable[[T, BaseException], R] | None = None,
    progress: ProgressAddress | None = None,
) -> list[tuple[int, R]]:
    """One Spark task: a group's items with up to ``threads`` in flight, then their one sync (executor side).

    With a ``progress`` address each finished copy is counted there (``copied``)."""
    indexes = [index for index, _ in group]
    items = [item for _, item in group]
    try:
        with deferred_sync(durability), ProgressSender(progress) as sender:

            def counted(item: T) -> R:
                outcome = work(item)
                sender.add(*copied(outcome))
                return outcome

            outcomes = run_threaded(counted if progress else work, items, threads)
    except Exception as exc:  # the batch's sync failed: none of its copies may count as done
        if failed is None:
            raise
        outcomes = [failed(item, exc) for item in items]
    return list(zip(indexes, outcomes, strict=True))


def run_threaded(work: Callable[[T], R], items: Sequence[T], threads: int) -> list[R]:
    """``work`` over ``items`` with up to ``threads`` in flight, each in a copy of the caller's context.

    The copy carries context variables such as the open ``deferred_sync`` batch into the pool's threads.
    """
    if threads <= 1 or len(items) <= 1:
        return list(map(work, items))
    with ThreadPoolExecutor(max_workers=min(threads, len(items))) as pool:
        futures = [pool.submit(contextvars.copy_context().run, work, item) for item in items]
        return [future.result() for future in futures]


def copied(outcome: object) -> tuple[int, int, int]:
    """(files, bytes copied, files failed) of one copy's outcome, for progress reports."""
    if isinstance(outcome, FileFailure):
        return 1, 0, 1
    if isinstance(outcome, CopyResult):
        return 1, outcome.bytes_copied, 0
    return 1, outcome if isinstance(outcome, int) else 0, 0


def failure_reason(exc: BaseException) -> str:
    text = str(exc) if isinstance(exc, HmsReplError) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())  # one line, for logs and the orchestrator
