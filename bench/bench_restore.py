"""Restore benchmark: undrop a table of many partitions and files from cmroot, against ``cp`` of the same bytes.

    python bench/bench_restore.py [--partitions 200] [--files 10] [--payload 4096] [--backend sqlite|postgres]

Makes table ``bench.t`` of ``--partitions`` partitions holding ``--files`` files of ``--payload`` bytes each,
drops it (its files go to cmroot), then times the restore twice: hard-linking the content from cmroot (the
default on a local disk) and copying it (verified); each restore is a plan (the log read backwards, every
needed file checksummed in cmroot) and a run (files placed, CREATE_TABLE and ADD_PARTITION events). The
baseline is ``cp -r`` of the restored table's directory (the same files and bytes) to a fresh directory.
The issue's size is 10,000 partitions of 10 files (100,000 files); the default is small for a quick run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO)]

from bench.bench_replication import open_store  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.model import Database  # noqa: E402
from hmsrepl.restore.executor import RestoreExecutor  # noqa: E402
from hmsrepl.restore.planner import RestorePlanner  # noqa: E402
from hmsrepl.storage.local import local_path  # noqa: E402
from tests.helpers import make_partition, make_table  # noqa: E402

BATCH = 500


def build(store: Metastore, partitions: int, files: int, payload: int) -> int:
    """The table, its files written before each batch of partitions is added (captured by the add)."""
    store.catalog.create_database(Database(name="bench"))
    table = store.catalog.create_table(make_table("bench", "t", partition_keys=("p",)))
    root = Path(local_path(table.sd.location or ""))
    for start in range(0, partitions, BATCH):
        names = range(start, min(start + BATCH, partitions))
        for i in names:
            directory = root / f"p={i}"
            directory.mkdir(parents=True, exist_ok=True)
            for j in range(files):
                (directory / f"part-{j:05d}.parquet").write_bytes(os.urandom(payload))
        store.catalog.add_partitions("bench", "t", [make_partition(table, str(i)) for i in names])
    return partitions * files * payload


def restore_once(store: Metastore, *, link: bool) -> tuple[float, float, int, int]:
    store.catalog.drop_table("bench", "t")
    started = time.monotonic()
    plan = RestorePlanner(store).undrop_table("bench", "t")
    planned = time.monotonic() - started
    result = RestoreExecutor(store, link=link).run(plan)
    return planned, result.seconds, result.files, result.linked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--payload", type=int, default=4096)
    parser.add_argument("--backend", default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        root = Path(tmp)
        store = open_store(stack, args.backend, root, "src")
        started = time.monotonic()
        size = build(store, args.partitions, args.files, args.payload)
        count = args.partitions * args.files
        print(
            f"table bench.t: {args.partitions} partitions, {count} files, {size / 2**20:.1f} MiB "
            f"({args.backend}; built in {time.monotonic() - started:.1f} s)"
        )
        for link in (True, False):
            planned, ran, files, linked = restore_once(store, link=link)
            mode = "hard links" if link else "copies"
            print(
                f"restore ({mode}): plan {planned:.2f} s + run {ran:.2f} s = {planned + ran:.2f} s; "
                f"{files} files, {size / 2**20:.1f} MiB placed, {linked} linked, "
                f"{(size if not link else 0) / 2**20:.1f} MiB written"
            )
        location = local_path(store.catalog.get_table("bench", "t").sd.location or "")
        started = time.monotonic()
        subprocess.run(["cp", "-r", location, str(root / "cp-copy")], check=True)
        print(f"cp -r of the same {count} files, {size / 2**20:.1f} MiB: {time.monotonic() - started:.2f} s")


if __name__ == "__main__":
    main()
