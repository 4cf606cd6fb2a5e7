"""Unplanned failover for real: the source metastore server is killed (SIGKILL) while a Thrift client writes.

The replica is promoted with ``repl promote --force``, both sides change, the old source's database comes back
and ``repl failback`` makes it a replica of the promoted one, copying only the changed tables' data.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner
from hmsclient.genthrift.hive_metastore import ttypes as h2

from hmsrepl.cli import main
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import ReplicaProtectedError
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.failover import FailoverError, failback
from hmsrepl.replication.metrics import MetricsLog
from hmsrepl.replication.verify import verify
from hmsrepl.storage.base import join_uri
from tests.helpers import make_table, open_store, side_args, write_file
from tests.integration.test_thrift_server import _sd
from tests.servers import Hive2Client, metastore_server


def _thrift_table(client: Hive2Client, store: Metastore, name: str, data: bytes) -> None:
    """A table created by a Thrift client, with a data file already in its directory."""
    write_file(join_uri(store.catalog.get_database("sales").location_uri, name), "part-0", data)
    client.create_table(
        h2.Table(
            tableName=name,
            dbName="sales",
            owner="hive",
            sd=_sd(),
            partitionKeys=[],
            parameters={},
            tableType="MANAGED_TABLE",
        )
    )


def _kill_server_on(port: int) -> None:
    """SIGKILL the metastore server process this test started (the child listening on ``port``)."""
    for child in psutil.Process().children(recursive=True):
        try:
            if any(c.laddr and c.laddr.port == port for c in child.net_connections(kind="tcp")):
                child.send_signal(signal.SIGKILL)
                child.wait(timeout=20)
                return
        except psutil.NoSuchProcess:
            continue
    raise AssertionError(f"no child process listens on port {port}")


def test_source_killed_promote_then_failback_after_both_sides_changed(tmp_path: Path) -> None:
    target = open_store(tmp_path, "dr")
    server_root = tmp_path / "site_a"
    server_root.mkdir()
    runner = CliRunner()
    with metastore_server(server_root, f"sqlite:///{server_root}/metastore.db") as server:
        source = Metastore.open(server.config)
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
        source.catalog.create_database(Database(name="sales"))
        client = Hive2Client(server.port)
        client.set_ugi("hive", [])
        for i in range(6):
            _thrift_table(client, source, f"t{i}", f"table {i}".encode() * 50)
        dump = engine.execute("REPL DUMP sales")
        engine.execute(f"REPL LOAD sales_dr FROM '{dump.dump_dir}'")
        _thrift_table(client, source, "lost", b"acknowledged, never replicated")  # RPO > 0 in this case
        _kill_server_on(server.port)
        with pytest.raises(Exception):  # noqa: B017 - the site is gone
            client.get_table("sales", "t0")
        client.close()

    promoted = runner.invoke(
        main,
        ["repl", "promote", "sales_dr", "--force", "--reason", "site A down", *side_args("target", target)],
    )
    assert promoted.exit_code == 0, promoted.output
    assert json.loads(promoted.output)["target_db"] == "sales_dr"
    # the promoted side takes writes: one table rewritten, one created
    t = target.catalog
    fresh = write_file(t.get_table("sales_dr", "t4").sd.location, "part-new", b"rewritten at site B" * 20)
    t.insert("sales_dr", "t4", new_files=[fresh], replace=True)
    location = join_uri(t.get_database("sales_dr").location_uri, "created_at_b")
    write_file(location, "part-0", b"new at site B" * 7)
    t.create_table(make_table("sales_dr", "created_at_b"))

    # site A comes back (its database, opened again): it also changed a table before it died
    old = Metastore.open(server.config)
    try:
        args = [
            *side_args("source", target),
            *side_args("target", old),
            "--dump-root",
            str(tmp_path / "back"),
        ]
        refused = runner.invoke(main, ["repl", "failback", "sales_dr", "sales", *args])
        assert refused.exit_code == 1 and "changed after the hand-over" in refused.output
        assert "'lost'" in refused.output and "--discard-divergent" in refused.output
        with pytest.raises(ReplicaProtectedError):
            old.catalog.drop_table("sales", "t0")  # protected from the first failback attempt on
        done = runner.invoke(main, ["repl", "failback", "sales_dr", "sales", "--discard-divergent", *args])
        assert done.exit_code == 0, done.output
        result = json.loads(done.output)
        assert result["changed_on_old"] == ["lost"] and result["tables_dropped"] == ["lost"]
        assert sorted(result["tables_rebootstrapped"]) == ["created_at_b", "t4"]
        expected = len(b"rewritten at site B" * 20) + len(b"new at site B" * 7)
        assert result["bytes_copied"] == expected  # the 5 unchanged tables: nothing copied
        [row] = MetricsLog(old.engine).list(operation="load", limit=1)
        assert row.bytes == expected
        assert verify(target, "sales_dr", old, "sales") == []
        with pytest.raises(FailoverError, match="already a replica"):
            failback(ReplicationEngine(str(tmp_path / "back"), target, old), "sales_dr", "sales")
    finally:
        old.close()
        source.close()
        target.close()
