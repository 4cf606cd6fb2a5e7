"""The hmsrepl_restore DAG previews, refuses and restores with ``dag.test()`` on a real metastore database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.airflow.test_dag_runs import run_dag
from tests.helpers import disk_files, make_table, write_file


def _store(root: Path, monkeypatch: pytest.MonkeyPatch) -> Metastore:
    config = MetastoreConfig(
        db_url=f"sqlite:///{root}/source.db",
        warehouse=str(root / "source_wh"),
        cmroot=str(root / "source_cm"),
    )
    for key, value in (("DB_URL", config.db_url), ("WAREHOUSE", config.warehouse), ("CMROOT", config.cmroot)):
        monkeypatch.setenv(f"HMSREPL_SOURCE_{key}", value)
    return Metastore.open(config)


def test_restore_dag_previews_refuses_then_undrops(
    dagbag: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path, monkeypatch)
    try:
        store.catalog.create_database(Database(name="sales"))
        table = store.catalog.create_table(make_table("sales", "orders"))
        write_file(table.sd.location, "f1", b"rows before the accident")
        store.catalog.insert("sales", "orders")
        before = {Path(p).name: c for p, c in disk_files(table.sd.location or "").items()}
        store.catalog.drop_table("sales", "orders")
        dropped_at = store.events.current_event_id()

        state, tasks = run_dag(dagbag, "hmsrepl_restore", {"kind": "table", "name": "sales"})
        assert state == "failed" and tasks == {"restore": "failed"}
        state, tasks = run_dag(dagbag, "hmsrepl_restore", {"kind": "table", "name": "sales.orders"})
        assert state == "success" and tasks == {"restore": "success"}  # a preview (the form's default)
        assert (
            store.events.current_event_id() == dropped_at
            and store.catalog.find_table("sales", "orders") is None
        )

        state, tasks = run_dag(
            dagbag, "hmsrepl_restore", {"kind": "table", "name": "sales.orders", "preview": False}
        )
        assert state == "success" and tasks == {"restore": "success"}
        restored = store.catalog.get_table("sales", "orders")
        assert {Path(p).name: c for p, c in disk_files(restored.sd.location or "").items()} == before
    finally:
        store.close()
