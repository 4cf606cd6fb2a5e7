"""Cost of validating a dump before a load (dump_validation), against the whole load, same run.

    python bench/bench_dump_validation.py [TABLES] [PARTITIONS]      (default 200 x 10; SQLite, local files)

Prints CPU and wall seconds of the validation alone and of the whole load (which includes it), for a
bootstrap dump of TABLES x PARTITIONS partitions with one file each, then an incremental dump with one INSERT
per partition (compaction off).
"""

import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO)]
from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.model import Database  # noqa: E402
from hmsrepl.replication.engine import ReplicationEngine  # noqa: E402
from hmsrepl.replication.layout import DumpDir  # noqa: E402
from hmsrepl.replication.load import LoadEngine  # noqa: E402
from tests.helpers import make_partition, make_table, write_file  # noqa: E402


def timed(work):
    cpu, wall = time.process_time(), time.perf_counter()
    result = work()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    tables, partitions = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (200, 10)
    root = Path(tempfile.mkdtemp(prefix="bench-dump-validation-"))

    def store(name: str) -> Metastore:
        config = MetastoreConfig(
            db_url=f"sqlite:///{root}/{name}.db",
            warehouse=str(root / f"{name}_wh"),
            cmroot=str(root / f"{name}_cm"),
        )
        return Metastore.open(config)

    source, target = store("src"), store("dst")
    source.catalog.create_database(Database(name="sales"))
    for t in range(tables):
        table = source.catalog.create_table(make_table("sales", f"t{t}", partition_keys=("p",)))
        parts = [make_partition(table, f"v{i}") for i in range(partitions)]
        for part in source.catalog.add_partitions("sales", f"t{t}", parts):
            write_file(part.sd.location, "f", b"x")
        for i in range(partitions):
            source.catalog.insert("sales", f"t{t}", [f"v{i}"])
    engine = ReplicationEngine(str(root / "dumps"), source, target)
    loader = LoadEngine(target, source_roots=engine.load_source_roots)
    first = engine.execute("REPL DUMP sales")
    dump = DumpDir(first.dump_dir)
    report, cpu, wall = timed(lambda: loader.validate_bootstrap(dump, dump.require_complete(), "sales_dr"))
    _, load_cpu, load_wall = timed(lambda: engine.execute(f"REPL LOAD sales_dr FROM '{first.dump_dir}'"))
    print(
        f"bootstrap {tables}x{partitions}: {report.objects} objects, {report.files} files: validation "
        f"{cpu:.2f} s CPU / {wall:.2f} s wall; whole load (validation included) {load_cpu:.2f} / {load_wall:.2f} s"
    )
    for t in range(tables):
        for i in range(partitions):
            source.catalog.insert("sales", f"t{t}", [f"v{i}"])
    every = "WITH ('hmsrepl.repl.compact.events'='false')"
    second = engine.execute(f"REPL DUMP sales FROM {first.last_event_id} {every}")
    dump = DumpDir(second.dump_dir)
    replica = target.catalog.get_database("sales_dr")
    report, cpu, wall = timed(
        lambda: loader.validate_incremental(
            dump, dump.require_complete(), "sales_dr", replica, first.last_event_id
        )
    )
    _, load_cpu, load_wall = timed(lambda: engine.execute(f"REPL LOAD sales_dr FROM '{second.dump_dir}'"))
    print(
        f"incremental: {report.events} events, {report.files} file entries: validation {cpu:.2f} s CPU / "
        f"{wall:.2f} s wall; whole load (validation included) {load_cpu:.2f} / {load_wall:.2f} s"
    )
    source.close()
    target.close()


if __name__ == "__main__":
    main()
