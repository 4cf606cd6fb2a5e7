"""Point-in-time restore with a Spark writer: after each accident made with Spark SQL, a restore brings back
exactly the rows Spark read before it (row hashes compared with a snapshot taken then), and a replica
replicates the restore. All cases share the run's one SparkSession and metastore server."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.verify import verify
from hmsrepl.restore.executor import RestoreExecutor
from hmsrepl.restore.planner import RestorePlanner

pytestmark = pytest.mark.spark


def rows_hash(spark: Any, table: str) -> tuple[int, str]:
    """How many rows Spark reads from ``table`` and a hash of them in a stable order."""
    spark.catalog.refreshTable(table)
    rows = sorted(tuple(row) for row in spark.sql(f"SELECT * FROM {table}").collect())
    return len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()


def make_sales(spark: Any) -> str:
    db = f"pitr_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {db}")
    spark.sql(f"CREATE TABLE {db}.orders (id INT, item STRING) PARTITIONED BY (day STRING) STORED AS PARQUET")
    spark.sql(f"INSERT INTO {db}.orders PARTITION (day='d1') VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"INSERT INTO {db}.orders PARTITION (day='d2') VALUES (3, 'c')")
    spark.sql(f"INSERT INTO {db}.orders PARTITION (day='d2') VALUES (4, 'd')")
    spark.sql(f"CREATE TABLE {db}.plain (id INT, item STRING) STORED AS PARQUET")
    spark.sql(f"INSERT INTO {db}.plain VALUES (10, 'x'), (11, 'y')")
    return db


def restore(store: Metastore, plan_of: Callable[[RestorePlanner], Any]) -> None:
    RestoreExecutor(store).run(plan_of(RestorePlanner(store)))


def test_drop_table_then_undrop_and_a_replica_follows(
    spark, session_store: Metastore, tmp_path: Path
) -> None:
    db = make_sales(spark)
    engine = ReplicationEngine(str(tmp_path / "dumps"), session_store, session_store)
    engine.execute(f"REPL LOAD {db}_dr FROM '{engine.execute(f'REPL DUMP {db}').dump_dir}'")
    before = rows_hash(spark, f"{db}.orders")
    spark.sql(f"DROP TABLE {db}.orders")
    restore(session_store, lambda p: p.undrop_table(db, "orders"))
    assert rows_hash(spark, f"{db}.orders") == before
    last = session_store.catalog.get_database(f"{db}_dr").parameters["repl.last.id"]
    engine.execute(f"REPL LOAD {db}_dr FROM '{engine.execute(f'REPL DUMP {db} FROM {last}').dump_dir}'")
    assert verify(session_store, db, session_store, f"{db}_dr") == []
    assert rows_hash(spark, f"{db}_dr.orders") == before


def test_overwrite_with_a_bad_filter_then_revert(spark, session_store: Metastore) -> None:
    db = make_sales(spark)
    before = rows_hash(spark, f"{db}.orders"), rows_hash(spark, f"{db}.plain")
    good = session_store.events.current_event_id()
    spark.sql(f"INSERT OVERWRITE TABLE {db}.orders PARTITION (day='d2') SELECT 99, 'bad'")
    spark.sql(f"INSERT OVERWRITE TABLE {db}.plain SELECT 98, 'bad'")
    assert rows_hash(spark, f"{db}.plain") != before[1]
    restore(session_store, lambda p: p.revert_table(db, "orders", good, partitions=["day=d2"]))
    restore(session_store, lambda p: p.revert_table(db, "plain", good))
    assert (rows_hash(spark, f"{db}.orders"), rows_hash(spark, f"{db}.plain")) == before


def test_drop_partition_then_undrop(spark, session_store: Metastore) -> None:
    db = make_sales(spark)
    before = rows_hash(spark, f"{db}.orders")
    spark.sql(f"ALTER TABLE {db}.orders DROP PARTITION (day='d2')")
    restore(session_store, lambda p: p.undrop_partitions(db, "orders", ["day=d2"]))
    assert rows_hash(spark, f"{db}.orders") == before


def test_drop_database_then_undrop(spark, session_store: Metastore) -> None:
    db = make_sales(spark)
    before = rows_hash(spark, f"{db}.orders"), rows_hash(spark, f"{db}.plain")
    spark.sql(f"DROP DATABASE {db} CASCADE")
    restore(session_store, lambda p: p.undrop_database(db))
    assert (rows_hash(spark, f"{db}.orders"), rows_hash(spark, f"{db}.plain")) == before


def test_rename_then_drop_then_undrop(spark, session_store: Metastore) -> None:
    db = make_sales(spark)
    before = rows_hash(spark, f"{db}.orders")
    spark.sql(f"ALTER TABLE {db}.orders RENAME TO {db}.orders_old")
    spark.sql(f"DROP TABLE {db}.orders_old")
    restore(session_store, lambda p: p.undrop_table(db, "orders_old"))
    assert rows_hash(spark, f"{db}.orders_old") == before


def test_drop_recreate_then_restore_into_another_name(spark, session_store: Metastore) -> None:
    db = make_sales(spark)
    before = rows_hash(spark, f"{db}.plain")
    spark.sql(f"DROP TABLE {db}.plain")
    spark.sql(f"CREATE TABLE {db}.plain (id INT, item STRING) STORED AS PARQUET")
    spark.sql(f"INSERT INTO {db}.plain VALUES (20, 'new')")
    new_rows = rows_hash(spark, f"{db}.plain")
    restore(session_store, lambda p: p.undrop_table(db, "plain", into="plain_before"))
    assert rows_hash(spark, f"{db}.plain_before") == before
    assert rows_hash(spark, f"{db}.plain") == new_rows
