"""Hive 4's ``*_req`` forms of DDL and reads, called over the wire with Hive 4's generated client, do what
their classic calls do: the same objects, the same notification events, the same refusals (replica
protection, missing objects) with the exceptions the Hive 4 signature declares.

The client is Apache Thrift's binding of Hive 4's IDL that pyiceberg ships (``hive_metastore``).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hive_metastore import ThriftHiveMetastore as Hive4
from hive_metastore import ttypes as h4

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, FieldSchema, StorageDescriptor, Table
from hmsrepl.metastore.protection import REPLICA_OF, privileged
from hmsrepl.thrift.handler import MetastoreHandler
from hmsrepl.thrift.idl import hms
from tests.hive4_reference import hive4_client, hive4_table
from tests.servers import RunningMetastore


@pytest.fixture
def client(session_metastore: RunningMetastore) -> Iterator[Hive4.Client]:
    with hive4_client(session_metastore.port) as hive:
        yield hive


@pytest.fixture
def db(client: Hive4.Client) -> str:
    name = f"req_{uuid.uuid4().hex[:8]}"
    client.create_database(h4.Database(name=name, description="", parameters={}))
    return name


def _table(db: str, name: str, keys: list[str], location: str | None = None) -> h4.Table:
    return hive4_table(db, name, keys, location=location)


def _events_since(client: Hive4.Client, event_id: int, db: str) -> list[str]:
    events = client.get_next_notification(
        h4.NotificationEventRequest(lastEvent=event_id, maxEvents=1000)
    ).events
    return [e.eventType for e in events if e.dbName == db]


def test_ddl_request_forms_write_through_the_classic_path(client: Hive4.Client, db: str) -> None:
    start = client.get_current_notificationEventId().eventId
    client.create_table_req(h4.CreateTableRequest(table=_table(db, "events", ["ds"])))
    client.create_table_req(
        h4.CreateTableRequest(
            table=_table(db, "keyed", []),
            primaryKeys=[h4.SQLPrimaryKey(db, "keyed", "id", 1, "keyed_pk", False, False, True)],
        )
    )
    table = client.get_table(db, "events")
    assert table.sd.location.endswith(f"/{db}.db/events")  # the default location, as create_table gives
    pk = client.get_primary_keys(h4.PrimaryKeysRequest(db_name=db, tbl_name="keyed"))
    assert [(k.column_name, k.pk_name) for k in pk.primaryKeys] == [("id", "keyed_pk")]

    table.parameters["comment"] = "altered by request"
    assert (
        client.alter_table_req(
            h4.AlterTableRequest(catName="hive", dbName=db, tableName="events", table=table)
        )
        == h4.AlterTableResponse()
    )
    assert client.get_table(db, "events").parameters["comment"] == "altered by request"

    parts = [h4.Partition(values=[ds], dbName=db, tableName="events", parameters={}) for ds in ("1", "2")]
    client.add_partitions(parts)
    part = client.get_partition(db, "events", ["1"])
    part.parameters["k"] = "v"
    client.alter_partitions_req(
        h4.AlterPartitionsRequest(dbName=db, tableName="events", partitions=[part], catName="hive")
    )
    assert client.get_partition(db, "events", ["1"]).parameters["k"] == "v"
    part.parameters["k"] = "w"
    client.rename_partition_req(
        h4.RenamePartitionRequest(dbName=db, tableName="events", partVals=["1"], newPart=part)
    )
    assert client.get_partition(db, "events", ["1"]).parameters["k"] == "w"
    assert client.drop_partition_by_name_with_environment_context(
        db, "events", "ds=2", True, h4.EnvironmentContext({})
    )
    client.truncate_table_req(h4.TruncateTableRequest(dbName=db, tableName="events"))

    client.drop_database_req(
        h4.DropDatabaseRequest(name=db, ignoreUnknownDb=False, deleteData=True, cascade=True)
    )
    assert db not in client.get_all_databases()
    assert _events_since(client, start, db) == [
        "CREATE_TABLE",
        "CREATE_TABLE",
        "ALTER_TABLE",
        "ADD_PARTITION",
        "ALTER_PARTITION",
        "ALTER_PARTITION",
        "DROP_PARTITION",
        "ALTER_PARTITION",  # truncation empties the remaining partition
        "DROP_TABLE",
        "DROP_TABLE",
        "DROP_DATABASE",
    ]


def test_read_request_forms_answer_as_the_classic_reads(client: Hive4.Client, db: str) -> None:
    client.create_table_req(h4.CreateTableRequest(table=_table(db, "events", ["ds", "hr"])))
    client.add_partitions(
        [
            h4.Partition(values=[ds, hr], dbName=db, tableName="events", parameters={})
            for ds, hr in (("1", "a"), ("1", "b"), ("2", "a"))
        ]
    )
    fields = client.get_fields_req(h4.GetFieldsRequest(catName="hive", dbName=db, tblName="events")).fields
    assert fields == client.get_fields(db, "events")
    schema = client.get_schema_req(h4.GetSchemaRequest(dbName=db, tblName="events")).fields
    assert [f.name for f in schema] == ["id", "name", "ds", "hr"]
    names = client.get_partition_names_ps_req(
        h4.GetPartitionNamesPsRequest(dbName=db, tblName="events", partValues=["1", ""], maxParts=-1)
    ).names
    assert sorted(names) == ["ds=1/hr=a", "ds=1/hr=b"]
    parts = client.get_partitions_ps_with_auth_req(
        h4.GetPartitionsPsWithAuthRequest(dbName=db, tblName="events", partVals=["", "a"], maxParts=-1)
    ).partitions
    assert sorted(p.values for p in parts) == [["1", "a"], ["2", "a"]]
    assert client.get_open_txns_req(h4.GetOpenTxnsRequest(excludeTxnTypes=[])) == client.get_open_txns()


def test_request_forms_refuse_as_the_classic_calls(client: Hive4.Client, db: str) -> None:
    missing = f"{db}_missing"
    with pytest.raises(h4.NoSuchObjectException, match=missing):
        client.drop_database_req(
            h4.DropDatabaseRequest(name=missing, ignoreUnknownDb=False, deleteData=True, cascade=False)
        )
    client.drop_database_req(  # DROP DATABASE IF EXISTS
        h4.DropDatabaseRequest(name=missing, ignoreUnknownDb=True, deleteData=True, cascade=False)
    )
    client.create_table_req(h4.CreateTableRequest(table=_table(db, "t", [])))
    with pytest.raises(h4.AlreadyExistsException):
        client.create_table_req(h4.CreateTableRequest(table=_table(db, "t", [])))
    with pytest.raises(h4.InvalidOperationException, match="not empty"):
        client.drop_database_req(
            h4.DropDatabaseRequest(name=db, ignoreUnknownDb=False, deleteData=True, cascade=False)
        )
    with pytest.raises(h4.NoSuchObjectException, match="catalog 'spark' does not exist"):
        client.create_table_req(h4.CreateTableRequest(table=_other_catalog(db)))
    unknown = _raised(lambda: client.get_fields_req(h4.GetFieldsRequest(dbName=db, tblName="nope")))
    classic = _raised(lambda: client.get_fields(db, "nope"))
    assert type(unknown) is type(classic) is h4.UnknownTableException  # immutable: not for pytest.raises
    assert unknown.message == classic.message
    assert client.get_all_tables(db) == ["t"]


def _raised(call: Callable[[], object]) -> Exception:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("no exception")


def _other_catalog(db: str) -> h4.Table:
    table = _table(db, "u", [])
    table.catName = "spark"
    return table


def _listing(store: Metastore, db: str) -> str:
    """What must stay untouched in a protected replica: its tables, their documents and their files."""
    tables = store.catalog.get_table_objects(db, store.catalog.get_tables(db))
    files = sorted(str(p) for t in tables for p in Path(t.sd.location or "/nonexistent").rglob("*"))
    text = "\n".join([*(t.model_dump_json() for t in tables), *files])
    return hashlib.sha256(text.encode()).hexdigest()


def test_request_forms_cannot_write_into_a_protected_replica(
    client: Hive4.Client, session_store: Metastore
) -> None:
    replica = f"replica_{uuid.uuid4().hex[:8]}"
    with privileged("test: a replica as a load makes it"):
        session_store.catalog.create_database(Database(name=replica, parameters={REPLICA_OF: "src"}))
        session_store.catalog.create_table(_model(replica))
    before = _listing(session_store, replica)
    table = client.get_table(replica, "t")
    table.parameters["x"] = "y"
    refusals = [
        lambda: client.create_table_req(h4.CreateTableRequest(table=_table(replica, "u", []))),
        lambda: client.alter_table_req(h4.AlterTableRequest(dbName=replica, tableName="t", table=table)),
        lambda: client.truncate_table_req(h4.TruncateTableRequest(dbName=replica, tableName="t")),
        lambda: client.drop_database_req(
            h4.DropDatabaseRequest(name=replica, ignoreUnknownDb=False, deleteData=True, cascade=True)
        ),
    ]
    for call in refusals:
        with pytest.raises(
            (h4.MetaException, h4.InvalidOperationException), match="protected replica of 'src'"
        ):
            call()
    assert _listing(session_store, replica) == before
    assert replica in client.get_all_databases()


def _model(db: str) -> Table:
    return Table(
        db_name=db, table_name="t", sd=StorageDescriptor(cols=[FieldSchema(name="id", type="bigint")])
    )


def test_hive_4_2_request_forms_in_process(session_store: Metastore) -> None:
    """The forms Hive 4.2's client sends that pyiceberg's bindings lack (its own client runs them over the
    wire in test_hive4_jvm_client.py): a remote database is refused naming it, and nothing is created."""
    handler = MetastoreHandler(session_store)
    name = f"req42_{uuid.uuid4().hex[:8]}"
    with pytest.raises(InvalidObjectError, match=f"database '{name}': remote databases"):
        handler.create_database_req(
            hms.CreateDatabaseRequest(databaseName=name, type=2, dataConnectorName="c")
        )
    assert name not in session_store.catalog.get_databases()
    handler.create_database_req(hms.CreateDatabaseRequest(databaseName=name, parameters={"a": "1"}))
    db = handler.get_database(name)
    db.parameters["b"] = "2"
    handler.alter_database_req(hms.AlterDatabaseRequest(oldDbName=f"@hive#{name}", newDb=db))
    assert session_store.catalog.get_database(name).parameters == {"a": "1", "b": "2"}
    handler.drop_database_req(
        hms.DropDatabaseRequest(name=name, ignoreUnknownDb=False, deleteData=True, cascade=False)
    )
    assert name not in session_store.catalog.get_databases()


def test_an_alter_with_a_write_id_joins_the_transaction_that_holds_it(client: Hive4.Client, db: str) -> None:
    """Trino and Hive send a transactional table's statistics update as alter_table_req with their open
    transaction's write id: the change is that transaction's write (stamped with it, as the classic call with
    ``hmsrepl.txnId``); a write id no open transaction holds is refused and changes nothing."""
    table = _table(db, "acid", [])
    table.parameters = {"transactional": "true", "transactional_properties": "insert_only"}
    client.create_table_req(h4.CreateTableRequest(table=table))
    [txn] = client.open_txns(h4.OpenTxnRequest(1, "hive", "localhost")).txn_ids
    allocate = h4.AllocateTableWriteIdsRequest(dbName=db, tableName="acid", txnIds=[txn])
    [written] = client.allocate_table_write_ids(allocate).txnToWriteIds
    current = client.get_table(db, "acid")
    current.parameters["numRows"] = "3"
    before = client.get_current_notificationEventId().eventId
    unheld = h4.AlterTableRequest(dbName=db, tableName="acid", table=current, writeId=written.writeId + 7)
    with pytest.raises(h4.InvalidOperationException, match="is held by no open transaction"):
        client.alter_table_req(unheld)
    assert client.get_current_notificationEventId().eventId == before
    client.alter_table_req(
        h4.AlterTableRequest(dbName=db, tableName="acid", table=current, writeId=written.writeId)
    )
    stamped = client.get_table(db, "acid").parameters
    assert stamped["numRows"] == "3" and str(txn) in stamped["hmsrepl.txnWrite"]
    client.commit_txn(h4.CommitTxnRequest(txnid=txn))
