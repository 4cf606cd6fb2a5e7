"""Read time of an insert-only partition of N deltas (default 200), before and after a major compaction.

Run:  python bench/bench_compaction_read.py [--deltas 200] [--rows 20] [--repeats 5] [--spark]

Without ``--spark`` (quick, no JVM): each append is one text file; a read is ``InsertOnlyReader.files()``
(get the snapshot, list the partition, choose directories) plus reading every chosen file, and the
compaction uses the copy rewriter (one base directory, same files). With ``--spark``: each append is one
parquet file, a read is ``read_insert_only(...).count()``, and the compaction is the Spark rewriter's (one
file). Prints median and min read seconds before and after, the compaction's own time, and the directory
and file counts. A throwaway SQLite metastore under a temporary directory; the figures inform, they do
not gate.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "include", ROOT):  # run as a plain script from a checkout, no PYTHONPATH needed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from hmsrepl.acid import InsertOnlyReader, InsertOnlyWriter  # noqa: E402
from hmsrepl.acid.compaction_cycle import run_cycle  # noqa: E402
from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.model import Database, FieldSchema, StorageDescriptor, Table  # noqa: E402

PARQUET_IN = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"


def timed(read: Callable[[], object], repeats: int) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        read()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=200)
    parser.add_argument("--rows", type=int, default=20, help="rows per append")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--spark", action="store_true", help="parquet files, Spark reads and rewriter")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-compaction-"))
    store = Metastore.open(
        MetastoreConfig(db_url=f"sqlite:///{root}/m.db", warehouse=str(root / "wh"), cmroot=str(root / "cm"))
    )
    store.catalog.create_database(Database(name="b"))
    store.catalog.create_table(
        Table(
            db_name="b",
            table_name="t",
            sd=StorageDescriptor(
                cols=[FieldSchema(name="id", type="bigint"), FieldSchema(name="note", type="string")],
                input_format=PARQUET_IN if args.spark else None,
            ),
            partition_keys=[FieldSchema(name="ds", type="string")],
            parameters={"transactional": "true", "transactional_properties": "insert_only"},
        )
    )
    part = ["2024-01-01"]
    spark = None
    kwargs: dict[str, object] = {}
    if args.spark:
        from hmsrepl.acid.spark import read_insert_only, spark_rewriter
        from hmsrepl.spark_session import local_spark_session

        spark = local_spark_session("bench-compaction-read")
        staging = str(root / "staging")
        frame = spark.range(0, args.deltas * args.rows, numPartitions=args.deltas).selectExpr(
            "id", "concat('n', id) as note"
        )
        frame.write.parquet(staging)
        files = sorted(n for n in os.listdir(staging) if n.endswith(".parquet"))
        kwargs["rewriter"] = spark_rewriter(spark)

        def read() -> object:
            return read_insert_only(spark, store, "b", "t", partition_values=part).count()
    else:
        files = [f"part-{i:05d}" for i in range(args.deltas)]

        def read() -> object:
            total = 0
            for uri in InsertOnlyReader(store, "b", "t").files(part):
                with open(uri, "rb") as src:
                    total += len(src.read())
            return total

    for i, name in enumerate(files):
        with InsertOnlyWriter(store, "b", "t", part, heartbeat=False) as writer:
            target = os.path.join(writer.target_uri, name)
            if spark is not None:
                os.rename(os.path.join(str(root / "staging"), name), target)
            else:
                Path(target).write_text("".join(f"{i * args.rows + r}\tn{r}\n" for r in range(args.rows)))
    location = store.catalog.get_partition("b", "t", part).sd.location
    read()  # warm-up (JIT, page cache)
    before = timed(read, args.repeats)
    n_before = (len(os.listdir(location)), len(InsertOnlyReader(store, "b", "t").files(part)))
    start = time.perf_counter()
    run_cycle(store, force=True, cleaner_delay_seconds=0, **kwargs)  # type: ignore[arg-type]
    compaction = time.perf_counter() - start
    read()
    after = timed(read, args.repeats)
    n_after = (len(os.listdir(location)), len(InsertOnlyReader(store, "b", "t").files(part)))
    engine = "spark" if args.spark else "copy"
    print(f"partition of {args.deltas} deltas x {args.rows} rows, {engine} rewriter, {args.repeats} reads")
    print(f"before: {n_before[0]} entries, {n_before[1]} files: median {before[0]:.4f}s min {before[1]:.4f}s")
    print(f"after:  {n_after[0]} entries, {n_after[1]} files: median {after[0]:.4f}s min {after[1]:.4f}s")
    print(f"compaction (initiator + worker + cleaner): {compaction:.2f}s")
    if spark is not None:
        spark.stop()
    store.close()


if __name__ == "__main__":
    main()
