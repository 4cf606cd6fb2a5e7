"""What the rooted file system costs: catalog writes and a metadata replay, before vs after, in one run.

Each round runs in a fresh process on the code of one checkout (``--before``, default: the main checkout;
``--after``: this one), alternating before/after, so both see the same machine state. A round, on SQLite:
``--tables`` ``create_table`` calls; ``add_partitions`` of ``--partitions`` partitions to one table (a
file then written into each, not timed); ``drop_table`` of it, which recycles every file into cmroot
(through the change manager's file system: the choke point's heaviest user); then an incremental REPL DUMP
and REPL LOAD replaying all of it into a replica. Prints the median and minimum of each figure per side.

    python bench/bench_choke_point.py [--rounds 3] [--tables 50] [--partitions 1000] [--before /work/main]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
FIGURES = ("create_table", "add_partitions", "drop_table", "dump", "load")


class Clock:
    """Wall and CPU seconds of a block into ``out`` (``<figure>`` and ``cpu <figure>``), divided by ``per``.

    The CPU time of this process is what the checks add (string work and system calls); wall time also
    holds fsync waits and whatever else the shared machine runs."""

    def __init__(self, out: dict[str, float]) -> None:
        self.out = out

    @contextlib.contextmanager
    def __call__(self, figure: str, per: int = 1) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        self.out[figure] = (time.perf_counter() - wall) / per
        self.out[f"cpu {figure}"] = (time.process_time() - cpu) / per


def one_round(tables: int, partitions: int) -> dict[str, float]:
    """One round in this process (the child): seconds per figure (create_table: per call)."""
    from hmsrepl.config import MetastoreConfig
    from hmsrepl.metastore import Metastore
    from hmsrepl.metastore.model import Database
    from hmsrepl.replication.engine import ReplicationEngine
    from tests.helpers import make_partition, make_table, write_file

    root = Path(tempfile.mkdtemp(prefix="bench-choke-"))

    def open_store(side: str) -> Metastore:
        return Metastore.open(
            MetastoreConfig(
                db_url=f"sqlite:///{root}/{side}.db",
                warehouse=str(root / f"{side}_wh"),
                cmroot=str(root / f"{side}_cm"),
                trash_root="",
            )
        )

    source, target = open_store("src"), open_store("dst")
    engine = ReplicationEngine(str(root / "dumps"), source, target)
    c = source.catalog
    c.create_database(Database(name="b"))
    engine.execute(f"REPL LOAD b FROM '{engine.execute('REPL DUMP b').dump_dir}'")
    start_id = source.get_current_notification_event_id()
    out: dict[str, float] = {}
    clock = Clock(out)

    with clock("create_table", per=tables):
        for number in range(tables):
            c.create_table(make_table("b", f"t{number}"))
    big = c.create_table(make_table("b", "big", partition_keys=("d",)))
    with clock("add_partitions"):
        c.add_partitions("b", "big", [make_partition(big, str(i)) for i in range(partitions)])
    for part in c.get_partitions("b", "big"):
        write_file(part.sd.location or "", "f", part.values[0].encode())
    with clock("drop_table"):
        c.drop_table("b", "big")
    with clock("dump"):
        dumped = engine.execute(f"REPL DUMP b FROM {start_id}")
    with clock("load"):
        engine.execute(f"REPL LOAD b FROM '{dumped.dump_dir}'")
    source.close()
    target.close()
    return out


def run_child(checkout: str, tables: int, partitions: int) -> dict[str, float]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{checkout}/include:{checkout}",
        "HMSREPL_REPL_RETIRE_GRACE_SECONDS": "0",
    }
    done = subprocess.run(
        [sys.executable, __file__, "--child", "--tables", str(tables), "--partitions", str(partitions)],
        env=env,
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--before", default="/work/main")
    parser.add_argument("--after", default=str(HERE))
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_round(args.tables, args.partitions)))
        return
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for side in ("before", "after"):
            runs[side].append(run_child(getattr(args, side), args.tables, args.partitions))
    print(f"{args.rounds} rounds, {args.tables} tables, add_partitions({args.partitions}); seconds")
    print(
        f"{'figure':<16}{'before median':>15}{'before min':>12}{'after median':>14}{'after min':>11}{'ratio':>8}"
    )
    for figure in [*FIGURES, *(f"cpu {f}" for f in FIGURES)]:
        before = [run[figure] for run in runs["before"]]
        after = [run[figure] for run in runs["after"]]
        ratio = statistics.median(after) / statistics.median(before)
        print(
            f"{figure:<16}{statistics.median(before):>15.4f}{min(before):>12.4f}"
            f"{statistics.median(after):>14.4f}{min(after):>11.4f}{ratio:>8.2f}"
        )


if __name__ == "__main__":
    main()
