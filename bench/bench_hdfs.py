"""Benchmark of HDFS copies and checksums: our copy against ``hdfs dfs -cp``, composite CRC against reading.

Against one MiniDFSCluster on loopback (``tests.peers.hdfs``: one NameNode, one DataNode, 1 MiB blocks;
started here and stopped after), in one run:

- copies HDFS -> HDFS and HDFS -> local disk of each workload, by
  - ``hmsrepl copy_files``: ``storage.copy_files`` with 16 threads, streamed through WebHDFS and verified
    against the source's checksum token (what a replication load does outside Spark);
  - ``hdfs dfs -cp``: Hadoop's shell (``FsShell -cp <dir> <dir>``, the same jars), one JVM per call, its
    start included, as an operator would run it;
  - with ``--spark`` (HDFS -> HDFS only), ``spark.copy.spark_copy_tree`` on a local[2] SparkSession (started
    once, its start reported on its own line): through Hadoop's FileSystem API in the executors' JVMs
    (``spark.hadoop_copy``, the default between HDFS paths), and through WebHDFS in the executors' Python
    workers (``HMSREPL_SPARK_HDFS_COPY=python``), both verified;
- checksums of every file of each workload, by
  - ``composite CRC``: HDFS's whole-file CRC32C (``dfs.checksum.combine.mode=COMPOSITE_CRC``) asked of
    Hadoop's client through the py4j gateway (``storage.hadoop_checksums``; the gateway's start is reported
    on its own line, it is paid once per process), 8 threads;
  - ``read + CRC32C``: each file read through WebHDFS and hashed here, 8 threads;
  - ``identify, snapshot pin``: what the metastore does when it records the files of an INSERT below a
    snapshottable directory: one snapshot taken, every file checked against it and checksummed there
    (composite CRC), 8 threads; the snapshots are deleted after each round.

Workloads: large files (default 4 x 16 MB) and small files (default 200 x 4 KB). The cluster shares the
machine with this process, so absolute speeds are those of loopback on a busy host; the ratios carry over.
Each figure is the median of ``--rounds`` rounds.

Run:  python bench/bench_hdfs.py [--large-count 4 --large-mb 16 --small-count 200 --small-kb 4 --rounds 2]
      [--spark] [--copies-only]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "include", ROOT):  # run as a plain script from a checkout, no PYTHONPATH needed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench.bench_s3_copy import Row, Workload  # noqa: E402
from hmsrepl.spark import hadoop_copy  # noqa: E402
from hmsrepl.storage import (  # noqa: E402
    copy_files,
    filesystem_for,
    hadoop_checksums,
)
from hmsrepl.storage.checksum import checksum_bytes  # noqa: E402
from hmsrepl.storage.hdfs import ENDPOINTS_ENV, HdfsFileSystem, parse_hdfs_uri  # noqa: E402
from tests.peers import hdfs as peer  # noqa: E402

THREADS = 16
CHECKSUM_THREADS = 8
SPARK: list[object] = []  # the SparkSession of --spark, started once


def prepare(root: str, workload: Workload) -> list[tuple[str, str]]:
    """Write the sources on HDFS; returns (uri, checksum token)."""
    fs = filesystem_for(root)

    def write(index: int) -> tuple[str, str]:
        data = os.urandom(workload.size)
        uri = f"{root}/f{index:05d}"
        fs.write_bytes(uri, data)
        return uri, checksum_bytes(data)

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(write, range(workload.count)))


def ours(sources: list[tuple[str, str]], src_dir: str, dst_dir: str, _: peer.MiniDfs) -> None:
    tasks = [(uri, f"{dst_dir}/{uri.rsplit('/', 1)[1]}", token) for uri, token in sources]
    copy_files(tasks, threads=THREADS)


def hdfs_cp(_: list[tuple[str, str]], src_dir: str, dst_dir: str, cluster: peer.MiniDfs) -> None:
    target = dst_dir if "://" in dst_dir else f"file://{dst_dir}"
    if "://" not in dst_dir:
        os.makedirs(os.path.dirname(dst_dir), exist_ok=True)
    run = cluster.hadoop_shell("-cp", src_dir, target)
    if run.returncode != 0:
        raise SystemExit(f"hdfs dfs -cp failed: {run.stderr[-500:]}")


def spark_tree_copy(engine: str) -> Callable[[list[tuple[str, str]], str, str, peer.MiniDfs], None]:
    """``spark_copy_tree`` with the copy engine ``engine`` (``HMSREPL_SPARK_HDFS_COPY``)."""

    def copy(sources: list[tuple[str, str]], src_dir: str, dst_dir: str, _: peer.MiniDfs) -> None:
        from hmsrepl.spark.copy import spark_copy_tree

        os.environ[hadoop_copy.ENGINE_ENV] = engine
        try:
            result = spark_copy_tree(SPARK[0], src_dir, dst_dir)  # type: ignore[arg-type]
        finally:
            os.environ.pop(hadoop_copy.ENGINE_ENV, None)
        if result.files != len(sources):
            raise SystemExit(f"spark_copy_tree copied {result.files} of {len(sources)} files")

    copy.__name__ = f"spark_{engine}"
    return copy


Method = Callable[[list[tuple[str, str]], str, str, peer.MiniDfs], None]
COPY_METHODS: list[tuple[str, Method]] = [
    ("hmsrepl copy_files (16 threads, verified)", ours),
    ("hdfs dfs -cp (FsShell, JVM start included)", hdfs_cp),
]
SPARK_METHODS: list[tuple[str, Method]] = [
    ("Spark local[2], Hadoop FS API in executor JVMs", spark_tree_copy("hadoop")),
    ("Spark local[2], WebHDFS in executor Python", spark_tree_copy("python")),
]


def check_copies(sources: list[tuple[str, str]], dst_dir: str) -> None:
    """Every copy exists with the source's size: a benchmark of copies that did not happen is worthless."""
    sizes = {s.uri.rsplit("/", 1)[1]: s.size for s in filesystem_for(dst_dir).list_files(dst_dir)}
    for uri, token in sources:
        if sizes.get(uri.rsplit("/", 1)[1]) != int(token.rsplit("-", 1)[1]):
            raise SystemExit(f"copy of {uri} into {dst_dir} is missing or has the wrong size")


def checksums(fs: HdfsFileSystem, sources: list[tuple[str, str]]) -> None:
    with ThreadPoolExecutor(CHECKSUM_THREADS) as pool:
        found = list(pool.map(fs.checksum, [uri for uri, _ in sources]))
    if found != [token for _, token in sources]:
        raise SystemExit(f"{fs.checksum_mode} checksums differ from the written data's")


def pinned(fs: HdfsFileSystem, sources: list[tuple[str, str]]) -> int:
    """Identify every file (pinning it) and check the tokens; how many snapshots that took."""
    with ThreadPoolExecutor(CHECKSUM_THREADS) as pool:
        found = list(pool.map(fs.identify, [uri for uri, _ in sources]))
    if [identity.checksum for identity in found] != [token for _, token in sources]:
        raise SystemExit("pinned checksums differ from the written data's")
    return len({identity.version_id for identity in found})


def run(
    cluster: peer.MiniDfs, workloads: list[Workload], rounds: int, local_root: Path, copies_only: bool = False
) -> list[Row]:
    rows = []
    namenode = parse_hdfs_uri(cluster.namenode + "/")[0]
    by_mode = {mode: HdfsFileSystem(namenode, checksum_mode=mode) for mode in ("composite", "read")}
    warm_up = f"{cluster.namenode}/bench/warm-up"
    filesystem_for(warm_up).write_bytes(warm_up, b"x")
    started = time.perf_counter()
    hadoop_checksums.composite_checksum(warm_up)  # starts the gateway
    print(f"py4j gateway start for composite checksums: {time.perf_counter() - started:.1f} s (once)")
    for index, workload in enumerate(workloads):
        src_dir = f"{cluster.namenode}/bench/src{index}"
        sources = prepare(src_dir, workload)
        for target_name, target_root in (
            ("HDFS -> HDFS", f"{cluster.namenode}/bench/dst{index}"),
            ("HDFS -> local", str(local_root / f"dst{index}")),
        ):
            spark = SPARK_METHODS if SPARK and target_name == "HDFS -> HDFS" else []
            for method_name, method in COPY_METHODS + spark:
                timings = []
                for round_no in range(rounds):
                    dst_dir = f"{target_root}/{method.__name__}-{round_no}"
                    began = time.perf_counter()
                    method(sources, src_dir, dst_dir, cluster)
                    timings.append(time.perf_counter() - began)
                    check_copies(sources, dst_dir)
                    filesystem_for(dst_dir).delete_tree(dst_dir)
                label = f"copy {target_name}: {method_name}"
                rows.append(
                    Row(workload.name, label, statistics.median(timings), workload.count, workload.size)
                )
        if copies_only:
            filesystem_for(src_dir).delete_tree(src_dir)
            continue
        for mode, label in (("composite", "composite CRC from HDFS"), ("read", "read + CRC32C here")):
            timings = []
            for _ in range(rounds):
                began = time.perf_counter()
                checksums(by_mode[mode], sources)
                timings.append(time.perf_counter() - began)
            name = f"checksum: {label} ({CHECKSUM_THREADS} threads)"
            rows.append(Row(workload.name, name, statistics.median(timings), workload.count, workload.size))
        pinning = HdfsFileSystem(namenode, checksum_mode="composite", snapshots="pin")
        pinning._call("ALLOWSNAPSHOT", src_dir, "put")
        timings, taken = [], set()
        for _ in range(rounds):
            began = time.perf_counter()
            taken.add(pinned(pinning, sources))
            timings.append(time.perf_counter() - began)
            pinning.expire_pins(src_dir, time.time() + 1)
        pinning._call("DISALLOWSNAPSHOT", src_dir, "put")
        name = f"identify: snapshot pin + composite CRC, {'/'.join(map(str, sorted(taken)))} snapshot(s)"
        rows.append(Row(workload.name, name, statistics.median(timings), workload.count, workload.size))
        filesystem_for(src_dir).delete_tree(src_dir)
    return rows


def print_table(rows: list[Row]) -> None:
    print(f"{'workload':<20} {'method':<72} {'seconds':>8} {'MB/s':>8} {'files/s':>9}")
    for row in rows:
        print(
            f"{row.workload:<20} {row.method:<72} {row.seconds:>8.2f} {row.mb_per_s:>8.1f} "
            f"{row.files_per_s:>9.1f}"
        )


def start_spark() -> None:
    """A local[2] SparkSession whose Python workers import this checkout (the WebHDFS address is already in
    the environment they inherit); the Hadoop copier's jar is built before the clock starts."""
    from hmsrepl.spark.hadoop_jar import build
    from hmsrepl.spark_session import local_spark_session

    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "include"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    )
    build()
    began = time.perf_counter()
    session = local_spark_session("bench-hdfs", master="local[2]")
    session.sparkContext.setLogLevel("ERROR")
    SPARK.append(session)
    print(f"SparkSession start: {time.perf_counter() - began:.1f} s (once)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--large-count", type=int, default=4)
    parser.add_argument("--large-mb", type=int, default=16)
    parser.add_argument("--small-count", type=int, default=200)
    parser.add_argument("--small-kb", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--spark", action="store_true", help="add the Spark copies (HDFS -> HDFS)")
    parser.add_argument("--copies-only", action="store_true", help="skip the checksum and snapshot rows")
    args = parser.parse_args()
    workloads = [
        Workload(f"{args.large_count} x {args.large_mb} MB", args.large_count, args.large_mb * 1_000_000),
        Workload(f"{args.small_count} x {args.small_kb} KB", args.small_count, args.small_kb * 1000),
    ]
    with tempfile.TemporaryDirectory(prefix="bench-hdfs-") as tmp:
        cluster = peer.start(Path(tmp) / "cluster")
        try:
            print(f"MiniDFSCluster start: {cluster.start_seconds:.1f} s")
            os.environ[ENDPOINTS_ENV] = cluster.endpoints
            if args.spark:
                start_spark()
            local_root = Path(tmp) / "local"
            rows = run(cluster, workloads, args.rounds, local_root, args.copies_only)
            shutil.rmtree(local_root, ignore_errors=True)
        finally:
            if SPARK:
                SPARK.pop().stop()  # type: ignore[attr-defined]
            hadoop_checksums.stop_gateway()
            cluster.stop()
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
