"""Spark writing into a replica over Thrift gets the protection's error; reading it works; loads still apply;
a planned failover under a running Spark workload loses no acknowledged write.

A Spark INSERT writes its files before calling the metastore: the metastore refuses the call, but the file
stays in the replica's directory until the next load of that table removes it (``repl verify`` reports it
meanwhile). Only storage permissions can keep clients from writing files there.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.verify import verify

pytestmark = pytest.mark.spark


def test_spark_writes_into_a_replica_are_refused(spark, session_store: Metastore, tmp_path: Path) -> None:
    src = f"shop_{uuid.uuid4().hex[:8]}"
    dr = f"{src}_dr"
    spark.sql(f"CREATE DATABASE {src}")
    spark.sql(f"CREATE TABLE {src}.orders (id INT, item STRING) STORED AS PARQUET")
    spark.sql(f"INSERT INTO {src}.orders VALUES (1, 'a'), (2, 'b')")
    engine = ReplicationEngine(str(tmp_path / "dumps"), session_store, session_store)
    dump = engine.execute(f"REPL DUMP {src}")
    engine.execute(f"REPL LOAD {dr} FROM '{dump.dump_dir}'")

    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {dr}.orders").collect()) == [1, 2]  # reads work
    for statement in (
        f"CREATE TABLE {dr}.extra (id INT) STORED AS PARQUET",
        f"ALTER TABLE {dr}.orders SET TBLPROPERTIES ('k'='v')",
        f"INSERT INTO {dr}.orders VALUES (3, 'c')",
        f"DROP TABLE {dr}.orders",
    ):
        with pytest.raises(Exception) as info:
            spark.sql(statement).collect()
        assert f"'{dr}' is a protected replica of '{src}'" in str(info.value), statement
    assert session_store.catalog.get_tables(dr) == ["orders"]
    assert "k" not in session_store.catalog.get_table(dr, "orders").parameters
    # Spark writes an INSERT's file into the table directory before it calls the metastore: the call is
    # refused, but the file is there (storage permissions must protect a replica's files); verify shows it
    differences = verify(session_store, src, session_store, dr)
    assert len(differences) == 1 and "table orders: files differ (missing [], extra [" in differences[0]

    # the source keeps working and the next load applies (and removes any file a refused write left)
    spark.sql(f"INSERT INTO {src}.orders VALUES (4, 'd')")
    last = session_store.catalog.get_database(dr).parameters["repl.last.id"]
    dump = engine.execute(f"REPL DUMP {src} FROM {last}")
    engine.execute(f"REPL LOAD {dr} FROM '{dump.dump_dir}'")
    assert verify(session_store, src, session_store, dr) == []
    spark.catalog.refreshTable(f"{dr}.orders")
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {dr}.orders").collect()) == [1, 2, 4]


def test_planned_failover_under_a_spark_workload(spark, session_store: Metastore, tmp_path: Path) -> None:
    """Spark creates tables (CTAS: data first, then the metastore call) while the source fails over."""
    import threading
    import time

    from hmsrepl.replication.failover import planned_failover

    src = f"live_{uuid.uuid4().hex[:8]}"
    dr = f"{src}_dr"
    spark.sql(f"CREATE DATABASE {src}")
    engine = ReplicationEngine(str(tmp_path / "dumps"), session_store, session_store)
    dump = engine.execute(f"REPL DUMP {src}")
    engine.execute(f"REPL LOAD {dr} FROM '{dump.dump_dir}'")
    acknowledged: list[str] = []
    refusals: list[str] = []
    stop = threading.Event()

    def workload() -> None:
        i = 0
        while not stop.is_set() and not refusals:
            try:
                spark.sql(f"CREATE TABLE {src}.w{i} USING parquet AS SELECT {i} AS id").collect()
                acknowledged.append(f"w{i}")
            except Exception as exc:  # Spark wraps the metastore's error in its own exception types
                refusals.append(str(exc))
            i += 1

    thread = threading.Thread(target=workload)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while len(acknowledged) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        result = planned_failover(engine, src, dr)
        while not refusals and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join()
    assert refusals and f"'{src}'" in refusals[0]
    assert "read-only" in refusals[0] or f"protected replica of '{dr}'" in refusals[0]
    assert set(acknowledged) <= set(session_store.catalog.get_tables(dr))  # RPO 0
    assert session_store.catalog.get_tables(dr) == session_store.catalog.get_tables(src)
    assert verify(session_store, src, session_store, dr) == []
    assert result.handover_id > 0
    for name in acknowledged:  # the data Spark wrote is readable on the new source
        [row] = spark.sql(f"SELECT id FROM {dr}.{name}").collect()
        assert row.id == int(name[1:])
    spark.sql(f"CREATE TABLE {dr}.after USING parquet AS SELECT 1 AS id").collect()  # new source writable
    with pytest.raises(Exception, match=f"protected replica of '{dr}'"):
        spark.sql(f"CREATE TABLE {src}.late USING parquet AS SELECT 1 AS id").collect()
