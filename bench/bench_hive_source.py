"""REPL DUMP from a stock Hive Metastore (2.3.10, 3.1.3 or 4.2.0) against the same dump from an hmsrepl source.

    python bench/bench_hive_source.py [--partitions 300] [--repeat 3] [--hive 2.3.10|3.1.3|4.2.0]

Builds the same database in both sources: a partitioned table of ``--partitions`` partitions (one small
file each, one ADD_PARTITION event each), then as many more partitions for an incremental window. The stock
one is Hive Metastore 2.3.10 from pyspark's jars on Derby, keeping its notification log with the test
listener (``tests/integration/hive_listener``), or with ``--hive`` 3.1.3 or 4.2.0 one with hcatalog's own
``DbNotificationListener`` (``tests.peers.hive_metastore``: json-0.2, gzip(json-2.0) messages); the hmsrepl one is an embedded SQLite metastore. Each repeat
takes a bootstrap dump (objects) and an incremental dump of the window (events) with a fresh source object
(no translation kept from an earlier repeat). Prints seconds, median and min, side by side, and the ratio.
What the stock source pays on top: Thrift reads, Hive's Thrift-JSON snapshots decoded, and each event's
listing read and checksummed when the event is read (an hmsrepl event carries its listing already).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO)]

from bench import hive_peers  # noqa: E402
from bench.hive_reference import HiveReferenceMetastore, java_version  # noqa: E402
from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.hive_source.source import StockHiveSource  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.model import Database, FieldSchema, Partition, StorageDescriptor, Table  # noqa: E402
from hmsrepl.replication.commands import parse_command  # noqa: E402
from hmsrepl.replication.dump import DumpEngine  # noqa: E402
from hmsrepl.thrift.convert import database_to_thrift, partition_to_thrift, table_to_thrift  # noqa: E402

DB = "bench"


def _sd(location: Path) -> StorageDescriptor:
    location.mkdir(parents=True, exist_ok=True)
    (location / "part-00000.txt").write_bytes(b"x" * 1024)
    return StorageDescriptor(cols=[FieldSchema(name="id", type="bigint")], location=str(location))


def _objects(warehouse: Path, first: int, count: int) -> tuple[Table, list[Partition]]:
    table = Table(
        db_name=DB,
        table_name="events",
        sd=StorageDescriptor(
            cols=[FieldSchema(name="id", type="bigint")], location=str(warehouse / "events")
        ),
        partition_keys=[FieldSchema(name="day", type="string")],
    )
    parts = [
        Partition(
            values=[f"d{i:05d}"], db_name=DB, table_name="events", sd=_sd(warehouse / f"events/day=d{i:05d}")
        )
        for i in range(first, first + count)
    ]
    return table, parts


def build_stock(hive: HiveReferenceMetastore, partitions: int) -> Callable[[int], None]:
    from thriftpy2.rpc import make_client

    from hmsrepl.thrift.idl import Service

    client = make_client(Service, "127.0.0.1", hive.port, timeout=600_000)
    warehouse = hive.root / "warehouse" / f"{DB}.db"
    client.create_database(database_to_thrift(Database(name=DB, location_uri=str(warehouse))))
    table, _ = _objects(warehouse, 0, 0)
    client.create_table(table_to_thrift(table))

    def add(first: int) -> None:
        for part in _objects(warehouse, first, partitions)[1]:
            client.add_partition(partition_to_thrift(part))

    add(0)
    return add


def build_ours(root: Path, partitions: int) -> tuple[Metastore, Callable[[int], None]]:
    store = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{root}/src.db", warehouse=str(root / "wh"), cmroot=str(root / "cm")
        )
    )
    warehouse = root / "wh" / f"{DB}.db"
    store.catalog.create_database(Database(name=DB, location_uri=str(warehouse)))
    table, _ = _objects(warehouse, 0, 0)
    store.catalog.create_table(table)

    def add(first: int) -> None:
        for part in _objects(warehouse, first, partitions)[1]:
            store.catalog.add_partitions(DB, "events", [part])

    add(0)
    return store, add


def timed(make_source: Callable[[], object], dump_root: Path, command: str) -> float:
    source = make_source()
    started = time.perf_counter()
    DumpEngine(source, str(dump_root)).dump(parse_command(command))  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    close = getattr(source, "close", None)
    if close is not None and not isinstance(source, Metastore):
        close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hive", choices=hive_peers.VERSIONS, default=hive_peers.PYSPARK_HIVE)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-hive-source-") as tmp:
        root = Path(tmp)
        metastore = hive_peers.stock_metastore(args.hive, root / "hive", notification_log=True)
        version = f"{args.hive}; {java_version(metastore.java)}"
        with metastore as hive:
            hive.wait_ready(timeout=180)
            add_stock = build_stock(hive, args.partitions)
            ours, add_ours = build_ours(root / "ours", args.partitions)
            roots = {"warehouse": str(hive.root / "warehouse"), "cmroot": str(hive.root / "cmroot")}

            def stock() -> StockHiveSource:
                return StockHiveSource(hive.uri, **roots)

            stock_start = stock().get_current_notification_event_id()
            ours_start = ours.get_current_notification_event_id()
            add_stock(args.partitions)
            add_ours(args.partitions)
            print(
                f"Hive Metastore {version} (Derby) vs hmsrepl (SQLite); "
                f"{args.partitions} partitions, then {args.partitions} ADD_PARTITION events; "
                f"{args.repeat} repeats"
            )
            print(f"{'dump':<34}{'stock median':>14}{'min':>8}{'hmsrepl median':>16}{'min':>8}{'ratio':>8}")
            cases = (
                ("bootstrap (tables, partitions)", f"REPL DUMP {DB}", f"REPL DUMP {DB}"),
                (
                    "incremental (events)",
                    f"REPL DUMP {DB} FROM {stock_start}",
                    f"REPL DUMP {DB} FROM {ours_start}",
                ),
            )
            for label, stock_command, ours_command in cases:
                stock_s, ours_s = [], []
                for i in range(args.repeat):  # interleaved, so both see the same machine load
                    stock_s.append(timed(stock, root / f"d{i}s", stock_command))
                    ours_s.append(timed(lambda: ours, root / f"d{i}o", ours_command))
                sm, om = statistics.median(stock_s), statistics.median(ours_s)
                print(
                    f"{label:<34}{sm:>14.2f}{min(stock_s):>8.2f}{om:>16.2f}{min(ours_s):>8.2f}{sm / om:>8.1f}"
                )
            ours.close()


if __name__ == "__main__":
    main()
