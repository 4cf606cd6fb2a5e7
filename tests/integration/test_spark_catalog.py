"""Spark uses the metastore as its Hive catalog over Thrift; every change lands in the notification log.

File lists and checksums in events are checked against the files on disk, hashed here independently: each
event's change (format 2: files added, paths removed) applied in order must give exactly the files on disk.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import google_crc32c
import pytest

from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.messages import DataChange
from hmsrepl.storage.local import local_path
from tests.helpers import disk_files, event_files

pytestmark = pytest.mark.spark


def change(event) -> DataChange:
    [obj] = parse_event(event).objects()
    return obj.change


class Recorder:
    """Runs one statement and returns the events it produced; applies their changes to ``held`` in order."""

    def __init__(self, spark, store: Metastore) -> None:
        self.spark, self.store = spark, store
        self.held: dict[tuple[str | None, str | None], dict[str, str]] = {}

    def __call__(self, sql: str):
        before = self.store.get_current_notification_event_id()
        rows = self.spark.sql(sql).collect()
        self.last_rows = rows
        events = self.store.get_next_notification(before)
        for event in events:
            for obj in parse_event(event).objects():
                key = (event.table_name, obj.partition_name)
                self.held[key] = obj.change.apply(self.held.get(key, {}))
                obj.change.check(self.held[key], f"{key}")
        return events

    def listing(self, table: str, partition: str | None = None) -> dict[str, str]:
        return event_files(list(self.held[(table, partition)].values()))


def test_spark_sql_workload_through_the_metastore(spark, session_store: Metastore) -> None:
    db = f"sales_{uuid.uuid4().hex[:8]}"
    run = Recorder(spark, session_store)
    catalog = session_store.catalog

    [event] = run(f"CREATE DATABASE {db}")
    assert (event.event_type, event.db_name) == ("CREATE_DATABASE", db)

    [event] = run(
        f"CREATE TABLE {db}.orders (id INT, name STRING) PARTITIONED BY (day STRING) STORED AS PARQUET"
    )
    assert event.event_type == "CREATE_TABLE"
    assert [k["name"] for k in event.body()["table"]["partition_keys"]] == ["day"]
    run(f"CREATE TABLE {db}.notes (id INT, note STRING) STORED AS TEXTFILE")

    # INSERT into a new partition: the metastore lists and checksums the partition's files itself.
    events = run(f"INSERT INTO {db}.orders PARTITION (day='d1') VALUES (1, 'a'), (2, 'b')")
    d1 = catalog.get_partition(db, "orders", ["d1"])
    [add] = [e for e in events if e.event_type == "ADD_PARTITION"]
    assert change(add).complete and event_files(list(change(add).added)) == disk_files(d1.sd.location)
    first_files = disk_files(d1.sd.location)
    assert first_files

    # INSERT into the existing partition: Spark's Hive client fires the INSERT first, which records exactly
    # the new files; the alter_partition it declared lists nothing and logs an empty change.
    events = run(f"INSERT INTO {db}.orders PARTITION (day='d1') VALUES (3, 'c')")
    [insert] = [e for e in events if e.event_type == "INSERT"]
    [alter] = [e for e in events if e.event_type == "ALTER_PARTITION"]
    now = disk_files(d1.sd.location)
    new = {p: c for p, c in now.items() if p not in first_files}
    assert event_files(insert.body()["new_files"]) == new
    assert insert.event_id < alter.event_id
    assert event_files(list(change(insert).added)) == new and not change(insert).removed
    assert change(alter).is_empty
    assert run.listing("orders", "day=d1") == now  # the changes rebuild the partition's listing
    assert insert.body()["partition"]["values"] == ["d1"]

    # INSERT OVERWRITE: a complete change to the new content only.
    events = run(f"INSERT OVERWRITE TABLE {db}.orders PARTITION (day='d1') VALUES (4, 'd')")
    [alter] = [e for e in events if e.event_type == "ALTER_PARTITION"]
    [insert] = [e for e in events if e.event_type == "INSERT"]
    first, second = sorted([insert, alter], key=lambda e: e.event_id)
    assert change(first).complete and event_files(list(change(first).added)) == disk_files(d1.sd.location)
    assert change(second).is_empty
    assert run.listing("orders", "day=d1") == disk_files(d1.sd.location)
    # The replaced files went through Hadoop trash into cmroot, so the earlier event can still be replayed.
    recycled = [f for e in events for f in e.body().get("recycled", [])]
    assert event_files(recycled) == now
    for encoded in recycled:
        data = Path(local_path(session_store.cm.resolve(encoded))).read_bytes()
        assert (
            f"crc32c-{google_crc32c.value(data):08x}-{len(data)}" == EncodedFileUri.decode(encoded).checksum
        )
    assert not set(disk_files(d1.sd.location)) & set(now)

    # Dynamic partitions: one ADD_PARTITION per new partition, each with its files.
    events = run(f"INSERT INTO {db}.orders PARTITION (day) VALUES (5, 'e', 'd2'), (6, 'f', 'd3')")
    adds = {e.body()["partitions"][0]["values"][0]: e for e in events if e.event_type == "ADD_PARTITION"}
    assert set(adds) == {"d2", "d3"}
    for day in adds:
        location = catalog.get_partition(db, "orders", [day]).sd.location
        assert run.listing("orders", f"day={day}") == disk_files(location)

    # Unpartitioned table: ALTER_TABLE and INSERT carry the table's files.
    events = run(f"INSERT INTO {db}.notes VALUES (1, 'x')")
    notes = catalog.get_table(db, "notes")
    assert [e for e in events if e.event_type == "INSERT"]
    assert run.listing("notes") == disk_files(notes.sd.location)

    run(f"SELECT id, name, day FROM {db}.orders ORDER BY id")
    assert [tuple(r) for r in run.last_rows] == [(4, "d", "d1"), (5, "e", "d2"), (6, "f", "d3")]
    run(f"SELECT id FROM {db}.orders WHERE day = 'd2'")
    assert [r.id for r in run.last_rows] == [5]
    run(f"SHOW PARTITIONS {db}.orders")
    assert [r.partition for r in run.last_rows] == ["day=d1", "day=d2", "day=d3"]

    [event] = run(f"ALTER TABLE {db}.orders ADD PARTITION (day='d9')")
    assert (event.event_type, event.body()["partitions"][0]["values"]) == ("ADD_PARTITION", ["d9"])

    # DROP PARTITION: the files move to cmroot, and the event says where to find them.
    d3 = catalog.get_partition(db, "orders", ["d3"])
    d3_files = disk_files(d3.sd.location)
    [event] = run(f"ALTER TABLE {db}.orders DROP PARTITION (day='d3')")
    assert event.event_type == "DROP_PARTITION"
    recycled = event.body()["recycled"][0]
    assert event_files(recycled) == d3_files
    for encoded in recycled:
        copy = session_store.cm.resolve(encoded)
        assert copy.startswith(session_store.cm.cmroot)
        data = Path(local_path(copy)).read_bytes()
        assert (
            f"crc32c-{google_crc32c.value(data):08x}-{len(data)}" == EncodedFileUri.decode(encoded).checksum
        )
    assert not os.path.exists(local_path(d3.sd.location))

    # RENAME: one ALTER_TABLE with both names; the data moves with the table and stays readable.
    [event] = run(f"ALTER TABLE {db}.notes RENAME TO {db}.notes2")
    assert event.event_type == "ALTER_TABLE"
    assert (event.body()["before"]["table_name"], event.body()["after"]["table_name"]) == ("notes", "notes2")
    run(f"SELECT id, note FROM {db}.notes2")
    assert [tuple(r) for r in run.last_rows] == [(1, "x")]

    events = run(f"CREATE TABLE {db}.ctas STORED AS PARQUET AS SELECT * FROM {db}.notes2")
    assert events[0].event_type == "CREATE_TABLE"
    ctas = catalog.get_table(db, "ctas")
    assert [e for e in events if e.event_type == "INSERT"]
    assert run.listing("ctas") == disk_files(ctas.sd.location)

    ctas_files = disk_files(ctas.sd.location)
    [event] = run(f"DROP TABLE {db}.ctas")
    assert event.event_type == "DROP_TABLE"
    assert event_files(event.body()["recycled"]) == ctas_files
    assert all(os.path.exists(local_path(session_store.cm.resolve(f))) for f in event.body()["recycled"])

    events = run(f"DROP DATABASE {db} CASCADE")
    assert sorted((e.event_type, e.table_name) for e in events) == [
        ("DROP_DATABASE", None),
        ("DROP_TABLE", "notes2"),
        ("DROP_TABLE", "orders"),
    ]
    assert db not in catalog.get_databases()


def test_spark_reports_missing_objects_clearly(spark) -> None:
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException, match="nosuchdb"):
        spark.sql("SELECT * FROM nosuchdb.t").collect()
    db = f"errs_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {db}")
    spark.sql(f"CREATE TABLE {db}.t (id INT) PARTITIONED BY (p STRING) STORED AS PARQUET")
    with pytest.raises(AnalysisException, match=r"(?i)already exists"):
        spark.sql(f"CREATE TABLE {db}.t (id INT) STORED AS PARQUET")
    with pytest.raises(AnalysisException):
        spark.sql(f"ALTER TABLE {db}.t DROP PARTITION (p='never')")
    # The server is still serving this client after the errors.
    assert [r.tableName for r in spark.sql(f"SHOW TABLES IN {db}").collect()] == ["t"]
    spark.sql(f"DROP DATABASE {db} CASCADE")


def test_spark_functions_live_in_the_metastore(spark, session_store: Metastore) -> None:
    """CREATE FUNCTION asks the metastore whether the function exists first: a missing one must read as
    missing to Spark's Hive client, not as a failure."""
    db = f"funcs_{uuid.uuid4().hex[:8]}"
    run = Recorder(spark, session_store)
    run(f"CREATE DATABASE {db}")
    [event] = run(f"CREATE FUNCTION {db}.shout AS 'org.apache.hadoop.hive.ql.udf.generic.GenericUDFUpper'")
    assert (event.event_type, event.db_name) == ("CREATE_FUNCTION", db)
    assert session_store.catalog.get_functions(db) == ["shout"]
    run(f"SELECT {db}.shout('quiet') AS loud")
    assert [r.loud for r in run.last_rows] == ["QUIET"]
    [event] = run(f"DROP FUNCTION {db}.shout")
    assert event.event_type == "DROP_FUNCTION"
    assert session_store.catalog.get_functions(db) == []
    run(f"DROP DATABASE {db}")
