"""Replication benchmark: metadata replay throughput and bootstrap time.

    python bench/bench_replication.py [--events 5000] [--tables 1000] [--partitions 10] [--backend sqlite|postgres]

Prints events/s of an incremental metadata-only dump and load (target >= 2,000 events/s) and the time of a
bootstrap dump and load of 1,000 tables x 10 partitions (target <= 30 s). Source and target are separate
metastores on the chosen backend; set-up time is not measured.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO)]

from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.model import Database  # noqa: E402
from hmsrepl.replication.engine import ReplicationEngine  # noqa: E402
from tests.backends import temporary_database  # noqa: E402
from tests.helpers import make_partition, make_table  # noqa: E402

METADATA_ONLY = "WITH ('hive.repl.dump.metadata.only'='true')"
# Replay throughput is measured on every event: compaction (bench_compaction.py) would skip most of this mix.
EVERY_EVENT = "WITH ('hive.repl.dump.metadata.only'='true', 'hmsrepl.repl.compact.events'='false')"


def open_store(stack: ExitStack, backend: str, root: Path, name: str) -> Metastore:
    url = stack.enter_context(temporary_database(backend, str(root)))
    store = Metastore.open(
        MetastoreConfig(db_url=url, warehouse=str(root / f"{name}_wh"), cmroot=str(root / f"{name}_cm"))
    )
    stack.callback(store.close)
    return store


def bench_replay(stack: ExitStack, backend: str, root: Path, events: int) -> list[tuple[str, float, float]]:
    source, target = open_store(stack, backend, root, "src1"), open_store(stack, backend, root, "dst1")
    engine = ReplicationEngine(str(root / "dumps1"), source, target)
    source.catalog.create_database(Database(name="bench"))
    table = source.catalog.create_table(make_table("bench", "t", partition_keys=("p",)))
    dumped = engine.execute(f"REPL DUMP bench {METADATA_ONLY}")
    engine.execute(f"REPL LOAD bench FROM '{dumped.dump_dir}'")
    start_id = dumped.last_event_id
    # A realistic mix: new tables, new partitions, altered partitions, dropped partitions.
    made = 0
    i = 0
    while made < events:
        part = make_partition(table, f"v{i}")
        source.catalog.add_partitions("bench", "t", [part])
        source.catalog.alter_partitions("bench", "t", [part.model_copy(update={"parameters": {"n": str(i)}})])
        made += 2
        if i % 4 == 0:
            source.catalog.create_table(make_table("bench", f"x{i}"))
            made += 1
        if i % 5 == 4:
            source.catalog.drop_partitions("bench", "t", [[f"v{i - 1}"]])
            made += 1
        i += 1
    n = source.get_current_notification_event_id() - start_id
    t0 = time.perf_counter()
    inc = engine.execute(f"REPL DUMP bench FROM {start_id} {EVERY_EVENT}")
    t1 = time.perf_counter()
    loaded = engine.execute(f"REPL LOAD bench FROM '{inc.dump_dir}'")
    t2 = time.perf_counter()
    assert loaded.events_applied == n, (loaded.events_applied, n)
    return [
        ("incremental dump (metadata only)", n, t1 - t0),
        ("incremental load (metadata only)", n, t2 - t1),
        ("dump + load", n, t2 - t0),
    ]


def bench_bootstrap(stack: ExitStack, backend: str, root: Path, tables: int, partitions: int):
    source, target = open_store(stack, backend, root, "src2"), open_store(stack, backend, root, "dst2")
    engine = ReplicationEngine(str(root / "dumps2"), source, target)
    source.catalog.create_database(Database(name="boot"))
    for t in range(tables):
        table = source.catalog.create_table(make_table("boot", f"t{t:04d}", partition_keys=("p",)))
        source.catalog.add_partitions(
            "boot", table.table_name, [make_partition(table, str(p)) for p in range(partitions)]
        )
    t0 = time.perf_counter()
    dumped = engine.execute("REPL DUMP boot")
    t1 = time.perf_counter()
    engine.execute(f"REPL LOAD boot FROM '{dumped.dump_dir}'")
    t2 = time.perf_counter()
    assert len(target.catalog.get_tables("boot")) == tables
    return [("bootstrap dump", t1 - t0), ("bootstrap load", t2 - t1), ("bootstrap dump + load", t2 - t0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "mysql"], default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-repl-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        print(f"replication benchmark on {args.backend}; python {sys.version.split()[0]}")
        print(f"\n{'measurement':<36} {'events':>8} {'seconds':>9} {'events/s':>10}  target")
        for name, n, seconds in bench_replay(stack, args.backend, root, args.events):
            verdict = ("PASS" if n / seconds >= 2000 else "FAIL") if name == "dump + load" else ""
            print(
                f"{name:<36} {n:>8,} {seconds:>9.3f} {n / seconds:>10,.0f}  {'>= 2,000 ev/s ' + verdict if verdict else ''}"
            )
        print(f"\n{'measurement':<36} {'objects':>8} {'seconds':>9}  target")
        objects = f"{args.tables}x{args.partitions}"
        for name, seconds in bench_bootstrap(stack, args.backend, root, args.tables, args.partitions):
            verdict = ("PASS" if seconds <= 30 else "FAIL") if name == "bootstrap dump + load" else ""
            print(f"{name:<36} {objects:>8} {seconds:>9.2f}  {'<= 30 s ' + verdict if verdict else ''}")


if __name__ == "__main__":
    main()
