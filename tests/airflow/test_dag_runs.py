"""The DAGs run with ``dag.test()``: real metastore servers, real spark-submit (local[*]), real Airflow DB.

End to end: a Spark workload on the source, the bootstrap DAG, more workload (inserts, overwrite, dynamic
partitions, drops), the incremental DAG in small LIMIT batches, then the package's verify says the replica
equals the source (metadata and file checksums) and the Variable mirrors the target's ``repl.last.id``.
Bad input (no bootstrap, unreachable metastore, missing connection) fails the run with a message saying
what to fix, and advances nothing.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.metrics import MetricsLog
from hmsrepl.replication.verify import verify
from tests.airflow.conftest import metastore_connection
from tests.servers import RunningMetastore, free_port


def _variable(policy: str) -> str | None:
    from airflow.models.variable import Variable
    from hmsrepl_airflow.settings import variable_key

    return Variable.get(variable_key(policy), default_var=None)


def run_dag(dagbag: Any, dag_id: str, conf: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """One ``dag.test()`` run; returns the run's state and each task's state."""
    run = dagbag.dags[dag_id].test(run_conf=conf)
    return str(run.state), {
        ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]": str(ti.state)
        for ti in run.get_task_instances()
    }


@pytest.fixture
def airflow_connections(
    monkeypatch: pytest.MonkeyPatch, session_metastore: RunningMetastore, target_metastore: RunningMetastore
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_SOURCE_METASTORE", metastore_connection(session_metastore.port))
    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_TARGET_METASTORE", metastore_connection(target_metastore.port))


@pytest.fixture
def stale_replica(target_store: Metastore) -> str:
    """A replica database on the target at event 5 (as a bootstrap would leave it)."""
    name = f"stale_{uuid.uuid4().hex[:8]}_dr"
    target_store.catalog.create_database(Database(name=name, parameters={"repl.last.id": "5"}))
    return name


# -- bad input: the run fails, says what to fix, advances nothing -------------------------------------------
def test_incremental_before_bootstrap_is_refused(
    dagbag: Any, airflow_connections: None, target_store: Metastore, capfd: pytest.CaptureFixture[str]
) -> None:
    policy, target_db = "never_bootstrapped", "never_bootstrapped_dr"
    state, tasks = run_dag(
        dagbag, "hmsrepl_incremental", {"replications": [{"policy": policy, "target_db": target_db}]}
    )
    assert state == "failed"
    assert tasks == {"plan_replications": "success", "replicate[0]": "failed"}
    out = capfd.readouterr()
    assert "trigger the hmsrepl_bootstrap DAG" in out.out + out.err
    assert f"'{target_db}' has no repl.last.id" in out.out + out.err
    assert _variable(policy) is None
    assert target_db not in target_store.catalog.get_databases()


def test_unreachable_metastore_fails_and_advances_nothing(
    dagbag: Any,
    airflow_connections: None,
    stale_replica: str,
    target_store: Metastore,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    dead = free_port()
    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_SOURCE_METASTORE", metastore_connection(dead))
    policy = stale_replica.removesuffix("_dr")
    state, tasks = run_dag(
        dagbag, "hmsrepl_incremental", {"replications": [{"policy": policy, "target_db": stale_replica}]}
    )
    assert state == "failed" and tasks == {"plan_replications": "success", "replicate[0]": "failed"}
    out = capfd.readouterr()
    assert (
        f"cannot reach the metastore of connection 'hmsrepl_source_metastore' at thrift://127.0.0.1:{dead}"
        in (out.out + out.err)
    )
    assert "check the connection's host and port" in out.out + out.err
    assert repl_status(target_store, stale_replica) == 5
    assert _variable(policy) is None


def test_missing_connection_fails_with_how_to_define_it(
    dagbag: Any,
    airflow_connections: None,
    stale_replica: str,
    target_store: Metastore,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_HMSREPL_TARGET_METASTORE")
    policy = stale_replica.removesuffix("_dr")
    state, tasks = run_dag(dagbag, "hmsrepl_bootstrap", {"policy": policy, "target_db": stale_replica})
    assert (
        state == "failed"
        and tasks["check_metastores"] == "failed"
        and tasks["bootstrap"] == "upstream_failed"
    )
    out = capfd.readouterr()
    assert "Airflow connection 'hmsrepl_target_metastore' is not defined" in out.out + out.err
    assert "AIRFLOW_CONN_HMSREPL_TARGET_METASTORE=" in out.out + out.err
    assert repl_status(target_store, stale_replica) == 5
    assert _variable(policy) is None


def test_malformed_replications_are_reported(
    dagbag: Any, airflow_connections: None, capfd: pytest.CaptureFixture[str]
) -> None:
    state, tasks = run_dag(dagbag, "hmsrepl_incremental", {"replications": [{"policy": "sales"}]})
    assert state == "failed" and tasks["plan_replications"] == "failed"
    out = capfd.readouterr()
    assert "needs a 'policy' and a 'target_db'" in out.out + out.err


# -- end to end -------------------------------------------------------------------------------------------
@pytest.mark.spark
def test_bootstrap_then_incremental_dags_replicate_the_workload(
    dagbag: Any,
    airflow_connections: None,
    spark: Any,
    session_metastore: RunningMetastore,
    session_store: Metastore,
    target_metastore: RunningMetastore,
    target_store: Metastore,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    for side, server in (("SOURCE", session_metastore), ("TARGET", target_metastore)):
        monkeypatch.setenv(f"HMSREPL_{side}_DB_URL", server.db_url)
        monkeypatch.setenv(f"HMSREPL_{side}_WAREHOUSE", server.warehouse)
        monkeypatch.setenv(f"HMSREPL_{side}_CMROOT", server.cmroot)
    monkeypatch.setenv("HMSREPL_DUMP_ROOT", str(tmp_path / "dumps"))
    db = f"af_{uuid.uuid4().hex[:8]}"
    replica = f"{db}_dr"
    sql = spark.sql

    # Workload 1: a partitioned Parquet table and a plain text table.
    sql(f"CREATE DATABASE {db}")
    sql(f"CREATE TABLE {db}.orders (id INT, item STRING) PARTITIONED BY (day STRING) STORED AS PARQUET")
    sql(f"CREATE TABLE {db}.people (id INT, name STRING) STORED AS TEXTFILE")
    for day in ("2026-11-20", "2026-11-21"):
        sql(f"INSERT INTO {db}.orders PARTITION (day='{day}') SELECT id, concat('item-', id) FROM range(50)")
    sql(f"INSERT INTO {db}.people VALUES (1, 'ada'), (2, 'grace')")

    state, tasks = run_dag(dagbag, "hmsrepl_bootstrap", {"policy": db, "target_db": replica})
    assert state == "success", capfd.readouterr().out[-4000:]
    assert set(tasks.values()) == {"success"}
    assert verify(session_store, db, target_store, replica) == []
    bootstrapped = repl_status(target_store, replica)
    assert bootstrapped is not None and _variable(db) == str(bootstrapped)

    # Workload 2: appends, an overwrite, dynamic partitions, a dropped partition and table, a new table.
    sql(f"INSERT INTO {db}.orders PARTITION (day='2026-11-21') VALUES (1000, 'late order')")
    sql(f"INSERT OVERWRITE TABLE {db}.orders PARTITION (day='2026-11-20') VALUES (1, 'corrected')")
    sql(f"INSERT INTO {db}.orders PARTITION (day) VALUES (7, 'x', '2026-11-22'), (8, 'y', '2026-11-23')")
    sql(f"ALTER TABLE {db}.orders DROP PARTITION (day='2026-11-23')")
    sql(f"DROP TABLE {db}.people")
    sql(f"CREATE TABLE {db}.staff STORED AS PARQUET AS SELECT id, concat('s-', id) AS name FROM range(5)")
    sql(f"INSERT INTO {db}.staff VALUES (9, 'barbara')")
    pending = session_store.get_notification_events_count(bootstrapped, db)
    assert pending > 6  # several LIMIT batches below
    source_now = session_store.get_current_notification_event_id()

    capfd.readouterr()
    conf = {"replications": [{"policy": db, "target_db": replica}], "limit": 3}
    state, tasks = run_dag(dagbag, "hmsrepl_incremental", conf)
    out = capfd.readouterr()
    assert state == "success", out.out[-4000:] + out.err[-4000:]
    assert set(tasks.values()) == {"success"}
    assert verify(session_store, db, target_store, replica) == []
    caught_up = repl_status(target_store, replica)
    assert caught_up is not None and caught_up >= source_now
    assert _variable(db) == str(caught_up)
    summary = _app_summary(out.out + out.err)
    [done] = summary["replications"]
    assert done["target_db"] == replica and done["repl_last_id"] == caught_up
    # LIMIT 3: the pending events came in several batches (a load folds partition events, so it may apply
    # fewer than were dumped).
    assert done["batches"] >= 3 and 0 < done["events"] <= pending
    assert sorted(target_store.catalog.get_tables(replica)) == ["orders", "staff"]
    # Every dump and load the applications ran is recorded on the target, as the CLI records them.
    rows = MetricsLog(target_store.engine).list(policy=db, limit=None)
    assert {(r.operation, r.kind, r.status) for r in rows} == {
        (op, kind, "succeeded") for op in ("dump", "load") for kind in ("bootstrap", "incremental")
    }
    loads = [r for r in rows if r.operation == "load" and r.kind == "incremental"]
    assert len(loads) == done["batches"] and max(r.last_event_id or 0 for r in loads) == caught_up

    # Nothing new: the run is skipped before spark-submit, and nothing changes.
    state, tasks = run_dag(dagbag, "hmsrepl_incremental", conf)
    assert state == "success"
    assert tasks == {"plan_replications": "success", "replicate[0]": "skipped"}
    assert repl_status(target_store, replica) == caught_up


def _app_summary(output: str) -> dict[str, Any]:
    """The Spark application's JSON summary line, as the SparkSubmitOperator logged it."""
    for line in reversed(output.splitlines()):
        start = line.find('{"replications"')
        if start >= 0:
            return json.loads(line[start : line.rindex("}") + 1])
    raise AssertionError("no repl_sync summary in the task log:\n" + output[-3000:])


# -- cmroot retention -------------------------------------------------------------------------------------
def test_cm_cleanup_dag_deletes_expired_files_on_both_sides(
    dagbag: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    day_ago = time.time() - 2 * 86400
    kept, expired = [], []
    for side in ("source", "target"):
        cmroot = tmp_path / side / "cmroot"
        cmroot.mkdir(parents=True)
        old, fresh = cmroot / f"part-0_{side}_old", cmroot / f"part-1_{side}_fresh"
        old.write_bytes(b"recycled two days ago")
        fresh.write_bytes(b"recycled just now")
        os.utime(old, (day_ago, day_ago))
        expired.append(old)
        kept.append(fresh)
        monkeypatch.setenv(f"HMSREPL_{side.upper()}_CMROOT", str(cmroot))
    monkeypatch.setenv("HMSREPL_CM_RETENTION_SECONDS", "86400")
    # Dumps: one loaded a week and more ago, one of today.
    dumps = tmp_path / "dumps"
    old_dump, new_dump = dumps / "sales-20261101T000000-aaaaaaaa", dumps / "sales-20261125T000000-bbbbbbbb"
    for dump in (old_dump, new_dump):
        (dump / "events" / "7").mkdir(parents=True)
        (dump / "events" / "7" / "_metadata").write_text("{}")
        (dump / "_finished_dump").write_text("7")
    weeks_ago = time.time() - 8 * 86400
    for path in old_dump.rglob("*"):
        os.utime(path, (weeks_ago, weeks_ago))
    monkeypatch.setenv("HMSREPL_DUMP_ROOT", str(dumps))
    monkeypatch.delenv("HMSREPL_TARGET_DB_URL", raising=False)
    from hmsrepl_airflow import launcher

    def no_spark_submit(*args: object) -> None:
        raise AssertionError("a cleanup of two files started spark-submit")

    monkeypatch.setattr(launcher, "_spark_submit", no_spark_submit)  # a few files: a plain Python process
    state, tasks = run_dag(dagbag, "hmsrepl_cm_cleanup", {})
    assert state == "success" and set(tasks.values()) == {"success"}
    assert [p.exists() for p in expired] == [False, False]
    assert [p.exists() for p in kept] == [True, True]
    assert not old_dump.exists() and (new_dump / "_finished_dump").is_file()
