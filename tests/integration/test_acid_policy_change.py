"""Transactional tables entering a policy by a rename or by REPLACE, bootstrapped inside the incremental load.

The incremental dump writes the table's metadata, its write-id state as of the dump's txn snapshot (high
watermark, open write ids with their source txns, aborted ids) and its visible files; the load creates it
with the same write ids, so readers on the replica see the source's committed rows and the txns still open
at the dump commit onto it later, by ordinary replay.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from hmsrepl.acid import InsertOnlyWriter, delta_dir_name, visible_files
from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.model import Database
from hmsrepl.replication.commands import parse_policy
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.failures import KILL_AT_ENV
from hmsrepl.replication.layout import DumpDir
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from hmsrepl.storage.base import filesystem_for, join_uri, relative_to
from tests.backends import temporary_database
from tests.dump_events import read_events
from tests.helpers import make_partition, make_table, open_store, repl_run_cli, write_file

ACID = {"transactional": "true", "transactional_properties": "insert_only"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """SQLite and PostgreSQL: the txn snapshot and the write-id state are what differs between backends."""
    return str(request.param)


def _store(url: str, root: Path) -> Metastore:
    return Metastore.open(MetastoreConfig(db_url=url, warehouse=str(root / "wh"), cmroot=str(root / "cm")))


@pytest.fixture
def source(backend: str, tmp_path: Path) -> Iterator[Metastore]:
    with temporary_database(backend, str(tmp_path)) as url:
        store = _store(url, tmp_path / "src")
        yield store
        store.close()


@pytest.fixture
def target(backend: str, tmp_path: Path) -> Iterator[Metastore]:
    with temporary_database(backend, str(tmp_path)) as url:
        store = _store(url, tmp_path / "dst")
        yield store
        store.close()


@pytest.fixture
def engine(source: Metastore, target: Metastore, tmp_path: Path) -> ReplicationEngine:
    source.catalog.create_database(Database(name="sales"))
    return ReplicationEngine(str(tmp_path / "dumps"), source, target)


def write(
    store: Metastore, table: str, rows: bytes, values: Sequence[str] | None = None, *, abort=False
) -> int:
    writer = InsertOnlyWriter(store, "sales", table, values, heartbeat=False).begin()
    write_file(writer.target_uri, "part-0.txt", rows)
    writer.abort() if abort else writer.commit()
    return writer.write_id


class OpenTxn:
    """A txn that allocates its write id now and writes its file only when it commits (after a rename)."""

    def __init__(self, store: Metastore, table: str) -> None:
        self.store, self.table = store, table
        [self.txn_id] = store.txns.open_txns(1)
        [alloc] = store.txns.allocate_table_write_ids([self.txn_id], "sales", table)
        self.write_id = alloc.write_id

    def commit(self, table: str, rows: bytes) -> None:
        location = self.store.catalog.get_table("sales", table).sd.location
        directory = join_uri(location, delta_dir_name(self.write_id))
        write_file(directory, "part-0.txt", rows)
        files = describe_files(location, self.store.cm, list(filesystem_for(directory).list_files(directory)))
        self.store.txns.add_write_notification(self.txn_id, self.write_id, "sales", table, None, files)
        self.store.txns.commit_txn(self.txn_id)


def seen(store: Metastore, db: str, table: str, values: Sequence[str] | None = None) -> dict[str, object]:
    """What a reader sees of one ACID table or partition: visible files' contents and the write-id state."""
    files = visible_files(store, db, table, values)
    meta = store.catalog.get_table(db, table)
    location = (
        store.catalog.get_partition(db, table, list(values)).sd.location if values else meta.sd.location
    )
    contents = {relative_to(uri, location): filesystem_for(uri).open_read(uri).read() for uri in files}
    [ids] = store.txns.get_valid_write_ids([f"{db}.{table}"])
    return {"files": contents, "write_ids": ids.write_ids.to_string().split(":", 1)[1]}


def run(engine: ReplicationEngine, command: str) -> int:
    dumped = engine.execute(command)
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    return dumped.last_event_id


def catch_up(engine: ReplicationEngine, policy: str) -> None:
    source = engine.source
    while repl_status(engine.target, "sales_dr") < source.get_current_notification_event_id():  # type: ignore[operator]
        run(engine, f"REPL DUMP {policy} FROM {repl_status(engine.target, 'sales_dr')} LIMIT 3")


def test_a_transactional_table_renamed_into_the_policy_is_bootstrapped_with_its_write_ids(
    engine, source, target
) -> None:
    policy = "sales.['t[0-9]+']"
    source.catalog.create_table(make_table("sales", "t1", **ACID))
    source.catalog.create_table(make_table("sales", "staging", **ACID))  # outside the policy
    write(source, "t1", b"t1 rows")
    write(source, "staging", b"staging 1")
    write(source, "staging", b"staging aborted", abort=True)
    run(engine, f"REPL DUMP {policy}")
    assert target.catalog.get_tables("sales_dr") == ["t1"]

    held = OpenTxn(source, "staging")  # opened after the replica's bootstrap, still open at the next dump
    catalog = source.catalog
    catalog.alter_table(
        "sales", "staging", catalog.get_table("sales", "staging").model_copy(update={"table_name": "t2"})
    )
    write(source, "t2", b"t2 after the rename")  # allocated and committed while the replica lacks t2
    write(source, "t2", b"t2 aborted after the rename", abort=True)
    write(source, "t1", b"t1 more")

    dumped = engine.execute(f"REPL DUMP {policy} FROM {repl_status(target, 'sales_dr')}")
    meta = DumpDir(dumped.dump_dir).read_metadata()
    assert meta.bootstrapped_tables == ["t2"]
    assert dumped.last_event_id == source.get_current_notification_event_id()
    written = read_events(dumped.dump_dir)
    assert not [
        e for e in written if e["event_type"] in ("ALLOC_WRITE_ID", "ACID_WRITE") and e["table"] == "t2"
    ]
    commits = [e for e in written if e["event_type"] == "COMMIT_TXN"]
    assert all(w["table"] != "t2" for e in commits for w in e["message"].get("writes", []))
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert target.catalog.get_tables("sales_dr") == ["t1", "t2"]
    assert seen(target, "sales_dr", "t2") == seen(source, "sales", "t2")
    assert seen(target, "sales_dr", "t2")["write_ids"] == f"5:{held.write_id}:{held.write_id}:2,5"
    assert verify(source, "sales", target, "sales_dr", parse_policy(policy)) == []

    # The txn open at the dump commits onto the bootstrapped table by ordinary replay; later writes follow.
    held.commit("t2", b"the held txn's rows")
    write(source, "t2", b"t2 later")
    catch_up(engine, policy)
    assert seen(target, "sales_dr", "t2") == seen(source, "sales", "t2")
    assert b"the held txn's rows" in seen(target, "sales_dr", "t2")["files"].values()  # type: ignore[union-attr]
    assert verify(source, "sales", target, "sales_dr", parse_policy(policy)) == []
    assert target.txns.repl_txn_map("sales_dr") == {}


def test_replace_bootstraps_an_existing_transactional_table_with_open_and_aborted_write_ids(
    engine, source, target
) -> None:
    old, new = "sales.['orders']", "sales.['orders', 'events']"
    source.catalog.create_table(make_table("sales", "orders", **ACID))
    events = source.catalog.create_table(make_table("sales", "events", partition_keys=("day",), **ACID))
    source.catalog.add_partitions("sales", "events", [make_partition(events, "d1")])
    write(source, "orders", b"orders 1")
    write(source, "events", b"events d1 one", ["d1"])
    write(source, "events", b"events d1 aborted", ["d1"], abort=True)
    run(engine, f"REPL DUMP {old}")
    assert target.catalog.get_tables("sales_dr") == ["orders"]
    open_writer = InsertOnlyWriter(source, "sales", "events", ["d1"], heartbeat=False).begin()
    write_file(open_writer.target_uri, "part-0.txt", b"events d1 open at the dump")
    write(source, "events", b"events d1 two", ["d1"])
    write(source, "orders", b"orders 2")

    last = run(engine, f"REPL DUMP {new} REPLACE {old} FROM {repl_status(target, 'sales_dr')}")
    assert repl_status(target, "sales_dr") == last
    assert target.catalog.get_tables("sales_dr") == ["events", "orders"]
    assert seen(target, "sales_dr", "events", ["d1"]) == seen(source, "sales", "events", ["d1"])
    assert (
        seen(target, "sales_dr", "events", ["d1"])["write_ids"]
        == f"4:{open_writer.write_id}:{open_writer.write_id}:2"
    )
    assert seen(target, "sales_dr", "orders") == seen(source, "sales", "orders")
    assert verify(source, "sales", target, "sales_dr", parse_policy(new)) == []

    open_writer.commit()
    write(source, "events", b"events d1 after", ["d1"])
    write(source, "events", b"events d1 aborted later", ["d1"], abort=True)
    catch_up(engine, new)
    assert seen(target, "sales_dr", "events", ["d1"]) == seen(source, "sales", "events", ["d1"])
    assert b"events d1 open at the dump" in seen(target, "sales_dr", "events", ["d1"])["files"].values()  # type: ignore[union-attr]
    assert verify(source, "sales", target, "sales_dr", parse_policy(new)) == []


def test_a_load_killed_at_each_step_while_bootstrapping_a_transactional_table_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The REPLACE load run as a process killed at step 1, 2, ... in turn: every re-run starts where the
    killed one left the replica, the last one finishes, and later commits of the txn open at the dump replay."""
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    old, new = "sales.['orders']", "sales.['orders', 'events']"
    source.catalog.create_database(Database(name="sales"))
    source.catalog.create_table(make_table("sales", "orders", **ACID))
    source.catalog.create_table(make_table("sales", "events", **ACID))
    write(source, "events", b"events one")
    write(source, "events", b"events aborted", abort=True)
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    run(engine, f"REPL DUMP {old}")
    held = OpenTxn(source, "events")
    write(source, "events", b"events two" * 512)
    write(source, "orders", b"orders rows")
    dumped = engine.execute(f"REPL DUMP {new} REPLACE {old} FROM {repl_status(target, 'sales_dr')}")
    command = f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'"
    step = 1
    while True:  # killed at step 1, 2, ... in turn until a run finishes
        monkeypatch.setenv(KILL_AT_ENV, str(step))
        done = repl_run_cli(command, target, source)
        if done.returncode != -9:
            break
        step += 1
    assert done.returncode == 0, done.stderr
    assert step > 3, "the load finished before the kills reached its data"
    monkeypatch.delenv(KILL_AT_ENV)
    assert repl_run_cli(command, target, source).returncode == 0  # loaded: nothing left to do
    assert seen(target, "sales_dr", "events") == seen(source, "sales", "events")
    assert verify(source, "sales", target, "sales_dr", parse_policy(new)) == []
    held.commit("events", b"the held txn's rows")
    catch_up(engine, new)
    assert seen(target, "sales_dr", "events") == seen(source, "sales", "events")
    assert verify(source, "sales", target, "sales_dr", parse_policy(new)) == []
