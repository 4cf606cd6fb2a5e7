"""The compaction DAG runs with ``dag.test()``: each side's insert-only tables are compacted and cleaned.

Two real metastore servers (source and target, each its own SQLite file), the tasks' settings from their
Airflow connections and the worker's ``HMSREPL_<SIDE>_*``, the copy engine (a plain Python process, no JVM).
Rows read through each side's snapshot are the same before and after; each location ends with one base.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.acid import InsertOnlyReader, InsertOnlyWriter
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.airflow.conftest import metastore_connection
from tests.airflow.test_dag_runs import run_dag
from tests.integration.test_insert_only import create_table, put, rows_of
from tests.servers import RunningMetastore, metastore_server


@pytest.fixture
def sides(tmp_path: Path) -> Iterator[dict[str, RunningMetastore]]:
    with (
        metastore_server(tmp_path / "source", f"sqlite:///{tmp_path}/source.db") as source,
        metastore_server(tmp_path / "target", f"sqlite:///{tmp_path}/target.db") as target,
    ):
        yield {"source": source, "target": target}


def test_compaction_dag_compacts_and_cleans_both_sides(
    dagbag: Any, sides: dict[str, RunningMetastore], monkeypatch: pytest.MonkeyPatch
) -> None:
    dag = dagbag.dags["hmsrepl_compaction"]
    for side, server in sides.items():
        monkeypatch.setenv(
            f"AIRFLOW_CONN_HMSREPL_{side.upper()}_METASTORE", metastore_connection(server.port)
        )
        monkeypatch.setenv(f"HMSREPL_{side.upper()}_DB_URL", server.db_url)
        monkeypatch.setenv(f"HMSREPL_{side.upper()}_WAREHOUSE", server.warehouse)
        monkeypatch.setenv(f"HMSREPL_{side.upper()}_CMROOT", server.cmroot)
        monkeypatch.setattr(dag.get_task(f"compact_{side}"), "engine", "copy")
    monkeypatch.setenv("HMSREPL_COMPACTION_DELTA_THRESHOLD", "3")
    monkeypatch.setenv("HMSREPL_COMPACTION_CLEANER_DELAY_SECONDS", "0")
    before: dict[str, list[str]] = {}
    for side, server in sides.items():
        store = Metastore(server.config)
        try:
            store.catalog.create_database(Database(name="sales"))
            create_table(store, "events")
            for n in range(5):
                with InsertOnlyWriter(store, "sales", "events", heartbeat=False) as writer:
                    put(writer.target_uri, "part-00000", [f"{side}-{n}"])
            before[side] = rows_of(InsertOnlyReader(store, "sales", "events").files())
        finally:
            store.close()

    state, tasks = run_dag(dagbag, "hmsrepl_compaction", {})

    assert state == "success" and tasks == {"compact_source": "success", "compact_target": "success"}
    for side, server in sides.items():
        store = Metastore(server.config)
        try:
            location = store.catalog.get_table("sales", "events").sd.location
            [base] = os.listdir(location)
            assert base.startswith("base_0000005_v")
            assert rows_of(InsertOnlyReader(store, "sales", "events").files()) == before[side]
        finally:
            store.close()
