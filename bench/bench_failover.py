"""Disaster-recovery benchmark: planned failover of a database with many tables, then failback after changes.

    python bench/bench_failover.py [--tables 1000] [--changed 10] [--payload 65536] [--backend sqlite|postgres]
    python bench/bench_failover.py --overhead 300 [--backend ...]   # cost of the protection check on writes

Bootstraps a replica of a database of ``--tables`` tables (one data file of ``--payload`` bytes each), then
times: a planned failover (freeze, last events, verify, promote) with a few events pending; an unplanned
promotion of the new replica (the old source) -- i.e. the roles swapped once more -- after which
``--changed`` tables are rewritten on the promoted side; and the failback that makes the other side a
replica again. Prints seconds per step and the bytes the failback copied against the changed tables' data
and the whole database's data (goal: only the changed tables are copied).

``--overhead N``: N ``create_table`` calls with the protection checks (entry and commit) against N in the
privileged context that skips them, alternated over 3 rounds; prints calls/s of each.
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
from hmsrepl.metastore.model import Database  # noqa: E402
from hmsrepl.metastore.protection import privileged  # noqa: E402
from hmsrepl.replication.engine import ReplicationEngine  # noqa: E402
from hmsrepl.replication.failover import failback, planned_failover, promote  # noqa: E402
from hmsrepl.replication.verify import verify  # noqa: E402
from hmsrepl.storage.base import join_uri  # noqa: E402
from tests.helpers import make_table, write_file  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--payload", type=int, default=65536)
    parser.add_argument("--backend", default="sqlite")
    parser.add_argument("--overhead", type=int, default=0, help="measure the protection check instead")
    args = parser.parse_args()
    if args.overhead:
        overhead(args.backend, args.overhead)
        return
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        root = Path(tmp)
        a, b = open_store(stack, args.backend, root, "a"), open_store(stack, args.backend, root, "b")
        a_to_b = ReplicationEngine(str(root / "dumps"), a, b)
        a.catalog.create_database(Database(name="sales"))
        location = a.catalog.get_database("sales").location_uri
        started = time.monotonic()
        for i in range(args.tables):
            write_file(join_uri(location, f"t{i}"), "part-0", bytes([i % 251]) * args.payload)
            a.catalog.create_table(make_table("sales", f"t{i}"))
        print(f"created {args.tables} tables: {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        dump = a_to_b.execute("REPL DUMP sales")
        a_to_b.execute(f"REPL LOAD sales_dr FROM '{dump.dump_dir}'")
        print(f"bootstrap: {time.monotonic() - started:.1f} s")
        for i in range(3):  # a few events pending at the failover
            write_file(a.catalog.get_table("sales", f"t{i}").sd.location, "part-1", b"late" * 10)
            a.catalog.insert("sales", f"t{i}")

        started = time.monotonic()
        result = planned_failover(a_to_b, "sales", "sales_dr")
        print(
            f"planned failover ({args.tables} tables, {result.events_applied} events pending): "
            f"{time.monotonic() - started:.1f} s, stages {result.seconds}"
        )

        # the old source (now a replica of sales_dr) is promoted as if sales_dr's site were lost, then
        # changes; sales_dr comes back and fails back from it
        promote(a, "sales", force=True, reason="benchmark")
        changed_bytes = 0
        for i in range(args.changed):
            table = a.catalog.get_table("sales", f"t{i * 7 % args.tables}")
            new = write_file(table.sd.location, "part-new", bytes([200]) * args.payload)
            a.catalog.insert("sales", table.table_name, new_files=[new], replace=True)
            changed_bytes += args.payload
        a_back = ReplicationEngine(str(root / "dumps_back"), a, b)
        started = time.monotonic()
        back = failback(a_back, "sales", "sales_dr")
        seconds = time.monotonic() - started
        total = args.tables * args.payload
        print(
            f"failback ({args.changed} of {args.tables} tables changed): {seconds:.1f} s, copied "
            f"{back.files_copied} files / {back.bytes_copied} bytes; changed tables' data {changed_bytes} "
            f"bytes, whole database {total} bytes"
        )
        started = time.monotonic()
        differences = verify(a, "sales", b, "sales_dr")
        print(f"verify after failback: {len(differences)} differences ({time.monotonic() - started:.1f} s)")


def overhead(backend: str, calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        store = open_store(stack, backend, Path(tmp), "s")
        store.catalog.create_database(Database(name="b"))
        rates: dict[str, list[float]] = {"checked": [], "unchecked": []}
        for round_ in range(3):
            for mode in rates:
                started = time.perf_counter()
                for i in range(calls):
                    table = make_table("b", f"{mode}{round_}_{i}")
                    if mode == "checked":
                        store.catalog.create_table(table)
                    else:
                        with privileged("benchmark baseline"):
                            store.catalog.create_table(table)
                rates[mode].append(calls / (time.perf_counter() - started))
        print(
            f"{backend} create_table/s: "
            + ", ".join(f"{k} {[round(r) for r in v]}" for k, v in rates.items())
        )


if __name__ == "__main__":
    main()
