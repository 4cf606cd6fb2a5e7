"""The Thrift server as clients see it: a Hive 2.x client from PyPI and a Hive 3-style client of our IDL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import thriftpy2
from hmsclient.genthrift.hive_metastore import ttypes as h2
from thrift.Thrift import TApplicationException
from thriftpy2.rpc import make_client

from hmsrepl.thrift.idl import IDL_PATH
from tests.backends import temporary_database
from tests.servers import Hive2Client, RunningMetastore, metastore_server

h3 = thriftpy2.load(str(IDL_PATH), module_name="hms_client_side_thrift")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningMetastore]:
    root = tmp_path_factory.mktemp(f"thrift-{request.param}")
    with temporary_database(request.param, str(root)) as url, metastore_server(root, url) as running:
        yield running


@pytest.fixture
def hive2(server: RunningMetastore) -> Iterator[Hive2Client]:
    client = Hive2Client(server.port)
    client.set_ugi("hive", [])
    yield client
    client.close()


@pytest.fixture
def hive3(server: RunningMetastore) -> Iterator[object]:
    client = make_client(h3.ThriftHiveMetastore, "127.0.0.1", server.port, timeout=30000)
    client.set_ugi("hive", [])
    yield client
    client.close()


def _sd(location: str | None = None) -> h2.StorageDescriptor:
    return h2.StorageDescriptor(
        cols=[h2.FieldSchema("id", "int", None)],
        location=location,
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=h2.SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )


def _create_table(
    client: Hive2Client, db: str, name: str, keys: list[tuple[str, str]], **params: str
) -> None:
    client.create_table(
        h2.Table(
            tableName=name,
            dbName=db,
            owner="hive",
            sd=_sd(),
            partitionKeys=[h2.FieldSchema(k, t, None) for k, t in keys],
            parameters=dict(params),
            tableType="MANAGED_TABLE",
        )
    )


def expect(exc_type: type[BaseException], fragment: str, call, *args) -> None:
    """The call fails with exc_type whose message contains fragment (quotes and all, unescaped)."""
    with pytest.raises(exc_type) as info:
        call(*args)
    assert fragment in getattr(info.value, "message", str(info.value)), info.value


def _ensure_db(client: Hive2Client, name: str) -> None:
    try:
        client.get_database(name)
    except h2.NoSuchObjectException:
        client.create_database(h2.Database(name=name, description=None, locationUri=None, parameters={}))


def test_notification_api_through_a_hive2_client(hive2: Hive2Client) -> None:
    start = hive2.get_current_notificationEventId().eventId
    _ensure_db(hive2, "notif")
    _create_table(hive2, "notif", "t1", [])
    events = hive2.get_next_notification(h2.NotificationEventRequest(lastEvent=start, maxEvents=10)).events
    created = [(e.eventType, e.dbName, e.tableName) for e in events]
    assert ("CREATE_TABLE", "notif", "t1") in created
    assert [e.eventId for e in events] == list(range(start + 1, start + 1 + len(events)))
    assert hive2.get_current_notificationEventId().eventId == events[-1].eventId
    one = hive2.get_next_notification(h2.NotificationEventRequest(lastEvent=start, maxEvents=1)).events
    assert len(one) == 1 and one[0].eventId == start + 1


def test_notification_api_needs_an_admin_user(server: RunningMetastore) -> None:
    client = Hive2Client(server.port)
    try:
        client.set_ugi("mallory", [])
        expect(TApplicationException, "user 'mallory' may not read", client.get_current_notificationEventId)
        # The connection stays usable for the calls mallory may make.
        assert "default" in client.get_all_databases()
    finally:
        client.close()


def test_events_count_and_type_skip_through_a_hive3_client(hive3) -> None:
    start = hive3.get_current_notificationEventId().eventId
    hive3.create_database(h3.Database(name="counted", parameters={}))
    for i in range(3):
        hive3.create_table(
            h3.Table(
                tableName=f"t{i}",
                dbName="counted",
                sd=h3.StorageDescriptor(cols=[], parameters={}),
                partitionKeys=[],
                parameters={},
                tableType="MANAGED_TABLE",
            )
        )
    count = hive3.get_notification_events_count(
        h3.NotificationEventsCountRequest(fromEventId=start, dbName="counted")
    )
    assert count.eventsCount == 4
    skipped = hive3.get_next_notification(
        h3.NotificationEventRequest(lastEvent=start, maxEvents=2, eventTypeSkipList=["CREATE_DATABASE"])
    ).events
    assert [(e.eventType, e.tableName) for e in skipped] == [("CREATE_TABLE", "t0"), ("CREATE_TABLE", "t1")]


def test_partition_filters_are_evaluated_like_hive(hive2: Hive2Client) -> None:
    _ensure_db(hive2, "filters")
    _create_table(hive2, "filters", "events", [("region", "string"), ("hour", "int")])
    combos = [(r, h) for r in ("eu", "us", "apac") for h in range(0, 24, 3)]
    hive2.add_partitions(
        [
            h2.Partition(values=[r, str(h)], dbName="filters", tableName="events", sd=_sd(), parameters={})
            for r, h in combos
        ]
    )
    cases = {
        'region = "eu"': lambda r, h: r == "eu",
        "hour > 12": lambda r, h: h > 12,
        "hour >= 9 and hour < 15": lambda r, h: 9 <= h < 15,
        '(region = "us" or region = "apac") and hour <= 3': lambda r, h: r in ("us", "apac") and h <= 3,
        'region <> "eu" and not hour = 0': lambda r, h: r != "eu" and h != 0,
        "21 = hour": lambda r, h: h == 21,
        "region like 'a%'": lambda r, h: r.startswith("a"),
    }
    for text, predicate in cases.items():
        got = {
            (p.values[0], int(p.values[1]))
            for p in hive2.get_partitions_by_filter("filters", "events", text, -1)
        }
        assert got == {(r, h) for r, h in combos if predicate(r, h)}, text
    assert len(hive2.get_partitions_by_filter("filters", "events", "hour > 0", 5)) == 5


def test_partition_requests_with_write_id_lists(hive2: Hive2Client, hive3) -> None:
    _ensure_db(hive2, "reqs")
    _create_table(
        hive2, "reqs", "mm", [("p", "string")], transactional="true", transactional_properties="insert_only"
    )
    hive2.add_partitions(
        [h2.Partition(values=[v], dbName="reqs", tableName="mm", sd=_sd(), parameters={}) for v in ("a", "b")]
    )
    table = hive3.get_table_req(h3.GetTableRequest(dbName="reqs", tblName="mm")).table
    [entry] = hive3.get_valid_write_ids(
        h3.GetValidWriteIdsRequest(fullTableNames=["reqs.mm"])
    ).tblValidWriteIds
    wids = f"reqs.mm:{entry.writeIdHighWaterMark}:9223372036854775807::"
    every = hive3.get_partitions_req(
        h3.PartitionsRequest(dbName="reqs", tblName="mm", validWriteIdList=wids, id=table.id)
    ).partitions
    assert sorted(p.values[0] for p in every) == ["a", "b"]
    named = hive3.get_partitions_by_names_req(
        h3.GetPartitionsByNamesRequest(
            db_name="reqs", tbl_name="mm", names=["p=b"], validWriteIdList=wids, id=table.id
        )
    ).partitions
    assert [p.values for p in named] == [["b"]]
    one = hive3.get_partition_req(
        h3.GetPartitionRequest(dbName="reqs", tblName="mm", partVals=["a"])
    ).partition
    assert one.values == ["a"]
    expect(
        h3.MetaException,
        "malformed ValidWriteIdList",
        hive3.get_partitions_req,
        h3.PartitionsRequest(dbName="reqs", tblName="mm", validWriteIdList="reqs.mm:x"),
    )


def test_bad_input_gets_clear_errors_and_the_server_keeps_serving(hive2: Hive2Client, server) -> None:
    _ensure_db(hive2, "bad")
    _create_table(hive2, "bad", "t", [("p", "string")])
    expect(h2.NoSuchObjectException, "'bad.missing' does not exist", hive2.get_table, "bad", "missing")
    expect(h2.NoSuchObjectException, "database 'nodb'", hive2.get_database, "nodb")
    expect(
        h2.MetaException,
        "cannot parse partition filter 'p ==='",
        hive2.get_partitions_by_filter,
        "bad",
        "t",
        "p ===",
        -1,
    )
    expect(
        h2.MetaException,
        "'q', which is not a partition key of 'bad.t'",
        hive2.get_partitions_by_filter,
        "bad",
        "t",
        'q = "1"',
        -1,
    )
    wrong_spec = h2.Partition(values=["a", "b"], dbName="bad", tableName="t", sd=_sd(), parameters={})
    expect(h2.InvalidObjectException, "2 values but the table has 1 keys", hive2.add_partition, wrong_spec)
    # Hive 2.3 declares only MetaException for get_partition_names: the message still names the table.
    expect(h2.MetaException, "'bad.missing' does not exist", hive2.get_partition_names, "bad", "missing", -1)
    expect(h2.AlreadyExistsException, "'bad.t' already exists", _create_table, hive2, "bad", "t", [])
    expect(
        TApplicationException,
        "'get_partitions_by_expr' is not supported",
        hive2.get_partitions_by_expr,
        h2.PartitionsByExprRequest(dbName="bad", tblName="t", expr=b""),
    )
    # Same connection, and a new one, still served.
    assert hive2.get_table("bad", "t").tableName == "t"
    other = Hive2Client(server.port)
    try:
        assert "bad" in other.get_all_databases()
    finally:
        other.close()


def test_transactions_and_write_ids_over_thrift(hive2: Hive2Client, hive3) -> None:
    _ensure_db(hive2, "acid")
    _create_table(hive2, "acid", "mm", [], transactional="true", transactional_properties="insert_only")
    committed, aborted, still_open = hive3.open_txns(
        h3.OpenTxnRequest(num_txns=3, user="hive", hostname="h")
    ).txn_ids
    for txn in (committed, aborted, still_open):
        hive3.allocate_table_write_ids(
            h3.AllocateTableWriteIdsRequest(dbName="acid", tableName="mm", txnIds=[txn])
        )
    hive3.commit_txn(h3.CommitTxnRequest(txnid=committed))
    hive3.abort_txns(h3.AbortTxnsRequest(txn_ids=[aborted]))
    expect(
        h3.TxnAbortedException,
        f"transaction {aborted} was aborted",
        hive3.commit_txn,
        h3.CommitTxnRequest(txnid=aborted),
    )
    with pytest.raises(h3.NoSuchTxnException):
        hive3.commit_txn(h3.CommitTxnRequest(txnid=10**9))
    [entry] = hive3.get_valid_write_ids(
        h3.GetValidWriteIdsRequest(fullTableNames=["acid.mm"])
    ).tblValidWriteIds
    assert (entry.writeIdHighWaterMark, entry.invalidWriteIds, entry.minOpenWriteId) == (3, [2, 3], 3)
    assert entry.abortedBits == bytes([0b01])  # Java BitSet: position 0 (write id 2) aborted
    table = hive3.get_table_req(h3.GetTableRequest(dbName="acid", tblName="mm")).table
    assert table.id > 0 and table.writeId >= 0
    bad_list = h3.GetTableRequest(dbName="acid", tblName="mm", validWriteIdList="acid.mm:x")
    expect(h3.MetaException, "malformed ValidWriteIdList 'acid.mm:x'", hive3.get_table_req, bad_list)
    open_txns = hive3.get_open_txns()
    assert still_open in open_txns.open_txns and open_txns.min_open_txn <= still_open


def test_dropped_table_files_go_to_cmroot(hive2: Hive2Client, server: RunningMetastore) -> None:
    _ensure_db(hive2, "cm")
    _create_table(hive2, "cm", "t", [])
    location = hive2.get_table("cm", "t").sd.location
    Path(location, "000000_0").write_bytes(b"1\n2\n")
    hive2.drop_table("cm", "t", True)
    assert not Path(location).exists()
    kept = [p.name for p in Path(server.cmroot).iterdir()]
    assert [n for n in kept if n.startswith("000000_0_crc32c-")] and len(kept) >= 1
