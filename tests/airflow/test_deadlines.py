"""Freshness deadlines: a replica staler than ``HMSREPL_FRESHNESS_DEADLINE_SECONDS`` raises an alert from its
replicate task, and Airflow's deadline alert of a late run reaches the same callback."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.load import repl_status
from tests.airflow.alert_recorder import ALERTS_ENV, CALLBACK, recorded
from tests.airflow.test_dag_operations import _bootstrap, _source_db_with_data, pipeline_env  # noqa: F401
from tests.airflow.test_dag_runs import run_dag
from tests.helpers import make_table, write_file


@pytest.fixture
def alerts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "alerts.jsonl"
    monkeypatch.setenv(ALERTS_ENV, str(path))
    monkeypatch.setenv("HMSREPL_ON_DEADLINE_CALLBACK", CALLBACK)
    return path


@pytest.mark.parametrize("deadline, alerted", [(1, True), (3600, False)])
def test_a_replica_staler_than_the_deadline_raises_an_alert(
    dagbag: Any,
    pipeline_env: Path,  # noqa: F811
    alerts: Path,
    monkeypatch: pytest.MonkeyPatch,
    session_store: Metastore,
    target_store: Metastore,
    capfd: Any,
    deadline: int,
    alerted: bool,
) -> None:
    db = _source_db_with_data(session_store)
    replica = f"{db}_dr"
    before = _bootstrap(session_store, target_store, pipeline_env, db, replica)
    # Other databases' events around the one the replica lacks: the check finds the policy's own oldest.
    noise = f"noise_{uuid.uuid4().hex[:8]}"
    session_store.catalog.create_database(Database(name=noise))
    table = session_store.catalog.get_table(db, "events")
    write_file(table.sd.location or "", "part-1.parquet", b"second file")
    session_store.catalog.insert(db, "events")
    [missing] = [e for e in session_store.get_next_notification(before) if e.db_name == db]
    session_store.catalog.create_table(make_table(noise, "t"))
    time.sleep(2.2)  # the missing event is now older than a 1 s deadline
    monkeypatch.setenv("HMSREPL_FRESHNESS_DEADLINE_SECONDS", str(deadline))

    capfd.readouterr()
    state, tasks = run_dag(
        dagbag, "hmsrepl_incremental", {"replications": [{"policy": db, "target_db": replica}]}
    )

    out = capfd.readouterr()
    log = out.out + out.err
    assert state == "success" and tasks["replicate[0]"] == "success"
    assert (repl_status(target_store, replica) or 0) > before  # the alert does not stop the catch-up
    found = [a for a in recorded(alerts) if a.get("target_db") == replica]
    if not alerted:
        assert found == [] and "freshness deadline missed" not in log
        return
    [alert] = found
    assert alert["kind"] == "replica" and alert["policy"] == db and alert["deadline_seconds"] == 1
    assert alert["oldest_missing_event_id"] == missing.event_id and alert["lag_seconds"] >= 2
    assert f"freshness deadline missed: replica {replica} lacks events of {db} from" in log


def test_airflows_deadline_alert_reaches_the_same_callback(
    alerts: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from hmsrepl_airflow.callbacks import on_deadline_missed

    # The context Airflow's scheduler gives a missed deadline's callback (models.deadline.handle_miss).
    context = {
        "dag_run": {"dag_id": "hmsrepl_incremental", "dag_run_id": "scheduled__2026-01-01T00:15:00+00:00"},
        "deadline": {"id": "d1", "deadline_time": "2026-01-01T00:30:00+00:00"},
    }
    on_deadline_missed(context=context, deadline_seconds=900)
    [alert] = recorded(alerts)
    assert alert["kind"] == "dagrun" and alert["run_id"] == "scheduled__2026-01-01T00:15:00+00:00"
    assert alert["message"] == (
        "freshness deadline missed: run scheduled__2026-01-01T00:15:00+00:00 of hmsrepl_incremental was not done "
        "900 s after it was queued (deadline 2026-01-01T00:30:00+00:00)"
    )
    assert alert["message"] in caplog.text
