"""What location checks cost: create_table / drop_table / drop_partitions with and without them, one run.

A SQLite metastore holds one table of ``--partitions`` partitions (the checks scan stored locations, so
their cost grows with the catalog); then ``--tables`` tables are created and dropped, and 1,000 partitions
dropped, once with the policy and once with checks that accept everything (same process, alternating).

    python bench/bench_location_checks.py [--partitions 5000] [--tables 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.helpers import make_partition, make_table


class NoChecks:
    """Accepts every location and lets every drop remove its directory (the behaviour before the policy)."""

    def check_database(self, *args: object, **kwargs: object) -> None: ...
    def check_table(self, *args: object, **kwargs: object) -> None: ...
    def check_partitions(
        self, conn: object, table: object, uris: dict[str, object], **kwargs: object
    ) -> dict:
        return dict.fromkeys(uris)

    def removable(self, *args: object, **kwargs: object) -> bool:
        return True

    def removal_refusal(self, *args: object, **kwargs: object) -> None:
        return None


def one_round(partitions: int, tables: int, checked: bool) -> tuple[float, float, float]:
    root = Path(tempfile.mkdtemp(prefix="bench-locations-"))
    store = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{root}/m.db",
            warehouse=str(root / "wh"),
            cmroot=str(root / "cm"),
            trash_root="",
        )
    )
    if not checked:
        store.catalog.locations = NoChecks()  # type: ignore[assignment]
    try:
        store.catalog.create_database(Database(name="b"))
        big = store.catalog.create_table(make_table("b", "big", partition_keys=("d",)))
        store.catalog.add_partitions("b", "big", [make_partition(big, str(i)) for i in range(partitions)])
        start = time.perf_counter()
        for i in range(tables):
            store.catalog.create_table(make_table("b", f"t{i}"))
        create = tables / (time.perf_counter() - start)
        start = time.perf_counter()
        for i in range(tables):
            store.catalog.drop_table("b", f"t{i}")
        drop = tables / (time.perf_counter() - start)
        start = time.perf_counter()
        store.catalog.drop_partitions("b", "big", [[str(i)] for i in range(min(1000, partitions))])
        return create, drop, time.perf_counter() - start
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=5000)
    parser.add_argument("--tables", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    for _ in range(args.rounds):
        for checked in (True, False):
            results[checked].append(one_round(args.partitions, args.tables, checked))
    for checked in (True, False):
        rows = results[checked]
        create, drop, parts = (statistics.median(column) for column in zip(*rows, strict=True))
        label = "with checks   " if checked else "without checks"
        print(
            f"{label}: create_table {create:,.0f}/s  drop_table {drop:,.0f}/s  "
            f"drop_partitions(1,000) {parts:.2f} s  (median of {args.rounds}, {args.partitions:,} partitions)"
        )


if __name__ == "__main__":
    main()
