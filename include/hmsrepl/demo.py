"""The main job on embedded defaults, end to end, orchestrated by the project's Airflow DAGs.

Source and target metastores (SQLite) run as their own Thrift server processes; a Spark workload writes to
the source; the ``hmsrepl_bootstrap`` DAG bootstraps one replica per database, more workload follows, the
``hmsrepl_incremental`` DAG catches the replicas up in LIMIT batches; ``hmsrepl repl verify`` then compares
each replica with its source. The DAGs run with ``dag.test()`` on a private Airflow home (SQLite metadata DB)
and submit the real Spark applications with ``spark-submit`` (``local[*]``): the same DAG files and
applications that run on a schedule in production, configured the same way (environment variables).

Airflow is imported only inside ``run``, after its environment is set: the core package never needs it.
Set ``HMSREPL_DEMO_ACID=false`` to leave the insert-only transactional table out of the workload.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import click

from hmsrepl.airflow_provider import CONNECTION_TYPE
from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import FieldSchema, StorageDescriptor, Table
from hmsrepl.replication.load import repl_status
from hmsrepl.thrift.process import metastore_process

DATABASES = ("sales", "hr")
BATCH = 25  # LIMIT of each incremental dump
REPO = Path(__file__).resolve().parents[2]
#: The demo's workload includes an insert-only ACID table (committed and aborted txns) unless set to false.
ACID_SWITCH = "HMSREPL_DEMO_ACID"


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
def metastore_server(config: MetastoreConfig, log: Path) -> Iterator[tuple[str, int]]:
    """A metastore as its own process, as in production; stopped when the demo ends."""
    settings = {
        "HMSREPL_DB_URL": config.db_url,
        "HMSREPL_WAREHOUSE": config.warehouse,
        "HMSREPL_CMROOT": config.cmroot,
        "HMSREPL_TRASH_ROOT": config.trash_root,
    }
    try:
        with metastore_process(settings, log) as running:
            yield running
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from exc


def airflow_environment(home: Path, source: MetastoreConfig, target: MetastoreConfig) -> dict[str, str]:
    """Everything the DAGs and Spark applications read, as production sets it (environment variables)."""
    for folder in ("dags", "plugins", "spark_apps"):
        if not (REPO / folder).is_dir():
            raise click.ClickException(f"{REPO / folder} is missing: run the demo from a checkout of hmsrepl")
    airflow_home = home / "airflow"
    env = {
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("HMSREPL_DEMO_AIRFLOW_LOG_LEVEL", "WARNING"),
        # The replicate tasks add each replica's Asset through an alias. No DAG of the demo is scheduled on
        # those Assets, so Airflow registers them inactive and warns at every event: a deployment whose
        # consumers are scheduled on them does not see this.
        "AIRFLOW__LOGGING__NAMESPACE_LEVELS": "airflow.assets.manager=ERROR",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
        "HMSREPL_DUMP_ROOT": str(home / "dumps"),
        "HMSREPL_REPLICATIONS": json.dumps([{"policy": db, "target_db": f"{db}_dr"} for db in DATABASES]),
        "HMSREPL_REPL_LIMIT": str(BATCH),
        "HMSREPL_TASK_RETRIES": "0",  # a demo should fail at once, with its error, rather than retry
        # spark-submit and the Python it starts: this interpreter's environment (the venv).
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
    }
    for side, config in (("SOURCE", source), ("TARGET", target)):
        env[f"HMSREPL_{side}_DB_URL"] = config.db_url
        env[f"HMSREPL_{side}_WAREHOUSE"] = config.warehouse
        env[f"HMSREPL_{side}_CMROOT"] = config.cmroot
    return env


def connection(port: int) -> str:
    return json.dumps({"conn_type": CONNECTION_TYPE, "host": "127.0.0.1", "port": port, "login": "hive"})


@contextmanager
def jvm_stderr_into(log: Path) -> Iterator[None]:
    """Starts the JVM with its standard error in ``log``, so the JVM's own launch notices and Spark's log4j
    lines land in the demo's log files beside the servers' instead of between the demo's steps.

    The driver JVM inherits file descriptor 2 when PySpark spawns it, so pointing that descriptor at the log
    while the session starts is enough; the demo's own output keeps the terminal afterwards.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with log.open("ab") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


class DagRunner:
    """Runs the project's DAGs with ``dag.test()``; Airflow is imported here, never by the core."""

    def __init__(self) -> None:
        import warnings

        from airflow.dag_processing.dagbag import DagBag

        # dag.test() serves Airflow's execution API in-process through starlette's test client, which warns
        # that it uses httpx; nothing a user of the demo can act on.
        warnings.filterwarnings("ignore", message=r"Using `httpx` with `starlette\.testclient` is deprecated")
        # Airflow's log masker registers every Variable it loads and warns once that values shorter than five
        # characters (event ids such as 46) are not masked; the demo's Variables hold no secret. The masker
        # logs through the standard library, not through Airflow's per-namespace levels.
        logging.getLogger("airflow._shared.secrets_masker").setLevel(logging.ERROR)

        self.bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
        if self.bag.import_errors:
            raise click.ClickException(f"the DAGs do not import: {self.bag.import_errors}")
        self.runs: list[tuple[str, str, dict[str, str]]] = []

    def run(self, dag_id: str, conf: dict[str, Any]) -> None:
        dag_run = self.bag.dags[dag_id].test(run_conf=conf)
        states = {
            ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]": str(ti.state)
            for ti in dag_run.get_task_instances()
        }
        self.runs.append((dag_id, str(dag_run.state), states))
        click.echo(
            f"   {dag_id} {json.dumps(conf)}: {dag_run.state} ({', '.join(f'{t} {s}' for t, s in states.items())})"
        )
        if str(dag_run.state) != "success":
            raise click.ClickException(
                f"DAG {dag_id} run failed (task errors above); demo state is in {os.environ['AIRFLOW_HOME']}"
            )

    @staticmethod
    def variable(key: str) -> str | None:
        from airflow.models.variable import Variable

        value: str | None = Variable.get(key, default_var=None)
        return value


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

    with_acid = os.environ.get(ACID_SWITCH, "true").strip().lower() not in ("0", "false", "no", "off")
    timer = StepTimer()
    with timer.step("create source and target metastores (SQLite, Alembic)"):
        source, target = Metastore.open(config("source")), Metastore.open(config("target"))
    os.environ.update(airflow_environment(home, source.config, target.config))
    with ExitStack() as servers:
        with timer.step("start the source and target metastore servers (Thrift) and Airflow's metadata DB"):
            source_uri, source_port = servers.enter_context(
                metastore_server(source.config, home / "source-metastore.log")
            )
            _, target_port = servers.enter_context(
                metastore_server(target.config, home / "target-metastore.log")
            )
            os.environ["AIRFLOW_CONN_HMSREPL_SOURCE_METASTORE"] = connection(source_port)
            os.environ["AIRFLOW_CONN_HMSREPL_TARGET_METASTORE"] = connection(target_port)
            _airflow_db_migrate(home)
            dags = DagRunner()
        with timer.step(f"start Spark (local) with the source metastore at {source_uri} as its catalog"):
            from hmsrepl.spark_session import hive_spark_session

            with jvm_stderr_into(home / "spark-driver.log"):
                spark = hive_spark_session("hmsrepl-demo", source_uri, source.config.warehouse)
            spark.sparkContext.setLogLevel("ERROR")
        try:
            with timer.step(
                "workload 1: databases, partitioned and plain tables, inserts"
                + (", an insert-only ACID table (committed and aborted txns)" if with_acid else "")
            ):
                _workload_one(spark, source, with_acid)
            with timer.step("DAG hmsrepl_bootstrap per database (spark-submit repl_sync.py --bootstrap)"):
                for db in DATABASES:
                    dags.run("hmsrepl_bootstrap", {"policy": db, "target_db": f"{db}_dr"})
            with timer.step(
                "workload 2: inserts, overwrite, dynamic partitions, drop partition, rename, drops"
                + (", more ACID commits and an abort" if with_acid else "")
            ):
                _workload_two(spark, source, with_acid)
        finally:
            spark.stop()
        with timer.step(
            f"DAG hmsrepl_incremental: REPL DUMP FROM repl.last.id LIMIT {BATCH} + REPL LOAD until caught up"
        ):
            dags.run("hmsrepl_incremental", {})
        with timer.step("hmsrepl repl verify <db> <db>_dr: replica == source (metadata and file checksums)"):
            differences = {db: _repl_verify(db) for db in DATABASES}
        _summary(source, target, timer, dags, differences)
    if any(differences.values()):
        raise SystemExit(1)


def _airflow_db_migrate(home: Path) -> None:
    airflow = Path(sys.executable).parent / "airflow"
    done = subprocess.run([str(airflow), "db", "migrate"], capture_output=True, text=True)
    if done.returncode != 0:
        (home / "airflow-db-migrate.log").write_text(done.stdout + done.stderr)
        raise click.ClickException(
            f"'airflow db migrate' failed (log {home / 'airflow-db-migrate.log'}): {done.stderr.strip()[-500:]}"
        )


def _repl_verify(db: str) -> list[str]:
    """The operator's command, as an operator would type it; prints its verdict."""
    done = subprocess.run(
        [sys.executable, "-m", "hmsrepl.cli", "repl", "verify", db, f"{db}_dr"],
        capture_output=True,
        text=True,
    )
    lines = (done.stderr + done.stdout).strip().splitlines()  # its progress line, then its verdict
    for line in lines:
        click.echo(f"   {line}")
    return [] if done.returncode == 0 else lines or [f"exit code {done.returncode}"]


def _workload_one(spark: Any, source: Metastore, with_acid: bool) -> None:
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
    if with_acid:
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
        _acid_writes(spark, source, first_id=0)


def _acid_writes(spark: Any, source: Metastore, first_id: int) -> None:
    """Insert-only transactional table: two committed writes and one that fails (its txn is aborted)."""
    from hmsrepl.acid.spark import write_insert_only

    frame = spark.createDataFrame(
        [(i, f"click-{i}") for i in range(first_id, first_id + 50)], "id INT, name STRING"
    )
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


def _workload_two(spark: Any, source: Metastore, with_acid: bool) -> None:
    sql = spark.sql
    sql("INSERT INTO sales.orders PARTITION (day='2026-11-21') VALUES (1000, 'late order')")
    sql("INSERT OVERWRITE TABLE sales.orders PARTITION (day='2026-11-20') VALUES (1, 'corrected')")
    sql("INSERT INTO sales.orders PARTITION (day) VALUES (7, 'x', '2026-11-22'), (8, 'y', '2026-11-23')")
    sql("ALTER TABLE sales.orders DROP PARTITION (day='2026-11-23')")
    sql("ALTER TABLE hr.people RENAME TO hr.staff")
    sql("INSERT INTO hr.staff VALUES (3, 'barbara')")
    sql("CREATE TABLE hr.scratch STORED AS PARQUET AS SELECT * FROM hr.staff")
    sql("DROP TABLE hr.scratch")
    if with_acid:
        _acid_writes(spark, source, first_id=100)


def _summary(
    source: Metastore,
    target: Metastore,
    timer: StepTimer,
    dags: DagRunner,
    differences: dict[str, list[str]],
) -> None:
    from hmsrepl_airflow.settings import variable_key

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
        replica = f"{db}_dr"
        tables = {
            t: len(target.catalog.get_partition_names(replica, t)) for t in target.catalog.get_tables(replica)
        }
        last = repl_status(target, replica)
        click.echo(
            f"  {replica}: repl.last.id {last} (Variable {variable_key(db)} = {dags.variable(variable_key(db))}), "
            f"tables {', '.join(f'{t} ({n} partitions)' if n else t for t, n in tables.items())}; "
            + ("equals the source" if not differences[db] else f"DIFFERS: {differences[db]}")
        )
    click.echo(f"  DAG runs: {', '.join(f'{dag_id} {state}' for dag_id, state, _ in dags.runs)}")
    click.echo("  step timings:")
    for name, seconds in timer.steps:
        click.echo(f"    {seconds:7.2f} s  {name}")
