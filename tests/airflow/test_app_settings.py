"""The applications get their metastore settings from the Airflow connections the checks use, and refuse a
database that is not the metastore the connection reaches.

Real metastore server processes and ``dag.test()``; the catch-ups are small, so ``repl_sync.py`` runs as a
plain Python process with exactly the environment the operator built (no JVM).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.identity import MetastoreIdentity
from hmsrepl.metastore import Metastore
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from tests.airflow.test_dag_operations import _bootstrap, _source_db_with_data
from tests.airflow.test_dag_runs import run_dag
from tests.helpers import write_file
from tests.servers import REPO, RunningMetastore

SIDES = ("SOURCE", "TARGET")


def _connection(server: RunningMetastore, **extra: str) -> str:
    return json.dumps(
        {
            "conn_type": "hmsrepl",
            "host": "127.0.0.1",
            "port": server.port,
            "login": "hive",
            "extra": extra,
        }
    )


def _full_connection(server: RunningMetastore, db_url: str | None = None) -> str:
    """Everything about one metastore in its connection: Thrift address and what the applications open."""
    return _connection(
        server, db_url=db_url or server.db_url, warehouse=server.warehouse, cmroot=server.cmroot
    )


@pytest.fixture
def connections_only(
    monkeypatch: pytest.MonkeyPatch,
    session_metastore: RunningMetastore,
    target_metastore: RunningMetastore,
    tmp_path: Path,
) -> Path:
    """The connections define both metastores; no ``HMSREPL_SOURCE_*``/``TARGET_*`` variable is set."""
    for side in SIDES:
        for name in ("DB_URL", "WAREHOUSE", "CMROOT", "EXTERNAL_ROOTS", "IDENTITY"):
            monkeypatch.delenv(f"HMSREPL_{side}_{name}", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_SOURCE_METASTORE", _full_connection(session_metastore))
    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_TARGET_METASTORE", _full_connection(target_metastore))
    dumps = tmp_path / "dumps"
    monkeypatch.setenv("HMSREPL_DUMP_ROOT", str(dumps))
    return dumps


def _pending_change(store: Metastore, db: str) -> None:
    table = store.catalog.get_table(db, "events")
    write_file(table.sd.location or "", "part-1.parquet", b"second file")
    store.catalog.insert(db, "events")


def test_the_connection_gives_the_database_url_with_its_password(monkeypatch: pytest.MonkeyPatch) -> None:
    from hmsrepl_airflow.hooks import MetastoreConfigError, MetastoreNotificationHook

    extra = {"db_url": "postgresql+psycopg://hive@db:5432/ms", "db_password": "p@ss/1", "cmroot": "/cm"}
    conn = {"conn_type": "hmsrepl", "host": "h", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_SETTINGS_TEST", json.dumps(conn))
    settings = MetastoreNotificationHook("settings_test").database_settings()
    assert settings == {"db_url": "postgresql+psycopg://hive:p%40ss%2F1@db:5432/ms", "cmroot": "/cm"}

    conn["extra"] = {"db_url": "not a url"}
    monkeypatch.setenv("AIRFLOW_CONN_SETTINGS_TEST", json.dumps(conn))
    with pytest.raises(MetastoreConfigError, match="connection 'settings_test': extra 'db_url' is not"):
        MetastoreNotificationHook("settings_test").database_settings()


def test_the_applications_take_both_metastores_from_the_connections(
    dagbag: Any, connections_only: Path, session_store: Metastore, target_store: Metastore, capfd: Any
) -> None:
    db = _source_db_with_data(session_store)
    replica = f"{db}_dr"
    before = _bootstrap(session_store, target_store, connections_only, db, replica)
    _pending_change(session_store, db)

    capfd.readouterr()
    state, tasks = run_dag(
        dagbag, "hmsrepl_incremental", {"replications": [{"policy": db, "target_db": replica}]}
    )

    out = capfd.readouterr()
    log = out.out + out.err
    assert state == "success", log[-3000:]
    assert tasks == {"plan_replications": "success", "replicate[0]": "success"}
    after = repl_status(target_store, replica)
    assert after is not None and after > before
    assert verify(session_store, db, target_store, replica) == []
    for side in ("source", "target"):  # each side checked against the metastore its connection reached
        assert f"{side} database sqlite:" in log
        assert f"is the metastore of Airflow connection 'hmsrepl_{side}_metastore'" in log
    [command] = [line for line in log.splitlines() if "running without spark-submit" in line]
    assert "sqlite" not in command and "db-url" not in command  # settings travel in the environment


def test_a_connection_and_a_database_of_different_metastores_fail_at_start(
    dagbag: Any,
    connections_only: Path,
    monkeypatch: pytest.MonkeyPatch,
    session_metastore: RunningMetastore,
    target_metastore: RunningMetastore,
    session_store: Metastore,
    target_store: Metastore,
    capfd: Any,
) -> None:
    db = _source_db_with_data(session_store)
    replica = f"{db}_dr"
    before = _bootstrap(session_store, target_store, connections_only, db, replica)
    _pending_change(session_store, db)
    # The source connection reaches the source's server but names the target's database.
    wrong = _full_connection(session_metastore, db_url=target_metastore.db_url)
    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_SOURCE_METASTORE", wrong)

    capfd.readouterr()
    state, tasks = run_dag(
        dagbag, "hmsrepl_incremental", {"replications": [{"policy": db, "target_db": replica}]}
    )

    out = capfd.readouterr()
    log = out.out + out.err
    assert state == "failed" and tasks["replicate[0]"] == "failed"
    address = f"thrift://127.0.0.1:{session_metastore.port}"
    [error] = {
        line.split("Error: ", 1)[1] for line in log.splitlines() if "Error: the source database" in line
    }
    assert f"is not the metastore of Airflow connection 'hmsrepl_source_metastore' ({address})" in error
    assert target_metastore.db_url.split("///")[1] in error  # names the database it opened too
    assert "AirflowFailException" in log  # exit 3: not retried
    assert repl_status(target_store, replica) == before


def _dump(env: dict[str, str], db: str) -> subprocess.CompletedProcess[str]:
    app = str(REPO / "spark_apps" / "repl_dump.py")
    return subprocess.run(
        [sys.executable, app, "--command", f"REPL DUMP {db}"], env=env, capture_output=True, text=True
    )


def test_run_by_hand_the_variables_still_work_and_an_identity_is_checked(
    tmp_path: Path, session_store: Metastore, target_store: Metastore
) -> None:
    db = _source_db_with_data(session_store)
    config = session_store.config
    env = {
        **os.environ,
        "HMSREPL_SOURCE_DB_URL": config.db_url,
        "HMSREPL_SOURCE_WAREHOUSE": str(config.warehouse),
        "HMSREPL_SOURCE_CMROOT": str(config.cmroot),
        "HMSREPL_DUMP_ROOT": str(tmp_path / "dumps"),
    }
    env.pop("HMSREPL_SOURCE_IDENTITY", None)
    done = _dump(env, db)  # no identity: the variables alone, nothing compared
    assert done.returncode == 0, done.stderr[-2000:]

    current = session_store.get_current_notification_event_id()
    [event] = session_store.get_next_notification(current - 1, 1)
    seen = MetastoreIdentity.of("src", "thrift://src:9083", event)
    env["HMSREPL_SOURCE_IDENTITY"] = seen.to_json()
    assert _dump(env, db).returncode == 0

    other = {**(seen.event or {}), "event_type": "DROP_TABLE", "db_name": "elsewhere"}
    for identity, why in (  # another metastore: a different event under that id, or no such event yet
        (
            MetastoreIdentity("src", seen.address, current, other),
            f"not DROP_TABLE elsewhere.events at {event.event_time}",
        ),
        (
            MetastoreIdentity("src", seen.address, current + 1000, other),
            f"its log has no event {current + 1000}",
        ),
    ):
        env["HMSREPL_SOURCE_IDENTITY"] = identity.to_json()
        done = _dump(env, db)
        assert done.returncode == 3 and "Traceback" not in done.stderr
        [error] = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
        assert "the source database sqlite:///" in error
        assert "is not the metastore of Airflow connection 'src' (thrift://src:9083)" in error
        assert why in error, error


def test_cmroot_cleanup_takes_the_cmroot_from_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    from hmsrepl_airflow.operators import CmrootCleanupOperator

    task = CmrootCleanupOperator(task_id="t", side="target", metastore_conn_id="cleanup_test")
    monkeypatch.setenv("AIRFLOW_CONN_CLEANUP_TEST", json.dumps({"conn_type": "hmsrepl", "host": "h"}))
    assert task.cleanup_args() == ["--side", "target"]  # the application's HMSREPL_TARGET_CMROOT
    conn = {"conn_type": "hmsrepl", "host": "h", "extra": {"cmroot": "s3://lake/cm"}}
    monkeypatch.setenv("AIRFLOW_CONN_CLEANUP_TEST", json.dumps(conn))
    assert task.cleanup_args() == ["--side", "target", "--cmroot", "s3://lake/cm"]
    monkeypatch.delenv("AIRFLOW_CONN_CLEANUP_TEST")
    assert task.cleanup_args() == ["--side", "target"]  # no connection: the variables alone
