"""A replica refuses client writes (in process and over Thrift) while replication loads still apply.

The replica's state is captured before and after the refused writes (metadata and file checksums, as
``repl verify`` sees it): refused writes must change nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hmsclient.genthrift.hive_metastore import ttypes as h2

from hmsrepl.cli import main
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Function
from hmsrepl.metastore.protection import PROTECTION_LIFTED, ReplicaProtectedError
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.verify import capture_state, verify
from tests.backends import temporary_database
from tests.helpers import make_partition, make_table, open_replica, open_sqlite_source, side_args, write_file
from tests.integration.test_thrift_server import _sd
from tests.servers import Hive2Client, metastore_server


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def replica_backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def pair(replica_backend: str, tmp_path: Path) -> Iterator[tuple[ReplicationEngine, str]]:
    source = open_sqlite_source(tmp_path)
    with temporary_database(replica_backend, str(tmp_path)) as url:
        target = open_replica(url, tmp_path)
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
        c = source.catalog
        c.create_database(Database(name="sales"))
        plain = c.create_table(make_table("sales", "orders"))
        write_file(plain.sd.location, "f1", b"one")
        c.insert("sales", "orders")
        part = c.create_table(make_table("sales", "events", partition_keys=("day",)))
        c.add_partitions("sales", "events", [make_partition(part, "2024-01-01")])
        c.create_table(
            make_table("sales", "acid_t", transactional="true", transactional_properties="insert_only")
        )
        dump = engine.execute("REPL DUMP sales")
        engine.execute(f"REPL LOAD sales_dr FROM '{dump.dump_dir}'")
        try:
            yield engine, url
        finally:
            target.close()
            source.close()


def _client_writes(store: Metastore) -> list[tuple[str, object]]:
    c = store.catalog
    orders = c.get_table("sales_dr", "orders")
    events = c.get_table("sales_dr", "events")
    db = c.get_database("sales_dr")
    return [
        ("create_table", lambda: c.create_table(make_table("sales_dr", "new_t"))),
        (
            "alter_table",
            lambda: c.alter_table("sales_dr", "orders", orders.model_copy(update={"owner": "x"})),
        ),
        ("drop_table", lambda: c.drop_table("sales_dr", "orders")),
        ("insert", lambda: c.insert("sales_dr", "orders")),
        ("truncate", lambda: c.truncate_table("sales_dr", "orders")),
        (
            "add_partitions",
            lambda: c.add_partitions("sales_dr", "events", [make_partition(events, "2024-02-02")]),
        ),
        ("drop_partitions", lambda: c.drop_partitions("sales_dr", "events", [["2024-01-01"]])),
        ("alter_database", lambda: c.alter_database("sales_dr", db.model_copy(update={"description": "x"}))),
        (
            "alter_database_unprotecting",
            lambda: c.alter_database("sales_dr", db.model_copy(update={"parameters": {}})),
        ),
        ("drop_database", lambda: c.drop_database("sales_dr", cascade=True)),
        (
            "create_function",
            lambda: c.create_function(Function(db_name="sales_dr", function_name="f", class_name="a.B")),
        ),
        ("allocate_write_ids", lambda: _acid_write(store)),
    ]


def _acid_write(store: Metastore) -> None:
    [txn] = store.txns.open_txns(1, user="u", host="h")
    try:
        store.txns.allocate_table_write_ids([txn], "sales_dr", "acid_t")
    finally:
        store.txns.abort_txns([txn])


def test_replica_refuses_every_client_write_and_loads_still_apply(
    pair: tuple[ReplicationEngine, str],
) -> None:
    engine, _ = pair
    source, target = engine.source, engine.target
    assert source is not None and target is not None
    before = capture_state(target, "sales_dr")
    refused = []
    for name, write in _client_writes(target):
        with pytest.raises(ReplicaProtectedError) as info:
            write()  # type: ignore[operator]
        refused.append(name)
        message = str(info.value)
        assert "sales_dr" in message and "replica of 'sales'" in message and "failover" in message, message
        assert "\n" not in message
    assert len(refused) == 12
    assert capture_state(target, "sales_dr") == before  # nothing changed
    assert target.catalog.get_table("sales_dr", "orders").table_name == "orders"  # reads untouched

    # the replication load itself still applies
    last = int(target.catalog.get_database("sales_dr").parameters["repl.last.id"])
    c = source.catalog
    write_file(c.get_table("sales", "orders").sd.location, "f2", b"two")
    c.insert("sales", "orders")
    c.create_table(make_table("sales", "later"))
    dump = engine.execute(f"REPL DUMP sales FROM {last}")
    engine.execute(f"REPL LOAD sales_dr FROM '{dump.dump_dir}'")
    assert verify(source, "sales", target, "sales_dr") == []


def test_unprotect_is_explicit_and_recorded(pair: tuple[ReplicationEngine, str]) -> None:
    engine, _ = pair
    target = engine.target
    assert target is not None
    runner = CliRunner()
    missing = runner.invoke(main, ["repl", "unprotect", "sales_dr", *side_args("target", target)])
    assert missing.exit_code != 0 and "--reason" in missing.output
    done = runner.invoke(
        main, ["repl", "unprotect", "sales_dr", "--reason", "DR test", *side_args("target", target)]
    )
    assert done.exit_code == 0, done.output
    params = target.catalog.get_database("sales_dr").parameters
    assert '"reason": "DR test"' in params[PROTECTION_LIFTED] and '"user"' in params[PROTECTION_LIFTED]
    target.catalog.create_table(make_table("sales_dr", "now_writable"))


def test_thrift_clients_get_the_refusal(pair: tuple[ReplicationEngine, str], tmp_path: Path) -> None:
    engine, url = pair
    target = engine.target
    assert target is not None
    before = capture_state(target, "sales_dr")
    server_root = tmp_path / "server"
    server_root.mkdir()
    with metastore_server(server_root, url) as server:
        client = Hive2Client(server.port)
        try:
            client.set_ugi("hive", [])
            table = h2.Table(
                tableName="t_new",
                dbName="sales_dr",
                owner="hive",
                sd=_sd(),
                partitionKeys=[],
                parameters={},
                tableType="MANAGED_TABLE",
            )
            with pytest.raises(Exception) as info:
                client.create_table(table)
            assert "protected replica of 'sales'" in str(info.value)
            with pytest.raises(Exception) as info:
                client.drop_table("sales_dr", "orders", True)
            assert "protected replica of 'sales'" in str(info.value)
            existing = client.get_table("sales_dr", "orders")  # reads work
            existing.parameters["k"] = "v"
            with pytest.raises(Exception) as info:
                client.alter_table("sales_dr", "orders", existing)
            assert "protected replica of 'sales'" in str(info.value)
            with pytest.raises(Exception) as info:
                client.drop_database("sales_dr", True, True)
            assert "protected replica" in str(info.value)
        finally:
            client.close()
    assert capture_state(target, "sales_dr") == before


def test_the_commit_check_alone_refuses_every_write(
    pair: tuple[ReplicationEngine, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the entry checks, the check at commit still refuses everything (and changes nothing)."""
    from hmsrepl.metastore.catalog.core import CatalogCore

    monkeypatch.setattr(CatalogCore, "refuse_protected", lambda self, db: None)
    engine, _ = pair
    target = engine.target
    assert target is not None
    before = capture_state(target, "sales_dr")
    for name, write in _client_writes(target):
        with pytest.raises(ReplicaProtectedError, match="protected replica of 'sales'"):
            write()  # type: ignore[operator]
        assert capture_state(target, "sales_dr") == before, name
