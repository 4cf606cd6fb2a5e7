"""Every DAG imports cleanly, declares owner/retries/tags, and touches no database or network at import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.airflow.conftest import AIRFLOW_ENV
from tests.servers import REPO

EXPECTED = {
    "hmsrepl_bootstrap",
    "hmsrepl_incremental",
    "hmsrepl_cm_cleanup",
    "hmsrepl_compaction",
    "hmsrepl_failover",
    "hmsrepl_restore",
}

# Runs in a fresh interpreter: Airflow pointed at a metadata database that does not exist (port 1), the
# metastore settings pointed nowhere, and every socket connect refused, so any import-time access fails.
PROBE = """
import json, socket, sys
def refuse(*args, **kwargs):
    raise OSError("network access while importing DAGs")
socket.socket.connect = refuse
socket.create_connection = refuse
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
out = {"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": {}}
for dag_id, dag in bag.dags.items():
    out["dags"][dag_id] = {
        "tags": sorted(dag.tags),
        "schedule": str(dag.schedule),
        "max_active_runs": dag.max_active_runs,
        "catchup": dag.catchup,
        "params": sorted(dag.params.keys()),
        "deadlines": [
            {
                "seconds": d.interval.total_seconds(),
                "reference": type(d.reference).__name__,
                "callback": d.callback.serialize(),
            }
            for d in (dag.deadline if isinstance(dag.deadline, list) else [dag.deadline] if dag.deadline else [])
        ],
        "tasks": {
            t.task_id: {
                "owner": t.owner,
                "retries": t.retries,
                "type": type(t).__name__,
                "application": getattr(t, "application", None),
                "timeout": str(t.execution_timeout) if getattr(t, "execution_timeout", None) else None,
            }
            for t in dag.tasks
        },
    }
print("PROBE " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict:  # type: ignore[type-arg]
    """The DAGs as a clean interpreter sees them (imported once for the module's tests)."""
    return _probe(tmp_path_factory.mktemp("dag-probe"), {})


def _probe(tmp_path: Path, settings: dict[str, str]) -> dict:  # type: ignore[type-arg]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "HMSREPL_"))}
    env.update(
        {
            "AIRFLOW_HOME": str(tmp_path),
            "AIRFLOW__CORE__DAGS_FOLDER": AIRFLOW_ENV["AIRFLOW__CORE__DAGS_FOLDER"],
            "AIRFLOW__CORE__PLUGINS_FOLDER": AIRFLOW_ENV["AIRFLOW__CORE__PLUGINS_FOLDER"],
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql+psycopg://nobody@127.0.0.1:1/absent",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": "postgresql+psycopg_async://nobody@127.0.0.1:1/absent",
            "HMSREPL_SOURCE_DB_URL": "postgresql+psycopg://nobody@127.0.0.1:1/source",
            "HMSREPL_TARGET_DB_URL": "postgresql+psycopg://nobody@127.0.0.1:1/target",
            "HMSREPL_REPLICATIONS": json.dumps([{"policy": "sales", "target_db": "sales_dr"}]),
        }
    )
    env.update(settings)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO / "dags")],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("PROBE "))
    return json.loads(line[len("PROBE ") :])


def test_dags_import_without_database_or_network_and_declare_ownership(probed: dict) -> None:  # type: ignore[type-arg]
    found = probed
    assert found["errors"] == {}
    assert set(found["dags"]) == EXPECTED
    for dag_id, dag in found["dags"].items():
        assert "hmsrepl" in dag["tags"], dag_id
        assert dag["max_active_runs"] == 1 and dag["catchup"] is False, dag_id
        for task_id, task in dag["tasks"].items():
            assert task["owner"] == "hmsrepl", (dag_id, task_id)
            # Checking settings has nothing to retry and a failover is re-run by the operator only (it leaves
            # the source frozen and says why); everything else that talks to a server retries.
            no_retry = task_id == "plan_replications" or dag_id in ("hmsrepl_failover", "hmsrepl_restore")
            assert task["retries"] >= (0 if no_retry else 1), (dag_id, task_id)
            if task["type"] in ("SparkSubmitOperator", "CmrootCleanupOperator", "CompactionOperator"):
                assert Path(task["application"]).is_file(), (dag_id, task_id, task["application"])


def test_dag_shapes_the_pipeline_relies_on(probed: dict) -> None:  # type: ignore[type-arg]
    dags = probed["dags"]
    bootstrap, incremental, cleanup = (
        dags["hmsrepl_bootstrap"],
        dags["hmsrepl_incremental"],
        dags["hmsrepl_cm_cleanup"],
    )
    assert bootstrap["schedule"] == "None"  # manual trigger only
    assert dags["hmsrepl_failover"]["schedule"] == "None"
    assert dags["hmsrepl_failover"]["tasks"]["failover"]["retries"] == 0
    assert dags["hmsrepl_restore"]["schedule"] == "None"
    assert dags["hmsrepl_restore"]["params"] == [
        "event",
        "into",
        "kind",
        "name",
        "partitions",
        "preview",
        "time",
        "write_id",
    ]
    assert bootstrap["params"] == ["policy", "target_db"]
    assert incremental["schedule"] != "None" and cleanup["schedule"] != "None"
    assert dags["hmsrepl_compaction"]["schedule"] == "@hourly"
    assert incremental["params"] == ["limit", "replications"]
    kinds = {dag_id: {t: v["type"] for t, v in dag["tasks"].items()} for dag_id, dag in dags.items()}
    assert kinds == {
        "hmsrepl_bootstrap": {
            "check_metastores": "ReplicationCheckOperator",
            "bootstrap": "ReplicateOperator",
        },
        # one mapped task per replication (it chooses spark-submit or a plain process by pending work)
        "hmsrepl_incremental": {
            "plan_replications": "ReplicationPlanOperator",
            "replicate": "MappedOperator",
        },
        "hmsrepl_cm_cleanup": {
            "cleanup_source_cmroot": "CmrootCleanupOperator",
            "cleanup_target_cmroot": "CmrootCleanupOperator",
            "prune_dumps": "PruneDumpsOperator",
        },
        "hmsrepl_compaction": {
            "compact_source": "CompactionOperator",
            "compact_target": "CompactionOperator",
        },
        "hmsrepl_failover": {
            "failover": "FailoverOperator",
        },
        "hmsrepl_restore": {
            "restore": "RestoreOperator",
        },
    }
    for dag in dags.values():
        assert all(task["timeout"] for task in dag["tasks"].values())  # a hung task cannot block the DAG


def test_malformed_settings_never_make_a_dag_vanish(tmp_path: Path) -> None:
    found = _probe(
        tmp_path,
        {
            "HMSREPL_INCREMENTAL_SCHEDULE": "every fifteen minutes",
            "HMSREPL_CM_CLEANUP_SCHEDULE": "61 * * * *",
            "HMSREPL_COMPACTION_SCHEDULE": "hourly-ish",
            "HMSREPL_COMPACTION_ENGINE": "gpu",
            "HMSREPL_REPL_LIMIT": "many",
            "HMSREPL_TASK_TIMEOUT_MINUTES": "-1",
            "HMSREPL_REPLICATIONS": "[{not json",
        },
    )
    assert found["errors"] == {}
    assert set(found["dags"]) == EXPECTED
    assert found["dags"]["hmsrepl_incremental"]["schedule"] == "*/15 * * * *"  # the default, until fixed
    assert found["dags"]["hmsrepl_cm_cleanup"]["schedule"] == "@daily"
    assert found["dags"]["hmsrepl_compaction"]["schedule"] == "@hourly"


def test_a_freshness_deadline_becomes_the_incremental_dags_deadline_alert(tmp_path: Path) -> None:
    (tmp_path / "set").mkdir()
    (tmp_path / "bad").mkdir()
    found = _probe(tmp_path / "set", {"HMSREPL_FRESHNESS_DEADLINE_SECONDS": "900"})
    assert found["dags"]["hmsrepl_incremental"]["deadlines"] == [
        {
            "seconds": 900.0,
            "reference": "DagRunQueuedAtDeadline",
            "callback": {
                "path": "hmsrepl_airflow.callbacks.on_deadline_missed",
                "kwargs": {"deadline_seconds": 900},
                "executor": None,
            },
        }
    ]
    assert found["dags"]["hmsrepl_bootstrap"]["deadlines"] == []  # a bootstrap takes as long as it takes
    # Malformed: the DAG stays, without a deadline (its first task fails naming the variable).
    found = _probe(tmp_path / "bad", {"HMSREPL_FRESHNESS_DEADLINE_SECONDS": "soon"})
    assert found["errors"] == {} and found["dags"]["hmsrepl_incremental"]["deadlines"] == []


def test_deadline_settings_are_checked_at_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    from hmsrepl_airflow.settings import configuration_problems

    monkeypatch.setenv("HMSREPL_FRESHNESS_DEADLINE_SECONDS", "soon")
    monkeypatch.setenv("HMSREPL_ON_DEADLINE_CALLBACK", "pager.page")
    problems = configuration_problems()
    assert (
        "HMSREPL_FRESHNESS_DEADLINE_SECONDS='soon' is not a whole number >= 1; fix it (default 0)" in problems
    )
    assert "HMSREPL_ON_DEADLINE_CALLBACK='pager.page' must be 'package.module:function'" in problems
