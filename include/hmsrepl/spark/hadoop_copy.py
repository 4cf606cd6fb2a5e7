"""Spark copies between ``hdfs://`` paths through Hadoop's FileSystem API on the executors, as distcp copies.

Why: the Python copy (``spark.copy``) reaches HDFS through WebHDFS, one HTTP request per operation and the
data through the NameNode's redirect; the Hadoop client streams blocks from and to the DataNodes over their
RPC, handles Kerberos and delegation tokens as every Hadoop job does, and gives the composite CRC32C of a
file from the DataNodes without reading it here. pyspark's JVM ships that client (``hadoop-client-api``), so
a small Java class of ours (``java/hmsrepl/spark/HadoopCopy.java``, built by ``spark.hadoop_jar``) runs the
copies in the executors' JVMs; no Python worker is started for them.

What stays here, on the driver, and why the JVM side is safe by construction:

- Every path is checked before the JVM sees it, as the Python copy checks it: each candidate source is
  admitted by a rooted file system bound to the copy's source roots (and, for a load, must lie strictly
  below its object's location or the source cmroot), each destination by one bound to the target roots.
  A refused task is a failed file and never reaches the JVM.
- The JVM receives that fixed list and touches only the paths it names (no globbing, no directories, no
  symbolic links, no ``.``/``..`` or empty segments, ``hdfs://`` only), plus one temporary name beside each
  destination; a load's copy can only go to its final name's staging name.
- Each copy's CRC32C is computed while streaming, the destination's composite CRC is asked of HDFS, and the
  copy is renamed into place only when both equal the expected checksum; the driver then checks every
  reported checksum against the checksum it expected before it trusts a copy (a disagreeing copy is removed
  and its file reported failed).

``HMSREPL_SPARK_HDFS_COPY``: ``auto`` (default: this path for HDFS-to-HDFS copies when the jar can be had,
else the Python copy with a warning), ``hadoop`` (this path, or an error), ``python`` (always the Python copy).
Local files, S3 and mixed copies keep the Python copy.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote_plus

from hmsrepl.exceptions import StorageError
from hmsrepl.formats.file_uri import EncodedFileUri, split_versioned_reference
from hmsrepl.replication.filecopy import CopyResult, CopyTask, below_any, bound, copy_candidates
from hmsrepl.storage.base import uri_scheme
from hmsrepl.storage.checksum import checksum_token, parse_checksum_token
from hmsrepl.storage.hdfs import parse_hdfs_uri
from hmsrepl.storage.hdfs_snapshots import path_in_snapshot
from hmsrepl.storage.staging import staging_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ENGINE_ENV = "HMSREPL_SPARK_HDFS_COPY"
ENGINE_MODES = ("auto", "hadoop", "python")
ENGINE = "hadoop-filesystem"
SCHEMES = ("hdfs",)

_copiers: dict[tuple[str, str], Any] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class HadoopTask:
    """One copy for the JVM: paths already admitted by the copy's roots."""

    mode: str  # "load": to the staging name, candidates in order; "tree": to the final name
    destination: str
    final: str
    size: int  # -1: unknown
    crc: str  # expected CRC32C, 8 hex digits, or "" (tree copies: the source's composite CRC)
    candidates: tuple[str, ...]


@dataclass(frozen=True)
class HadoopOutcome:
    """What the JVM reports for one task (checked by ``check_load``/``check_tree`` before it is trusted)."""

    status: str  # copied | inplace | prefetched | failed
    source: str
    bytes_copied: int
    length: int
    streamed: str  # CRC32C of the bytes streamed, 8 hex digits
    stored: str  # the destination's composite CRC32C from HDFS, or "" when HDFS gave none
    expected: str
    reason: str
    engine: str


def engine_mode() -> str:
    mode = os.environ.get(ENGINE_ENV, "auto") or "auto"
    if mode not in ENGINE_MODES:
        raise StorageError(f"{ENGINE_ENV}='{mode}' is not one of {', '.join(ENGINE_MODES)}")
    return mode


def on_hadoop(*uris: str) -> bool:
    """Whether a copy between ``uris`` is the Hadoop client's to make (all on HDFS, not switched off)."""
    return engine_mode() != "python" and all(uri_scheme(uri) in SCHEMES for uri in uris if uri)


def available(spark: SparkSession) -> bool:
    """Whether the copier can run in this session (its jar built or buildable); ``hadoop`` mode raises."""
    try:
        _copier(spark)
    except Exception as exc:
        if engine_mode() == "hadoop":
            raise
        log.warning("copying HDFS files through WebHDFS: the Hadoop-API copier is unavailable: %s", exc)
        return False
    return True


# -- the driver's checks ---------------------------------------------------------------------------------
def load_task(task: CopyTask) -> HadoopTask | None:
    """The JVM's task for a load's copy, every path admitted by the task's roots; None when a source or the
    target is not on HDFS (the Python copy handles it). Raises StorageError for a refused path."""
    entry = EncodedFileUri.decode(task.encoded)
    staged = staging_name(task.target_uri)
    candidates = copy_candidates(entry, task.default_cmroot)
    if not on_hadoop(task.target_uri, *(split_versioned_reference(c)[0] for c in candidates)):
        return None
    target = bound(task.target_roots, "replica files of this load")
    target.check(task.target_uri)
    target.check(staged)
    allowed = below_any(*task.allowed_roots)
    source = bound(allowed.roots, "source files of this load")
    paths = []
    for candidate in candidates:
        plain, version = split_versioned_reference(candidate)
        if not allowed(plain):
            raise StorageError(
                f"'{candidate}' is outside the source locations this dump may read (its object's location and "
                "the source cmroot); the dump is corrupt or was edited"
            )
        source.check(plain)
        paths.append(snapshot_path(plain, version) if version else plain)
    size, crc = -1, ""
    if entry.checksum:
        value, size = parse_checksum_token(entry.checksum)
        crc = f"{value:08x}"
    return HadoopTask("load", staged, task.target_uri, size, crc, tuple(paths))


def snapshot_path(uri: str, version: str) -> str:
    """The HDFS path under which a snapshot ``version`` keeps ``uri`` (``/dir/.snapshot/<name>/...``)."""
    authority, path = parse_hdfs_uri(uri)
    return f"{uri_scheme(uri)}://{authority}{path_in_snapshot(version, path)}"


def tree_task(src: str, dst: str, size: int) -> HadoopTask:
    """The JVM's task for one file of a tree copy (both paths admitted by the caller's rooted file systems)."""
    return HadoopTask("tree", dst, dst, size, "", (src,))


# -- the executors' run ----------------------------------------------------------------------------------
def run(
    spark: SparkSession, tasks: Sequence[HadoopTask], groups: Sequence[Sequence[int]], threads: int
) -> list[HadoopOutcome]:
    """Run ``tasks`` in the executors' JVMs, one Spark task per group; outcomes in task order."""
    lines = []
    for number, group in enumerate(groups):
        for index in group:
            task = tasks[index]
            fields = [
                str(number),
                str(index),
                task.mode,
                task.destination,
                task.final,
                str(task.size),
                task.crc,
            ]
            lines.append("\t".join(quote(field, safe="") for field in [*fields, *task.candidates]))
    copier = _copier(spark)
    began = time.perf_counter()
    answer = copier.copy(spark.sparkContext._jsc, "\n".join(lines), threads)
    outcomes: list[HadoopOutcome | None] = [None] * len(tasks)
    for line in filter(None, str(answer).split("\n")):
        fields = [unquote_plus(field) for field in line.split("\t")]
        index = int(fields[0])
        outcomes[index] = HadoopOutcome(fields[1], fields[2], int(fields[3]), int(fields[4]), *fields[5:10])
    done = [outcome for outcome in outcomes if outcome is not None]
    log.info(
        "Hadoop-API copier: %d files reported, %d copied (%d bytes), %d failed, in %.1f s",
        len(done),
        sum(1 for o in done if o.status == "copied"),
        sum(o.bytes_copied for o in done),
        sum(1 for o in done if o.status == "failed"),
        time.perf_counter() - began,
    )
    missing = [tasks[i].final for i, outcome in enumerate(outcomes) if outcome is None]
    if missing:
        raise StorageError(
            f"the Hadoop-API copier reported nothing for {len(missing)} files, e.g. '{missing[0]}'"
        )
    return outcomes  # type: ignore[return-value]


def _copier(spark: SparkSession) -> Any:
    """An instance of the Java copier in the driver's JVM, its jar shipped to the executors (once a session).

    Loaded through a class loader of its own, so a session started without ``spark.jars`` can use it;
    ``SparkContext.addJar`` (through the Java context) puts the jar on the executors' class path for the tasks that follow.
    """
    from hmsrepl.spark.hadoop_jar import CLASS_NAME, build

    sc = spark.sparkContext
    jar = str(build())
    key = (sc.applicationId, jar)  # unique per SparkContext: a new session ships the jar again
    with _lock:
        if key not in _copiers:
            sc._jsc.addJar(jar)
            jvm: Any = sc._jvm
            gateway: Any = sc._gateway
            urls = gateway.new_array(jvm.java.net.URL, 1)
            urls[0] = jvm.java.io.File(jar).toURI().toURL()
            loader = jvm.java.net.URLClassLoader(
                urls, jvm.java.lang.Thread.currentThread().getContextClassLoader()
            )
            cls = loader.loadClass(CLASS_NAME)
            constructor = cls.getDeclaredConstructor(gateway.new_array(jvm.java.lang.Class, 0))
            _copiers[key] = constructor.newInstance(gateway.new_array(jvm.java.lang.Object, 0))
        return _copiers[key]


# -- the driver's check of each reported copy -----------------------------------------------------------
def check_load(task: CopyTask, hadoop: HadoopTask, outcome: HadoopOutcome) -> CopyResult:
    """The load's result for a reported copy, after checking its checksums against the dump's; StorageError
    (the copy removed) when they disagree or the copy failed."""
    entry = EncodedFileUri.decode(task.encoded)
    if outcome.status == "failed":
        reason = outcome.reason
        if reason.startswith("no copy"):
            reason = (
                f"no copy of '{entry.file_uri}' with checksum {entry.checksum} is left: "
                + reason.split(": ", 1)[-1]
            )
        raise StorageError(reason)
    wanted = entry.checksum
    if outcome.status in ("inplace", "prefetched"):
        if not wanted or _token(outcome.stored, outcome.length) != wanted:
            raise StorageError(f"the Hadoop copier kept '{outcome.source}' without a matching checksum")
        if outcome.status == "inplace":
            return CopyResult(task.target_uri, task.target_uri, 0, from_cmroot=False)
        return CopyResult(
            task.target_uri, hadoop.destination, outcome.length, from_cmroot=False, prefetched=True
        )
    _require_verified(outcome, wanted, hadoop.destination, task.target_roots)
    source = _original(task, hadoop, outcome.source)
    cmroot = entry.cmroot or task.default_cmroot
    from_cmroot = bool(cmroot) and source.startswith(cmroot.rstrip("/") + "/")
    return CopyResult(task.target_uri, source, outcome.bytes_copied, from_cmroot=from_cmroot)


def check_tree(hadoop: HadoopTask, outcome: HadoopOutcome, roots: tuple[str, ...]) -> int:
    """Bytes of a tree copy's file after checking its checksums against the source's; StorageError (the
    copy removed) when they disagree or the copy failed."""
    if outcome.status != "copied":
        raise StorageError(outcome.reason or f"unexpected status '{outcome.status}'")
    wanted = _token(outcome.expected, hadoop.size) if outcome.expected else ""
    _require_verified(outcome, wanted, hadoop.destination, roots)
    return outcome.bytes_copied


def _require_verified(outcome: HadoopOutcome, wanted: str, destination: str, roots: tuple[str, ...]) -> None:
    streamed = _token(outcome.streamed, outcome.length)
    stored = _token(outcome.stored, outcome.length) if outcome.stored else streamed
    if outcome.bytes_copied != outcome.length or (wanted and streamed != wanted) or stored != streamed:
        bound(roots, "replica files of this copy").delete(destination)
        raise StorageError(
            f"the copy of '{outcome.source}' has checksum {stored} ({streamed} streamed), expected "
            f"{wanted or 'the streamed one'}; it was removed"
        )


def _token(crc_hex: str, length: int) -> str:
    try:
        return checksum_token(int(crc_hex, 16), length)
    except ValueError:
        return f"unreadable checksum '{crc_hex}'"


def _original(task: CopyTask, hadoop: HadoopTask, used: str) -> str:
    """The candidate (as the dump names it) the JVM read ``used`` for."""
    entry = EncodedFileUri.decode(task.encoded)
    for candidate, path in zip(copy_candidates(entry, task.default_cmroot), hadoop.candidates, strict=True):
        if path == used:
            return candidate
    return used
