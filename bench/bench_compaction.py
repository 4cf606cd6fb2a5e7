"""Event-window compaction benchmark: what a compacted incremental dump saves against a full one.

    python bench/bench_compaction.py [--ops 2000] [--payload 16384] [--limit N] [--seed 7] [--backend sqlite|postgres|mysql]

Runs the randomised workload of the compaction property test (tests/compaction_workload.py: creates, drops
and renames of tables, partitions added/altered/dropped, inserts and overwrites; data files of ``--payload``
bytes) on a source metastore, bootstraps two replicas, then replicates the same window to each: once with
``'hmsrepl.repl.compact.events'='false'``, once compacted (the default), in LIMIT-sized dumps when given.
Prints, side by side: events written and skipped, dump size (event files), data files and bytes the dumps
reference, files and bytes the loads copy, dump and load seconds, and the ratio compacted/full; then checks
that both replicas equal the source.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO)]

from bench.bench_replication import open_store  # noqa: E402
from hmsrepl.metastore.model import Database  # noqa: E402
from hmsrepl.replication.commands import parse_policy  # noqa: E402
from hmsrepl.replication.engine import ReplicationEngine  # noqa: E402
from hmsrepl.replication.layout import DumpDir  # noqa: E402
from hmsrepl.replication.load import repl_status  # noqa: E402
from hmsrepl.replication.verify import capture_state, diff_states  # noqa: E402
from tests.compaction_workload import KINDS, apply_ops, policy_text, random_ops  # noqa: E402

DB = "bench"
NO_COMPACTION = "WITH ('hmsrepl.repl.compact.events'='false')"
# "warehouse": many tables, mostly appends and overwrites of partitions, few drops; "churn": the property
# test's uniform mix on 4 tables and 3 partitions, where most of what is created is dropped again.
MIXES = {
    "warehouse": dict(
        weights=dict(
            create=0.5,
            drop=0.05,
            rename=0.05,
            add=3,
            alter_part=1,
            drop_part=0.3,
            insert=5,
            overwrite=2,
            alter_table=0.5,
        ),
        tables=tuple(f"t{i}" for i in range(20)),
        parts=tuple(f"d{i:02d}" for i in range(12)),
    ),
    "churn": dict(weights=None, tables=("t0", "t1", "t2", "t3"), parts=("a", "b", "c")),
}


@dataclass
class Figures:
    dumps: int = 0
    events: int = 0
    skipped: int = 0
    dump_bytes: int = 0
    files_referenced: int = 0
    bytes_referenced: int = 0
    files_copied: int = 0
    bytes_copied: int = 0
    dump_s: float = 0.0
    load_s: float = 0.0


def tree_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def dump_all(engine: ReplicationEngine, limit: int | None, extra: str, figures: Figures) -> list[str]:
    """Dump the whole window (in LIMIT-sized dumps), as a replica at the bootstrap's position would."""
    position = repl_status(engine.target, DB)
    dirs = []
    while position < engine.source.get_current_notification_event_id():
        bound = f" LIMIT {limit}" if limit else ""
        started = time.perf_counter()
        dumped = engine.execute(f"REPL DUMP {policy_text(DB)} FROM {position}{bound} {extra}")
        figures.dump_s += time.perf_counter() - started
        meta = DumpDir(dumped.dump_dir).read_metadata()
        figures.dumps += 1
        figures.events += dumped.events
        figures.skipped += meta.skipped_events
        figures.dump_bytes += tree_bytes(dumped.dump_dir)
        figures.files_referenced += dumped.files
        figures.bytes_referenced += dumped.bytes
        dirs.append(dumped.dump_dir)
        position = dumped.last_event_id
    return dirs


def load_all(engine: ReplicationEngine, dirs: list[str], figures: Figures) -> None:
    for dump_dir in dirs:
        started = time.perf_counter()
        loaded = engine.execute(f"REPL LOAD {DB} FROM '{dump_dir}'")
        figures.load_s += time.perf_counter() - started
        figures.files_copied += loaded.stats.files_copied
        figures.bytes_copied += loaded.stats.bytes_copied


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ops", type=int, default=2000, help="workload operations in the replicated window")
    parser.add_argument("--payload", type=int, default=16384, help="bytes per data file")
    parser.add_argument("--limit", type=int, default=None, help="LIMIT per incremental dump")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--mix", default="warehouse", choices=sorted(MIXES))
    parser.add_argument("--backend", default="sqlite", choices=("sqlite", "postgres", "mysql"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    mix = MIXES[args.mix]
    weights = [mix["weights"][k] for k in KINDS] if mix["weights"] else None
    pools = {"tables": mix["tables"], "parts": mix["parts"], "payload": args.payload}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        root = Path(tmp)
        source = open_store(stack, "sqlite", root, "source")
        replicas = {"full": open_store(stack, args.backend, root, "full")}
        replicas["compacted"] = open_store(stack, args.backend, root, "compacted")
        engines = {k: ReplicationEngine(str(root / f"dumps_{k}"), source, t) for k, t in replicas.items()}
        source.catalog.create_database(Database(name=DB))
        apply_ops(source, DB, random_ops(rng, 4 * len(mix["tables"]), weights), "b", **pools)
        for engine in engines.values():
            dumped = engine.execute(f"REPL DUMP {policy_text(DB)}")
            engine.execute(f"REPL LOAD {DB} FROM '{dumped.dump_dir}'")
        start = source.get_current_notification_event_id()
        apply_ops(source, DB, random_ops(rng, args.ops, weights), "w", **pools)
        window = source.get_current_notification_event_id() - start
        figures = {k: Figures() for k in engines}
        dirs = {
            "full": dump_all(engines["full"], args.limit, NO_COMPACTION, figures["full"]),
            "compacted": dump_all(engines["compacted"], args.limit, "", figures["compacted"]),
        }
        for name in ("full", "compacted"):
            load_all(engines[name], dirs[name], figures[name])
        expected = capture_state(source, DB, parse_policy(policy_text(DB)))
        diffs = {name: diff_states(expected, capture_state(store, DB)) for name, store in replicas.items()}

    print(
        f"workload '{args.mix}': {args.ops} operations -> {window} events, data files of {args.payload} bytes, "
        f"LIMIT {args.limit or 'none'}, replicas on {args.backend}, seed {args.seed}"
    )
    rows = [
        ("dumps", "dumps", "{:,}"),
        ("events written", "events", "{:,}"),
        ("events skipped by compaction", "skipped", "{:,}"),
        ("dump size (event files, bytes)", "dump_bytes", "{:,}"),
        ("data files referenced", "files_referenced", "{:,}"),
        ("data bytes referenced", "bytes_referenced", "{:,}"),
        ("data files copied by the load", "files_copied", "{:,}"),
        ("data bytes copied by the load", "bytes_copied", "{:,}"),
        ("dump seconds", "dump_s", "{:.2f}"),
        ("load seconds", "load_s", "{:.2f}"),
    ]
    print(f"{'':34} {'full':>14} {'compacted':>14} {'compacted/full':>15}")
    for label, key, fmt in rows:
        full, compacted = getattr(figures["full"], key), getattr(figures["compacted"], key)
        ratio = f"{compacted / full:.2f}x" if full else "-"
        print(f"{label:34} {fmt.format(full):>14} {fmt.format(compacted):>14} {ratio:>15}")
    for name, diff in diffs.items():
        print(f"{name} replica equals the source: {'yes' if not diff else 'NO: ' + '; '.join(diff[:3])}")
    if any(diffs.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
