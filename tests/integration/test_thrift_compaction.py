"""Hive's compaction calls (``compact``, ``compact2``, ``show_compact``) over Thrift and in process.

Over the wire the client is thriftpy2 with our IDL (Hive 3.1's compaction structs); in process the handler is
called through the same error mapping the server uses, on every backend. A refused request must leave the
queue and the replica as they were (compared whole, before and after).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import thriftpy2
from thriftpy2.rpc import make_client
from thriftpy2.thrift import TApplicationException

from hmsrepl.acid.compaction_cycle import run_cycle
from hmsrepl.acid.compaction_queue import CompactionQueue
from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import REPLICA_OF, privileged
from hmsrepl.replication.verify import capture_state
from hmsrepl.thrift.handler import ErrorMappingDispatcher, MetastoreHandler
from hmsrepl.thrift.idl import IDL_PATH
from tests.backends import temporary_database
from tests.integration.test_acid_compaction import append, entries, rows
from tests.integration.test_insert_only import create_table
from tests.servers import Hive2Client, RunningMetastore, metastore_server

h3 = thriftpy2.load(str(IDL_PATH), module_name="hms_compaction_client_thrift")
MAJOR, MINOR = h3.CompactionType.MAJOR, h3.CompactionType.MINOR


def _tables(store: Metastore) -> None:
    create_table(store, "events")
    create_table(store, "daily", partition_keys=("ds",))
    create_table(store, "plain", params={})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningMetastore]:
    root = tmp_path_factory.mktemp("compaction-server")
    with temporary_database("sqlite", str(root)) as url, metastore_server(root, url) as running:
        yield running


@pytest.fixture
def remote(server: RunningMetastore) -> Iterator[tuple[object, Metastore]]:
    store = Metastore.open(server.config)
    if "sales" not in store.catalog.get_databases():
        store.catalog.create_database(Database(name="sales"))
        _tables(store)
    client = make_client(h3.ThriftHiveMetastore, "127.0.0.1", server.port, timeout=30000)
    try:
        yield client, store
    finally:
        client.close()
        store.close()


def test_a_hive_client_queues_a_compaction_sees_it_in_show_compact_and_a_worker_runs_it(remote) -> None:
    client, store = remote
    for n in range(1, 4):
        append(store, n)
    request = h3.CompactionRequest(dbname="sales", tablename="events", type=MAJOR)

    first = client.compact2(request)
    again = client.compact2(request)
    client.compact(request)  # Hive 2/3's void form: the same request, no new row

    assert (first.accepted, first.state) == (True, "initiated")
    assert (again.accepted, again.id, again.state) == (False, first.id, "initiated")
    assert "already initiated" in again.errormessage
    [shown] = [e for e in client.show_compact(h3.ShowCompactRequest()).compacts if e.id == first.id]
    assert (shown.dbname, shown.tablename, shown.partitionname) == ("sales", "events", None)
    assert (shown.type, shown.state, shown.enqueueTime > 0) == (MAJOR, "initiated", True)

    report = run_cycle(store, table="sales.events", delta_threshold=100, cleaner_delay_seconds=0)

    assert [o.record.id for o in report.compacted] == [first.id]
    [done] = client.show_compact(h3.ShowCompactRequest(id=first.id)).compacts
    assert done.state == "succeeded" and done.metaInfo.startswith("base_0000003_v")
    assert done.hightestWriteId == 3 and done.txnId and done.endTime >= done.start
    # Hive 4's filters: by table, by state, newest first with a limit.
    assert client.show_compact(h3.ShowCompactRequest(dbName="sales", tbName="daily")).compacts == []
    assert client.show_compact(h3.ShowCompactRequest(state="initiated", id=first.id)).compacts == []
    newer = client.compact2(request)
    newest = client.show_compact(h3.ShowCompactRequest(order="id desc", limit=1)).compacts
    assert [e.id for e in newest] == [newer.id] and newer.id > first.id


def test_apache_thrift_bindings_of_hive_2_and_3_queue_and_list_compactions(remote, server) -> None:
    """hmsclient (Hive 2.3's IDL, what Hive 2 clients send) and pyiceberg's binding (Hive 3's IDL)."""
    from hive_metastore import ThriftHiveMetastore as Hive3Service
    from hive_metastore import ttypes as t3
    from hmsclient.genthrift.hive_metastore import ttypes as t2
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    _, store = remote
    append(store, 1, "daily", ["2024-03-01"])
    hive2 = Hive2Client(server.port, timeout_ms=30000)
    transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", server.port))
    hive3 = Hive3Service.Client(TBinaryProtocol.TBinaryProtocol(transport))
    transport.open()
    try:
        request = dict(dbname="sales", tablename="daily", partitionname="ds=2024-03-01")
        queued = hive2.compact2(t2.CompactionRequest(type=t2.CompactionType.MINOR, **request))
        again = hive3.compact2(t3.CompactionRequest(type=t3.CompactionType.MAJOR, **request))
        assert (queued.accepted, queued.state) == (True, "initiated")
        assert (again.accepted, again.id) == (False, queued.id) and "already initiated" in again.errormessage
        for shown in (
            hive2.show_compact(t2.ShowCompactRequest()),
            hive3.show_compact(t3.ShowCompactRequest()),
        ):
            [row] = [e for e in shown.compacts if e.id == queued.id]
            assert (row.tablename, row.partitionname, row.type, row.state) == (
                "daily",
                "ds=2024-03-01",
                t2.CompactionType.MINOR,
                "initiated",
            )
        with pytest.raises(Exception, match="not a transactional table"):
            hive2.compact(
                t2.CompactionRequest(dbname="sales", tablename="plain", type=t2.CompactionType.MAJOR)
            )
        assert hive2.get_all_databases()  # the connection still serves after the error
    finally:
        hive2.close()
        transport.close()


def test_bad_requests_get_one_line_errors_naming_the_fix_and_queue_nothing(remote) -> None:
    client, store = remote
    before = CompactionQueue(store.events).records()
    cases = [
        (h3.CompactionRequest(dbname="sales", tablename="nope", type=MAJOR), "nope"),
        (h3.CompactionRequest(dbname="sales", tablename="plain", type=MAJOR), "not a transactional table"),
        (h3.CompactionRequest(dbname="sales", tablename="daily", type=MAJOR), "name the partition"),
        (
            h3.CompactionRequest(
                dbname="sales", tablename="daily", partitionname="ds=2099-01-01", type=MAJOR
            ),
            "2099-01-01",
        ),
        (
            h3.CompactionRequest(dbname="sales", tablename="events", partitionname="ds=1", type=MAJOR),
            "not partitioned",
        ),
        (h3.CompactionRequest(dbname="sales", tablename="events", type=3), "3 (REBALANCE) is not supported"),
        (h3.CompactionRequest(dbname="sales", tablename="events", type=4), "MAJOR (2) or MINOR (1)"),
    ]
    for request, fragment in cases:
        with pytest.raises(TApplicationException) as info:
            client.compact2(request)
        assert fragment in info.value.message and "\n" not in info.value.message
    assert CompactionQueue(store.events).records() == before
    assert client.getName()  # the connection still serves


@pytest.fixture
def replica(metastore: Metastore) -> Metastore:
    """'sales' as a protected replica, its insert-only tables written by a (privileged) load."""
    with privileged("test load"):
        metastore.catalog.create_database(Database(name="sales", parameters={REPLICA_OF: "sales_src"}))
        _tables(metastore)
        append(metastore, 1)
        append(metastore, 2)
    return metastore


def test_a_protected_replica_refuses_client_compaction_requests_and_changes_nothing(
    replica: Metastore,
) -> None:
    api = ErrorMappingDispatcher(MetastoreHandler(replica))
    before = (capture_state(replica, "sales"), CompactionQueue(replica.events).records())
    for call in (api.compact2, api.compact):
        with pytest.raises(TApplicationException, match="protected replica of 'sales_src'"):
            call(h3.CompactionRequest(dbname="sales", tablename="events", type=MAJOR))
    assert (capture_state(replica, "sales"), CompactionQueue(replica.events).records()) == before
    assert api.show_compact(h3.ShowCompactRequest()).compacts == []  # reads still work

    # The replica's own housekeeping still compacts it.
    report = run_cycle(replica, force=True, cleaner_delay_seconds=0)
    assert [o.state for o in report.compacted] == ["ready for cleaning"]
    assert [e.state for e in api.show_compact(h3.ShowCompactRequest()).compacts] == ["succeeded"]


def test_partition_names_are_matched_as_the_initiator_spells_them(metastore: Metastore) -> None:
    metastore.catalog.create_database(Database(name="sales"))
    _tables(metastore)
    for ds in ("2024-01-01", "2024-01-02"):
        append(metastore, 1, "daily", [ds])
    api = ErrorMappingDispatcher(MetastoreHandler(metastore))
    first = api.compact2(
        h3.CompactionRequest(dbname="sales", tablename="daily", partitionname="DS=2024-01-01", type=MINOR)
    )
    assert first.accepted
    [row] = CompactionQueue(metastore.events).records()
    assert (row.part_name, row.type) == ("ds=2024-01-01", "minor")
    # The initiator sees the same location as already queued.
    assert CompactionQueue(metastore.events).enqueue("sales", "daily", "ds=2024-01-01") is None


def test_a_serving_metastore_compacts_on_its_own_when_told_to(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """With ``compaction_check_interval_seconds``, the server's housekeeping runs the initiator, worker and
    cleaner: a location past the delta threshold ends as one base, read as the same rows."""
    root = tmp_path_factory.mktemp("self-compacting")
    settings = {
        "HMSREPL_COMPACTION_CHECK_INTERVAL_SECONDS": "0.5",
        "HMSREPL_COMPACTION_DELTA_THRESHOLD": "3",
        "HMSREPL_COMPACTION_CLEANER_DELAY_SECONDS": "0",
    }
    url = f"sqlite:///{root}/ms.db"
    config = MetastoreConfig(db_url=url, warehouse=str(root / "warehouse"), cmroot=str(root / "cmroot"))
    store = Metastore.open(config)  # the appends are all in before the server looks
    store.catalog.create_database(Database(name="sales"))
    _tables(store)
    for n in range(5):
        append(store, n)
    before = rows(store)
    store.close()
    with metastore_server(root, url, **settings) as server:
        store = Metastore.open(server.config)
        client = make_client(h3.ThriftHiveMetastore, "127.0.0.1", server.port, timeout=30000)
        try:
            deadline = time.monotonic() + 60
            states: list[str] = []
            left: list[str] = []
            while time.monotonic() < deadline:  # the cleaner moves files right after it marks the row
                states = [e.state for e in client.show_compact(h3.ShowCompactRequest()).compacts]
                left = entries(store)
                if states == ["succeeded"] and len(left) == 1:
                    break
                time.sleep(0.2)
            assert states == ["succeeded"]
            [base] = left
            assert base.startswith("base_0000005_v") and rows(store) == before
        finally:
            client.close()
            store.close()
