"""``spark_apps/compact.py`` as the compaction DAG runs it: a subprocess with options, a JSON line, an exit code.

The copy engine (no JVM) on one side's metastore; the DAG's shape is checked by ``tests/airflow``.
"""

from __future__ import annotations

import os
from pathlib import Path

from hmsrepl.acid import InsertOnlyReader, InsertOnlyWriter
from hmsrepl.acid.compaction_queue import CompactionQueue
from hmsrepl.metastore.model import Database
from tests.helpers import open_store
from tests.integration.test_insert_only import create_table, put, rows_of
from tests.integration.test_spark_apps import run_app


def test_the_compact_app_compacts_one_side_and_refuses_a_stock_metastore(tmp_path: Path) -> None:
    store = open_store(tmp_path, "target")
    try:
        store.catalog.create_database(Database(name="sales"))
        create_table(store, "events")
        for n in range(11):  # past the default threshold (10)
            with InsertOnlyWriter(store, "sales", "events", heartbeat=False) as writer:
                put(writer.target_uri, "part-00000", [f"row-{n}"])
        before = rows_of(InsertOnlyReader(store, "sales", "events").files())
        side = ["--target-db-url", store.config.db_url, "--target-warehouse", store.config.warehouse]
        side += ["--target-cmroot", store.config.cmroot]

        run = run_app("compact.py", "--side", "target", "--engine", "copy", *side)

        summary = run.summary
        assert (summary["queued"], summary["compacted"], summary["failed"]) == (1, 1, 0)
        assert summary["spark_startup_seconds"] is None  # the copy engine starts no JVM
        location = store.catalog.get_table("sales", "events").sd.location
        assert any(name.startswith("base_0000011_v") for name in os.listdir(location))
        assert rows_of(InsertOnlyReader(store, "sales", "events").files()) == before
        [row] = CompactionQueue(store.events).records()
        assert row.state == "ready for cleaning"  # the default cleaner delay (300 s) has not passed

        stock = run_app("compact.py", "--side", "source", "--source-db-url", "thrift://127.0.0.1:1")
        assert "stock Hive Metastore, which compacts its own tables" in stock.error
        assert stock.returncode != 0 and "Traceback" not in stock.stderr
    finally:
        store.close()
