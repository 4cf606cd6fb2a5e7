"""Benchmark of the Spark load copy against ``cp -r`` of the same files, in one run on one machine.

The load app's copy is the part of replication that scales with data; the bar is the plainest copy there
is. Measured per workload over ``--large-rounds`` / ``--rounds`` rounds after ``--warmup-rounds`` untimed
ones; around every step dirty data is written back (``sync``, untimed), and each copy is checked, then
deleted; methods run in a new random order each round (seeded), so none always follows the same one. The
machine is shared and noisy (one method's runs spread 2-7x while other jobs run): the table prints the
median and the best round of each method, and ratios for both; other load only ever adds time, so the
best rounds are the steadiest comparison. Compare rows of one run, not runs.

- ``cp -r``: GNU cp (coreutils 9 copies in the kernel with ``copy_file_range``; no checksum, no fsync: its
  data may still be only in the page cache when it returns);
- ``cp -r + sync``: the same plus ``sync``: as durable as our durable modes;
- ``load app, <durability>``: what ``spark_apps/repl_load.py`` runs for a load's files, timed from the copy
  plan (load ``CopyTask`` s, checksums from the dump) to the files in place: ``hmsrepl.spark.copy.spark_copy``
  stages verified copies on the executors (read once, hashed while written, compared with the dump's
  checksum), then ``filecopy.publish_all`` renames them into place as the load does. Durability
  (``storage.local``): ``batch`` (the default) syncs each Spark task's copies with one ``syncfs`` before the
  task reports them, and the renames with one more; ``file`` fsyncs every copy; ``none`` syncs nothing (like
  plain ``cp``: a crash can lose copies reported done; not for production loads);
- ``spark_copy_tree, batch``: the distcp (``hmsrepl.spark.copy.spark_copy_tree``): the driver lists, the
  executors take the source's CRC32C first (a second read of each file), copy, compare, rename.

All Spark rows run on ``--master`` (``local[2]``) with the library's defaults: one Spark task per core,
``copy_threads`` copies in flight per task. Workloads: 1 GiB in four large files (``--large-mb``) and
20,000 files of 4 KiB (``--small-files``) in 100 directories. SparkSession start-up and the first job
(Python workers starting, importing the core) are excluded from the copy timings and printed separately.

Run:  python bench/bench_copy.py [--large-mb 1024 --small-files 20000 --large-rounds 11 --rounds 5
                                  --durability file batch none --master local[2]]
"""

from __future__ import annotations

import argparse
import functools
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
from hmsrepl.replication.filecopy import CopyTask, publish, publish_all  # noqa: E402
from hmsrepl.spark.copy import copy_threads, spark_copy, spark_copy_tree  # noqa: E402
from hmsrepl.storage.checksum import checksum_token  # noqa: E402
from hmsrepl.storage.local import DURABILITY_MODES, Durability  # noqa: E402
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
    timings: list[float]

    @property
    def seconds(self) -> float:
        return statistics.median(self.timings)

    @property
    def best(self) -> float:
        return min(self.timings)


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


def check_copy(workload: Workload, dst: Path) -> None:
    """Every file arrived in place with its size: a benchmark of copies that did not happen is worthless."""
    found = {p.relative_to(dst).as_posix(): p.stat().st_size for p in dst.rglob("*") if p.is_file()}
    if len(found) != workload.files or sum(found.values()) != workload.bytes:
        raise SystemExit(
            f"{workload.name}: copy in {dst} has {len(found)} files, {sum(found.values())} bytes"
        )
    if any(name.rsplit("/", 1)[-1].startswith(".") for name in found):
        raise SystemExit(f"{workload.name}: staged or temporary copies left in {dst}")


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
    dst = work / "dst"
    plans = {id(w): retarget(w.tasks, w.src, dst) for w in workloads}  # the load app gets its plan ready-made

    def load_app(workload: Workload, durability: Durability) -> None:
        tasks = plans[id(workload)]
        spark_copy(spark, tasks, threads=threads, durability=durability)
        targets = [task.target_uri for task in tasks]
        if durability == "none":
            for target in targets:
                publish(target)
        else:
            publish_all(targets)

    methods: list[tuple[str, Callable[[Workload], None]]] = [
        ("cp -r", lambda w: cp(w.src, dst, False)),
        ("cp -r + sync", lambda w: cp(w.src, dst, True)),
        *[(f"load app, {mode}", functools.partial(load_app, durability=mode)) for mode in args.durability],
        (
            "spark_copy_tree, batch",
            lambda w: spark_copy_tree(spark, str(w.src), str(dst), threads=threads),
        ),
    ]
    rows = []
    order = random.Random(7)
    try:
        for workload in workloads:
            timings: dict[str, list[float]] = {name: [] for name, _ in methods}
            rounds = args.large_rounds if workload is workloads[0] else args.rounds
            for round_no in range(args.warmup_rounds + rounds):
                for name, method in order.sample(methods, len(methods)):
                    subprocess.run(["sync"], check=True)  # no writeback of an earlier step in this timing
                    begin = time.perf_counter()
                    method(workload)
                    seconds = time.perf_counter() - begin
                    if round_no >= args.warmup_rounds:
                        timings[name].append(seconds)
                    check_copy(workload, dst)
                    # Written back before it is deleted, whoever wrote it: deleting cp's still-dirty copy
                    # made the next step 2-3x slower here, whichever method it was.
                    subprocess.run(["sync"], check=True)
                    shutil.rmtree(dst)
            for name, _ in methods:
                rows.append(Row(workload, name, timings[name]))
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
    """Median and best round per method; ratios are cp's time over ours (above 1: faster than cp)."""
    print(
        f"{'workload':<20} {'method':<24} {'median s':>8} {'MB/s':>7} {'files/s':>7} {'vs cp':>6} "
        f"{'vs cp+sync':>10} | {'best s':>7} {'MB/s':>7} {'files/s':>7} {'vs cp':>6} {'vs cp+sync':>10}"
    )
    for row in rows:
        cp, cp_sync = (
            next(r for r in rows if r.workload is row.workload and r.method == name)
            for name in ("cp -r", "cp -r + sync")
        )
        size, files = row.workload.bytes / MB, row.workload.files
        print(
            f"{row.workload.name:<20} {row.method:<24} {row.seconds:>8.3f} {size / row.seconds:>7.0f} "
            f"{files / row.seconds:>7.0f} {cp.seconds / row.seconds:>5.2f}x "
            f"{cp_sync.seconds / row.seconds:>9.2f}x | {row.best:>7.3f} {size / row.best:>7.0f} "
            f"{files / row.best:>7.0f} {cp.best / row.best:>5.2f}x {cp_sync.best / row.best:>9.2f}x"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--large-mb", type=int, default=1024, help="total size of the four large files")
    parser.add_argument("--large-files", type=int, default=4)
    parser.add_argument("--small-files", type=int, default=20_000)
    parser.add_argument("--small-kb", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of the small files")
    parser.add_argument("--large-rounds", type=int, default=11, help="timed rounds of the large files")
    parser.add_argument("--warmup-rounds", type=int, default=1, help="untimed rounds first")
    parser.add_argument(
        "--threads", type=int, default=None, help="copies in flight per Spark task (default: the library's)"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--durability",
        nargs="+",
        choices=DURABILITY_MODES,
        default=list(DURABILITY_MODES),
        help="load app durability modes to measure",
    )
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
