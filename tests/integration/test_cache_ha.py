"""Two metastore server processes with metadata caches on one PostgreSQL database, used over Thrift.

Clients do what a Hive 4 client does: take a ValidWriteIdList (get_valid_write_ids) and the table id (a
read without a list, which always goes to the database), then read with both (GetTableRequest fields 6 and
11). Writes join a txn through the EnvironmentContext property ``hmsrepl.txnId``. Instance A uses the
default 'contains' freshness, B 'equal'. Tests never sleep for timing: they poll an instance's applied
event id (getMetaConf('hmsrepl.cache.metrics')) until it reaches the log's head, with a deadline.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import thriftpy2
from sqlalchemy import Engine, create_engine, select
from thriftpy2.rpc import make_client

from hmsrepl.config import MetastoreConfig
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.schema import txn_sequence, txn_to_write_id, txns
from hmsrepl.thrift.idl import IDL_PATH
from tests.backends import temporary_database
from tests.servers import RunningMetastore, metastore_server

pytestmark = pytest.mark.postgres

hms = thriftpy2.load(str(IDL_PATH), module_name="hms_cache_client_thrift")
CACHE_ENV = {
    "HMSREPL_CACHE_ENABLED": "true",
    "HMSREPL_CACHE_REFRESH_INTERVAL_SECONDS": "0.02",
    "HMSREPL_CACHE_METRICS_LOG_INTERVAL_SECONDS": "5",
}
DEADLINE_SECONDS = 30.0


@dataclass
class Servers:
    a: RunningMetastore
    b: RunningMetastore
    db_url: str


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    root = tmp_path_factory.mktemp("cache-ha")
    for name in ("a", "b"):
        (root / name).mkdir()
    # Entered in order: the first server creates the schema, the second finds it.
    with (
        temporary_database("postgres", str(root)) as url,
        metastore_server(root / "a", url, **CACHE_ENV) as a,
        metastore_server(
            root / "b",
            url,
            **CACHE_ENV,
            HMSREPL_CACHE_FRESHNESS="equal",
            HMSREPL_WAREHOUSE=a.warehouse,  # one metastore, two instances: one database, one set of roots
            HMSREPL_CMROOT=a.cmroot,
        ) as b,
    ):
        yield Servers(a, b, url)


class Client:
    """A Thrift client of our IDL plus the few steps a Hive 4 client takes around reads and writes."""

    def __init__(self, server: RunningMetastore) -> None:
        self.server = server
        self.raw = make_client(hms.ThriftHiveMetastore, "127.0.0.1", server.port, timeout=60000)
        self.raw.set_ugi("hive", [])

    def close(self) -> None:
        self.raw.close()

    def metrics(self) -> dict[str, Any]:
        return json.loads(self.raw.getMetaConf("hmsrepl.cache.metrics"))

    def caught_up(self) -> dict[str, Any]:
        """Poll until this instance has applied every event committed so far; returns its metrics."""
        head = self.raw.get_current_notificationEventId().eventId
        deadline = time.monotonic() + DEADLINE_SECONDS
        while True:
            metrics = self.metrics()
            if metrics["ready"] and metrics["applied_event_id"] >= head:
                return metrics
            assert time.monotonic() < deadline, f"instance stuck at {metrics} (log head {head})"
            time.sleep(0.01)  # bounded polling for a condition, not a timing assumption

    def write_ids(self, *tables: str) -> dict[str, ValidWriteIdList]:
        request = hms.GetValidWriteIdsRequest(fullTableNames=list(tables))
        for _ in range(10):
            try:
                response = self.raw.get_valid_write_ids(request)
                return {entry.fullTableName: _write_id_list(entry) for entry in response.tblValidWriteIds}
            except hms.MetaException as exc:
                # Known race in TransactionService.get_valid_txns (reported, not the cache's): a txn opened
                # while the snapshot is read appears above its high watermark and the request fails.
                if "is above the high watermark" not in exc.message:
                    raise
        raise AssertionError("get_valid_write_ids kept failing")

    def table_id(self, db: str, table: str) -> int:
        return self.raw.get_table_req(hms.GetTableRequest(dbName=db, tblName=table)).table.id

    def read(self, db: str, table: str, write_ids: ValidWriteIdList | None, table_id: int | None) -> Any:
        request = hms.GetTableRequest(
            dbName=db,
            tblName=table,
            validWriteIdList=write_ids.to_string() if write_ids is not None else None,
            id=table_id if table_id is not None else -1,
        )
        return self.raw.get_table_req(request).table

    def open_txn(self) -> int:
        return self.raw.open_txns(hms.OpenTxnRequest(num_txns=1, user="hive", hostname="test")).txn_ids[0]

    def allocate(self, txn: int, db: str, table: str) -> int:
        request = hms.AllocateTableWriteIdsRequest(dbName=db, tableName=table, txnIds=[txn])
        return self.raw.allocate_table_write_ids(request).txnToWriteIds[0].writeId

    def alter_in_txn(self, txn: int, db: str, table: str, **params: str) -> None:
        current = self.raw.get_table_req(hms.GetTableRequest(dbName=db, tblName=table)).table
        current.parameters = {**current.parameters, **params}
        context = hms.EnvironmentContext(properties={"hmsrepl.txnId": str(txn)})
        self.raw.alter_table_with_environment_context(db, table, current, context)

    def commit(self, txn: int) -> None:
        self.raw.commit_txn(hms.CommitTxnRequest(txnid=txn))

    def abort(self, txn: int) -> None:
        self.raw.abort_txn(hms.AbortTxnRequest(txnid=txn))

    def create_acid_table(self, db: str, table: str) -> None:
        try:
            self.raw.get_database(db)
        except hms.NoSuchObjectException:
            self.raw.create_database(hms.Database(name=db, parameters={}))
        sd = hms.StorageDescriptor(cols=[hms.FieldSchema(name="id", type="int")], parameters={})
        self.raw.create_table(
            hms.Table(
                tableName=table,
                dbName=db,
                sd=sd,
                partitionKeys=[],
                tableType="MANAGED_TABLE",
                parameters={"transactional": "true", "transactional_properties": "insert_only"},
            )
        )


def snapshot_write_ids(engine: Engine, full_name: str) -> ValidWriteIdList:
    """A reader's list from one REPEATABLE READ snapshot of the database: the oracle under concurrency.

    TransactionService.get_valid_write_ids reads the open write ids before the high watermark in separate
    statements, so under concurrent allocations it can call an open write id committed (reported); this
    derivation reads everything in one snapshot, so it is right by construction.
    """
    db_name, table_name = full_name.split(".")
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn, conn.begin():
        txn_hwm = conn.execute(select(txn_sequence.c.next_txn_id)).scalar_one() - 1
        states = dict(conn.execute(select(txns.c.txn_id, txns.c.state).where(txns.c.state != "c")).all())
        rows = conn.execute(
            select(txn_to_write_id.c.write_id, txn_to_write_id.c.txn_id).where(
                txn_to_write_id.c.db_name == db_name, txn_to_write_id.c.tbl_name == table_name
            )
        ).all()
    hwm = max((w for w, t in rows if t <= txn_hwm), default=0)
    open_ids = {w for w, t in rows if w <= hwm and (t > txn_hwm or states.get(t) == "o")}
    aborted = {w for w, t in rows if w <= hwm and t <= txn_hwm and states.get(t) == "a"}
    return ValidWriteIdList(full_name, hwm, open_ids, aborted)


def _write_id_list(entry: Any) -> ValidWriteIdList:
    """Hive's TableValidWriteIds as a ValidWriteIdList (abortedBits is a Java BitSet over invalidWriteIds)."""
    bits = entry.abortedBits or b""
    invalid = list(entry.invalidWriteIds or [])
    aborted = {w for i, w in enumerate(invalid) if i // 8 < len(bits) and bits[i // 8] >> (i % 8) & 1}
    return ValidWriteIdList(entry.fullTableName, entry.writeIdHighWaterMark, set(invalid) - aborted, aborted)


@pytest.fixture
def a(servers: Servers) -> Iterator[Client]:
    client = Client(servers.a)
    yield client
    client.close()


@pytest.fixture
def b(servers: Servers) -> Iterator[Client]:
    client = Client(servers.b)
    yield client
    client.close()


def committed_txn_alter(client: Client, db: str, table: str, **params: str) -> None:
    txn = client.open_txn()
    client.allocate(txn, db, table)
    client.alter_in_txn(txn, db, table, **params)
    client.commit(txn)


def test_a_write_on_a_is_never_read_old_on_b(a: Client, b: Client) -> None:
    a.create_acid_table("ha", "t1")
    table_id = a.table_id("ha", "t1")
    b.caught_up()
    hits = b.metrics()["hits"]
    for version in range(1, 16):
        committed_txn_alter(a, "ha", "t1", v=str(version))
        fresh = b.write_ids("ha.t1")["ha.t1"]
        assert b.read("ha", "t1", fresh, table_id).parameters["v"] == str(version)  # whatever B has applied
    b.caught_up()
    fresh = b.write_ids("ha.t1")["ha.t1"]
    table = b.read("ha", "t1", fresh, table_id)
    assert table.parameters["v"] == "15" and table.writeId == 15
    assert b.metrics()["hits"] > hits


def test_a_txn_spanning_both_instances_becomes_visible_whole_after_commit(a: Client, b: Client) -> None:
    a.create_acid_table("ha", "x")
    a.create_acid_table("ha", "y")
    ids = {name: a.table_id("ha", name) for name in ("x", "y")}
    txn = a.open_txn()
    a.allocate(txn, "ha", "x")
    b.allocate(txn, "ha", "y")
    a.alter_in_txn(txn, "ha", "x", v="new")
    b.alter_in_txn(txn, "ha", "y", v="new")
    a.caught_up(), b.caught_up()

    torn: list[tuple[str, str, str | None, str | None]] = []
    checked = [0]
    stop = threading.Event()

    def watch(server: RunningMetastore) -> None:
        """Readers racing the commit: a snapshot that has the txn committed must show all of it.

        A snapshot from before the commit may be answered with a newer version once the commit is applied
        (the database fallback returns the latest; 'contains' serves newer entries), so it is not checked
        here; that cached answers to it are exactly that snapshot is checked in test_cache_consistency.
        """
        client = Client(server)
        try:
            while not stop.is_set():
                snapshot = client.write_ids("ha.x", "ha.y")  # one snapshot for both tables
                if snapshot["ha.x"].is_write_id_valid(1) != snapshot["ha.y"].is_write_id_valid(1):
                    torn.append((server.uri, "snapshot", None, None))
                if not snapshot["ha.x"].is_write_id_valid(1):
                    continue
                seen = [
                    client.read("ha", name, snapshot[f"ha.{name}"], ids[name]).parameters.get("v")
                    for name in ("x", "y")
                ]
                checked[0] += 1
                if seen != ["new", "new"]:
                    torn.append((server.uri, "committed", *seen))
        finally:
            client.close()

    before = [a.metrics()["hits"], b.metrics()["hits"]]
    for client in (a, b):
        snapshot = client.write_ids("ha.x", "ha.y")
        for name in ("x", "y"):
            assert "v" not in client.read("ha", name, snapshot[f"ha.{name}"], ids[name]).parameters
    assert [a.metrics()["hits"], b.metrics()["hits"]] == [before[0] + 2, before[1] + 2]  # from the caches

    watchers = [threading.Thread(target=watch, args=(client.server,)) for client in (a, b)]
    for thread in watchers:
        thread.start()
    b.commit(txn)  # committed through the other instance than the one that opened it
    a.caught_up(), b.caught_up()
    deadline = time.monotonic() + DEADLINE_SECONDS
    while checked[0] < 2 and time.monotonic() < deadline:  # both watchers saw the commit at least once
        time.sleep(0.01)  # bounded polling for a condition
    stop.set()
    for thread in watchers:
        thread.join(DEADLINE_SECONDS)
    assert torn == [] and checked[0] > 0
    for client in (a, b):
        snapshot = client.write_ids("ha.x", "ha.y")
        hits = client.metrics()["hits"]
        assert [client.read("ha", n, snapshot[f"ha.{n}"], ids[n]).parameters["v"] for n in "xy"] == [
            "new"
        ] * 2
        assert client.metrics()["hits"] == hits + 2


def test_aborted_writes_are_never_visible(a: Client, b: Client) -> None:
    a.create_acid_table("ha", "ab")
    table_id = a.table_id("ha", "ab")
    committed_txn_alter(a, "ha", "ab", v="good")
    txn = b.open_txn()
    b.allocate(txn, "ha", "ab")
    b.alter_in_txn(txn, "ha", "ab", v="bad")
    a.caught_up(), b.caught_up()
    for client in (a, b):  # while it is open
        assert client.read("ha", "ab", client.write_ids("ha.ab")["ha.ab"], table_id).parameters["v"] == "good"
    a.abort(txn)
    a.caught_up(), b.caught_up()
    for client in (a, b):
        fresh = client.write_ids("ha.ab")["ha.ab"]
        assert fresh.aborted_write_ids == {2}
        hits = client.metrics()["hits"]
        table = client.read("ha", "ab", fresh, table_id)
        assert (table.parameters["v"], table.writeId) == ("good", 1)
        assert client.metrics()["hits"] == hits + 1


def test_drop_and_recreate_under_the_same_name_is_detected(a: Client, b: Client) -> None:
    a.create_acid_table("ha", "dr")
    committed_txn_alter(a, "ha", "dr", v="old")
    old_id = a.table_id("ha", "dr")
    b.caught_up()
    assert b.read("ha", "dr", b.write_ids("ha.dr")["ha.dr"], old_id).parameters["v"] == "old"
    a.raw.drop_table("ha", "dr", True)
    a.create_acid_table("ha", "dr")
    committed_txn_alter(a, "ha", "dr", v="new")
    new_id = a.table_id("ha", "dr")
    assert new_id != old_id
    fresh = b.write_ids("ha.dr")["ha.dr"]
    for table_id in (new_id, old_id):  # B may not have applied the drop yet: never the old table
        table = b.read("ha", "dr", fresh, table_id)
        assert (table.id, table.parameters["v"]) == (new_id, "new")
    b.caught_up()
    misses = b.metrics()["misses"].get("table_id_mismatch", 0)
    assert b.read("ha", "dr", fresh, old_id).id == new_id
    assert b.metrics()["misses"]["table_id_mismatch"] == misses + 1
    hits = b.metrics()["hits"]
    assert b.read("ha", "dr", fresh, new_id).parameters["v"] == "new"
    assert b.metrics()["hits"] == hits + 1


def hits_of(server: RunningMetastore) -> int:
    client = Client(server)
    try:
        return client.metrics()["hits"]
    finally:
        client.close()


@dataclass
class Outcome:
    checked: int = 0
    stale: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def test_randomised_concurrent_writers_and_readers_find_no_stale_read(servers: Servers) -> None:
    """Writers on both instances change tables in txns (some abort); readers on both check every answer.

    Writes to one table are serialised, as Hive's exclusive DDL lock does, so version ``v`` of a table is
    the write id that set it and grows with time. Lists come from one database snapshot (see
    ``snapshot_write_ids``). For a reader's list L, the answer must include every
    write L marks committed (``v >= max committed write id in L``: else it is stale) and may not be newer
    than a database read with the same list made right after it (a read without the table id always goes
    to the database). A read the database cannot answer for L (its version is of an open or aborted txn)
    is refused, and skipped here.
    """
    tables = [f"r{i}" for i in range(4)]
    wanted_checks = 600
    setup = Client(servers.a)
    for name in tables:
        setup.create_acid_table("rnd", name)
    ids = {name: setup.table_id("rnd", name) for name in tables}
    setup.close()
    locks = {name: threading.Lock() for name in tables}
    engine = create_engine(servers.db_url, pool_size=8)
    outcome = Outcome()
    stop = threading.Event()
    rng_seed = random.randrange(1 << 30)

    def writer(server: RunningMetastore, seed: int) -> None:
        rng, client = random.Random(seed), Client(server)
        try:
            while not stop.is_set():
                name = rng.choice(tables)
                with locks[name]:
                    txn = client.open_txn()
                    write_id = client.allocate(txn, "rnd", name)
                    client.alter_in_txn(txn, "rnd", name, v=str(write_id))
                    client.abort(txn) if rng.random() < 0.25 else client.commit(txn)
        except Exception as exc:  # reported by the test, not lost in a thread
            outcome.errors.append(f"writer: {exc!r}")
        finally:
            client.close()

    def reader(server: RunningMetastore, seed: int) -> None:
        rng, client = random.Random(seed), Client(server)
        try:
            while not stop.is_set():
                name = rng.choice(tables)
                wids = snapshot_write_ids(engine, f"rnd.{name}")
                try:
                    answer = int(client.read("rnd", name, wids, ids[name]).parameters.get("v", "0"))
                    from_db = int(client.read("rnd", name, wids, None).parameters.get("v", "0"))
                except hms.MetaException as exc:
                    # The database holds an open or aborted txn's change the list does not count: refused
                    # (retryable), never answered with it.
                    if "does not count as committed" not in exc.message:
                        raise
                    continue
                required = max(
                    (w for w in range(1, wids.high_watermark + 1) if wids.is_write_id_valid(w)), default=0
                )
                outcome.checked += 1
                if outcome.checked >= wanted_checks:
                    stop.set()
                if not required <= answer <= from_db:
                    outcome.stale.append(f"{server.uri} {name} {wids.to_string()}: {answer} (db {from_db})")
        except Exception as exc:
            outcome.errors.append(f"reader: {exc!r}")
        finally:
            client.close()

    before = [hits_of(servers.a), hits_of(servers.b)]
    threads = [
        threading.Thread(target=role, args=(server, rng_seed + i))
        for i, (role, server) in enumerate(
            [(writer, servers.a), (writer, servers.b)] + [(reader, servers.a), (reader, servers.b)] * 2
        )
    ]
    for thread in threads:
        thread.start()
    stop.wait(DEADLINE_SECONDS * 2)  # readers set it once they have checked enough answers
    stop.set()
    for thread in threads:
        thread.join(DEADLINE_SECONDS)
    engine.dispose()
    assert outcome.errors == [], f"seed {rng_seed}"
    assert outcome.stale == [], f"seed {rng_seed}: {outcome.stale[:5]}"
    assert outcome.checked > 100
    after = [hits_of(servers.a), hits_of(servers.b)]
    assert after[0] > before[0] and after[1] > before[1], "the caches answered none of the reads"


def test_partitions_served_from_the_cache_decode_like_the_database(servers: Servers, a: Client) -> None:
    """Cache hits send partitions pre-encoded; a client must decode exactly what the database holds."""
    a.raw.create_table(
        hms.Table(
            tableName="ext",
            dbName="ha",
            sd=hms.StorageDescriptor(cols=[hms.FieldSchema(name="id", type="int")], parameters={}),
            partitionKeys=[
                hms.FieldSchema(name="region", type="string"),
                hms.FieldSchema(name="hour", type="int"),
            ],
            tableType="EXTERNAL_TABLE",
            parameters={"EXTERNAL": "TRUE"},
        )
    )
    parts = [
        hms.Partition(
            values=[region, str(hour)],
            dbName="ha",
            tableName="ext",
            sd=hms.StorageDescriptor(cols=[], parameters={"k": region}),
            parameters={"h": str(hour)},
        )
        for region in ("eu", "us")
        for hour in range(6)
    ]
    a.raw.add_partitions(parts)
    a.caught_up()
    store = Metastore(MetastoreConfig(db_url=servers.db_url, warehouse="/unused", cmroot="/unused"))
    try:

        def expected(parts: list[Any]) -> list[tuple[Any, ...]]:
            return [(p.values, p.sd.location, p.sd.parameters, p.parameters, p.write_id) for p in parts]

        def got(parts: list[Any]) -> list[tuple[Any, ...]]:
            return [(p.values, p.sd.location, p.sd.parameters, p.parameters, p.writeId) for p in parts]

        hits = a.metrics()["hits"]
        catalog = store.catalog
        for _ in range(2):  # the second round is served from the kept encodings
            assert got(a.raw.get_partitions("ha", "ext", -1)) == expected(catalog.get_partitions("ha", "ext"))
            assert got(a.raw.get_partitions("ha", "ext", 3)) == expected(
                catalog.get_partitions("ha", "ext", 3)
            )
            assert got(a.raw.get_partitions_by_filter("ha", "ext", "hour > 3", -1)) == expected(
                catalog.get_partitions_by_filter("ha", "ext", "hour > 3")
            )
            names = ["region=us/hour=1", "region=eu/hour=5"]
            assert got(a.raw.get_partitions_by_names("ha", "ext", names)) == expected(
                catalog.get_partitions_by_names("ha", "ext", names)
            )
            assert got(a.raw.get_partitions_ps("ha", "ext", ["eu"], -1)) == expected(
                catalog.get_partitions_ps("ha", "ext", ["eu"])
            )
            assert got([a.raw.get_partition("ha", "ext", ["us", "2"])]) == expected(
                [catalog.get_partition("ha", "ext", ["us", "2"])]
            )
            assert a.raw.get_partitions("ha", "ext", 0) == []
        assert a.metrics()["hits"] == hits + 14
    finally:
        store.close()
