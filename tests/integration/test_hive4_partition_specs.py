"""Hive 4's partition reads by request and its truncate under a write id, over the wire with Hive 4's client.

``get_partitions_with_specs`` filters (by names, values, filter expressions), projects (field paths, parameter
key patterns) and groups by shared storage descriptor as Hive's metastore does, refusing with Hive's own
MetaException texts; ``get_partition_names_req`` lists names in the requested order; the request forms that
carry a reader's ValidWriteIdList answer from the state that list may see; ``truncate_table_req`` with a
write id empties a transactional table inside the client's transaction. On each metastore backend.
The client is Apache Thrift's binding of Hive 4's IDL that pyiceberg ships (``hive_metastore``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hive_metastore import ThriftHiveMetastore as Hive4
from hive_metastore import ttypes as h4

from hmsrepl.acid import InsertOnlyWriter, visible_files
from hmsrepl.metastore import Metastore
from hmsrepl.replication.dump_events import DumpEvent
from hmsrepl.storage.local import local_path
from tests.backends import temporary_database
from tests.helpers import write_file
from tests.hive4_reference import hive4_client, hive4_table
from tests.servers import RunningMetastore, metastore_server

BY_NAMES, BY_VALUES, BY_EXPR = (
    h4.PartitionFilterMode.BY_NAMES,
    h4.PartitionFilterMode.BY_VALUES,
    h4.PartitionFilterMode.BY_EXPR,
)


@pytest.fixture(scope="module", params=["sqlite", "postgres", "mysql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningMetastore]:
    if request.param != "sqlite":
        request.applymarker(getattr(pytest.mark, request.param))
    root = tmp_path_factory.mktemp(f"specs-{request.param}")
    with temporary_database(request.param, str(root)) as url, metastore_server(root, url) as running:
        yield running


@pytest.fixture(scope="module")
def store(server: RunningMetastore) -> Iterator[Metastore]:
    """In-process access to the server's database (a writer's files, a reader's snapshot)."""
    metastore = Metastore(server.config)
    yield metastore
    metastore.close()


@pytest.fixture
def client(server: RunningMetastore) -> Iterator[Hive4.Client]:
    with hive4_client(server.port) as hive:
        yield hive


@pytest.fixture
def db(client: Hive4.Client) -> str:
    name = f"specs_{uuid.uuid4().hex[:8]}"
    client.create_database(h4.Database(name=name, description="", parameters={}))
    return name


def _partitioned(client: Hive4.Client, db: str, elsewhere: Path) -> None:
    """events(ds, hr): three partitions in the table's directory, one outside it (in the warehouse)."""
    client.create_table_req(h4.CreateTableRequest(table=hive4_table(db, "events", ["ds", "hr"])))
    sd = client.get_table(db, "events").sd
    params = {"a.x": "1", "a.z": "2", "b.y": "3"}
    parts = [
        h4.Partition(values=[ds, hr], dbName=db, tableName="events", sd=None, parameters=dict(params))
        for ds, hr in (("1", "b"), ("1", "a"), ("2", "a"))
    ]
    outside = h4.Partition(values=["3", "a"], dbName=db, tableName="events", sd=sd, parameters={})
    outside.sd.location = str(elsewhere)
    client.add_partitions(parts)
    client.add_partitions([outside])


def _request(db: str, fields: list[str] | None = None, mode: int | None = None, filters=None, **kw):
    return h4.GetPartitionsRequest(
        dbName=db,
        tblName="events",
        projectionSpec=h4.GetProjectionsSpec(fieldList=fields or [], **kw),
        filterSpec=h4.GetPartitionsFilterSpec(filterMode=mode, filters=filters),
    )


def _rebuilt(specs: list[h4.PartitionSpec]) -> list[h4.Partition]:
    """The partitions as Hive's client rebuilds them (``MetaStoreServerUtils.getPartitionsByProjectSpec``)."""
    out = []
    for spec in specs:
        if spec.partitionList is not None:
            out.extend(spec.partitionList.partitions)
        shared = spec.sharedSDPartitionSpec
        for member in shared.partitions if shared is not None else []:
            sd = h4.StorageDescriptor(**vars(shared.sd))
            if sd.location is not None:
                sd.location = sd.location + member.relativePath
            out.append(
                h4.Partition(
                    values=member.values,
                    dbName=spec.dbName,
                    tableName=spec.tableName,
                    createTime=member.createTime,
                    lastAccessTime=member.lastAccessTime,
                    sd=sd,
                    parameters=member.parameters,
                )
            )
    return out


def test_partitions_with_specs_group_by_shared_storage_and_rebuild_to_the_classic_partitions(
    client: Hive4.Client, db: str, server: RunningMetastore
) -> None:
    _partitioned(client, db, Path(server.warehouse) / f"outside_{db}")
    table = client.get_table(db, "events")
    specs = client.get_partitions_with_specs(_request(db)).partitionSpec
    [shared, listed] = specs
    assert shared.rootPath == table.sd.location == shared.sharedSDPartitionSpec.sd.location
    assert [m.relativePath for m in shared.sharedSDPartitionSpec.partitions] == [
        "/ds=1/hr=a",
        "/ds=1/hr=b",
        "/ds=2/hr=a",
    ]
    assert [p.values for p in listed.partitionList.partitions] == [["3", "a"]]  # outside: sent whole
    assert (listed.dbName, listed.tableName, listed.rootPath) == (db, "events", None)
    classic = {tuple(p.values): p for p in client.get_partitions(db, "events", -1)}
    for part in _rebuilt(specs):
        want = classic.pop(tuple(part.values))
        assert (part.sd.location, part.sd.cols, part.sd.serdeInfo) == (
            want.sd.location,
            want.sd.cols,
            want.sd.serdeInfo,
        )
        assert (part.parameters, part.createTime) == (want.parameters, want.createTime)
    assert classic == {}


def test_partitions_with_specs_filter_and_project_as_hive(
    client: Hive4.Client, db: str, server: RunningMetastore
) -> None:
    _partitioned(client, db, Path(server.warehouse) / f"outside_{db}")

    def read(*args, **kw) -> list[h4.Partition]:
        return _rebuilt(client.get_partitions_with_specs(_request(db, *args, **kw)).partitionSpec)

    by_values = read(["values", "sd.location"], BY_VALUES, ["1"])
    assert [p.values for p in by_values] == [["1", "a"], ["1", "b"]]
    assert all(p.sd.location.endswith(f"/ds=1/hr={p.values[1]}") for p in by_values)
    assert {(p.sd.cols, p.sd.inputFormat, p.parameters, p.createTime) for p in by_values} == {
        (None, None, None, None)  # not asked for: not sent
    }
    names = ["ds=2/hr=a", "ds=1/hr=b", "ds=9/hr=z"]
    assert [p.values for p in read(["values"], BY_NAMES, names)] == [["1", "b"], ["2", "a"]]
    assert [p.values for p in read(["values"], BY_VALUES, ["", "a"])] == [["1", "a"], ["2", "a"], ["3", "a"]]
    expressions = ['ds = "1"', 'hr = "b" or hr = "c"']
    assert [p.values for p in read(["values"], BY_EXPR, expressions)] == [["1", "b"]]
    narrowed = read(["values", "parameters"], BY_NAMES, ["ds=1/hr=a"], includeParamKeyPattern="a%")
    assert narrowed[0].parameters == {"a.x": "1", "a.z": "2"}
    narrowed = read(
        ["parameters"], BY_NAMES, ["ds=1/hr=a"], includeParamKeyPattern="a%", excludeParamKeyPattern="%z"
    )
    assert narrowed[0].parameters == {"a.x": "1"}
    [whole] = read(None, BY_NAMES, ["ds=1/hr=a"], excludeParamKeyPattern="a_%")
    assert {key for key in whole.parameters if key[0] in "ab"} == {"b.y"}  # numFiles and the like stay
    assert whole.sd == client.get_partition(db, "events", ["1", "a"]).sd
    [serde_only] = read(["sd.serdeInfo"], BY_NAMES, ["ds=3/hr=a"])
    serde = client.get_partition(db, "events", ["3", "a"]).sd.serdeInfo
    assert serde_only.sd.serdeInfo == serde and serde.serializationLib
    assert (serde_only.sd.location, serde_only.sd.cols, serde_only.values) == (None, None, None)

    refusals = {
        "Invalid field name nope": _request(db, ["values", "nope"]),
        "Invalid filter expressions in the filter spec": _request(db, ["values"], BY_NAMES, []),
        "Incorrect number of partition values. numPartKeys=2, part_val=[1, a, x]": _request(
            db, ["values"], BY_VALUES, ["1", "a", "x"]
        ),
        "cannot parse partition filter": _request(db, ["values"], BY_EXPR, ["ds ==="]),
    }
    for message, request in refusals.items():
        with pytest.raises(h4.MetaException, match=message.replace("[", r"\[").replace(".", r"\.")):
            client.get_partitions_with_specs(request)
    missing = _request(db)
    missing.tblName = "missing"
    with pytest.raises(h4.MetaException, match=f"'{db}.missing' does not exist"):
        client.get_partitions_with_specs(missing)


def test_partition_names_by_request_in_the_requested_order(client: Hive4.Client, db: str) -> None:
    table = hive4_table(db, "events", ["ds", "n"])
    table.partitionKeys[1].type = "int"
    client.create_table_req(h4.CreateTableRequest(table=table))
    values = [("1", "9"), ("1", "10"), ("2", "__HIVE_DEFAULT_PARTITION__"), ("2", "3")]
    client.add_partitions(
        [h4.Partition(values=list(v), dbName=db, tableName="events", parameters={}) for v in values]
    )

    def names(order: str | None = None, max_parts: int = -1, expr: bytes = b"\xff") -> list[str]:
        request = h4.PartitionsByExprRequest(db, "events", expr, maxParts=max_parts, order=order)
        return client.get_partition_names_req(request)

    assert names() == client.get_partition_names(db, "events", -1)
    assert names(max_parts=2) == ["ds=1/n=10", "ds=1/n=9"]
    # n as a number, not as text; the default partition's NULL last ascending, first descending
    assert names("1:+") == ["ds=2/n=3", "ds=1/n=9", "ds=1/n=10", "ds=2/n=__HIVE_DEFAULT_PARTITION__"]
    assert names("0,1:-+", 3) == ["ds=2/n=3", "ds=2/n=__HIVE_DEFAULT_PARTITION__", "ds=1/n=9"]
    assert names("1:-")[0] == "ds=2/n=__HIVE_DEFAULT_PARTITION__"
    with pytest.raises(h4.MetaException, match="serialized Hive expressions cannot be evaluated"):
        names(expr=b"\x01\x00kryo")
    with pytest.raises(h4.MetaException, match="do not mismatch, order: 0,1:-"):
        names("0,1:-")


def _insert_only(client: Hive4.Client, db: str, name: str, keys: list[str]) -> None:
    table = hive4_table(db, name, keys)
    table.parameters = {"transactional": "true", "transactional_properties": "insert_only"}
    client.create_table_req(h4.CreateTableRequest(table=table))


def _reader_list(store: Metastore, db: str, table: str) -> str:
    [entry] = store.txns.get_valid_write_ids([f"{db}.{table}"])
    return entry.write_ids.to_string()


def _partition_stats(client: Hive4.Client, db: str) -> None:
    data = h4.ColumnStatisticsData(
        longStats=h4.LongColumnStatsData(lowValue=1, highValue=5, numNulls=0, numDVs=5)
    )
    desc = h4.ColumnStatisticsDesc(isTblLevel=False, dbName=db, tableName="mm", partName="p=a")
    stats = h4.ColumnStatistics(statsDesc=desc, statsObj=[h4.ColumnStatisticsObj("id", "bigint", data)])
    client.update_partition_column_statistics(stats)


def _stats_reads(client: Hive4.Client, db: str, write_ids: str | None) -> tuple[object, object]:
    request = h4.PartitionsStatsRequest(db, "mm", ["id"], ["p=a"], validWriteIdList=write_ids)
    return client.get_partitions_statistics_req(request), client.get_aggr_stats_for(request)


def test_request_forms_answer_from_the_state_the_readers_write_id_list_may_see(
    client: Hive4.Client, db: str, store: Metastore
) -> None:
    """A change the reader's list does not count as committed is never answered: each request form that
    carries the list refuses (retryable) while the classic read, with no list, shows the latest state."""
    _insert_only(client, db, "mm", ["p"])
    client.add_partitions([h4.Partition(values=["a"], dbName=db, tableName="mm", parameters={})])
    _partition_stats(client, db)
    before = _reader_list(store, db, "mm")
    [txn] = client.open_txns(h4.OpenTxnRequest(1, "hive", "localhost")).txn_ids
    allocate = h4.AllocateTableWriteIdsRequest(dbName=db, tableName="mm", txnIds=[txn])
    [written] = client.allocate_table_write_ids(allocate).txnToWriteIds
    part = client.get_partition(db, "mm", ["a"])
    part.parameters["k"] = "uncommitted"
    client.alter_partitions_req(
        h4.AlterPartitionsRequest(dbName=db, tableName="mm", partitions=[part], writeId=written.writeId)
    )
    assert client.get_partition(db, "mm", ["a"]).parameters["k"] == "uncommitted"  # no list: latest
    reads = [
        lambda: client.get_partitions_ps_with_auth_req(
            h4.GetPartitionsPsWithAuthRequest(
                dbName=db, tblName="mm", partVals=["a"], validWriteIdList=before
            )
        ),
        lambda: client.get_partitions_with_specs(
            h4.GetPartitionsRequest(dbName=db, tblName="mm", validWriteIdList=before)
        ),
    ]
    for read in reads:
        with pytest.raises(
            h4.MetaException, match=f"write id {written.writeId} .*does not count as committed"
        ):
            read()
    stats, aggregate = _stats_reads(client, db, before)
    assert (stats.partStats, stats.isStatsCompliant) == ({}, False)  # withheld, as Hive answers
    assert (aggregate.colStats, aggregate.partsFound, aggregate.isStatsCompliant) == ([], 0, False)
    client.commit_txn(h4.CommitTxnRequest(txnid=txn))
    after = _reader_list(store, db, "mm")
    stats, aggregate = _stats_reads(client, db, after)
    assert (list(stats.partStats), stats.isStatsCompliant) == (["p=a"], True)
    assert (aggregate.partsFound, aggregate.isStatsCompliant) == (1, True)
    assert _stats_reads(client, db, None)[0].isStatsCompliant is None  # no list: no verdict
    [seen] = client.get_partitions_ps_with_auth_req(
        h4.GetPartitionsPsWithAuthRequest(dbName=db, tblName="mm", partVals=["a"], validWriteIdList=after)
    ).partitions
    assert seen.parameters["k"] == "uncommitted"
    fields = client.get_fields_req(h4.GetFieldsRequest(dbName=db, tblName="mm", validWriteIdList=after))
    assert [f.name for f in fields.fields] == ["id", "name"]
    names = client.get_partition_names_ps_req(
        h4.GetPartitionNamesPsRequest(dbName=db, tblName="mm", partValues=[""], validWriteIdList=after)
    )
    assert names.names == ["p=a"]
    with pytest.raises(h4.MetaException, match="malformed ValidWriteIdList"):
        client.get_schema_req(h4.GetSchemaRequest(dbName=db, tblName="mm", validWriteIdList=f"{db}.mm:x"))


def test_truncate_with_a_write_id_empties_the_table_inside_the_clients_transaction(
    client: Hive4.Client, db: str, store: Metastore
) -> None:
    _insert_only(client, db, "mm", [])
    with InsertOnlyWriter(store, db, "mm") as writer:
        write_file(writer.target_uri, "part-0.txt", b"kept until the commit\n")
    location = client.get_table(db, "mm").sd.location
    assert len(visible_files(store, db, "mm")) == 1
    [txn] = client.open_txns(h4.OpenTxnRequest(1, "hive", "localhost")).txn_ids
    allocate = h4.AllocateTableWriteIdsRequest(dbName=db, tableName="mm", txnIds=[txn])
    [written] = client.allocate_table_write_ids(allocate).txnToWriteIds
    start = client.get_current_notificationEventId().eventId
    unheld = h4.TruncateTableRequest(dbName=db, tableName="mm", writeId=written.writeId + 5)
    with pytest.raises(h4.MetaException, match="is held by no open transaction"):
        client.truncate_table_req(unheld)
    assert client.get_current_notificationEventId().eventId == start  # nothing changed
    client.truncate_table_req(h4.TruncateTableRequest(dbName=db, tableName="mm", writeId=written.writeId))
    assert len(visible_files(store, db, "mm")) == 1  # the client's transaction is still open
    assert Path(local_path(location), f"base_{written.writeId:07d}").is_dir()
    client.commit_txn(h4.CommitTxnRequest(txnid=txn))
    assert visible_files(store, db, "mm") == []
    assert client.get_table(db, "mm").writeId == written.writeId  # the table's write id, as Hive records it
    events = client.get_next_notification(h4.NotificationEventRequest(lastEvent=start, maxEvents=100)).events
    [commit] = [e for e in events if e.eventType == "COMMIT_TXN"]
    stored = store.events.next_events(commit.eventId - 1, 1)[0]
    assert [w.write_id for w in DumpEvent.of(stored).message.body.writes] == [written.writeId]
