"""Calls a Hive 3.1 client makes besides Spark's workload: constraints, environment-context reads, settings,
and its INSERT events (whose ``replace`` flag sits where Hive 2.3 has the file list).

The client is Apache Thrift's binding of Hive 4's IDL shipped on PyPI inside pyiceberg (``hive_metastore``):
an IDL this project did not write, whose Hive 3 calls and structs are the ones a Hive 3.1 client sends.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore import ThriftHiveMetastore as Hive4
from hive_metastore import ttypes as h4
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TApplicationException
from thrift.transport import TSocket, TTransport

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.storage.local import local_path
from tests.helpers import disk_files, event_files
from tests.servers import RunningMetastore, metastore_server

DB = "shop"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[RunningMetastore, Hive4.Client, Metastore]]:
    with metastore_server(tmp_path, f"sqlite:///{tmp_path / 'hms.db'}") as server:
        transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", server.port))
        client = Hive4.Client(TBinaryProtocol.TBinaryProtocol(transport))
        transport.open()
        client.set_ugi("hive", [])
        store = Metastore(server.config)
        try:
            yield server, client, store
        finally:
            transport.close()
            store.close()


def _create(client: Hive4.Client, warehouse: str, name: str, keys: list[str]) -> None:
    if DB not in client.get_all_databases():
        client.create_database(h4.Database(name=DB, description="", locationUri=f"{warehouse}/{DB}.db"))
    sd = h4.StorageDescriptor(
        cols=[h4.FieldSchema("id", "bigint", None), h4.FieldSchema("name", "string", None)],
        location=f"{warehouse}/{DB}.db/{name}",
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=h4.SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )
    client.create_table(
        h4.Table(
            tableName=name,
            dbName=DB,
            owner="hive",
            sd=sd,
            partitionKeys=[h4.FieldSchema(k, "string", None) for k in keys],
            parameters={},
            tableType="MANAGED_TABLE",
            catName="hive",
        )
    )


def test_constraint_reads_answer_empty_lists_for_an_existing_table(served) -> None:
    server, client, _ = served
    _create(client, server.warehouse, "orders", ["day"])
    assert client.get_primary_keys(h4.PrimaryKeysRequest(DB, "orders", catName="hive")).primaryKeys == []
    foreign = h4.ForeignKeysRequest(None, None, DB, "orders", catName="hive")
    assert client.get_foreign_keys(foreign).foreignKeys == []
    referencing = h4.ForeignKeysRequest(DB, "orders", None, None, catName="hive")
    assert client.get_foreign_keys(referencing).foreignKeys == []
    assert (
        client.get_unique_constraints(h4.UniqueConstraintsRequest("hive", DB, "orders")).uniqueConstraints
        == []
    )
    assert (
        client.get_not_null_constraints(h4.NotNullConstraintsRequest("hive", DB, "orders")).notNullConstraints
        == []
    )
    assert (
        client.get_default_constraints(h4.DefaultConstraintsRequest("hive", DB, "orders")).defaultConstraints
        == []
    )
    assert (
        client.get_check_constraints(h4.CheckConstraintsRequest("hive", DB, "orders")).checkConstraints == []
    )


def test_constraint_reads_of_a_missing_table_name_it(served) -> None:
    _, client, _ = served
    with pytest.raises(h4.NoSuchObjectException, match="nosuch"):
        client.get_primary_keys(h4.PrimaryKeysRequest("default", "nosuch"))
    with pytest.raises(h4.NoSuchObjectException, match="nosuch"):
        client.get_not_null_constraints(h4.NotNullConstraintsRequest("hive", "default", "nosuch"))
    with pytest.raises(h4.NoSuchObjectException, match="catalog 'spark'"):
        client.get_unique_constraints(h4.UniqueConstraintsRequest("spark", "default", "nosuch"))


def test_environment_context_reads_and_settings(served) -> None:
    server, client, _ = served
    _create(client, server.warehouse, "orders", ["day"])
    context = h4.EnvironmentContext({})
    fields = client.get_fields_with_environment_context(f"@hive#{DB}", "orders", context)
    assert [f.name for f in fields] == ["id", "name"]
    schema = client.get_schema_with_environment_context(DB, "orders", context)
    assert [f.name for f in schema] == ["id", "name", "day"]
    with pytest.raises(h4.UnknownTableException, match="nosuch"):
        client.get_fields_with_environment_context(DB, "nosuch", context)
    assert client.get_config_value("hive.metastore.warehouse.dir", "/elsewhere") == server.warehouse
    assert client.get_config_value("hive.some.unknown.setting", "fallback") == "fallback"


def test_a_call_this_metastore_does_not_serve_is_refused_and_logged(served) -> None:
    server, client, _ = served
    with pytest.raises(TApplicationException, match=r"get_active_resource_plan.*not supported"):
        client.get_active_resource_plan(h4.WMGetActiveResourcePlanRequest())
    assert (
        "a client called 'get_active_resource_plan', which this metastore does not serve"
        in server.log_path.read_text()
    )


def _write(location: str, name: str) -> str:
    path = Path(local_path(location), name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(64) + name.encode())
    return f"{location}/{name}"


def _fire_hive3_insert(
    client: Hive4.Client, table: str, values: list[str] | None, files: list[str], replace: bool
):
    data = h4.InsertEventRequestData(replace=replace, filesAdded=files)
    request = h4.FireEventRequest(
        successful=True,
        data=h4.FireEventRequestData(insertData=data),
        dbName=DB,
        tableName=table,
        partitionVals=values,
        catName="hive",
    )
    client.fire_listener_event(request)


def _last_insert(store: Metastore):
    [event] = [e for e in store.get_next_notification(0) if e.event_type == "INSERT"][-1:]
    [obj] = parse_event(event).objects()
    return event, obj.change


def test_a_hive3_overwrite_logs_the_new_listing_and_an_append_adds_to_it(served) -> None:
    """Hive 3 overwrites by moving the old files away and writing new ones; its INSERT then logs the whole
    new listing (not the new files added to the old ones). An append keeps the old files and adds."""
    server, client, store = served
    _create(client, server.warehouse, "orders", ["day"])
    location = f"{server.warehouse}/{DB}.db/orders/day=d1"
    first = _write(location, "part-0.txt")
    client.add_partition(
        h4.Partition(
            values=["d1"], dbName=DB, tableName="orders", sd=client.get_table(DB, "orders").sd, parameters={}
        )
    )
    part = client.get_partition(DB, "orders", ["d1"])
    part.sd.location = location
    client.alter_partition(DB, "orders", part)

    appended = _write(location, "part-1.txt")
    _fire_hive3_insert(client, "orders", ["d1"], [appended], replace=False)
    event, change = _last_insert(store)
    assert event.body()["replace"] is False and not change.complete
    assert event_files(list(change.added)) == {
        p: c for p, c in disk_files(location).items() if p.endswith("part-1.txt")
    }
    assert change.count == 2

    for old in (first, appended):
        Path(local_path(old)).unlink()
    new = _write(location, "part-2.txt")
    _fire_hive3_insert(client, "orders", ["d1"], [new], replace=True)
    event, change = _last_insert(store)
    assert event.body()["replace"] is True and change.complete
    assert event_files(list(change.added)) == disk_files(location) and change.count == 1
