"""The main job on embedded defaults: a real Spark workload against the metastore, then a summary.

It grows with the product: today it exercises the metastore core (catalog, notification log, change
manager, insert-only ACID tables written by Spark); replication and Airflow steps join as they land.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, FieldSchema, Partition, StorageDescriptor, Table

PARQUET_INPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"


class StepTimer:
    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = []

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        click.echo(f"-> {name}")
        start = time.perf_counter()
        yield
        self.steps.append((name, time.perf_counter() - start))


def run(home: Path = Path("var/demo")) -> None:
    if home.exists():
        shutil.rmtree(home)
    config = MetastoreConfig(
        db_url=f"sqlite:///{home / 'source-metastore.db'}",
        warehouse=str((home / "warehouse").absolute()),
        cmroot=str((home / "cmroot").absolute()),
    )
    timer = StepTimer()
    with timer.step("create metastore schema (SQLite, Alembic)"):
        store = Metastore.open(config)
    with timer.step("start Spark (local)"):
        from hmsrepl.spark_session import local_spark_session

        spark = local_spark_session("hmsrepl-demo")
        spark.sparkContext.setLogLevel("ERROR")
    try:
        with timer.step("workload: databases, partitioned tables, inserts, overwrite, drops"):
            _plain_workload(store, spark)
        with timer.step("workload: insert-only transactional table, committed and aborted txns"):
            visible_rows = _acid_workload(store, spark)
    finally:
        spark.stop()
    _summary(store, timer, visible_rows)


def _write_parquet(spark: Any, location: str, rows: list[tuple[int, str]], mode: str = "append") -> None:
    spark.createDataFrame(rows, "id INT, name STRING").coalesce(1).write.mode(mode).parquet(location)


def _plain_workload(store: Metastore, spark: Any) -> None:
    catalog = store.catalog
    for db in ("sales", "hr"):
        catalog.create_database(Database(name=db, description=f"{db} data"))
    sd = StorageDescriptor(
        cols=[FieldSchema(name="id", type="int"), FieldSchema(name="name", type="string")],
        input_format=PARQUET_INPUT,
    )
    orders = catalog.create_table(
        Table(
            db_name="sales",
            table_name="orders",
            sd=sd,
            partition_keys=[FieldSchema(name="day", type="string")],
        )
    )
    days = ["2026-11-20", "2026-11-21", "2026-11-22"]
    added = catalog.add_partitions(
        "sales", "orders", [Partition(values=[d], db_name="sales", table_name="orders") for d in days]
    )
    for part, day in zip(added, days, strict=True):
        _write_parquet(spark, part.sd.location or "", [(i, f"order-{day}-{i}") for i in range(100)])
        catalog.insert("sales", "orders", [day])
    # Overwrite one partition: the replaced files go to cmroot.
    _write_parquet(spark, added[0].sd.location or "", [(1, "corrected")], mode="overwrite")
    catalog.insert("sales", "orders", [days[0]], replace=True)
    catalog.drop_partitions("sales", "orders", [[days[1]]])
    people = catalog.create_table(Table(db_name="hr", table_name="people", sd=sd))
    _write_parquet(spark, people.sd.location or "", [(1, "ada"), (2, "grace")])
    catalog.insert("hr", "people")
    catalog.alter_table("hr", "people", people.model_copy(update={"table_name": "staff"}))
    scratch = catalog.create_table(Table(db_name="hr", table_name="scratch", sd=sd))
    _write_parquet(spark, scratch.sd.location or "", [(9, "tmp")])
    catalog.insert("hr", "scratch")
    catalog.drop_table("hr", "scratch")
    assert orders.id is not None


def _acid_workload(store: Metastore, spark: Any) -> int:
    from hmsrepl.acid.spark import read_insert_only, write_insert_only

    store.catalog.create_table(
        Table(
            db_name="sales",
            table_name="clicks",
            sd=StorageDescriptor(
                cols=[FieldSchema(name="id", type="int"), FieldSchema(name="name", type="string")],
                input_format=PARQUET_INPUT,
            ),
            parameters={"transactional": "true", "transactional_properties": "insert_only"},
        )
    )
    frame: Callable[[int], Any] = lambda start: spark.createDataFrame(  # noqa: E731
        [(i, f"click-{i}") for i in range(start, start + 50)], "id INT, name STRING"
    )
    write_insert_only(frame(0), store, "sales", "clicks")
    write_insert_only(frame(50), store, "sales", "clicks")
    spark.sparkContext.setLogLevel(
        "OFF"
    )  # the failure below is intended; keep its task traces off the console
    try:
        write_insert_only(
            frame(100).selectExpr("id", "CAST(raise_error('simulated writer failure') AS STRING) AS name"),
            store,
            "sales",
            "clicks",
        )
    except Exception:  # the demo shows that a failed writer's txn is aborted
        click.echo("   (a failing writer aborted its transaction, as intended)")
    spark.sparkContext.setLogLevel("ERROR")
    return read_insert_only(spark, store, "sales", "clicks").count()


def _summary(store: Metastore, timer: StepTimer, visible_rows: int) -> None:
    events = store.get_next_notification(0)
    by_type = Counter(e.event_type for e in events)
    cm_files = list(Path(store.cm.cmroot).glob("*"))
    click.echo("\nSummary")
    click.echo(
        f"  notification log: {len(events)} events, current id {store.get_current_notification_event_id()}"
    )
    for event_type, count in sorted(by_type.items()):
        click.echo(f"    {event_type:<16} {count}")
    click.echo(f"  cmroot keeps {len(cm_files)} recycled files (data of dropped tables and partitions)")
    click.echo(f"  transactions: {store.txns.get_valid_txns().to_string()}  (hwm:minOpen:open:aborted)")
    [clicks] = store.txns.get_valid_write_ids(["sales.clicks"])
    click.echo(f"  sales.clicks write ids: {clicks.write_ids.to_string()}; rows visible: {visible_rows}")
    click.echo("  step timings:")
    for name, seconds in timer.steps:
        click.echo(f"    {seconds:7.2f} s  {name}")
