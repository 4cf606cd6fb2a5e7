"""What progress reports cost a Spark copy: the load's copy with them (the default) and without, one run.

Each executor task sends its counts to the driver at most once a second over one TCP connection, and the
driver logs every ``--interval`` seconds (``hmsrepl.spark.progress``); the question is whether that shows in
the copy's time, for many small files (one count per file) and for a few large ones. Both variants run the
same ``distribute`` call as ``spark_copy`` (``progress_bytes`` set or not), alternating which goes first, on
``--master`` (``local[2]``); SparkSession start-up is excluded. Printed: median and best of ``--rounds``.

Run:  python bench/bench_copy_progress.py [--small-files 5000 --large-mb 256 --rounds 5 --interval 0.5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))

from hmsrepl.formats.file_uri import EncodedFileUri  # noqa: E402
from hmsrepl.replication.filecopy import CopyTask  # noqa: E402
from hmsrepl.spark.copy import (  # noqa: E402
    _copy_failure,
    _copy_task_outcome,
    _task_cost,
    _task_size,
    copy_threads,
    distribute,
)
from hmsrepl.storage.checksum import checksum_bytes  # noqa: E402


def workload(base: Path, name: str, count: int, size: int) -> list[CopyTask]:
    src, cmroot = base / name / "src", base / name / "cm"
    cmroot.mkdir(parents=True)
    tasks = []
    for i in range(count):
        path = src / f"d{i % 50:02d}" / f"part-{i:05d}"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = os.urandom(size)
        path.write_bytes(data)
        encoded = EncodedFileUri(str(path), checksum_bytes(data), str(cmroot)).encode()
        tasks.append(
            CopyTask(encoded, str(base / name / "dst" / path.relative_to(src)), (str(src), str(cmroot)))
        )
    return tasks


def copy_seconds(spark: object, tasks: list[CopyTask], progress: bool) -> float:
    dst = Path(tasks[0].target_uri).parents[1]
    shutil.rmtree(dst, ignore_errors=True)
    started = time.perf_counter()
    outcomes = distribute(
        spark,  # type: ignore[arg-type]
        tasks,
        [_task_cost(t) for t in tasks],
        _copy_task_outcome,
        None,
        copy_threads(tasks[0].target_uri),
        f"bench copy: {len(tasks)} files",
        durability="batch",
        failed=_copy_failure,
        progress_bytes=sum(_task_size(t) for t in tasks) if progress else None,
    )
    elapsed = time.perf_counter() - started
    assert all(not hasattr(o, "reason") for o in outcomes), "a copy failed"
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small-files", type=int, default=5000)
    parser.add_argument("--large-mb", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    os.environ["HMSREPL_SPARK_PROGRESS_SECONDS"] = str(args.interval)

    from hmsrepl.spark_session import local_spark_session

    base = Path(tempfile.mkdtemp(prefix="bench-progress-"))
    try:
        loads = {
            f"{args.small_files} x 4 KiB": workload(base, "small", args.small_files, 4096),
            f"4 x {args.large_mb // 4} MiB": workload(base, "large", 4, args.large_mb * 1024 * 1024 // 4),
        }
        started = time.perf_counter()
        spark = local_spark_session("bench-copy-progress", master=args.master)
        spark.sparkContext.setLogLevel("ERROR")
        print(f"SparkSession on {args.master} in {time.perf_counter() - started:.1f} s (not counted)")
        for tasks in loads.values():  # warm-up: Python workers, imports
            copy_seconds(spark, tasks[:50], progress=True)
        print(f"{'workload':<20} {'variant':<16} {'median s':>9} {'best s':>8}")
        for name, tasks in loads.items():
            times: dict[bool, list[float]] = {True: [], False: []}
            for round_no in range(args.rounds):
                for progress in (True, False) if round_no % 2 == 0 else (False, True):
                    times[progress].append(copy_seconds(spark, tasks, progress))
            for progress in (False, True):
                label = "with progress" if progress else "without"
                values = times[progress]
                print(f"{name:<20} {label:<16} {statistics.median(values):>9.2f} {min(values):>8.2f}")
        spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
