"""Planned failover under a running writer, unplanned promotion, failback copying only changed tables, lag.

Real metastores (source and replica both on SQLite, PostgreSQL or MariaDB); the writer is a thread writing
through the catalog API, as a Thrift handler would. Every write the writer saw acknowledged must be on the new source;
every write after the freeze must be refused with the clear error.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from hmsrepl.cli import main
from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import HANDOVER_ID, HANDOVER_PEER, READ_ONLY, ReplicaProtectedError
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.failover import FailoverError, failback, planned_failover, promote, replica_lag
from hmsrepl.replication.leftovers import cleanup_database
from hmsrepl.replication.metrics import MetricsLog
from hmsrepl.replication.target import REPL_LAST_ID, REPLICA_OF
from hmsrepl.replication.verify import verify
from hmsrepl.storage.base import join_uri
from tests.backends import temporary_database
from tests.helpers import make_table, open_replica, side_args, write_file


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ReplicationEngine]:
    with (
        temporary_database(request.param, str(tmp_path)) as source_url,
        temporary_database(request.param, str(tmp_path)) as url,
    ):
        config = MetastoreConfig(
            db_url=source_url, warehouse=str(tmp_path / "src_wh"), cmroot=str(tmp_path / "src_cm")
        )
        source = Metastore.open(config)
        target = open_replica(url, tmp_path)
        yield ReplicationEngine(str(tmp_path / "dumps"), source, target)
        target.close()
        source.close()


def _table_with_data(store, db: str, name: str, data: bytes) -> None:
    location = join_uri(store.catalog.get_database(db).location_uri, name)
    write_file(location, "part-0", data)
    store.catalog.create_table(make_table(db, name))


def _bootstrap(engine: ReplicationEngine, tables: int = 5) -> None:
    source = engine.source
    source.catalog.create_database(Database(name="sales"))
    for i in range(tables):
        _table_with_data(source, "sales", f"t{i}", f"table {i} data".encode() * (i + 1))
    dump = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dump.dump_dir}'")


def _catch_up(engine: ReplicationEngine, source_db: str, target_db: str) -> None:
    last = engine.target.catalog.get_database(target_db).parameters[REPL_LAST_ID]
    dump = engine.execute(f"REPL DUMP {source_db} FROM {last}")
    engine.execute(f"REPL LOAD {target_db} FROM '{dump.dump_dir}'")


def test_planned_failover_under_a_running_writer(engine: ReplicationEngine) -> None:
    source, target = engine.source, engine.target
    _bootstrap(engine)
    acknowledged: list[str] = []
    refusals: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set() and len(refusals) < 3:
            name = f"w{i}"
            try:
                _table_with_data(source, "sales", name, f"written {i}".encode())
                acknowledged.append(name)
            except ReplicaProtectedError as exc:
                refusals.append(str(exc))
            i += 1
            time.sleep(0.005)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while len(acknowledged) < 5:
            time.sleep(0.01)
        _catch_up(engine, "sales", "sales_dr")  # the usual incremental cycle, while writes go on
        while len(acknowledged) < 10:
            time.sleep(0.01)
        result = planned_failover(engine, "sales", "sales_dr")
        deadline = time.monotonic() + 30
        while len(refusals) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join()
    assert len(refusals) >= 1
    assert all("is a protected replica of 'sales_dr'" in r or "read-only" in r for r in refusals), refusals
    # RPO 0: every acknowledged write is on the new source, nothing more
    new_tables = set(target.catalog.get_tables("sales_dr"))
    assert set(acknowledged) <= new_tables
    assert new_tables == set(source.catalog.get_tables("sales"))
    assert verify(source, "sales", target, "sales_dr") == []  # equal at the hand-over id
    assert result.handover_id >= max(
        e.event_id for e in source.events.next_events(0, db_name="sales") if e.event_type == "CREATE_TABLE"
    )
    # roles swapped, hand-over recorded on both sides
    new_params = target.catalog.get_database("sales_dr").parameters
    old_params = source.catalog.get_database("sales").parameters
    assert REPLICA_OF not in new_params and new_params[HANDOVER_ID] == str(result.target_handover_id)
    assert new_params[HANDOVER_PEER] == f"sales@{result.handover_id}"
    assert old_params[REPLICA_OF] == "sales_dr" and old_params[HANDOVER_ID] == str(result.handover_id)
    assert READ_ONLY not in old_params
    # writes succeed on the new source, the old one is a protected replica of it
    _table_with_data(target, "sales_dr", "after_failover", b"new primary")
    with pytest.raises(ReplicaProtectedError, match="protected replica of 'sales_dr'"):
        _table_with_data(source, "sales", "late", b"x")
    # reverse replication continues from the hand-over without a bootstrap
    reverse = ReplicationEngine(engine.dump_root, target, source)
    _catch_up(reverse, "sales_dr", "sales")
    # Writes refused after the freeze had written their files first (as Spark does): verify shows them as
    # leftovers of the (now replica) old source until 'hmsrepl repl cleanup' removes them.
    leftovers = verify(target, "sales_dr", source, "sales")
    assert leftovers and all(line.startswith("leftover on the replica: ") for line in leftovers)
    assert "leftover on the replica: late/" in leftovers
    cleanup_database(source, "sales")
    assert verify(target, "sales_dr", source, "sales") == []
    assert "after_failover" in source.catalog.get_tables("sales")


def test_failover_of_a_database_that_is_not_a_replica_changes_nothing(engine: ReplicationEngine) -> None:
    engine.source.catalog.create_database(Database(name="sales"))
    engine.target.catalog.create_database(Database(name="other"))
    with pytest.raises(FailoverError, match="not a bootstrapped replica of 'sales'"):
        planned_failover(engine, "sales", "other")
    assert READ_ONLY not in engine.source.catalog.get_database("sales").parameters


def test_unplanned_failover_then_failback_copies_only_changed_tables(engine: ReplicationEngine) -> None:
    source, target = engine.source, engine.target
    _bootstrap(engine, tables=8)
    c = source.catalog
    _table_with_data(source, "sales", "replicated_late", b"r")
    _catch_up(engine, "sales", "sales_dr")
    # the source takes writes that never reach the replica, then "dies"
    write_file(c.get_table("sales", "t1").sd.location, "lost-1", b"lost on the old source")
    c.insert("sales", "t1")
    _table_with_data(source, "sales", "only_on_old", b"old side only")
    runner = CliRunner()
    refused = runner.invoke(main, ["repl", "promote", "sales_dr", *side_args("target", target)])
    assert refused.exit_code != 0 and "--force" in refused.output
    promoted = runner.invoke(
        main,
        ["repl", "promote", "sales_dr", "--force", "--reason", "site down", *side_args("target", target)],
    )
    assert promoted.exit_code == 0, promoted.output
    handed = json.loads(promoted.output)
    assert handed["handover_id"] == int(
        target.catalog.get_database("sales_dr").parameters[HANDOVER_PEER].rpartition("@")[2]
    )
    # the new source changes: one table overwritten, one created, one dropped
    t = target.catalog
    location = t.get_table("sales_dr", "t2").sd.location
    fresh = write_file(location, "part-new", b"rewritten on the new source" * 10)
    t.insert("sales_dr", "t2", new_files=[fresh], replace=True)
    _table_with_data(target, "sales_dr", "new_on_dr", b"created after the failover" * 3)
    t.drop_table("sales_dr", "t3")

    back = ReplicationEngine(engine.dump_root, target, source)
    with pytest.raises(FailoverError, match="changed after the hand-over") as info:
        failback(back, "sales_dr", "sales")
    assert "only_on_old" in str(info.value) and "t1" in str(info.value)
    with pytest.raises(ReplicaProtectedError):  # protected from now on
        _table_with_data(source, "sales", "more", b"x")
    result = failback(back, "sales_dr", "sales", discard_divergent=True)
    assert set(result.changed_on_old) == {"t1", "only_on_old"}
    assert set(result.changed_on_new) >= {"t2", "new_on_dr", "t3"}
    assert set(result.tables_dropped) == {"t3", "only_on_old"}
    assert set(result.tables_rebootstrapped) == {"t1", "t2", "new_on_dr"}
    assert verify(target, "sales_dr", source, "sales") == []
    # bytes copied: the changed tables' data that differed, nothing of the 6 unchanged tables
    expected = len(b"rewritten on the new source" * 10) + len(b"created after the failover" * 3)
    assert result.bytes_copied == expected
    [row] = MetricsLog(source.engine).list(operation="load", limit=1)
    assert row.bytes == expected and row.status == "succeeded"
    # the old source is now an ordinary replica of the new one: incremental replication continues
    _table_with_data(target, "sales_dr", "after_failback", b"z")
    _catch_up(back, "sales_dr", "sales")
    assert verify(target, "sales_dr", source, "sales") == []


def test_lag_in_events_and_seconds(engine: ReplicationEngine) -> None:
    source, target = engine.source, engine.target
    _bootstrap(engine, tables=2)
    assert replica_lag(source, "sales", target, "sales_dr").events == 0
    _table_with_data(source, "sales", "x1", b"1")
    _table_with_data(source, "sales", "x2", b"2")
    lag = replica_lag(source, "sales", target, "sales_dr")
    assert lag.events == 2 and lag.seconds >= 0 and lag.source_event_id > lag.replica_event_id
    out = CliRunner().invoke(
        main, ["repl", "lag", "sales", "sales_dr", *side_args("source", source), *side_args("target", target)]
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["events"] == 2
    _catch_up(engine, "sales", "sales_dr")
    assert replica_lag(source, "sales", target, "sales_dr").events == 0


def test_failed_verification_keeps_the_source_frozen_until_unprotected(engine: ReplicationEngine) -> None:
    source, target = engine.source, engine.target
    _bootstrap(engine, tables=2)
    write_file(
        target.catalog.get_table("sales_dr", "t0").sd.location, "stray", b"written outside replication"
    )
    args = [*side_args("source", source), *side_args("target", target), "--dump-root", engine.dump_root]
    failed = CliRunner().invoke(main, ["repl", "failover", "sales", "sales_dr", *args])
    assert failed.exit_code == 1 and "Traceback" not in failed.output
    assert "differs from 'sales'" in failed.output and "'sales' stays read-only" in failed.output
    assert "stray" in failed.output  # the difference that stopped it
    assert target.catalog.get_database("sales_dr").parameters[REPLICA_OF] == "sales"  # not promoted
    with pytest.raises(
        ReplicaProtectedError, match="'sales' is read-only: it is being failed over to 'sales_dr'"
    ):
        _table_with_data(source, "sales", "blocked", b"x")
    out = CliRunner().invoke(
        main, ["repl", "unprotect", "sales", "--reason", "failover abandoned", *side_args("target", source)]
    )
    assert out.exit_code == 0, out.output
    _table_with_data(source, "sales", "writable_again", b"y")
    assert READ_ONLY not in source.catalog.get_database("sales").parameters


def test_failback_of_a_changed_acid_table(engine: ReplicationEngine) -> None:
    from hmsrepl.acid import InsertOnlyWriter

    source, target = engine.source, engine.target
    _bootstrap(engine, tables=2)
    acid = {"transactional": "true", "transactional_properties": "insert_only"}
    source.catalog.create_table(make_table("sales", "ledger", **acid))
    for rows in (b"1\n", b"2\n"):
        writer = InsertOnlyWriter(source, "sales", "ledger", None, heartbeat=False).begin()
        write_file(writer.target_uri, "part-0.txt", rows)
        writer.commit()
    _catch_up(engine, "sales", "sales_dr")
    promote(target, "sales_dr", force=True)
    writer = InsertOnlyWriter(target, "sales_dr", "ledger", None, heartbeat=False).begin()
    write_file(writer.target_uri, "part-0.txt", b"3 on the promoted side\n")
    writer.commit()
    result = failback(ReplicationEngine(engine.dump_root, target, source), "sales_dr", "sales")
    assert result.tables_rebootstrapped == ["ledger"]
    assert verify(target, "sales_dr", source, "sales") == []  # data as readers see it, and write-id state


def test_failback_to_a_lost_database_says_to_bootstrap(engine: ReplicationEngine) -> None:
    source, target = engine.source, engine.target
    _bootstrap(engine, tables=1)
    promote(target, "sales_dr", force=True)
    source.catalog.drop_database("sales", cascade=True)  # the old site was rebuilt empty
    with pytest.raises(FailoverError, match=r"'sales' does not exist on the old side.*REPL DUMP sales_dr"):
        failback(ReplicationEngine(engine.dump_root, target, source), "sales_dr", "sales")
