"""Replay of appends to unpartitioned tables: the data-carrying load path, per backend.

    python bench/bench_table_appends.py [--tables 10] [--appends 20] [--backend sqlite|postgres|mysql|all]

Each of ``--tables`` plain tables receives ``--appends`` one-file INSERTs on the source (a Spark job
appending to a table); one incremental dump and load replays them with their files. Prints the load's
events/s, the CPU seconds it cost this process, and the statements and round trips it sent to the
replica's database per event. A load folds a table's writes in a batch into one put (``table_writes``), so
the statements per event fall as appends per table grow. Set-up (writes, bootstrap, dump) is not measured.
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

from bench.bench_replication import open_store  # noqa: E402
from bench.statement_table import CHOICES, chosen_backends, print_grid, versus_sqlite  # noqa: E402
from hmsrepl.metastore.model import Database  # noqa: E402
from hmsrepl.metastore.statement_counts import StatementCounter  # noqa: E402
from hmsrepl.replication.engine import ReplicationEngine  # noqa: E402
from tests.helpers import make_table, write_file  # noqa: E402


def run_backend(backend: str, tables: int, appends: int) -> dict[str, float]:
    """One backend's load of ``tables`` x ``appends`` INSERT events: its rate, CPU and statements."""
    with tempfile.TemporaryDirectory(prefix="bench-appends-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        source, target = open_store(stack, backend, root, "src"), open_store(stack, backend, root, "dst")
        engine = ReplicationEngine(str(root / "dumps"), source, target)
        source.catalog.create_database(Database(name="app"))
        names = [f"t{number:03d}" for number in range(tables)]
        locations = {name: source.catalog.create_table(make_table("app", name)).sd.location for name in names}
        dumped = engine.execute("REPL DUMP app")
        engine.execute(f"REPL LOAD app FROM '{dumped.dump_dir}'")
        for append in range(appends):
            for name in names:
                new = write_file(locations[name] or "", f"part-{append:05d}.parquet", b"rows" * 25)
                source.catalog.insert("app", name, new_files=[new])
        incremental = engine.execute(f"REPL DUMP app FROM {dumped.last_event_id}")
        counter = StatementCounter(target.engine)
        cpu, wall = time.process_time(), time.perf_counter()
        with counter.counting() as counts:
            loaded = engine.execute(f"REPL LOAD app FROM '{incremental.dump_dir}'")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        counter.close()
        events = loaded.events_applied
        return {
            "events/s": events / wall,
            "CPU s": cpu,
            "statements per event": counts.statements / events,
            "round trips per event": counts.round_trips / events,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--appends", type=int, default=20, help="one-file INSERTs per table")
    parser.add_argument(
        "--backend", default="sqlite", help=f"one of {', '.join(CHOICES)}, or a comma-separated list"
    )
    args = parser.parse_args()
    backends = chosen_backends(args.backend)
    events = args.tables * args.appends
    print(
        f"table appends: {args.tables} tables x {args.appends} INSERTs ({events:,} events) on {', '.join(backends)}"
    )
    results = {backend: run_backend(backend, args.tables, args.appends) for backend in backends}
    rows = []
    for name, higher, fmt in (
        ("events/s", True, ",.0f"),
        ("CPU s", False, ".2f"),
        ("statements per event", False, ".2f"),
        ("round trips per event", False, ".2f"),
    ):
        values = {backend: results[backend][name] for backend in backends}
        rows.append((f"load: {name}", versus_sqlite(values, higher_is_better=higher, fmt=fmt)))
    print_grid("incremental load of table appends (ratio: times slower than SQLite)", rows, backends)


if __name__ == "__main__":
    main()
