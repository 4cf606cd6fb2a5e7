"""Hive 4's fields a Hive 4 client sends are kept: SerDeInfo's description, serializer and deserializer
classes and serde type on tables and partitions, and a database's managed location, which is honoured
(managed tables go below it, it obeys the location rules, a drop removes it) and replicated as Hive's
REPL LOAD does (the replica's managed tables go below the replica's own location).

Over the wire with Hive 4's generated client (pyiceberg's ``hive_metastore``); replication in process.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore import ThriftHiveMetastore as Hive4
from hive_metastore import ttypes as h4
from thrift.Thrift import TApplicationException

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, SerDeInfo
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.verify import verify
from hmsrepl.storage.local import local_path
from tests.helpers import make_partition, make_table
from tests.hive4_reference import hive4_client, hive4_table
from tests.servers import RunningMetastore

SERDE = h4.SerDeInfo(
    name="s",
    serializationLib="org.apache.hadoop.hive.serde2.avro.AvroSerDe",
    parameters={"k": "v"},
    description="rows as Avro",
    serializerClass="org.example.AvroSerializer",
    deserializerClass="org.example.AvroDeserializer",
    serdeType=h4.SerdeType.SCHEMA_REGISTRY,
)


@pytest.fixture
def client(session_metastore: RunningMetastore) -> Iterator[Hive4.Client]:
    with hive4_client(session_metastore.port) as hive:
        yield hive


def _table(db: str, name: str, *, external: bool = False) -> h4.Table:
    avro = "org.apache.hadoop.hive.ql.io.avro.AvroContainer"
    formats = (f"{avro}InputFormat", f"{avro}OutputFormat", "")
    return hive4_table(
        db, name, ["ds"], columns=(("id", "bigint"),), formats=formats, serde=SERDE, external=external
    )


def test_serde_fields_of_hive_4_round_trip(client: Hive4.Client) -> None:
    db = f"serde_{uuid.uuid4().hex[:8]}"
    client.create_database(h4.Database(name=db, description="", parameters={}))
    client.create_table_req(h4.CreateTableRequest(table=_table(db, "t")))
    assert client.get_table(db, "t").sd.serdeInfo == SERDE
    part = h4.Partition(values=["1"], dbName=db, tableName="t", sd=_table(db, "t").sd, parameters={})
    client.add_partitions([part])
    assert client.get_partition(db, "t", ["1"]).sd.serdeInfo == SERDE
    [listed] = client.get_partitions(db, "t", -1)  # the database path builds structs from the documents
    assert listed.sd.serdeInfo == SERDE
    table = client.get_table(db, "t")
    table.sd.serdeInfo.description = None  # a Hive 4 client clears a field: it is gone
    client.alter_table(db, "t", table)
    assert client.get_table(db, "t").sd.serdeInfo.description is None
    assert client.get_table(db, "t").sd.serdeInfo.serdeType == h4.SerdeType.SCHEMA_REGISTRY


def test_a_managed_location_holds_managed_tables_and_obeys_the_location_rules(
    client: Hive4.Client, session_metastore: RunningMetastore
) -> None:
    db = f"mloc_{uuid.uuid4().hex[:8]}"
    warehouse = session_metastore.warehouse
    managed = f"file:{warehouse}/managed/{db}.db"
    client.create_database(h4.Database(name=db, description="", parameters={}, managedLocationUri=managed))
    got = client.get_database(db)
    assert got.managedLocationUri == managed and got.locationUri.endswith(f"/{db}.db")
    assert Path(f"{warehouse}/managed/{db}.db").is_dir()

    client.create_table(_table(db, "m"))
    client.create_table(_table(db, "e", external=True))
    assert client.get_table(db, "m").sd.location == f"{managed}/m"
    assert client.get_table(db, "e").sd.location == f"{got.locationUri}/e"
    client.alter_table(db, "m", _renamed(client.get_table(db, "m"), "m2"))  # a rename moves the default dir
    assert client.get_table(db, "m2").sd.location == f"{managed}/m2"

    before = _state(client)
    for bad, why in [
        ("file:/tmp/elsewhere", "outside"),  # not below a managed root of this metastore
        (got.locationUri, "is the location of database"),  # another database's directory
        (f"{managed}/m2", "lies inside the location of database"),  # its own managed location
    ]:
        other = f"mloc_{uuid.uuid4().hex[:8]}"
        with pytest.raises(h4.InvalidObjectException, match=why):
            client.create_database(
                h4.Database(name=other, description="", parameters={}, managedLocationUri=bad)
            )
    assert _state(client) == before  # nothing created

    client.drop_database(db, True, True)
    assert not Path(f"{warehouse}/managed/{db}.db").exists()


def _renamed(table: h4.Table, name: str) -> h4.Table:
    table.tableName = name
    return table


def _state(client: Hive4.Client) -> str:
    """The catalog's databases with their documents: what a refused create must leave as it was."""
    names = sorted(client.get_all_databases())
    return hashlib.sha256(repr([(n, client.get_database(n)) for n in names]).encode()).hexdigest()


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_serde_fields_and_managed_tables_replicate(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    managed = f"{source.config.warehouse}/managed/sales.db"
    source.catalog.create_database(Database(name="sales", managed_location_uri=managed))
    serde = SerDeInfo(
        serialization_lib="org.apache.hadoop.hive.serde2.avro.AvroSerDe",
        description="rows as Avro",
        serializer_class="org.example.AvroSerializer",
        deserializer_class="org.example.AvroDeserializer",
        serde_type=2,
    )
    table = make_table("sales", "orders", partition_keys=("d",))
    table = table.model_copy(
        update={"sd": table.sd.model_copy(update={"location": None, "serde_info": serde})}
    )
    created = source.catalog.create_table(table)
    assert created.sd.location == f"{managed}/orders"
    part = make_partition(created, "d1").model_copy(
        update={"sd": created.sd.model_copy(update={"location": None})}
    )
    [added] = source.catalog.add_partitions("sales", "orders", [part])
    assert added.sd.location == f"{managed}/orders/d=d1"

    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert verify(source, "sales", target, "sales_dr") == []
    replica_db = target.catalog.get_database("sales_dr")
    assert replica_db.managed_location_uri is None  # as Hive's REPL LOAD: the replica's own layout
    replica = target.catalog.get_table("sales_dr", "orders")
    assert replica.sd.serde_info == serde
    assert target.catalog.get_partition("sales_dr", "orders", ["d1"]).sd.serde_info == serde
    assert replica.sd.location.startswith(target.config.warehouse)

    changed = serde.model_copy(update={"description": "rows as Avro, v2"})
    altered = source.catalog.get_table("sales", "orders")
    source.catalog.alter_table(
        "sales",
        "orders",
        altered.model_copy(update={"sd": altered.sd.model_copy(update={"serde_info": changed})}),
    )
    inc = engine.execute(f"REPL DUMP sales FROM {dumped.last_event_id}")
    engine.execute(f"REPL LOAD sales_dr FROM '{inc.dump_dir}'")
    assert target.catalog.get_table("sales_dr", "orders").sd.serde_info == changed
    assert verify(source, "sales", target, "sales_dr") == []


def _write(location: str, name: str) -> str:
    path = Path(local_path(location), name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(64) + name.encode())
    return f"{location}/{name}"


def _text(message: str) -> str:
    """A notification message as the server sends it (``gzip(json-1)``: base64 of gzipped JSON), as text."""
    return gzip.decompress(base64.b64decode(message)).decode()


def test_several_partitions_inserts_in_one_call_are_each_recorded(client: Hive4.Client) -> None:
    db = f"ins_{uuid.uuid4().hex[:8]}"
    client.create_database(h4.Database(name=db, description="", parameters={}))
    client.create_table(_table(db, "t"))
    client.add_partitions(
        [h4.Partition(values=[d], dbName=db, tableName="t", parameters={}) for d in ("1", "2")]
    )
    written = {
        d: _write(client.get_partition(db, "t", [d]).sd.location, f"part-{d}.avro") for d in ("1", "2")
    }
    datas = [
        h4.InsertEventRequestData(replace=False, filesAdded=[written[d]], partitionVal=[d])
        for d in ("1", "2")
    ]
    request = h4.FireEventRequest(True, h4.FireEventRequestData(insertDatas=datas), db, "t", catName="hive")
    ids = client.fire_listener_event(request).eventIds
    assert len(ids) == 2
    events = client.get_next_notification(
        h4.NotificationEventRequest(lastEvent=ids[0] - 1, maxEvents=2)
    ).events
    assert [(e.eventId, e.eventType) for e in events] == [(ids[0], "INSERT"), (ids[1], "INSERT")]
    assert "part-1.avro" in _text(events[0].message) and "part-2.avro" in _text(events[1].message)

    before = client.get_current_notificationEventId().eventId
    unnamed = h4.InsertEventRequestData(replace=False, filesAdded=[written["1"]])
    request = h4.FireEventRequest(True, h4.FireEventRequestData(insertDatas=[unnamed]), db, "t")
    with pytest.raises(TApplicationException, match="must name its partition"):
        client.fire_listener_event(request)
    assert client.get_current_notificationEventId().eventId == before


def test_a_commit_naming_hive_repl_write_events_is_refused_and_changes_nothing(client: Hive4.Client) -> None:
    [txn] = client.open_txns(h4.OpenTxnRequest(1, "hive", "localhost")).txn_ids
    info = h4.WriteEventInfo(1, "default", "t", "file-list")
    before = client.get_current_notificationEventId().eventId
    with pytest.raises(TApplicationException, match=r"writeEventInfos.*replicate with hmsrepl's REPL LOAD"):
        client.commit_txn(h4.CommitTxnRequest(txnid=txn, writeEventInfos=[info]))
    assert txn in client.get_open_txns().open_txns  # still open: the client aborts it
    assert client.get_current_notificationEventId().eventId == before
    client.abort_txn(h4.AbortTxnRequest(txn))
