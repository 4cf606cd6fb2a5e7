"""Replication benchmark: metadata replay throughput and bootstrap time.

    python bench/bench_replication.py [--events 5000] [--tables 1000] [--partitions 10]
        [--backend sqlite|postgres|mysql|all] [--count-events 50] [--count-tables 20] [--rounds 1]

Prints events/s of an incremental metadata-only dump and load (target >= 2,000 events/s) and the time of a
bootstrap dump and load of 1,000 tables x 10 partitions (target <= 30 s). Source and target are separate
metastores on the chosen backend; set-up time is not measured. ``--backend all`` runs the three backends in
one command and prints their figures side by side, with each one's ratio to SQLite. ``--rounds N`` runs N
rounds, the backends taking turns in each (a slow spell of a noisy machine then hits every backend), and
prints the rounds' medians, with each backend's best round beside them.

It prints the cyclic collector's passes during each step, by generation (counted exactly, where times are
noisy), and the statements and round trips per event type (the source's catalog write, the dump's read,
the load's write) and per bootstrap table with its partitions, counted on small separate replays
(``--count-events`` events of each type, ``--count-tables`` tables): on PostgreSQL and MariaDB these round
trips are most of the time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO)]

from bench.collector_passes import CollectorPasses, counted_passes  # noqa: E402
from bench.statement_table import CHOICES, chosen_backends, print_grid, versus_sqlite  # noqa: E402
from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.model import Database  # noqa: E402
from hmsrepl.metastore.statement_counts import Counts, StatementCounter  # noqa: E402
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


def bench_replay(
    stack: ExitStack, backend: str, root: Path, events: int, passes: dict[str, CollectorPasses]
) -> list[tuple[str, float, float]]:
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
    with counted_passes() as passes["replay dump"]:
        inc = engine.execute(f"REPL DUMP bench FROM {start_id} {EVERY_EVENT}")
    t1 = time.perf_counter()
    with counted_passes() as passes["replay load"]:
        loaded = engine.execute(f"REPL LOAD bench FROM '{inc.dump_dir}'")
    t2 = time.perf_counter()
    assert loaded.events_applied == n, (loaded.events_applied, n)
    return [
        ("incremental dump (metadata only)", n, t1 - t0),
        ("incremental load (metadata only)", n, t2 - t1),
        ("dump + load", n, t2 - t0),
    ]


def bench_bootstrap(
    stack: ExitStack,
    backend: str,
    root: Path,
    tables: int,
    partitions: int,
    passes: dict[str, CollectorPasses],
):
    source, target = open_store(stack, backend, root, "src2"), open_store(stack, backend, root, "dst2")
    engine = ReplicationEngine(str(root / "dumps2"), source, target)
    source.catalog.create_database(Database(name="boot"))
    for t in range(tables):
        table = source.catalog.create_table(make_table("boot", f"t{t:04d}", partition_keys=("p",)))
        source.catalog.add_partitions(
            "boot", table.table_name, [make_partition(table, str(p)) for p in range(partitions)]
        )
    t0 = time.perf_counter()
    with counted_passes() as passes["bootstrap dump"]:
        dumped = engine.execute("REPL DUMP boot")
    t1 = time.perf_counter()
    with counted_passes() as passes["bootstrap load"]:
        engine.execute(f"REPL LOAD boot FROM '{dumped.dump_dir}'")
    t2 = time.perf_counter()
    assert len(target.catalog.get_tables("boot")) == tables
    return [("bootstrap dump", t1 - t0), ("bootstrap load", t2 - t1), ("bootstrap dump + load", t2 - t0)]


def count_statements(
    stack: ExitStack, backend: str, root: Path, per_type: int, tables: int
) -> list[tuple[str, Counts, int]]:
    """(what, counts, objects) for each event type's write, dump and load, and for a bootstrap per table."""
    source, target = open_store(stack, backend, root, "src3"), open_store(stack, backend, root, "dst3")
    counter = StatementCounter(source.engine, target.engine)
    stack.callback(counter.close)
    engine = ReplicationEngine(str(root / "dumps3"), source, target)
    catalog = source.catalog
    catalog.create_database(Database(name="cnt"))
    table = catalog.create_table(make_table("cnt", "t", partition_keys=("p",)))
    for t in range(tables):
        made = catalog.create_table(make_table("cnt", f"b{t:04d}", partition_keys=("p",)))
        catalog.add_partitions("cnt", made.table_name, [make_partition(made, str(p)) for p in range(10)])
    results: list[tuple[str, Counts, int]] = []
    with counter.counting() as dumped_counts:
        dumped = engine.execute(f"REPL DUMP cnt {METADATA_ONLY}")
    with counter.counting() as loaded_counts:
        engine.execute(f"REPL LOAD cnt FROM '{dumped.dump_dir}'")
    objects = tables + 1
    results += [("bootstrap dump, per table x 10 partitions", dumped_counts, objects)]
    results += [("bootstrap load, per table x 10 partitions", loaded_counts, objects)]
    last = dumped.last_event_id
    parts = [make_partition(table, f"c{i}") for i in range(per_type)]
    writes = {
        "CREATE_TABLE": lambda i: catalog.create_table(make_table("cnt", f"n{i}")),
        "ADD_PARTITION": lambda i: catalog.add_partitions("cnt", "t", [parts[i]]),
        "ALTER_PARTITION": lambda i: catalog.alter_partitions(
            "cnt", "t", [parts[i].model_copy(update={"parameters": {"n": str(i)}})]
        ),
        "DROP_PARTITION": lambda i: catalog.drop_partitions("cnt", "t", [[f"c{i}"]]),
    }
    for kind, write in writes.items():
        with counter.counting() as written:
            for i in range(per_type):
                write(i)
        with counter.counting() as dumped_counts:
            inc = engine.execute(f"REPL DUMP cnt FROM {last} {EVERY_EVENT}")
        with counter.counting() as loaded_counts:
            engine.execute(f"REPL LOAD cnt FROM '{inc.dump_dir}'")
        last = inc.last_event_id
        results += [(f"{kind}: source write", written, per_type)]
        results += [(f"{kind}: dump", dumped_counts, per_type), (f"{kind}: load", loaded_counts, per_type)]
    return results


def run_backend(backend: str, args: argparse.Namespace, *, count: bool) -> dict[str, Any]:
    """One round of one backend's figures: the replay, the bootstrap and (``count``) the statement counts."""
    with tempfile.TemporaryDirectory(prefix="bench-repl-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        print(f"  {backend}: replay of {args.events:,} events...", file=sys.stderr, flush=True)
        passes: dict[str, CollectorPasses] = {}
        replay = bench_replay(stack, backend, root, args.events, passes)
        print(f"  {backend}: bootstrap of {args.tables}x{args.partitions}...", file=sys.stderr, flush=True)
        bootstrap = bench_bootstrap(stack, backend, root, args.tables, args.partitions, passes)
        counts = (
            count_statements(stack, backend, root, args.count_events, args.count_tables)
            if count and args.count_events
            else []
        )
        return {"replay": replay, "bootstrap": bootstrap, "counts": counts, "passes": passes}


def median_and_min(values: Sequence[float], *, higher_is_better: bool) -> tuple[float, float]:
    """The median of a measurement's rounds and its best round (the least disturbed by the machine)."""
    return statistics.median(values), (max(values) if higher_is_better else min(values))


def add_rows(
    rows: list[tuple[str, dict[str, str]]],
    best_rows: list[tuple[str, dict[str, str]]],
    label: str,
    values: dict[str, list[float]],
    *,
    higher_is_better: bool,
    fmt: str,
) -> dict[str, float]:
    """Add one measurement's cells to the medians' table and the best rounds' table; returns its medians."""
    figures = {b: median_and_min(v, higher_is_better=higher_is_better) for b, v in values.items()}
    medians = {b: f[0] for b, f in figures.items()}
    rows.append((label, versus_sqlite(medians, higher_is_better=higher_is_better, fmt=fmt)))
    best = {b: f[1] for b, f in figures.items()}
    best_rows.append((label, versus_sqlite(best, higher_is_better=higher_is_better, fmt=fmt)))
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument(
        "--backend", default="sqlite", help=f"one of {', '.join(CHOICES)}, or a comma-separated list"
    )
    parser.add_argument(
        "--count-events", type=int, default=50, help="events per type in the statement counts (0: skip)"
    )
    parser.add_argument("--count-tables", type=int, default=20, help="tables in the counted bootstrap")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="rounds, the backends taking turns in each; figures are the rounds' medians (and best)",
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give a number of rounds of at least 1")
    backends = chosen_backends(args.backend)
    print(
        f"replication benchmark on {', '.join(backends)}, {args.rounds} round(s); python {sys.version.split()[0]}"
    )
    rounds: dict[str, list[dict[str, Any]]] = {backend: [] for backend in backends}
    for number in range(args.rounds):  # the backends take turns, so a slow spell of the machine hits all
        for backend in backends:
            rounds[backend].append(run_backend(backend, args, count=number == 0))
    rows: list[tuple[str, dict[str, str]]] = []
    best_rows: list[tuple[str, dict[str, str]]] = []
    replay_rates: dict[str, float] = {}
    for index, (name, n, _seconds) in enumerate(rounds[backends[0]][0]["replay"]):
        rates = {b: [r["replay"][index][1] / r["replay"][index][2] for r in rounds[b]] for b in backends}
        label = f"{name}, events/s ({n:,} events)"
        replay_rates = add_rows(rows, best_rows, label, rates, higher_is_better=True, fmt=",.0f")
    objects = f"{args.tables}x{args.partitions}"
    boot_seconds: dict[str, float] = {}
    for index, (name, _seconds) in enumerate(rounds[backends[0]][0]["bootstrap"]):
        seconds = {b: [r["bootstrap"][index][1] for r in rounds[b]] for b in backends}
        boot_seconds = add_rows(
            rows, best_rows, f"{name}, s ({objects})", seconds, higher_is_better=False, fmt=".2f"
        )
    median_title = "the rounds' medians" if args.rounds > 1 else "one round"
    print_grid(f"throughput, {median_title} (ratio: times slower than SQLite)", rows, backends)
    if args.rounds > 1:
        print_grid(
            "throughput, each backend's best round (ratio: times slower than SQLite)", best_rows, backends
        )
    print_grid(
        "cyclic collector passes in the process, young / middle / full (their time), first round",
        [
            (step, {b: rounds[b][0]["passes"][step].cell() for b in backends})
            for step in rounds[backends[0]][0]["passes"]
        ],
        backends,
    )
    print("\n".join(["", f"targets ({median_title}):", *verdicts(backends, replay_rates, boot_seconds)]))
    if args.count_events:
        count_rows = []
        for index, (what, _counts, _objects) in enumerate(rounds[backends[0]][0]["counts"]):
            cells = {}
            for backend in backends:
                _name, counts, objects = rounds[backend][0]["counts"][index]
                statements, trips = counts.per(objects)
                cells[backend] = f"{statements:.1f} / {trips:.1f}"
            count_rows.append((what, cells))
        print_grid("statements / round trips per event (per table for the bootstrap)", count_rows, backends)


def verdicts(
    backends: Sequence[str], replay_rates: dict[str, float], boot_seconds: dict[str, float]
) -> list[str]:
    """Each backend's replay and bootstrap against their fixed targets, and a server backend's against
    SQLite's (the production backends' goal: within 1.5x of SQLite, PostgreSQL's replay at least 2,500/s)."""
    out = []
    base_rate, base_boot = replay_rates.get("sqlite"), boot_seconds.get("sqlite")
    for backend in backends:
        rate, boot = replay_rates[backend], boot_seconds[backend]
        line = (
            f"  {backend}: replay {rate:,.0f} ev/s (>= 2,000: {'PASS' if rate >= 2000 else 'FAIL'}), "
            f"bootstrap {boot:.2f} s (<= 30 s at 1000x10: {'PASS' if boot <= 30 else 'FAIL'})"
        )
        if backend == "postgres":
            line += f"; replay >= 2,500 ev/s: {'PASS' if rate >= 2500 else 'FAIL'}"
        if backend != "sqlite" and base_rate and base_boot:
            replay_ratio, boot_ratio = base_rate / rate, boot / base_boot
            line += (
                f"; within 1.5x of SQLite: replay {replay_ratio:.2f}x {'PASS' if replay_ratio <= 1.5 else 'FAIL'}, "
                f"bootstrap {boot_ratio:.2f}x {'PASS' if boot_ratio <= 1.5 else 'FAIL'}"
            )
        out.append(line)
    return out


if __name__ == "__main__":
    main()
