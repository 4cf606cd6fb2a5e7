"""The hmsrepl_failover DAG runs a planned failover with ``dag.test()`` on real metastore databases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import HANDOVER_ID, READ_ONLY
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.target import REPLICA_OF
from hmsrepl.replication.verify import verify
from tests.airflow.test_dag_runs import run_dag
from tests.helpers import make_table, write_file


def _store(root: Path, side: str, monkeypatch: pytest.MonkeyPatch) -> Metastore:
    config = MetastoreConfig(
        db_url=f"sqlite:///{root}/{side}.db",
        warehouse=str(root / f"{side}_wh"),
        cmroot=str(root / f"{side}_cm"),
    )
    for key, value in (("DB_URL", config.db_url), ("WAREHOUSE", config.warehouse), ("CMROOT", config.cmroot)):
        monkeypatch.setenv(f"HMSREPL_{side.upper()}_{key}", value)
    return Metastore.open(config)


def test_failover_dag_swaps_roles_and_a_bad_request_changes_nothing(
    dagbag: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, target = _store(tmp_path, "source", monkeypatch), _store(tmp_path, "target", monkeypatch)
    monkeypatch.setenv("HMSREPL_DUMP_ROOT", str(tmp_path / "dumps"))
    try:
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
        source.catalog.create_database(Database(name="sales"))
        table = source.catalog.create_table(make_table("sales", "orders"))
        write_file(table.sd.location, "f1", b"one")
        source.catalog.insert("sales", "orders")
        dump = engine.execute("REPL DUMP sales")
        engine.execute(f"REPL LOAD sales_dr FROM '{dump.dump_dir}'")
        write_file(table.sd.location, "f2", b"two, not replicated yet")
        source.catalog.insert("sales", "orders")

        state, tasks = run_dag(dagbag, "hmsrepl_failover", {"source_db": "sales", "target_db": "nope"})
        assert state == "failed" and tasks == {"failover": "failed"}
        assert READ_ONLY not in source.catalog.get_database("sales").parameters  # nothing frozen

        state, tasks = run_dag(dagbag, "hmsrepl_failover", {"source_db": "sales", "target_db": "sales_dr"})
        assert state == "success" and tasks == {"failover": "success"}
        assert verify(source, "sales", target, "sales_dr") == []
        assert source.catalog.get_database("sales").parameters[REPLICA_OF] == "sales_dr"
        assert HANDOVER_ID in target.catalog.get_database("sales_dr").parameters
        assert REPLICA_OF not in target.catalog.get_database("sales_dr").parameters
    finally:
        source.close()
        target.close()
