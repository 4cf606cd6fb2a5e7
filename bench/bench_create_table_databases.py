"""Benchmark of a single ``create_table`` in a metastore holding many databases.

Every managed table created checks that its location overlaps no other object's; the databases' locations
are looked up by their indexed keys, so the cost of a create should not grow with the number of databases
(warehouses hold hundreds or thousands). Prints, per backend, the creates per second, the CPU time per
create and the statements one create sends.

Run:  python bench/bench_create_table_databases.py [--databases 300] [--creates 300]
      [--backend sqlite|postgres|mysql|all|a,b]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "include", ROOT):  # run as a plain script from a checkout, no PYTHONPATH needed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench.bench_notification_log import BENCH_DB, sample_table  # noqa: E402
from bench.statement_table import chosen_backends  # noqa: E402
from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.database import upgrade_schema  # noqa: E402
from hmsrepl.metastore.model import Database  # noqa: E402
from hmsrepl.metastore.statement_counts import StatementCounter  # noqa: E402
from tests.backends import temporary_database  # noqa: E402


def run(backend: str, databases: int, creates: int) -> str:
    """One backend's line: creates/s, CPU ms a create, statements a create."""
    with tempfile.TemporaryDirectory() as tmp, temporary_database(backend, tmp) as url:
        upgrade_schema(url)
        config = MetastoreConfig(db_url=url, warehouse=f"{tmp}/wh", cmroot=f"{tmp}/cm")
        store = Metastore(config)
        try:
            catalog = store.catalog
            catalog.create_database(Database(name=BENCH_DB))
            for number in range(databases - 1):
                catalog.create_database(Database(name=f"other_{number:05d}"))
            tables = [sample_table(number) for number in range(creates)]
            start, cpu = time.perf_counter(), time.process_time()
            for table in tables:
                catalog.create_table(table)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            counter = StatementCounter(store.engine)
            with counter.counting() as counts:
                catalog.create_table(sample_table(creates))
            counter.close()
        finally:
            store.close()
    return (
        f"{backend:9} {databases:>9} {creates / wall:>10.0f} {cpu / creates * 1000:>12.2f} "
        f"{counts.statements:>11} {counts.round_trips:>11}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--databases", type=int, default=300, help="databases in the metastore")
    parser.add_argument("--creates", type=int, default=300, help="single create_table calls timed")
    parser.add_argument("--backend", default="sqlite", help="sqlite, postgres, mysql, all or a list")
    args = parser.parse_args()
    if args.databases < 1 or args.creates < 1:
        parser.error("--databases and --creates must be >= 1")
    print(
        f"{'backend':9} {'databases':>9} {'creates/s':>10} {'CPU ms/call':>12} {'statements':>11} {'round trips':>11}"
    )
    for backend in chosen_backends(args.backend):
        print(run(backend, args.databases, args.creates), flush=True)


if __name__ == "__main__":
    main()
