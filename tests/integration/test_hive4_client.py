"""A Hive 3/4 client's DDL and reads with catalog-qualified names, against a real server process.

The client is Apache Thrift's binding of Hive 4's IDL shipped on PyPI inside pyiceberg (``hive_metastore``).
Hive 3.1+ Java clients send database names as ``@hive#db`` and set ``catName`` in structs: the requests
below are shaped that way.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hive_metastore import ThriftHiveMetastore as Hive4
from hive_metastore import ttypes as h4

from tests.backends import temporary_database
from tests.hive4_reference import hive4_client, hive4_table
from tests.servers import RunningMetastore, metastore_server

Q = "@hive#"  # Hive 3.1+'s catalog prefix for database names


@pytest.fixture(scope="module", params=["sqlite", "postgres", "mysql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningMetastore]:
    root = tmp_path_factory.mktemp(f"hive4-{request.param}")
    with temporary_database(request.param, str(root)) as url, metastore_server(root, url) as running:
        yield running


@pytest.fixture
def client(server: RunningMetastore) -> Iterator[Hive4.Client]:
    with hive4_client(server.port) as hive:
        yield hive


def _table(db: str, name: str, keys: list[str]) -> h4.Table:
    parquet = "org.apache.hadoop.hive.ql.io.parquet"
    formats = (
        f"{parquet}.MapredParquetInputFormat",
        f"{parquet}.MapredParquetOutputFormat",
        f"{parquet}.serde.ParquetHiveSerDe",
    )
    return hive4_table(db, name, keys, formats=formats, parameters={"created.by": "hive4"})


def test_ddl_and_reads_with_catalog_qualified_names(client: Hive4.Client) -> None:
    assert client.get_catalogs().names == ["hive"]
    assert client.get_catalog(h4.GetCatalogRequest(name="hive")).catalog.name == "hive"
    client.create_database(h4.Database(name="q", description="qualified", parameters={}, catalogName="hive"))
    assert client.get_database(f"{Q}q").name == "q"
    assert (
        client.get_database_req(h4.GetDatabaseRequest(name="q", catalogName="hive")).description
        == "qualified"
    )
    assert "q" in client.get_databases(f"{Q}q*")
    assert "q" in client.get_databases(Q)  # no pattern: every database

    client.create_table(_table("q", "events", ["ds"]))
    client.create_table_with_environment_context(_table("q", "dims", []), h4.EnvironmentContext({}))
    assert sorted(client.get_tables(f"{Q}q", "*")) == ["dims", "events"]
    assert sorted(client.get_all_tables(f"{Q}q")) == ["dims", "events"]
    got = client.get_table_req(h4.GetTableRequest(dbName="q", tblName="events", catName="hive")).table
    assert got.parameters["created.by"] == "hive4" and [k.name for k in got.partitionKeys] == ["ds"]
    assert client.get_table(f"{Q}q", "events").tableName == "events"
    by_name = client.get_table_objects_by_name_req(
        h4.GetTablesRequest(dbName="q", tblNames=["dims"], catName="hive")
    )
    assert [t.tableName for t in by_name.tables] == ["dims"]
    ext = client.get_tables_ext(h4.GetTablesExtRequest("hive", "q", "ev*", requestedFields=1))
    assert [e.tblName for e in ext] == ["events"]

    parts = [
        h4.Partition(values=[ds], dbName="q", tableName="events", parameters={}, catName="hive")
        for ds in ("1", "2")
    ]
    client.add_partitions_req(
        h4.AddPartitionsRequest("q", "events", parts, ifNotExists=False, catName="hive")
    )
    assert sorted(client.get_partition_names(f"{Q}q", "events", -1)) == ["ds=1", "ds=2"]
    assert len(client.get_partitions(f"{Q}q", "events", -1)) == 2
    named = client.get_partitions_by_names_req(
        h4.GetPartitionsByNamesRequest(f"{Q}q", "events", names=["ds=2"])
    )
    assert [p.values for p in named.partitions] == [["2"]]

    table = client.get_table(f"{Q}q", "dims")
    table.parameters["owner.team"] = "data"
    client.alter_table_with_environment_context(f"{Q}q", "dims", table, h4.EnvironmentContext({}))
    assert client.get_table(f"{Q}q", "dims").parameters["owner.team"] == "data"
    client.drop_partition(f"{Q}q", "events", ["1"], True)
    client.drop_table(f"{Q}q", "dims", True)
    assert client.get_all_tables(f"{Q}q") == ["events"]


def test_other_catalogs_are_refused_clearly(client: Hive4.Client) -> None:
    with pytest.raises(h4.NoSuchObjectException, match="catalog 'spark' does not exist"):
        client.get_database("@spark#default")
    with pytest.raises(h4.NoSuchObjectException, match="catalog 'spark' does not exist"):
        client.get_table_req(h4.GetTableRequest(dbName="default", tblName="x", catName="spark"))
    with pytest.raises(h4.NoSuchObjectException, match="catalog 'other' does not exist"):
        client.get_catalog(h4.GetCatalogRequest(name="other"))
    with pytest.raises(h4.MetaException, match="catalog 'spark' does not exist"):
        client.create_database(h4.Database(name="nope", parameters={}, catalogName="spark"))
    assert "nope" not in client.get_all_databases()
