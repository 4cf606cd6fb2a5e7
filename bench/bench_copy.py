"""Benchmark of the Spark load copy against ``cp -r`` of the same files, in one run on one machine.

The load app's copy is the part of replication that scales with data; the bar is the plainest copy there
is. Measured per workload as the median of ``--rounds`` rounds after ``--warmup-rounds`` untimed ones;
around every step dirty data is written back (``sync``, untimed), and each copy is checked, then deleted;
methods run in a new random order each round (seeded), so none always follows the same one. The machine is
noisy (one method's runs spread 2x): compare rows of one run, not runs.

- ``cp -r``: GNU cp (coreutils 9 copies in the kernel with ``copy_file_range``; no checksum, no fsync: its
  data may still be only in the page cache when it returns);
- ``cp -r + sync``: the same plus ``sync``: as durable as our copies, which fsync each file before use;
- ``spark_copy_tree``: ``hmsrepl.spark.copy.spark_copy_tree`` (the distcp): the driver lists, executors take
  the source's CRC32C, copy it hashing under a hidden staging name, compare, and rename into place;
- ``spark_copy (load)``: ``hmsrepl.spark.copy.spark_copy`` of load ``CopyTask`` s, what the load app runs:
  the checksum comes from the dump (no source pass); copies are staged and verified, the load publishes
  them later (not timed). ``serial map``: one file after the other per Spark task instead of a thread pool.

All Spark rows run on ``--master`` (``local[2]``) with the library's defaults: one Spark task per core,
``copy_threads`` copies in flight per task. Workloads: 1 GiB in four large files (``--large-mb``) and
20,000 files of 4 KiB (``--small-files``) in 100 directories. SparkSession start-up and the first job
(Python workers starting, importing the core) are excluded from the copy timings and printed separately.

Run:  python bench/bench_copy.py [--large-mb 1024 --small-files 20000 --rounds 5 --master local[2]]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "include", ROOT):  # run as a plain script from a checkout, no PYTHONPATH needed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "include"), os.environ.get("PYTHONPATH", "")])
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from hmsrepl.formats.file_uri import EncodedFileUri  # noqa: E402
from hmsrepl.replication.filecopy import CopyTask  # noqa: E402
from hmsrepl.spark.copy import copy_threads, spark_copy, spark_copy_tree  # noqa: E402
from hmsrepl.storage.checksum import checksum_token  # noqa: E402
from spark_apps.common import spark_session  # noqa: E402

MB = 1_000_000


@dataclass
class Workload:
    name: str
    src: Path
    files: int
    bytes: int
    tasks: list[CopyTask]


@dataclass
class Row:
    workload: Workload
    method: str
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.workload.bytes / MB / self.seconds

    @property
    def files_per_s(self) -> float:
        return self.workload.files / self.seconds


def make_workload(name: str, src: Path, sizes: list[int], dirs: int) -> Workload:
    """Write the files (random content) and the CopyTasks a load of them would get from a dump."""
    tasks = []
    for index, size in enumerate(sizes):
        directory = src / f"p={index % dirs:03d}" if dirs > 1 else src
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"part-{index:05d}"
        token = _write_random(path, size)
        tasks.append(CopyTask(EncodedFileUri(str(path), token).encode(), "", (str(src),)))
    return Workload(name, src, len(sizes), sum(sizes), tasks)


def _write_random(path: Path, size: int) -> str:
    import google_crc32c

    crc = google_crc32c.Checksum()
    with open(path, "wb") as out:
        left = size
        while left:
            chunk = os.urandom(min(left, 8 * 1024 * 1024))
            crc.update(chunk)
            out.write(chunk)
            left -= len(chunk)
    return checksum_token(int.from_bytes(crc.digest(), "big"), size)


def retarget(tasks: list[CopyTask], src: Path, dst: Path) -> list[CopyTask]:
    """The same tasks with targets under ``dst`` (the load's target warehouse)."""
    out = []
    for task in tasks:
        source = EncodedFileUri.decode(task.encoded).file_uri
        out.append(CopyTask(task.encoded, str(dst / Path(source).relative_to(src)), task.allowed_roots))
    return out


def check_copy(workload: Workload, dst: Path, staged: bool) -> None:
    """Every file arrived with its size: a benchmark of copies that did not happen is worthless."""
    found = {
        p.relative_to(dst).as_posix().replace(".hmsrepl-staging-", ""): p.stat().st_size
        for p in dst.rglob("*")
        if p.is_file()
    }
    if len(found) != workload.files or sum(found.values()) != workload.bytes:
        raise SystemExit(
            f"{workload.name}: copy in {dst} has {len(found)} files, {sum(found.values())} bytes"
        )
    if not staged and any(".hmsrepl-staging-" in name for name in map(str, dst.rglob("*"))):
        raise SystemExit(f"{workload.name}: staged copies left in {dst}")


def run(workloads: list[Workload], work: Path, args: argparse.Namespace) -> tuple[list[Row], float, float]:
    started = time.perf_counter()
    spark = spark_session("hmsrepl-bench-copy", args.master)
    startup = time.perf_counter() - started
    started = time.perf_counter()
    sc = spark.sparkContext
    sc.parallelize(range(sc.defaultParallelism * 2), sc.defaultParallelism * 2).map(_warm_up).collect()
    warm_up = time.perf_counter() - started

    def cp(src: Path, dst: Path, then_sync: bool) -> None:
        subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
        if then_sync:
            subprocess.run(["sync"], check=True)

    threads = args.threads or copy_threads(str(work))
    methods: list[tuple[str, bool, Callable[[Workload, Path], None]]] = [
        ("cp -r", False, lambda w, dst: cp(w.src, dst, False)),
        ("cp -r + sync", False, lambda w, dst: cp(w.src, dst, True)),
        (
            "spark_copy_tree",
            False,
            lambda w, dst: spark_copy_tree(spark, str(w.src), str(dst), threads=threads),
        ),
        (
            "spark_copy (load)",
            True,
            lambda w, dst: spark_copy(spark, retarget(w.tasks, w.src, dst), threads=threads),
        ),
        (
            "spark_copy (load), serial map",
            True,
            lambda w, dst: spark_copy(spark, retarget(w.tasks, w.src, dst), threads=1),
        ),
    ]
    rows = []
    order = random.Random(7)
    try:
        for workload in workloads:
            timings: dict[str, list[float]] = {name: [] for name, _, _ in methods}
            for round_no in range(args.warmup_rounds + args.rounds):
                for name, staged, method in order.sample(methods, len(methods)):
                    dst = work / "dst"
                    subprocess.run(["sync"], check=True)  # no writeback of an earlier step in this timing
                    begin = time.perf_counter()
                    method(workload, dst)
                    seconds = time.perf_counter() - begin
                    if round_no >= args.warmup_rounds:
                        timings[name].append(seconds)
                    check_copy(workload, dst, staged)
                    # Written back before it is deleted, whoever wrote it: deleting cp's still-dirty copy
                    # made the next step 2-3x slower here, whichever method it was.
                    subprocess.run(["sync"], check=True)
                    shutil.rmtree(dst)
            for name, _, _ in methods:
                rows.append(Row(workload, name, statistics.median(timings[name])))
                print(
                    f"  {workload.name}: {name}: " + ", ".join(f"{t:.2f}" for t in timings[name]) + " s",
                    file=sys.stderr,
                )
    finally:
        spark.stop()
    return rows, startup, warm_up


def _warm_up(_: int) -> int:
    import hmsrepl.spark.copy  # noqa: F401 - what the first copy task would import

    return os.getpid()


def print_table(rows: list[Row]) -> None:
    print(
        f"{'workload':<22} {'method':<34} {'seconds':>8} {'MB/s':>8} {'files/s':>8} "
        f"{'ours/cp':>8} {'ours/(cp+sync)':>15}"
    )
    for row in rows:
        cp, cp_sync = (
            next(r for r in rows if r.workload is row.workload and r.method == name)
            for name in ("cp -r", "cp -r + sync")
        )
        print(
            f"{row.workload.name:<22} {row.method:<34} {row.seconds:>8.3f} {row.mb_per_s:>8.1f} "
            f"{row.files_per_s:>8.0f} {cp.seconds / row.seconds:>7.2f}x {cp_sync.seconds / row.seconds:>14.2f}x"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--large-mb", type=int, default=1024, help="total size of the four large files")
    parser.add_argument("--large-files", type=int, default=4)
    parser.add_argument("--small-files", type=int, default=20_000)
    parser.add_argument("--small-kb", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (the median is reported)")
    parser.add_argument("--warmup-rounds", type=int, default=1, help="untimed rounds first")
    parser.add_argument(
        "--threads", type=int, default=None, help="copies in flight per Spark task (default: the library's)"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", default=None, help="work directory (default: a new one under the temp dir)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-copy-", dir=args.dir))
    try:
        large = args.large_mb * 1024 * 1024 // args.large_files
        workloads = [
            make_workload(
                f"large {args.large_files} x {large // (1024 * 1024)} MiB",
                work / "large",
                [large] * args.large_files,
                1,
            ),
            make_workload(
                f"small {args.small_files} x {args.small_kb} KiB",
                work / "small",
                [args.small_kb * 1024] * args.small_files,
                100,
            ),
        ]
        rows, startup, warm_up = run(workloads, work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"SparkSession start-up ({args.master}): {startup:.1f} s; first job (Python workers, imports): {warm_up:.1f} s"
    )
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
