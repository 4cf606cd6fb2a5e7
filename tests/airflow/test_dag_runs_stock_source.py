"""The bootstrap and incremental DAGs with a stock Hive Metastore 2.3.10 as source: settings only.

The source connection and ``HMSREPL_SOURCE_DB_URL`` point at Hive's Thrift port (its notification log kept
by the test listener, see ``tests/integration/test_hive_source.py``); the DAG files, operators and Spark
applications are the ones an hmsrepl source uses. Hive 2.3 has no event count call: the planning task
counts pending events by reading Hive's log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hmsrepl.hive_source.source import StockHiveSource
from hmsrepl.metastore import Metastore
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from tests.airflow.conftest import metastore_connection
from tests.airflow.test_dag_runs import run_dag
from tests.integration.test_hive_source import Writer, hive, stock_roots  # noqa: F401  (the module's Hive fixture)
from tests.servers import RunningMetastore


def test_bootstrap_and_incremental_dags_replicate_a_stock_source(
    dagbag: Any,
    hive: Any,  # noqa: F811
    target_metastore: RunningMetastore,
    target_store: Metastore,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_SOURCE_METASTORE", metastore_connection(hive.port))
    monkeypatch.setenv("AIRFLOW_CONN_HMSREPL_TARGET_METASTORE", metastore_connection(target_metastore.port))
    monkeypatch.setenv("HMSREPL_SOURCE_DB_URL", hive.uri)
    monkeypatch.setenv("HMSREPL_SOURCE_WAREHOUSE", stock_roots(hive)["warehouse"])
    monkeypatch.setenv("HMSREPL_SOURCE_CMROOT", stock_roots(hive)["cmroot"])
    monkeypatch.setenv("HMSREPL_TARGET_DB_URL", target_metastore.db_url)
    monkeypatch.setenv("HMSREPL_TARGET_WAREHOUSE", target_metastore.warehouse)
    monkeypatch.setenv("HMSREPL_TARGET_CMROOT", target_metastore.cmroot)
    monkeypatch.setenv("HMSREPL_DUMP_ROOT", str(tmp_path / "dumps"))
    writer = Writer(hive, "ops")
    source = StockHiveSource(hive.uri, **stock_roots(hive))
    try:
        writer.create_database()
        writer.create_table("runs", partitioned=True)
        writer.add_partition("runs", "r1", {"part-0.txt": "1\n"})

        state, tasks = run_dag(dagbag, "hmsrepl_bootstrap", {"policy": "ops", "target_db": "ops_dr"})
        assert state == "success", capfd.readouterr().out[-4000:]
        assert set(tasks.values()) == {"success"}
        assert verify(source, "ops", target_store, "ops_dr") == []

        for run in ("r2", "r3", "r4"):
            writer.add_partition("runs", run, {"part-0.txt": f"{run}\n"})
        writer.append("runs", "r1", "part-1.txt", "more\n")
        writer.client.drop_partition("ops", "runs", ["r2"], True)
        now = source.get_current_notification_event_id()

        conf = {"replications": [{"policy": "ops", "target_db": "ops_dr"}], "limit": 2}
        state, tasks = run_dag(dagbag, "hmsrepl_incremental", conf)
        out = capfd.readouterr()
        assert state == "success", out.out[-4000:] + out.err[-4000:]
        assert set(tasks.values()) == {"success"}
        assert (repl_status(target_store, "ops_dr") or 0) >= now
        assert verify(source, "ops", target_store, "ops_dr") == []
    finally:
        writer.close()
        source.close()
