"""The incremental DAG under a real Airflow scheduler: mapped tasks, retries and Asset-scheduled DAGs.

``dag.test()`` runs tasks in-process and ignores retries; here Airflow 3 runs as in production (api-server,
scheduler, dag-processor, LocalExecutor) with the repository's DAGs and plugins, and runs are triggered
through the REST API the UI uses. Two replications, one of them never bootstrapped: the healthy one
advances and its replica's Asset triggers a downstream DAG, the broken one fails once without retries.
With the source metastore down, the tasks are retried (an outage), then fail. A connection that is wrong
(unknown host, a port that does not speak Thrift, a user the notification API refuses) fails at its first try.
"""

from __future__ import annotations

import contextlib
import json
import os
import textwrap
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from tests.airflow.alert_recorder import ALERTS_ENV, CALLBACK, recorded
from tests.airflow.conftest import metastore_connection
from tests.airflow_local import AirflowApi, LocalAirflow, wait_for
from tests.helpers import make_table, write_file
from tests.servers import REPO, RunningMetastore, answering, metastore_server

#: Its DAGs' tasks run spark-submit.
pytestmark = pytest.mark.spark

RUN_TIMEOUT = 240.0

CONSUMER_DAG = """
from datetime import UTC, datetime

from airflow.sdk import DAG, Asset
from airflow.providers.standard.operators.empty import EmptyOperator

with DAG(
    dag_id="replica_consumer",
    schedule=[Asset(name="hmsrepl_replica__{replica}", uri="hmsrepl://replica/{replica}")],
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
):
    EmptyOperator(task_id="read_fresh_replica")
"""

#: One check task per class of mistake, each on a connection wrong in that way, each allowed one retry.
FAIL_FAST_DAG = """
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG
from hmsrepl_airflow.operators import ReplicationCheckOperator

with DAG(dag_id="fail_fast", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC), catchup=False):
    for mistake in {mistakes!r}:
        ReplicationCheckOperator(
            task_id=mistake,
            replications=[{{"policy": "{db}", "target_db": "{replica}"}}],
            source_conn_id="ff_" + mistake,
            retries=1,
            retry_delay=timedelta(seconds=1),
        )
"""
FAIL_FAST_MISTAKES = ("unknown_host", "not_thrift", "not_admin")


@pytest.fixture(scope="module")
def scenario(
    tmp_path_factory: pytest.TempPathFactory, target_metastore: RunningMetastore
) -> Iterator[dict[str, Any]]:
    """A source with one bootstrapped replica, and Airflow running the repository's DAGs plus a consumer."""
    root = tmp_path_factory.mktemp("scheduler-runs")
    db = f"sched_{uuid.uuid4().hex[:8]}"
    replica = f"{db}_dr"
    dumps = root / "dumps"
    with contextlib.ExitStack() as stack, contextlib.ExitStack() as source_stack:
        source_server = source_stack.enter_context(
            metastore_server(root / "source", f"sqlite:///{root}/source.db")
        )
        source = Metastore(source_server.config)
        target = Metastore(target_metastore.config)
        stack.callback(source.close)
        stack.callback(target.close)
        source.catalog.create_database(Database(name=db))
        table = source.catalog.create_table(make_table(db, "events"))
        write_file(table.sd.location or "", "part-0.parquet", b"bootstrapped")
        source.catalog.insert(db, "events")
        engine = ReplicationEngine(str(dumps), source, target)
        dumped = engine.execute(f"REPL DUMP {db}")
        engine.execute(f"REPL LOAD {replica} FROM '{dumped.dump_dir}'")  # type: ignore[union-attr]

        dags = root / "dags"
        dags.mkdir()
        for dag_file in (REPO / "dags").glob("*.py"):
            (dags / dag_file.name).symlink_to(dag_file)
        (dags / "replica_consumer.py").write_text(textwrap.dedent(CONSUMER_DAG.format(replica=replica)))
        fail_fast = FAIL_FAST_DAG.format(mistakes=FAIL_FAST_MISTAKES, db=db, replica=replica)
        (dags / "fail_fast.py").write_text(textwrap.dedent(fail_fast))
        http_port = stack.enter_context(answering(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
        unknown_host = json.dumps({"conn_type": "generic", "host": "metastore.invalid", "port": 9083})
        env = {
            "AIRFLOW_CONN_HMSREPL_SOURCE_METASTORE": metastore_connection(source_server.port),
            "AIRFLOW_CONN_HMSREPL_TARGET_METASTORE": metastore_connection(target_metastore.port),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[1]"}),
            "AIRFLOW_CONN_FF_UNKNOWN_HOST": unknown_host,
            "AIRFLOW_CONN_FF_NOT_THRIFT": metastore_connection(http_port),
            "AIRFLOW_CONN_FF_NOT_ADMIN": metastore_connection(source_server.port, "mallory"),
            "HMSREPL_TASK_RETRIES": "1",
            "HMSREPL_TASK_RETRY_DELAY_SECONDS": "1",
            "HMSREPL_DUMP_ROOT": str(dumps),
            "HMSREPL_REPLICATIONS": "[]",
            # Every run misses a 1 s freshness deadline: Airflow's deadline alert must reach the notifier.
            "HMSREPL_FRESHNESS_DEADLINE_SECONDS": "1",
            "HMSREPL_ON_DEADLINE_CALLBACK": CALLBACK,
            ALERTS_ENV: str(root / "alerts.jsonl"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        for side, server in (("SOURCE", source_server), ("TARGET", target_metastore)):
            env[f"HMSREPL_{side}_DB_URL"] = server.db_url
            env[f"HMSREPL_{side}_WAREHOUSE"] = server.warehouse
            env[f"HMSREPL_{side}_CMROOT"] = server.cmroot
        airflow = LocalAirflow(root / "airflow", root / "logs", dags, REPO / "plugins", env)
        airflow.prepare()
        airflow.start()
        stack.callback(airflow.stop)
        api = AirflowApi(airflow)
        wait_for("the Airflow api-server and scheduler", api.healthy, RUN_TIMEOUT)
        api.login()
        wanted = {"hmsrepl_incremental", "replica_consumer", "fail_fast"}
        wait_for("the DAGs to be parsed", lambda: wanted <= api.dag_ids(), RUN_TIMEOUT, interval=2)
        api.call("PATCH", "/dags/replica_consumer", json={"is_paused": False})
        yield {
            "api": api,
            "airflow": airflow,
            "db": db,
            "replica": replica,
            "source": source,
            "target": target,
            "stop_source_server": source_stack.close,
            "alerts": root / "alerts.jsonl",
        }


def _by_map_index(api: AirflowApi, run_id: str) -> dict[str, dict[str, Any]]:
    found = {}
    for ti in api.task_instances("hmsrepl_incremental", run_id):
        key = ti["task_id"] if ti["map_index"] < 0 else f"{ti['task_id']}[{ti['map_index']}]"
        found[key] = ti
    return found


def test_healthy_replication_advances_broken_one_fails_once_and_downstream_runs(
    scenario: dict[str, Any],
) -> None:
    api: AirflowApi = scenario["api"]
    source: Metastore = scenario["source"]
    db, replica = scenario["db"], scenario["replica"]
    table = source.catalog.get_table(db, "events")
    write_file(table.sd.location or "", "part-1.parquet", b"appended")
    source.catalog.insert(db, "events")
    before = repl_status(scenario["target"], replica)
    broken = {"policy": f"{db}_never", "target_db": f"{db}_never_dr"}

    run_id = api.trigger(
        "hmsrepl_incremental", {"replications": [{"policy": db, "target_db": replica}, broken], "limit": 2}
    )
    final = api.wait_run("hmsrepl_incremental", run_id, RUN_TIMEOUT)

    tis = _by_map_index(api, run_id)
    assert final["state"] == "failed"
    assert tis["plan_replications"]["state"] == "success"
    assert tis["replicate[0]"]["state"] == "success"
    # A replica never bootstrapped is a configuration error: failed at the first try although retries=1.
    assert tis["replicate[1]"]["state"] == "failed" and tis["replicate[1]"]["try_number"] == 1
    after = repl_status(scenario["target"], replica)
    assert before is not None and after is not None and after > before
    assert verify(source, db, scenario["target"], replica) == []

    def consumer_ran() -> dict[str, Any] | None:
        runs = [r for r in api.runs("replica_consumer") if r["state"] == "success"]
        return runs[0] if runs else None

    consumed = wait_for("the Asset-scheduled consumer DAG to run", consumer_ran, RUN_TIMEOUT, interval=2)
    assert consumed["run_type"] == "asset_triggered"


def test_a_run_past_the_freshness_deadline_raises_airflows_deadline_alert(scenario: dict[str, Any]) -> None:
    """The run of the test above took longer than the 1 s deadline: the scheduler found the missed
    deadline and the executor ran the DAG's callback, which called the configured notifier."""

    def dagrun_alert() -> dict[str, Any] | None:
        found = [a for a in recorded(scenario["alerts"]) if a["kind"] == "dagrun"]
        return found[0] if found else None

    alert = wait_for("Airflow's deadline alert to reach the notifier", dagrun_alert, RUN_TIMEOUT, interval=2)
    assert alert["dag_id"] == "hmsrepl_incremental" and alert["deadline_seconds"] == 1
    assert alert["message"].startswith("freshness deadline missed: run ")


def test_a_wrong_connection_fails_at_its_first_try(scenario: dict[str, Any]) -> None:
    """Unknown host, a port answering HTTP, a user the notification API refuses: retries cannot fix any of
    them, so each task fails at try 1 although it has a retry (the outage below is retried)."""
    api: AirflowApi = scenario["api"]
    run_id = api.trigger("fail_fast")
    final = api.wait_run("fail_fast", run_id, RUN_TIMEOUT)

    tis = {ti["task_id"]: ti for ti in api.task_instances("fail_fast", run_id)}
    assert final["state"] == "failed"
    assert {name: (ti["state"], ti["try_number"]) for name, ti in tis.items()} == {
        mistake: ("failed", 1) for mistake in FAIL_FAST_MISTAKES
    }


def test_unreachable_source_is_retried_then_fails(scenario: dict[str, Any]) -> None:
    api: AirflowApi = scenario["api"]
    replica = scenario["replica"]
    last = repl_status(scenario["target"], replica)
    scenario["stop_source_server"]()  # the source metastore is down (its database is still there)

    conf = {"replications": [{"policy": scenario["db"], "target_db": replica}]}
    run_id = api.trigger("hmsrepl_incremental", conf)
    final = api.wait_run("hmsrepl_incremental", run_id, RUN_TIMEOUT)

    tis = _by_map_index(api, run_id)
    assert final["state"] == "failed"
    assert tis["replicate[0]"]["state"] == "failed"
    assert tis["replicate[0]"]["try_number"] == 2  # an outage is retried (retries=1), then fails
    assert repl_status(scenario["target"], replica) == last
