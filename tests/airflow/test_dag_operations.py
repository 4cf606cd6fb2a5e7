"""How the incremental DAG behaves for operators: one task per replication, nothing started without work.

Real metastore server processes, the real Airflow metadata DB and ``dag.test()``; replicas are bootstrapped
in-process (the bootstrap DAG's spark-submit path is covered by test_dag_runs), so these runs start no JVM
at all: the small catch-ups below run ``repl_sync.py`` as a plain Python process, which is the point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from tests.airflow.conftest import metastore_connection
from tests.airflow.test_dag_runs import _variable, run_dag
from tests.helpers import make_table, write_file
from tests.servers import REPO, RunningMetastore


@pytest.fixture
def pipeline_env(
    monkeypatch: pytest.MonkeyPatch,
    session_metastore: RunningMetastore,
    target_metastore: RunningMetastore,
    tmp_path: Path,
) -> Path:
    """Connections and the applications' settings, as the docker-compose deployment sets them."""
    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_SOURCE_METASTORE", metastore_connection(session_metastore.port))
    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_TARGET_METASTORE", metastore_connection(target_metastore.port))
    for side, server in (("SOURCE", session_metastore), ("TARGET", target_metastore)):
        monkeypatch.setenv(f"HMSREPL_{side}_DB_URL", server.db_url)
        monkeypatch.setenv(f"HMSREPL_{side}_WAREHOUSE", server.warehouse)
        monkeypatch.setenv(f"HMSREPL_{side}_CMROOT", server.cmroot)
    dumps = tmp_path / "dumps"
    monkeypatch.setenv("HMSREPL_DUMP_ROOT", str(dumps))
    return dumps


def _source_db_with_data(store: Metastore) -> str:
    db = f"ops_{uuid.uuid4().hex[:8]}"
    store.catalog.create_database(Database(name=db))
    table = store.catalog.create_table(make_table(db, "events"))
    write_file(table.sd.location or "", "part-0.parquet", b"first file")
    store.catalog.insert(db, "events")
    return db


def _bootstrap(source: Metastore, target: Metastore, dumps: Path, policy: str, target_db: str) -> int:
    engine = ReplicationEngine(str(dumps), source, target)
    dumped = engine.execute(f"REPL DUMP {policy}")
    engine.execute(f"REPL LOAD {target_db} FROM '{dumped.dump_dir}'")  # type: ignore[union-attr]
    last = repl_status(target, target_db)
    assert last is not None
    return last


def _asset_events(target_db: str) -> list[dict[str, Any]]:
    """The Airflow metadata DB's events of a replica's Asset, oldest first (their ``extra``)."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.name == f"hmsrepl_replica__{target_db}")
            .order_by(AssetEvent.id)
        ).all()
        return [dict(row.extra or {}) for row in rows]


def _dump_dirs(dumps: Path) -> set[str]:
    return {p.name for p in dumps.iterdir()} if dumps.exists() else set()


def test_one_broken_replication_does_not_stop_the_healthy_one(
    dagbag: Any, pipeline_env: Path, session_store: Metastore, target_store: Metastore, capfd: Any
) -> None:
    db = _source_db_with_data(session_store)
    replica = f"{db}_dr"
    before = _bootstrap(session_store, target_store, pipeline_env, db, replica)
    table = session_store.catalog.get_table(db, "events")
    write_file(table.sd.location or "", "part-1.parquet", b"second file")
    session_store.catalog.insert(db, "events")
    broken = {"policy": f"{db}_never", "target_db": f"{db}_never_dr"}

    conf = {"replications": [{"policy": db, "target_db": replica}, broken], "limit": 2}
    state, tasks = run_dag(dagbag, "hmsrepl_incremental", conf)

    out = capfd.readouterr()
    log = out.out + out.err
    assert state == "failed"  # the broken replication fails the run ...
    assert tasks == {"plan_replications": "success", "replicate[0]": "success", "replicate[1]": "failed"}
    # ... but the healthy one advanced, without a JVM, and its Variable mirrors the target.
    after = repl_status(target_store, replica)
    assert after is not None and after > before
    assert verify(session_store, db, target_store, replica) == []
    assert _variable(db) == str(after)
    assert "running without spark-submit" in log
    # Freshness for other DAGs: the replica's Asset got an event with the position it reached.
    assert _asset_events(replica)[-1]["repl_last_id"] == after
    assert (
        f"'{broken['target_db']}' has no repl.last.id" in log and "trigger the hmsrepl_bootstrap DAG" in log
    )


def test_unrelated_events_start_nothing_and_leave_no_dump(
    dagbag: Any, pipeline_env: Path, session_store: Metastore, target_store: Metastore, capfd: Any
) -> None:
    db = _source_db_with_data(session_store)
    replica = f"{db}_dr"
    last = _bootstrap(session_store, target_store, pipeline_env, db, replica)
    dumps_before = _dump_dirs(pipeline_env)
    # Busy elsewhere: events in another database only.
    other = f"other_{uuid.uuid4().hex[:8]}"
    session_store.catalog.create_database(Database(name=other))
    session_store.catalog.create_table(make_table(other, "noise"))
    assert session_store.get_current_notification_event_id() > last

    capfd.readouterr()
    state, tasks = run_dag(
        dagbag, "hmsrepl_incremental", {"replications": [{"policy": db, "target_db": replica}]}
    )

    out = capfd.readouterr()
    assert state == "success"
    assert tasks == {"plan_replications": "success", "replicate[0]": "skipped"}
    assert f"{replica} is caught up: no event of {db} after {last}" in out.out + out.err
    assert "spark-submit" not in out.out + out.err and "repl_sync.py" not in out.out + out.err
    assert _dump_dirs(pipeline_env) == dumps_before  # no empty dump directory left behind
    assert _asset_events(replica) == []  # nothing advanced: no freshness event
    assert repl_status(target_store, replica) == last


def test_a_bad_schedule_keeps_the_dag_and_fails_its_first_task(
    dagbag: Any, pipeline_env: Path, monkeypatch: pytest.MonkeyPatch, capfd: Any
) -> None:
    monkeypatch.setenv("HMSREPL_INCREMENTAL_SCHEDULE", "every fifteen minutes")
    state, tasks = run_dag(
        dagbag, "hmsrepl_incremental", {"replications": [{"policy": "a", "target_db": "b"}]}
    )
    out = capfd.readouterr()
    assert state == "failed" and tasks["plan_replications"] == "failed"
    assert "replicate" not in " ".join(k for k, v in tasks.items() if v not in ("upstream_failed", "removed"))
    assert (
        "HMSREPL_INCREMENTAL_SCHEDULE='every fifteen minutes' is not a cron expression" in out.out + out.err
    )


def test_the_replications_param_may_be_a_json_string(
    dagbag: Any, pipeline_env: Path, session_store: Metastore, target_store: Metastore
) -> None:
    db = _source_db_with_data(session_store)
    replica = f"{db}_dr"
    last = _bootstrap(session_store, target_store, pipeline_env, db, replica)
    text = json.dumps([{"policy": db, "target_db": replica}])
    state, tasks = run_dag(dagbag, "hmsrepl_incremental", {"replications": text})
    assert state == "success" and tasks == {"plan_replications": "success", "replicate[0]": "skipped"}
    assert repl_status(target_store, replica) == last


def test_application_exit_codes_tell_configuration_from_outage(
    tmp_path: Path, session_store: Metastore
) -> None:
    """A file where the dump root should be fails with exit 3 (no retry); a dead database with 1 (retry)."""
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
    from hmsrepl_airflow.launcher import failure

    db = _source_db_with_data(session_store)
    not_a_dir = tmp_path / "dumps-is-a-file"
    not_a_dir.write_text("not a directory")
    config = session_store.config
    env = {
        **os.environ,
        "HMSREPL_SOURCE_DB_URL": config.db_url,
        "HMSREPL_SOURCE_WAREHOUSE": str(config.warehouse),
        "HMSREPL_SOURCE_CMROOT": str(config.cmroot),
        "HMSREPL_DUMP_ROOT": str(not_a_dir),
    }
    app = str(REPO / "spark_apps" / "repl_dump.py")
    done = subprocess.run(
        [sys.executable, app, "--command", f"REPL DUMP {db}"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    [error] = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert isinstance(failure(done.returncode, [error], "repl_dump.py"), AirflowFailException)

    env["HMSREPL_SOURCE_DB_URL"] = "postgresql+psycopg://nobody@127.0.0.1:1/absent"
    dead = subprocess.run(
        [sys.executable, app, "--command", f"REPL DUMP {db}"], env=env, capture_output=True, text=True
    )
    assert dead.returncode == 1, dead.stderr[-2000:]
    assert "Traceback" not in dead.stderr and "cannot reach the source metastore database" in dead.stderr
    retried = failure(dead.returncode, dead.stderr.splitlines(), "repl_dump.py")
    assert isinstance(retried, AirflowException) and not isinstance(retried, AirflowFailException)
