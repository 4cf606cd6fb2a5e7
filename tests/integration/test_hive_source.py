"""A stock Hive Metastore 2.3.10 (pyspark's jars, on Derby) as a replication source.

The metastore keeps its notification log through a small listener compiled here against pyspark's jars
(``hive_listener/DbNotificationListener.java``: Hive's own ``JSONMessageFactory`` messages, stored with
``RawStore.addNotificationEvent``, as hcatalog's ``DbNotificationListener`` does). A client writes through
Hive's Thrift API (databases, plain and partitioned tables with files, a function, INSERT events as Hive's
clients fire them); REPL DUMP reads Hive's log and REPL LOAD applies it to an hmsrepl replica, which then
equals the source in metadata and file checksums (``repl verify``'s comparison), after the bootstrap and
after incremental rounds in LIMIT batches (add partition, append, alter, drop partition, rename, drop and
re-create).

Constraints (Hive 3.1.3 and 4.2.0) replicate with their tables: read with each table in a bootstrap, and
Hive's constraint events replayed as the table's ALTER_TABLE.

Hive 2.3's change manager stays off: on a file system without checksums (the local one here) its
``ReplChangeManager`` fails every drop (a null checksum in ``getCMPath``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.hive_reference import (
    LISTENER_CLASS,
    LISTENER_SETTING,
    HiveReferenceMetastore,
    compile_notification_listener,
)
from hmsrepl.config import MetastoreConfig
from hmsrepl.hive_source.source import StockHiveSource
from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.verify import verify
from hmsrepl.thrift.idl import Service, hms
from tests.helpers import open_store
from tests.peers import hive_metastore
from tests.servers import REPO, free_port

HMSREPL = str(Path(sys.executable).parent / "hmsrepl")
TEXT_IN = "org.apache.hadoop.mapred.TextInputFormat"
TEXT_OUT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
LAZY_SERDE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"


@pytest.fixture(scope="module")
def hive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HiveReferenceMetastore]:
    root = tmp_path_factory.mktemp("stock-hms-source")
    classes = compile_notification_listener(root / "listener")
    properties = {
        LISTENER_SETTING: LISTENER_CLASS,
        "hive.repl.cmrootdir": str(root / "cmroot"),
    }
    quick = hive_metastore.JVM_OPTIONS
    with HiveReferenceMetastore(
        root, properties=properties, classpath=(str(classes),), jvm_options=quick
    ) as metastore:
        metastore.wait_ready()
        yield metastore


@pytest.fixture(scope="session")
def hive31(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HiveReferenceMetastore]:
    """Hive Metastore 3.1.3 with hcatalog's DbNotificationListener (json-0.2 messages), once per run."""
    with hive_metastore.running(hive_metastore.HIVE_31, tmp_path_factory.mktemp("hive-3.1.3")) as metastore:
        yield metastore


@pytest.fixture(scope="session")
def hive4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HiveReferenceMetastore]:
    """Hive Metastore 4.2.0 with hcatalog's DbNotificationListener (gzip(json-2.0) messages), once per run."""
    with hive_metastore.running(hive_metastore.HIVE_4, tmp_path_factory.mktemp("hive-4.2.0")) as metastore:
        yield metastore


#: Each stock release, the fixture that runs it, and the message format of its notification log.
STOCK_RELEASES = {
    "2.3.10": ("hive", "json-0.2"),
    "3.1.3": ("hive31", hive_metastore.HIVE_31.message_format),
    "4.2.0": ("hive4", hive_metastore.HIVE_4.message_format),
}


@dataclass(frozen=True)
class Stock:
    """A running stock metastore of one release, and the message format its log is expected in."""

    version: str
    hive: HiveReferenceMetastore
    message_format: str


@pytest.fixture(params=list(STOCK_RELEASES))
def stock(request: pytest.FixtureRequest) -> Stock:
    """Each stock release in turn (one metastore per release and run)."""
    fixture, message_format = STOCK_RELEASES[request.param]
    return Stock(request.param, request.getfixturevalue(fixture), message_format)


def stock_roots(hive: HiveReferenceMetastore) -> dict[str, str]:
    """The roots an operator configures for this metastore (its warehouse and cmroot directories)."""
    return {"warehouse": str(hive.root / "warehouse"), "cmroot": str(hive.root / "cmroot")}


def stock_root_args(hive: HiveReferenceMetastore) -> list[str]:
    roots = stock_roots(hive)
    return ["--source-warehouse", roots["warehouse"], "--source-cmroot", roots["cmroot"]]


class Writer:
    """A Hive client writing through the stock metastore's Thrift API, files first, as Hive does.

    ``version`` is the metastore's release: from Hive 3 on, ``InsertEventRequestData`` starts with a
    ``replace`` flag where Hive 2.3 has the file list, so INSERT events go through Hive 4's bindings."""

    def __init__(self, hive: HiveReferenceMetastore, db: str, version: str = "2.3.10") -> None:
        from thriftpy2.rpc import make_client

        self.client: Any = make_client(Service, "127.0.0.1", hive.port, timeout=120_000)
        self.port = hive.port
        self.modern = not version.startswith("2.")
        self.db = db
        self.db_dir = hive.root / "warehouse" / f"{db}.db"

    def sd(self, location: Path) -> Any:
        return hms.StorageDescriptor(
            cols=[hms.FieldSchema(name="v", type="string", comment=None)],
            location=str(location),
            inputFormat=TEXT_IN,
            outputFormat=TEXT_OUT,
            compressed=False,
            numBuckets=-1,
            serdeInfo=hms.SerDeInfo(name=None, serializationLib=LAZY_SERDE, parameters={}),
            bucketCols=[],
            sortCols=[],
            parameters={},
        )

    def create_database(self) -> None:
        self.client.create_database(
            hms.Database(name=self.db, description="sales", locationUri=str(self.db_dir), parameters={})
        )

    def create_table(self, name: str, partitioned: bool, files: dict[str, str] | None = None) -> Path:
        location = self.db_dir / name
        location.mkdir(parents=True, exist_ok=True)
        for file_name, text in (files or {}).items():
            (location / file_name).write_text(text)
        keys = [hms.FieldSchema(name="dt", type="string", comment=None)] if partitioned else []
        self.client.create_table(
            hms.Table(
                tableName=name,
                dbName=self.db,
                owner="etl",
                sd=self.sd(location),
                partitionKeys=keys,
                parameters={"owner_team": "sales"},
                tableType="MANAGED_TABLE",
            )
        )
        return location

    def add_partition(self, table: str, dt: str, files: dict[str, str]) -> None:
        location = self.db_dir / table / f"dt={dt}"
        location.mkdir(parents=True, exist_ok=True)
        for file_name, text in files.items():
            (location / file_name).write_text(text)
        self.client.add_partition(
            hms.Partition(values=[dt], dbName=self.db, tableName=table, sd=self.sd(location), parameters={})
        )

    def append(self, table: str, dt: str | None, file_name: str, text: str) -> None:
        """Write a file and fire the INSERT event a Hive client fires (hive.metastore.dml.events)."""
        location = self.db_dir / table / (f"dt={dt}" if dt else "")
        (location / file_name).write_text(text)
        if self.modern:
            self._fire_insert_hive3(table, dt, [str(location / file_name)])
            return
        data = hms.InsertEventRequestData(filesAdded=[str(location / file_name)])
        self.client.fire_listener_event(
            hms.FireEventRequest(
                successful=True,
                data=hms.FireEventRequestData(insertData=data),
                dbName=self.db,
                tableName=table,
                partitionVals=[dt] if dt else None,
            )
        )

    def _fire_insert_hive3(self, table: str, dt: str | None, files: list[str]) -> None:
        from hive_metastore import ThriftHiveMetastore as Hive4
        from hive_metastore import ttypes as h4
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport

        transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", self.port))
        transport.open()
        try:
            Hive4.Client(TBinaryProtocol.TBinaryProtocol(transport)).fire_listener_event(
                h4.FireEventRequest(
                    successful=True,
                    # hcatalog's listener reads one checksum per file; the local file system has none.
                    data=h4.FireEventRequestData(
                        insertData=h4.InsertEventRequestData(
                            replace=False, filesAdded=files, filesAddedChecksum=[""] * len(files)
                        )
                    ),
                    dbName=self.db,
                    tableName=table,
                    partitionVals=[dt] if dt else None,
                )
            )
        finally:
            transport.close()

    def alter_table(self, name: str, **changes: Any) -> None:
        table = self.client.get_table_req(hms.GetTableRequest(dbName=self.db, tblName=name)).table
        for key, value in changes.items():
            setattr(table, key, value)
        self.client.alter_table(self.db, name, table)

    def alter_partition(self, table: str, dt: str, **parameters: str) -> None:
        partition = self.client.get_partition(self.db, table, [dt])
        partition.parameters = {**(partition.parameters or {}), **parameters}
        self.client.alter_partition(self.db, table, partition)

    def alter_partitions(self, table: str, days: list[str], **parameters: str) -> None:
        """One ``alter_partitions`` call (Spark's stats updates): Hive 4 logs it as one event by default."""
        names = [f"dt={day}" for day in days]
        partitions = self.client.get_partitions_by_names(self.db, table, names)
        for partition in partitions:
            partition.parameters = {**(partition.parameters or {}), **parameters}
        self.client.alter_partitions(self.db, table, partitions)

    def message_formats(self) -> set[str]:
        """The message formats of this database's events in the metastore's own notification log."""
        response = self.client.get_next_notification(
            hms.NotificationEventRequest(lastEvent=0, maxEvents=10_000)
        )
        return {e.messageFormat for e in response.events if (e.dbName or "").lower() == self.db}

    def close(self) -> None:
        self.client.close()


def _replicate(engine: ReplicationEngine, command: str, target_db: str) -> int:
    dumped = engine.execute(command)
    loaded = engine.execute(f"REPL LOAD {target_db} FROM '{dumped.dump_dir}'")  # type: ignore[union-attr]
    return loaded.last_event_id  # type: ignore[union-attr]


def test_bootstrap_then_incremental_rounds_from_a_stock_metastore(stock: Stock, tmp_path: Path) -> None:
    hive = stock.hive
    writer = Writer(hive, "sales", stock.version)
    writer.create_database()
    writer.create_table("customers", partitioned=False, files={"part-0.txt": "ann\nbob\n"})
    writer.create_table("orders", partitioned=True)
    for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
        writer.add_partition("orders", day, {"part-0.txt": f"{day} 1\n", "part-1.txt": f"{day} 2\n"})
    writer.client.create_function(
        hms.Function(
            functionName="shout",
            dbName="sales",
            className="org.apache.hadoop.hive.ql.udf.generic.GenericUDFUpper",
            ownerName="etl",
            ownerType=1,
            createTime=0,
            functionType=1,
            resourceUris=[],
        )
    )
    source = StockHiveSource(hive.uri, **stock_roots(hive))
    target: Metastore = open_store(tmp_path, "replica")
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    try:
        last = _replicate(engine, "REPL DUMP sales", "sales_dr")
        assert verify(source, "sales", target, "sales_dr") == []
        assert len(target.catalog.get_partition_names("sales_dr", "orders")) == 3
        assert target.catalog.get_function("sales_dr", "shout").class_name.endswith("GenericUDFUpper")

        # Incremental round: every kind of change Hive logs, replayed in batches of three events.
        writer.add_partition("orders", "2024-01-04", {"part-0.txt": "2024-01-04 1\n"})
        writer.append("orders", "2024-01-01", "part-2.txt", "2024-01-01 3\n")
        writer.append("customers", None, "part-1.txt", "cid\n")
        writer.client.drop_partition("sales", "orders", ["2024-01-02"], True)
        writer.alter_table("customers", parameters={"owner_team": "crm"})
        writer.create_table("scratch", partitioned=False, files={"a.txt": "x\n"})
        writer.client.drop_table("sales", "scratch", True)
        writer.create_table("scratch", partitioned=False, files={"b.txt": "y\n"})
        writer.alter_table("scratch", tableName="scratch_v2")
        writer.alter_partition("orders", "2024-01-03", quality="checked")
        writer.alter_partitions("orders", ["2024-01-01", "2024-01-04"], reviewed="yes")
        current = source.get_current_notification_event_id()
        assert current > last
        assert writer.message_formats() == {stock.message_format}
        rounds = 0
        while last < current:
            last = _replicate(engine, f"REPL DUMP sales FROM {last} LIMIT 3", "sales_dr")
            rounds += 1
        assert rounds >= 3
        assert verify(source, "sales", target, "sales_dr") == []
        names = target.catalog.get_partition_names("sales_dr", "orders")
        assert names == ["dt=2024-01-01", "dt=2024-01-03", "dt=2024-01-04"]
        assert sorted(target.catalog.get_tables("sales_dr")) == ["customers", "orders", "scratch_v2"]
        assert target.catalog.get_table("sales_dr", "customers").parameters["owner_team"] == "crm"
        assert (
            target.catalog.get_partition("sales_dr", "orders", ["2024-01-03"]).parameters["quality"]
            == "checked"
        )
    finally:
        writer.close()
        source.close()
        target.close()


def test_dump_from_an_unreachable_stock_metastore_is_one_line(tmp_path: Path) -> None:
    uri = f"thrift://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [
            HMSREPL,
            "repl",
            "run",
            "REPL DUMP sales",
            "--source-db-url",
            uri,
            *("--source-warehouse", str(tmp_path / "wh"), "--source-cmroot", str(tmp_path / "cm")),
            "--target-db-url",
            f"sqlite:///{tmp_path}/replica.db",
            "--dump-root",
            str(tmp_path / "dumps"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and uri in lines[0] and "cannot reach" in lines[0], done.stderr
    assert not (tmp_path / "dumps").exists() or not any((tmp_path / "dumps").iterdir())


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HMSREPL, *args], capture_output=True, text=True, timeout=300, check=False)


def test_cli_replicates_and_verifies_with_a_thrift_source_url(
    hive: HiveReferenceMetastore, tmp_path: Path
) -> None:
    writer = Writer(hive, "crm")
    writer.create_database()
    writer.create_table("accounts", partitioned=False, files={"part-0.txt": "a\n"})
    open_store(tmp_path, "replica").close()
    sides = [
        "--source-db-url",
        hive.uri,
        *stock_root_args(hive),
        "--target-db-url",
        f"sqlite:///{tmp_path}/replica.db",
        "--target-warehouse",
        str(tmp_path / "replica_wh"),
        "--target-cmroot",
        str(tmp_path / "replica_cm"),
    ]
    dumps = ["--dump-root", str(tmp_path / "dumps")]
    try:
        last = "0"
        for command in ("REPL DUMP crm", "REPL DUMP crm FROM {last}"):
            dumped = _cli("repl", "run", command.format(last=last), *sides, *dumps)
            assert dumped.returncode == 0, dumped.stderr[-2000:]
            dump_dir, last = dumped.stdout.strip().split("\t")
            loaded = _cli("repl", "run", f"REPL LOAD crm_dr FROM '{dump_dir}'", *sides, *dumps)
            assert loaded.returncode == 0, loaded.stderr[-2000:]
            writer.append("accounts", None, "part-1.txt", "b\n")
        writer.append("accounts", None, "part-2.txt", "c\n")  # after the last dump: verify must see it
        stale = _cli("repl", "verify", "crm", "crm_dr", *sides)
        assert stale.returncode == 1 and "accounts" in stale.stdout, stale.stdout + stale.stderr
        dumped = _cli("repl", "run", f"REPL DUMP crm FROM {last}", *sides, *dumps)
        dump_dir = dumped.stdout.strip().split("\t")[0]
        assert _cli("repl", "run", f"REPL LOAD crm_dr FROM '{dump_dir}'", *sides, *dumps).returncode == 0
        verified = _cli("repl", "verify", "crm", "crm_dr", *sides)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "crm_dr equals crm" in verified.stdout
    finally:
        writer.close()


def test_a_stock_metastore_without_notification_log_is_refused_in_one_line(tmp_path: Path) -> None:
    """The same Hive without the listener: the dump names the setting to turn on and writes nothing."""
    with HiveReferenceMetastore(tmp_path / "silent", jvm_options=hive_metastore.JVM_OPTIONS) as silent:
        silent.wait_ready()
        open_store(tmp_path, "replica").close()
        done = _cli(
            "repl",
            "run",
            "REPL DUMP default",
            "--source-db-url",
            silent.uri,
            *stock_root_args(silent),
            "--target-db-url",
            f"sqlite:///{tmp_path}/replica.db",
            "--dump-root",
            str(tmp_path / "dumps"),
        )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "hive.metastore.transactional.event.listeners" in lines[0], done.stderr
    assert "keeps no notification log" in lines[0]
    assert not (tmp_path / "dumps").exists() or not any((tmp_path / "dumps").iterdir())


def test_the_dags_sync_application_takes_a_stock_source_from_its_settings(
    hive: HiveReferenceMetastore, tmp_path: Path
) -> None:
    """``spark_apps/repl_sync.py`` (what the DAGs run) with HMSREPL_SOURCE_DB_URL=thrift://: bootstrap, then
    LIMIT batches up to the source's current event, as for an hmsrepl source; only settings change."""
    import json
    import os

    writer = Writer(hive, "shop")
    writer.create_database()
    writer.create_table("items", partitioned=True)
    writer.add_partition("items", "2024-02-01", {"part-0.txt": "x\n"})
    open_store(tmp_path, "replica").close()
    env = {
        **os.environ,
        "HMSREPL_SOURCE_DB_URL": hive.uri,
        "HMSREPL_SOURCE_WAREHOUSE": stock_roots(hive)["warehouse"],
        "HMSREPL_SOURCE_CMROOT": stock_roots(hive)["cmroot"],
        "HMSREPL_TARGET_DB_URL": f"sqlite:///{tmp_path}/replica.db",
        "HMSREPL_TARGET_WAREHOUSE": str(tmp_path / "replica_wh"),
        "HMSREPL_TARGET_CMROOT": str(tmp_path / "replica_cm"),
        "HMSREPL_DUMP_ROOT": str(tmp_path / "dumps"),
    }
    app = [sys.executable, str(REPO / "spark_apps" / "repl_sync.py")]
    replications = json.dumps([{"policy": "shop", "target_db": "shop_dr"}])

    def sync(*extra: str) -> dict[str, Any]:
        done = subprocess.run(
            [*app, "--replications", replications, "--limit", "2", *extra],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    try:
        sync("--bootstrap")
        for day in ("2024-02-02", "2024-02-03"):
            writer.add_partition("items", day, {"part-0.txt": f"{day}\n"})
        writer.append("items", "2024-02-01", "part-1.txt", "y\n")
        result = sync()
        source = StockHiveSource(hive.uri, **stock_roots(hive))
        target = Metastore.open(
            MetastoreConfig(
                db_url=env["HMSREPL_TARGET_DB_URL"],
                warehouse=env["HMSREPL_TARGET_WAREHOUSE"],
                cmroot=env["HMSREPL_TARGET_CMROOT"],
            )
        )
        try:
            assert result["replications"][0]["repl_last_id"] == source.get_current_notification_event_id()
            assert verify(source, "shop", target, "shop_dr") == []
        finally:
            source.close()
            target.close()
    finally:
        writer.close()


@pytest.mark.spark
def test_a_spark_workload_on_the_stock_metastore_replicates_in_limit_batches(
    hive: HiveReferenceMetastore, tmp_path: Path
) -> None:
    """Spark writes through Hive 2.3.10 (Hive's writer path, ``hive.metastore.dml.events``): a first state,
    bootstrapped; then append, overwrite, add/drop partition, rename, drop and re-create, replayed in
    batches of five events. The replica equals the source after each stage."""
    from tests.integration.test_hive_import import _spark

    warehouse = str(hive.root / "warehouse")
    _spark("mart-setup", hive.uri, warehouse)
    source = StockHiveSource(hive.uri, **stock_roots(hive))
    target = open_store(tmp_path, "replica")
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    try:
        last = _replicate(engine, "REPL DUMP mart", "mart_dr")
        assert verify(source, "mart", target, "mart_dr") == []
        _spark("mart-change", hive.uri, warehouse)
        current = source.get_current_notification_event_id()
        while last < current:
            last = _replicate(engine, f"REPL DUMP mart FROM {last} LIMIT 5", "mart_dr")
        assert verify(source, "mart", target, "mart_dr") == []
        assert sorted(target.catalog.get_tables("mart_dr")) == ["dim_v2", "sales", "scratch"]
        assert target.catalog.get_partition_names("mart_dr", "sales") == ["day=d2", "day=d3", "day=d4"]
    finally:
        source.close()
        target.close()


def _two_column_table(writer: Writer, name: str) -> hms.Table:
    location = writer.db_dir / name
    location.mkdir(parents=True, exist_ok=True)
    sd = writer.sd(location)
    sd.cols = [
        hms.FieldSchema(name="id", type="int", comment=None),
        hms.FieldSchema(name="v", type="string", comment=None),
    ]
    return hms.Table(
        tableName=name,
        dbName=writer.db,
        owner="etl",
        sd=sd,
        partitionKeys=[],
        parameters={},
        tableType="MANAGED_TABLE",
    )


@pytest.mark.parametrize("release", ["3.1.3", "4.2.0"])
def test_constraints_of_a_stock_metastore_replicate(
    release: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    hive = request.getfixturevalue(STOCK_RELEASES[release][0])
    db = f"keys{release.replace('.', '')}"
    writer = Writer(hive, db, release)
    writer.create_database()
    writer.client.create_table_with_constraints(
        _two_column_table(writer, "parent"),
        [hms.SQLPrimaryKey(db, "parent", "id", 1, "parent_pk", False, False, True)],
        [],
        [],
        [],
        [],
        [],
    )
    writer.client.create_table_with_constraints(
        _two_column_table(writer, "child"),
        [],
        [
            hms.SQLForeignKey(
                db, "parent", "id", db, "child", "id", 1, 0, 0, "child_fk", "parent_pk", False, False, True
            )
        ],
        [],
        [],
        [],
        [],
    )
    source = StockHiveSource(hive.uri, **stock_roots(hive))
    target: Metastore = open_store(tmp_path, "replica")
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    replica = f"{db}_dr"
    try:
        last = _replicate(engine, f"REPL DUMP {db}", replica)
        parent = target.catalog.get_table(replica, "parent").constraints
        child = target.catalog.get_table(replica, "child").constraints
        assert parent is not None and parent.primary_key is not None
        assert (parent.primary_key.name, parent.primary_key.columns, parent.primary_key.rely) == (
            "parent_pk",
            ["id"],
            True,
        )
        assert child is not None and [
            (k.name, k.parent_db, k.parent_table, k.parent_columns) for k in child.foreign_keys
        ] == [("child_fk", None, "parent", ["id"])]
        assert verify(source, db, target, replica) == []

        # Incremental: a unique constraint added, the foreign key dropped: two events of Hive's own types.
        writer.client.add_unique_constraint(
            hms.AddUniqueConstraintRequest(
                [hms.SQLUniqueConstraint("hive", db, "child", "v", 1, "child_uk", False, False, True)]
            )
        )
        writer.client.drop_constraint(
            hms.DropConstraintRequest(dbname=db, tablename="child", constraintname="child_fk")
        )
        _replicate(engine, f"REPL DUMP {db} FROM {last}", replica)
        child = target.catalog.get_table(replica, "child").constraints
        assert child is not None and child.foreign_keys == []
        assert [(u.name, u.columns) for u in child.unique] == [("child_uk", ["v"])]
        assert verify(source, db, target, replica) == []
    finally:
        writer.close()
        source.close()
        target.close()


class AcidWriter:
    """A Hive 3 client writing insert-only ACID tables through the stock metastore's txn calls, as Hive's own
    writers do: open a txn, allocate the table's write id, write ``delta_W_W_0000``, commit or abort.
    ``notify``: also record the write with ``add_write_notification_log`` (Hive 4; Hive 3.1.3 lacks the call),
    which Hive keeps out of its notification log (its write-notification table)."""

    def __init__(self, hive: HiveReferenceMetastore, db: str, *, notify: bool = False) -> None:
        from hive_metastore import ThriftHiveMetastore as Hive4
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport

        self.transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", hive.port))
        self.transport.open()
        self.client: Any = Hive4.Client(TBinaryProtocol.TBinaryProtocol(self.transport))
        self.db, self.notify = db, notify
        self.db_dir = hive.root / "warehouse" / f"{db}.db"

    def _sd(self, location: Path) -> Any:
        from hive_metastore import ttypes as h4

        location.mkdir(parents=True, exist_ok=True)
        return h4.StorageDescriptor(
            cols=[h4.FieldSchema(name="v", type="string")],
            location=str(location),
            inputFormat=TEXT_IN,
            outputFormat=TEXT_OUT,
            serdeInfo=h4.SerDeInfo(serializationLib=LAZY_SERDE, parameters={}),
            bucketCols=[],
            sortCols=[],
            parameters={},
            numBuckets=-1,
            compressed=False,
        )

    def create_table(self, name: str, *, partitioned: bool = False) -> None:
        from hive_metastore import ttypes as h4

        keys = [h4.FieldSchema(name="dt", type="string")] if partitioned else []
        params = {"transactional": "true", "transactional_properties": "insert_only"}
        table = h4.Table(
            tableName=name, dbName=self.db, owner="etl", sd=self._sd(self.db_dir / name), partitionKeys=keys
        )
        table.parameters = params
        self.client.create_table(table)

    def add_partition(self, table: str, dt: str) -> None:
        from hive_metastore import ttypes as h4

        sd = self._sd(self.db_dir / table / f"dt={dt}")
        self.client.add_partition(
            h4.Partition(values=[dt], dbName=self.db, tableName=table, sd=sd, parameters={})
        )

    def begin(self, table: str, rows: str, dt: str | None = None) -> tuple[int, int]:
        """A txn holding the table's next write id, its delta written: (txn, write id)."""
        from hive_metastore import ttypes as h4

        txn = self.client.open_txns(h4.OpenTxnRequest(num_txns=1, user="etl", hostname="client")).txn_ids[0]
        request = h4.AllocateTableWriteIdsRequest(dbName=self.db, tableName=table, txnIds=[txn])
        write_id = self.client.allocate_table_write_ids(request).txnToWriteIds[0].writeId
        delta = self.db_dir / table / (f"dt={dt}" if dt else "") / f"delta_{write_id:07d}_{write_id:07d}_0000"
        delta.mkdir()
        (delta / "000000_0").write_text(rows)
        if self.notify:
            files = h4.InsertEventRequestData(
                replace=False,
                filesAdded=[str(delta / "000000_0")],
                filesAddedChecksum=[""],
                subDirectoryList=[delta.name],
            )
            self.client.add_write_notification_log(
                h4.WriteNotificationLogRequest(
                    txnId=txn,
                    writeId=write_id,
                    db=self.db,
                    table=table,
                    fileInfo=files,
                    partitionVals=[dt] if dt else None,
                )
            )
        return txn, write_id

    def commit(self, txn: int) -> None:
        from hive_metastore import ttypes as h4

        self.client.commit_txn(h4.CommitTxnRequest(txnid=txn))

    def abort(self, txn: int) -> None:
        from hive_metastore import ttypes as h4

        self.client.abort_txn(h4.AbortTxnRequest(txnid=txn))

    def close(self) -> None:
        self.transport.close()


def _write_id_state(store: Any, name: str) -> tuple[int, frozenset[int], frozenset[int]]:
    ids = store.txns.get_valid_write_ids([name])[0].write_ids
    return ids.high_watermark, ids.open_write_ids, ids.aborted_write_ids


@pytest.mark.parametrize("version", ["3.1.3", "4.2.0"])
def test_acid_transactions_of_a_stock_metastore_replicate(
    version: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Hive's own txn events (OPEN_TXN, ALLOC_WRITE_ID_EVENT, COMMIT_TXN, ABORT_TXN) replay on the
    replica: a bootstrap with a txn open, then its commit, an abort and another commit incrementally; the
    replica's files and ValidWriteIdList equal the source's each time."""
    hive: HiveReferenceMetastore = request.getfixturevalue(STOCK_RELEASES[version][0])
    Writer(hive, "acidsales", version).create_database()
    acid = AcidWriter(hive, "acidsales", notify=not version.startswith("3."))
    acid.create_table("events")
    first, _ = acid.begin("events", "a\nb\n")
    acid.commit(first)
    pending, pending_id = acid.begin("events", "c\n")  # open across the bootstrap
    source = StockHiveSource(hive.uri, **stock_roots(hive))
    target: Metastore = open_store(tmp_path, "replica")
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    try:
        last = _replicate(engine, "REPL DUMP acidsales", "acidsales_dr")
        assert verify(source, "acidsales", target, "acidsales_dr") == []
        state = _write_id_state(source, "acidsales.events")
        assert state == (2, frozenset({pending_id}), frozenset())
        assert _write_id_state(target, "acidsales_dr.events") == state

        acid.commit(pending)
        aborted, aborted_id = acid.begin("events", "never\n")
        acid.abort(aborted)
        later, _ = acid.begin("events", "d\n")
        acid.commit(later)
        acid.create_table("daily", partitioned=True)  # a partitioned table: its commits name the partition
        acid.add_partition("daily", "2024-01-01")
        acid.add_partition("daily", "2024-01-02")
        daily, daily_id = acid.begin("daily", "e\n", "2024-01-02")
        acid.commit(daily)
        _replicate(engine, f"REPL DUMP acidsales FROM {last}", "acidsales_dr")
        assert verify(source, "acidsales", target, "acidsales_dr") == []
        state = _write_id_state(source, "acidsales.events")
        assert state == (4, frozenset(), frozenset({aborted_id}))
        assert _write_id_state(target, "acidsales_dr.events") == state
        replica_dir = Path(target.catalog.get_table("acidsales_dr", "events").sd.location or "")
        assert sorted(p.name for p in replica_dir.iterdir() if p.name.startswith("delta_")) == [
            "delta_0000001_0000001_0000",
            "delta_0000002_0000002_0000",
            "delta_0000004_0000004_0000",
        ]
        assert _write_id_state(target, "acidsales_dr.daily") == _write_id_state(source, "acidsales.daily")
        day = target.catalog.get_partition("acidsales_dr", "daily", ["2024-01-02"]).sd.location or ""
        assert (Path(day) / f"delta_{daily_id:07d}_{daily_id:07d}_0000" / "000000_0").read_text() == "e\n"
    finally:
        acid.close()
        source.close()
        target.close()
