"""Spark on the metastore: a renamed managed table that has no files yet stays readable and writable."""

from __future__ import annotations

import uuid

import pytest

pytestmark = pytest.mark.spark


def test_renamed_empty_managed_table_stays_readable(spark) -> None:
    db = f"ren_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {db}")
    spark.sql(f"CREATE TABLE {db}.x0 (a INT) STORED AS PARQUET")
    spark.sql(f"ALTER TABLE {db}.x0 RENAME TO x1")
    assert spark.sql(f"SELECT count(*) FROM {db}.x1").collect()[0][0] == 0
    spark.sql(f"INSERT INTO {db}.x1 VALUES (1), (2)")
    spark.sql(f"ALTER TABLE {db}.x1 RENAME TO x2")
    assert spark.sql(f"SELECT count(*) FROM {db}.x2").collect()[0][0] == 2
    spark.sql(f"DROP DATABASE {db} CASCADE")


def test_renamed_table_with_an_empty_partition_reads_on_source_and_replica(
    spark, session_store, tmp_path
) -> None:
    """The empty partition's directory moves with the rename: Spark reads the renamed table on the source
    (it failed with "Input path does not exist"), and on the replica after the rename is replicated."""
    from hmsrepl.replication.engine import ReplicationEngine
    from hmsrepl.replication.load import repl_status
    from hmsrepl.replication.verify import verify

    db = f"renp_{uuid.uuid4().hex[:8]}"
    dr = f"{db}_dr"
    spark.sql(f"CREATE DATABASE {db}")
    spark.sql(f"CREATE TABLE {db}.x0 (a INT) PARTITIONED BY (p STRING) STORED AS PARQUET")
    spark.sql(f"INSERT INTO {db}.x0 PARTITION (p='full') VALUES (1), (2)")
    spark.sql(f"ALTER TABLE {db}.x0 ADD PARTITION (p='empty')")
    engine = ReplicationEngine(str(tmp_path / "dumps"), session_store, session_store)
    dumped = engine.execute(f"REPL DUMP {db}")
    engine.execute(f"REPL LOAD {dr} FROM '{dumped.dump_dir}'")
    spark.sql(f"ALTER TABLE {db}.x0 RENAME TO x1")
    dumped = engine.execute(f"REPL DUMP {db} FROM {repl_status(session_store, dr)}")
    engine.execute(f"REPL LOAD {dr} FROM '{dumped.dump_dir}'")
    for name in (db, dr):
        spark.catalog.refreshTable(f"{name}.x1")
        assert spark.sql(f"SELECT count(*) FROM {name}.x1").collect()[0][0] == 2, name
        assert spark.sql(f"SELECT count(*) FROM {name}.x1 WHERE p = 'empty'").collect()[0][0] == 0, name
        partitions = sorted(row[0] for row in spark.sql(f"SHOW PARTITIONS {name}.x1").collect())
        assert partitions == ["p=empty", "p=full"], name
    assert verify(session_store, db, session_store, dr) == []
    spark.sql(f"DROP DATABASE {db} CASCADE")  # the replica stays: it is protected from clients
