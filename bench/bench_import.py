"""Importing a stock Hive Metastore: tables/s and partitions/s, in place, against reading alone.

    python bench/bench_import.py [--tables 100] [--partitions 1000 3000] [--repeat 3]

Starts Hive Metastore 2.3.10 from pyspark's jars (Derby), creates ``--tables`` plain tables and one
partitioned table per ``--partitions`` size through its Thrift API (each table and partition with one small
data file, as a writer leaves them), then imports the database in place into a fresh embedded hmsrepl
metastore (SQLite) with ``HiveImporter``, ``--repeat`` times. Side by side in the same run: reading the same
objects from the stock metastore alone (the pages the import reads), so the ratio says what the import adds
on top of what any reader of Hive pays. Prints median and min.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO)]

from bench.hive_reference import HiveReferenceMetastore  # noqa: E402
from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.hive_import.importer import HiveImporter, ImportOptions  # noqa: E402
from hmsrepl.hive_import.reader import StockMetastoreReader  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.model import Database, FieldSchema, Partition, StorageDescriptor, Table  # noqa: E402
from hmsrepl.thrift.convert import database_to_thrift, partition_to_thrift, table_to_thrift  # noqa: E402

PARQUET_IN = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"


def _sd(location: str) -> StorageDescriptor:
    Path(location).mkdir(parents=True, exist_ok=True)
    (Path(location) / "part-00000.parquet").write_bytes(b"x" * 1024)
    return StorageDescriptor(
        cols=[FieldSchema(name="id", type="bigint")], location=location, input_format=PARQUET_IN
    )


def populate(uri: str, warehouse: Path, db: str, tables: int, sizes: list[int]) -> None:
    """The stock catalog, written through Hive's own Thrift calls."""
    from thriftpy2.rpc import make_client

    from hmsrepl.thrift.idl import Service

    client = make_client(Service, "127.0.0.1", int(uri.rsplit(":", 1)[1]), timeout=600_000)
    db_location = str(warehouse / f"{db}.db")
    client.create_database(database_to_thrift(Database(name=db, location_uri=db_location)))
    for i in range(tables):
        table = Table(db_name=db, table_name=f"plain_{i:04d}", sd=_sd(f"{db_location}/plain_{i:04d}"))
        client.create_table(table_to_thrift(table))
    for size in sizes:
        name = f"parts_{size}"
        location = f"{db_location}/{name}"
        keys = [FieldSchema(name="day", type="string")]
        client.create_table(
            table_to_thrift(Table(db_name=db, table_name=name, sd=_sd(location), partition_keys=keys))
        )
        for start in range(0, size, 500):
            batch = [
                partition_to_thrift(
                    Partition(
                        values=[f"d{n:05d}"], db_name=db, table_name=name, sd=_sd(f"{location}/day=d{n:05d}")
                    )
                )
                for n in range(start, min(size, start + 500))
            ]
            client.add_partitions(batch)
    client.close()


def read_only(reader: StockMetastoreReader, db: str) -> None:
    for name in reader.table_names(db):
        table = reader.table(db, name)
        if table.partition_keys:
            for _ in reader.partitions(db, name, reader.partition_names(db, name)):
                pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1000, 3000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-import-"))
    with HiveReferenceMetastore(root / "hive") as hive:
        hive.wait_ready()
        warehouse = root / "hive" / "warehouse"
        started = time.perf_counter()
        populate(hive.uri, warehouse, "bench", args.tables, args.partitions)
        total_parts = sum(args.partitions)
        print(
            f"stock catalog: {args.tables + len(args.partitions)} tables, {total_parts} partitions written "
            f"through Hive 2.3.10 in {time.perf_counter() - started:.1f} s"
        )
        imports, reads = [], []
        for run in range(args.repeat):
            reader = StockMetastoreReader(hive.uri)
            began = time.perf_counter()
            read_only(reader, "bench")
            reads.append(time.perf_counter() - began)
            config = MetastoreConfig(
                db_url=f"sqlite:///{root}/hmsrepl-{run}.db",
                warehouse=str(warehouse),
                cmroot=str(root / f"cm-{run}"),
            )
            store = Metastore.open(config)
            began = time.perf_counter()
            result = HiveImporter(
                reader, store, ImportOptions(databases=["bench"]), progress=lambda _: None
            ).run()
            imports.append(time.perf_counter() - began)
            assert result.partitions == total_parts, result
            store.close()
            reader.close()
        tables = args.tables + len(args.partitions)
        best, median = min(imports), statistics.median(imports)
        print(f"in-place import, median (min) of {args.repeat}: {median:.2f} ({best:.2f}) s")
        print(f"  {tables / median:,.0f} tables/s and {total_parts / median:,.0f} partitions/s (median)")
        print(
            f"  reading the same objects from Hive alone: {statistics.median(reads):.2f} ({min(reads):.2f}) s; "
            f"import / read = {median / statistics.median(reads):.2f}x"
        )


if __name__ == "__main__":
    main()
