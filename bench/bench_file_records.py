"""Recording a big listing's file rows: the bulk path (PostgreSQL's COPY, SQLite's driver executemany) against
SQLAlchemy's executemany of the same rows, in one transaction, as a load or a first capture records them.

    python bench/bench_file_records.py [--files 200000] [--backend sqlite,postgres] [--rounds 3]

Each round records ``--files`` rows (batches of 5,000, ``listings.apply`` with ``new_paths``) once each way,
alternating, on a new object each time; it prints wall and CPU seconds per way, their medians and minima, and
the ratio of the medians. PostgreSQL is the server named by ``HMSREPL_TEST_POSTGRES_URL`` (or the local
default, as the tests find it), on a database made for the run and dropped after.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO)]

from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.metastore import Metastore, bulk_rows, listings  # noqa: E402
from hmsrepl.metastore.listings import FileRecord, ObjectKey  # noqa: E402

BATCH = 5_000
WAYS = {"bulk": bulk_rows.COPY_MIN_ROWS, "SQLAlchemy executemany": 1 << 62}


@contextmanager
def store_on(backend: str, root: Path) -> Iterator[Metastore]:
    from tests.backends import temporary_database

    with temporary_database(backend, str(root)) as url:
        store = Metastore.open(
            MetastoreConfig(db_url=url, warehouse=str(root / "wh"), cmroot=str(root / "cm"))
        )
        try:
            yield store
        finally:
            store.close()


def record_once(store: Metastore, key: ObjectKey, records: list[FileRecord]) -> tuple[float, float]:
    """Wall and CPU seconds of recording ``records`` under the new object ``key`` in one transaction."""
    cpu, wall = time.process_time(), time.perf_counter()
    with store.engine.begin() as conn:
        summary = None
        for start in range(0, len(records), BATCH):
            summary = listings.apply(
                conn, key, records[start : start + BATCH], before=summary, new_paths=True
            )
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200_000)
    parser.add_argument("--backend", default="sqlite,postgres")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    records = [
        FileRecord(f"ds=2026-01-01/part-{i:07d}.parquet", 8, 1_700_000_000_000_000_000 + i, f"{i:08x}")
        for i in range(args.files)
    ]
    print(f"{args.files:,} file records in one transaction, batches of {BATCH:,}; {args.rounds} rounds")
    for backend in args.backend.split(","):
        with (
            tempfile.TemporaryDirectory(prefix="bench-records-") as tmp,
            store_on(backend, Path(tmp)) as store,
        ):
            figures: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
            for round_ in range(args.rounds):
                for index, (way, threshold) in enumerate(WAYS.items()):
                    bulk_rows.COPY_MIN_ROWS = threshold
                    key = ObjectKey(1 + round_ * len(WAYS) + index, 1)
                    figures[way].append(record_once(store, key, records))
            bulk_rows.COPY_MIN_ROWS = WAYS["bulk"]
        medians = {}
        for way, runs in figures.items():
            walls, cpus = [w for w, _ in runs], [c for _, c in runs]
            medians[way] = statistics.median(walls)
            print(
                f"{backend:<9} {way:<24} wall {' / '.join(f'{w:.2f}' for w in walls)} s"
                f" (median {medians[way]:.2f}, min {min(walls):.2f}); CPU median {statistics.median(cpus):.2f} s"
            )
        ratio = medians["bulk"] / medians["SQLAlchemy executemany"]
        print(f"{backend:<9} bulk / SQLAlchemy executemany, median wall: {ratio:.2f}x")


if __name__ == "__main__":
    main()
