"""The main job on embedded defaults, end to end: a Spark workload on a source metastore served over Thrift,
a bootstrap replication, more workload, incremental replication in LIMIT batches, and a verification.

Everything runs on this machine: SQLite metastores, local warehouses, Spark ``local[2]``. The Airflow DAGs
run the same steps on a schedule (see dags/ when they land).
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import FieldSchema, StorageDescriptor, Table
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from hmsrepl.thrift.process import metastore_process

DATABASES = ("sales", "hr")
BATCH = 25  # LIMIT of each incremental dump


class StepTimer:
    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = []

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        click.echo(f"-> {name}")
        start = time.perf_counter()
        yield
        self.steps.append((name, time.perf_counter() - start))


@contextmanager
def metastore_server(config: MetastoreConfig, log: Path) -> Iterator[str]:
    """The source metastore as its own process, as in production; stopped when the demo ends."""
    settings = {
        "HMSREPL_DB_URL": config.db_url,
        "HMSREPL_WAREHOUSE": config.warehouse,
        "HMSREPL_CMROOT": config.cmroot,
        "HMSREPL_TRASH_ROOT": config.trash_root,
    }
    try:
        with metastore_process(settings, log) as (uri, _port):
            yield uri
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc


def run(home: Path = Path("var/demo")) -> None:
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    home = home.absolute()

    def config(side: str) -> MetastoreConfig:
        return MetastoreConfig(
            db_url=f"sqlite:///{home / side / 'metastore.db'}",
            warehouse=str(home / side / "warehouse"),
            cmroot=str(home / side / "cmroot"),
        )

    timer = StepTimer()
    with timer.step("create source and target metastores (SQLite, Alembic)"):
        source, target = Metastore.open(config("source")), Metastore.open(config("target"))
    engine = ReplicationEngine(str(home / "dumps"), source, target)
    with metastore_server(source.config, home / "source-metastore.log") as uri:
        with timer.step(f"start Spark (local) with the source metastore at {uri} as its catalog"):
            from hmsrepl.spark_session import hive_spark_session

            spark = hive_spark_session("hmsrepl-demo", uri, source.config.warehouse)
            spark.sparkContext.setLogLevel("ERROR")
        try:
            with timer.step(
                "workload 1: databases, partitioned and plain tables, inserts, an insert-only ACID table"
            ):
                _workload_one(spark, source)
            with timer.step("bootstrap: REPL DUMP + REPL LOAD of each database"):
                for db in DATABASES:
                    dumped = engine.execute(f"REPL DUMP {db}")
                    engine.execute(f"REPL LOAD {db}_dr FROM '{dumped.dump_dir}'")
            with timer.step(
                "workload 2: inserts, overwrite, dynamic partitions, drop partition, rename, drops"
            ):
                _workload_two(spark)
        finally:
            spark.stop()
        with timer.step(
            f"incremental: REPL DUMP FROM repl.last.id LIMIT {BATCH} + REPL LOAD until caught up"
        ):
            batches = _catch_up(engine, source, target)
    with timer.step("verify: replica == source (metadata and file checksums)"):
        differences = {db: verify(source, db, target, f"{db}_dr") for db in DATABASES}
    _summary(source, target, timer, batches, differences)
    if any(differences.values()):
        raise SystemExit(1)


def _workload_one(spark: Any, source: Metastore) -> None:
    sql = spark.sql
    sql("CREATE DATABASE sales")
    sql("CREATE DATABASE hr")
    sql("CREATE TABLE sales.orders (id INT, item STRING) PARTITIONED BY (day STRING) STORED AS PARQUET")
    sql("CREATE TABLE hr.people (id INT, name STRING) STORED AS TEXTFILE")
    for day in ("2026-11-20", "2026-11-21"):
        sql(
            f"INSERT INTO sales.orders PARTITION (day='{day}') SELECT id, concat('item-', id) FROM range(100)"
        )
    sql("INSERT INTO hr.people VALUES (1, 'ada'), (2, 'grace')")
    _acid_table(spark, source)


def _acid_table(spark: Any, source: Metastore) -> None:
    """Insert-only transactional table: two committed writes and one that fails (its txn is aborted)."""
    from hmsrepl.acid.spark import write_insert_only

    source.catalog.create_table(
        Table(
            db_name="sales",
            table_name="clicks",
            sd=StorageDescriptor(
                cols=[FieldSchema(name="id", type="int"), FieldSchema(name="name", type="string")],
                input_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
            ),
            parameters={"transactional": "true", "transactional_properties": "insert_only"},
        )
    )
    frame = spark.createDataFrame([(i, f"click-{i}") for i in range(50)], "id INT, name STRING")
    write_insert_only(frame, source, "sales", "clicks")
    write_insert_only(frame.selectExpr("id + 50 AS id", "name"), source, "sales", "clicks")
    spark.sparkContext.setLogLevel(
        "OFF"
    )  # the failure below is intended; keep its task traces off the console
    try:
        failing = frame.selectExpr("id", "CAST(raise_error('simulated writer failure') AS STRING) AS name")
        write_insert_only(failing, source, "sales", "clicks")
    except Exception:  # the demo shows that a failed writer's txn is aborted
        click.echo("   (a failing writer aborted its transaction, as intended)")
    spark.sparkContext.setLogLevel("ERROR")


def _workload_two(spark: Any) -> None:
    sql = spark.sql
    sql("INSERT INTO sales.orders PARTITION (day='2026-11-21') VALUES (1000, 'late order')")
    sql("INSERT OVERWRITE TABLE sales.orders PARTITION (day='2026-11-20') VALUES (1, 'corrected')")
    sql("INSERT INTO sales.orders PARTITION (day) VALUES (7, 'x', '2026-11-22'), (8, 'y', '2026-11-23')")
    sql("ALTER TABLE sales.orders DROP PARTITION (day='2026-11-23')")
    sql("ALTER TABLE hr.people RENAME TO hr.staff")
    sql("INSERT INTO hr.staff VALUES (3, 'barbara')")
    sql("CREATE TABLE hr.scratch STORED AS PARQUET AS SELECT * FROM hr.staff")
    sql("DROP TABLE hr.scratch")


def _catch_up(engine: ReplicationEngine, source: Metastore, target: Metastore) -> int:
    batches = 0
    for db in DATABASES:
        while (last := repl_status(target, f"{db}_dr") or 0) < source.get_current_notification_event_id():
            dumped = engine.execute(f"REPL DUMP {db} FROM {last} LIMIT {BATCH}")
            engine.execute(f"REPL LOAD {db}_dr FROM '{dumped.dump_dir}'")
            batches += 1
            if dumped.events == 0:
                break
    return batches


def _summary(
    source: Metastore, target: Metastore, timer: StepTimer, batches: int, differences: dict[str, list[str]]
) -> None:
    events = source.get_next_notification(0)
    by_type = Counter(e.event_type for e in events)
    click.echo("\nSummary")
    click.echo(
        f"  source notification log: {len(events)} events; "
        + ", ".join(f"{kind} {count}" for kind, count in sorted(by_type.items()))
    )
    click.echo(
        f"  source cmroot keeps {len(list(Path(source.cm.cmroot).glob('*')))} files (dropped and overwritten data)"
    )
    for db in DATABASES:
        tables = target.catalog.get_tables(f"{db}_dr")
        click.echo(
            f"  {db}_dr: repl.last.id {repl_status(target, f'{db}_dr')}, tables {tables}; "
            + ("equals the source" if not differences[db] else f"DIFFERS: {differences[db]}")
        )
    click.echo(f"  incremental batches loaded: {batches}")
    click.echo("  step timings:")
    for name, seconds in timer.steps:
        click.echo(f"    {seconds:7.2f} s  {name}")
