"""ACID replication end to end on real metastores (source and replica on each backend).

Txn events are replayed on the replica through a source-to-target txn map, write ids stay identical per
table, data is copied at COMMIT_TXN only, and a reader on the replica with the replica's ValidWriteIdList
sees exactly what a source reader saw at the same event id.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import delete, func, select

from hmsrepl.acid import InsertOnlyWriter, delta_dir_name, visible_files
from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import privileged
from hmsrepl.metastore.schema import repl_txn_map, txns
from hmsrepl.metastore.transactions import ReplicationTxnError
from hmsrepl.replication.commands import parse_command
from hmsrepl.replication.dump import DumpEngine
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import LoadEngine, repl_status
from hmsrepl.replication.metrics import StageClock
from hmsrepl.replication.verify import verify
from hmsrepl.storage.base import filesystem_for, join_uri, relative_to
from tests.backends import temporary_database
from tests.dump_events import edit_event, read_events, rewrite_events
from tests.helpers import make_partition, make_table, write_file

ACID = {"transactional": "true", "transactional_properties": "insert_only"}


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
    source.catalog.create_table(make_table("sales", "orders", **ACID))
    days = source.catalog.create_table(make_table("sales", "daily", partition_keys=("day",), **ACID))
    source.catalog.add_partitions("sales", "daily", [make_partition(days, "d1")])
    plain = source.catalog.create_table(make_table("sales", "plain"))
    write_file(plain.sd.location, "000000_0", b"a,1\n")
    source.catalog.insert("sales", "plain")
    return ReplicationEngine(str(tmp_path / "dumps"), source, target)


def write(
    store: Metastore,
    table: str,
    rows: bytes,
    *,
    values: Sequence[str] | None = None,
    mode: str = "append",
    on_step: Callable[[], None] = lambda: None,
) -> int:
    """One committed transactional write through the foundation's writer; ``on_step`` after each call
    that changes what readers see (allocation, commit)."""
    writer = InsertOnlyWriter(store, "sales", table, values, mode=mode, heartbeat=False).begin()  # type: ignore[arg-type]
    on_step()
    write_file(writer.target_uri, "part-0.txt", rows)
    writer.commit()
    on_step()
    return writer.write_id


class TwoTableTxn:
    """One txn writing both ACID tables (the writer API does one table per txn; the metastore allows more)."""

    def __init__(self, store: Metastore, tag: bytes, on_step: Callable[[], None] = lambda: None) -> None:
        self.store, txns = store, store.txns
        [self.txn_id] = txns.open_txns(1)
        for table, values in (("orders", None), ("daily", ["d1"])):
            [alloc] = txns.allocate_table_write_ids([self.txn_id], "sales", table)
            on_step()
            meta = store.catalog.get_table("sales", table)
            location = (
                store.catalog.get_partition("sales", table, values).sd.location
                if values
                else meta.sd.location
            )
            directory = join_uri(location, delta_dir_name(alloc.write_id))
            write_file(directory, "part-0.txt", tag + b" " + table.encode())
            statuses = list(filesystem_for(directory).list_files(directory))
            files = describe_files(location, store.cm, statuses)
            txns.add_write_notification(self.txn_id, alloc.write_id, "sales", table, values, files)

    def commit(self) -> None:
        self.store.txns.commit_txn(self.txn_id)

    def abort(self) -> None:
        self.store.txns.abort_txns([self.txn_id])


def snapshot(store: Metastore, db: str) -> dict[str, object]:
    """What readers see of the two ACID tables now: contents of the visible files, and the write-id state."""
    out: dict[str, object] = {}
    for table, values in (("orders", None), ("daily", ["d1"])):
        files = visible_files(store, db, table, values)
        location = (
            store.catalog.get_partition(db, table, values).sd.location
            if values
            else store.catalog.get_table(db, table).sd.location
        )
        fs = filesystem_for(files[0]) if files else None
        out[table] = {relative_to(uri, location): fs.open_read(uri).read() for uri in files} if fs else {}
        [ids] = store.txns.get_valid_write_ids([f"{db}.{table}"])
        out[f"{table}.write_ids"] = ids.write_ids.to_string().split(":", 1)[1]
    return out


def step(engine: ReplicationEngine, limit: int | None = 1) -> int:
    """One incremental dump (LIMIT ``limit``) and its load; returns the replica's new position."""
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}" + (f" LIMIT {limit}" if limit else ""))
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    return repl_status(engine.target, "sales_dr")  # type: ignore[attr-defined, return-value]


def bootstrap(engine: ReplicationEngine, settings: str = "") -> int:
    dumped = engine.execute("REPL DUMP sales" + (f" WITH ({settings})" if settings else ""))
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    return dumped.last_event_id


def test_aborted_two_table_txn_copies_nothing_and_a_commit_changes_both_in_one_step(engine, source, target):
    write(source, "orders", b"before")
    bootstrap(engine)
    before = snapshot(target, "sales_dr")
    assert before == snapshot(source, "sales")

    aborted = TwoTableTxn(source, b"aborted")
    aborted.abort()
    while step(engine) < source.get_current_notification_event_id():
        assert {k: v for k, v in snapshot(target, "sales_dr").items() if "write_ids" not in k} == {
            k: v for k, v in before.items() if "write_ids" not in k
        }
    assert snapshot(target, "sales_dr") == snapshot(source, "sales")
    for table in ("orders", "daily"):  # no file of the aborted txn was copied, visible or not
        location = target.catalog.get_table("sales_dr", table).sd.location
        assert not any(
            b"aborted" in Path(s.uri.removeprefix("file:")).read_bytes()
            for s in filesystem_for(location).list_files(location)
        )
    assert target.txns.repl_txn_map("sales_dr") == {}

    committed = TwoTableTxn(source, b"committed")
    committed.commit()
    seen = []
    while step(engine) < source.get_current_notification_event_id():
        now = snapshot(target, "sales_dr")
        changed = {t: now[t] != before[t] for t in ("orders", "daily")}
        assert changed["orders"] == changed["daily"], f"one table of the txn without the other: {changed}"
        seen.append(changed["orders"])
    assert snapshot(target, "sales_dr") == snapshot(source, "sales")
    assert b"committed orders" in snapshot(target, "sales_dr")["orders"].values()  # type: ignore[union-attr]
    assert verify(source, "sales", target, "sales_dr") == []
    assert target.txns.repl_txn_map("sales_dr") == {}


def test_replica_reader_sees_what_a_source_reader_saw_at_the_same_event_id(engine, source, target):
    rng = random.Random(7)
    write(source, "orders", b"first")
    bootstrap(engine)
    seen: dict[int, dict[str, object]] = {}

    def record() -> None:
        seen[source.get_current_notification_event_id()] = snapshot(source, "sales")

    record()
    held = InsertOnlyWriter(source, "sales", "orders", heartbeat=False).begin()  # stays open across loads
    record()
    write_file(held.target_uri, "part-0.txt", b"long write")
    for i in range(12):
        kind = rng.choice(["append", "overwrite", "abort", "two", "two_abort"])
        if kind in ("append", "overwrite"):
            write(source, "orders", f"{kind} {i}".encode(), mode=kind, on_step=record)
            if rng.random() < 0.5:
                write(source, "daily", f"{kind} d {i}".encode(), values=["d1"], mode=kind, on_step=record)
        elif kind == "abort":
            with (
                pytest.raises(RuntimeError),
                InsertOnlyWriter(source, "sales", "orders", heartbeat=False) as writer,
            ):
                record()
                write_file(writer.target_uri, "part-0.txt", f"never {i}".encode())
                raise RuntimeError("the job failed")
        else:
            txn = TwoTableTxn(source, f"two {i}".encode(), on_step=record)
            txn.commit() if kind == "two" else txn.abort()
        record()
        if i == 6:
            held.commit()
            record()
        position = step(engine, rng.choice([1, 2, 3, None]))
        assert snapshot(target, "sales_dr") == seen[max(k for k in seen if k <= position)], (
            f"replica at {position}"
        )
    while (position := step(engine, 2)) < source.get_current_notification_event_id():
        assert snapshot(target, "sales_dr") == seen[max(k for k in seen if k <= position)]
    assert snapshot(target, "sales_dr") == snapshot(source, "sales")
    assert verify(source, "sales", target, "sales_dr") == []


def test_bootstrap_with_open_txns_keeps_write_ids_and_replays_them_later(engine, source, target):
    write(source, "orders", b"one")
    stale = InsertOnlyWriter(
        source, "sales", "daily", ["d1"], heartbeat=False
    ).begin()  # open when the dump starts
    write_file(stale.target_uri, "part-0.txt", b"stale")
    later: list[InsertOnlyWriter] = []

    def open_one_more(_table: str) -> None:  # a txn opened (and writing) while the bootstrap reads
        if not later:
            writer = InsertOnlyWriter(source, "sales", "orders", heartbeat=False).begin()
            write_file(writer.target_uri, "part-0.txt", b"during the dump")
            later.append(writer)

    command = parse_command("REPL DUMP sales WITH ('hive.repl.bootstrap.dump.open.txn.timeout'='0s')")
    dumped = DumpEngine(source, engine.dump_root, open_one_more).dump(command)  # type: ignore[arg-type]
    assert source.txns.txn_state(stale.txn_id) == "aborted"  # open at the start, past the timeout
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert snapshot(target, "sales_dr") == snapshot(source, "sales")
    assert set(target.txns.repl_txn_map("sales_dr")) >= {later[0].txn_id}
    later[0].commit()
    write(source, "orders", b"after")
    while step(engine, 3) < source.get_current_notification_event_id():
        pass
    assert snapshot(target, "sales_dr") == snapshot(source, "sales")
    assert b"during the dump" in snapshot(target, "sales_dr")["orders"].values()  # type: ignore[union-attr]
    assert verify(source, "sales", target, "sales_dr") == []


def _state_of(target: Metastore) -> tuple[int | None, dict[str, object]]:
    return repl_status(target, "sales_dr"), snapshot(target, "sales_dr")


def test_missing_txn_map_entry_fails_clearly_and_leaves_the_replica_unchanged(engine, source, target):
    bootstrap(engine)
    txn = TwoTableTxn(source, b"x")
    step(engine, 1)  # OPEN_TXN replayed: the map has the txn
    assert txn.txn_id in target.txns.repl_txn_map("sales_dr")
    with target.events.transaction() as tx:  # the map row is lost (restored backup, manual cleanup)
        tx.conn.execute(delete(repl_txn_map).where(repl_txn_map.c.src_txn_id == txn.txn_id))
    txn.commit()
    before = _state_of(target)
    with pytest.raises(ReplicationTxnError, match=rf"source txn {txn.txn_id}.*run a bootstrap"):
        step(engine, None)
    assert _state_of(target) == before


def test_commit_of_an_unknown_txn_fails_clearly_and_leaves_the_replica_unchanged(engine, source, target):
    bootstrap(engine)
    write(source, "orders", b"x")
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    # a corrupt dump: the commit names a txn the replica never saw
    edit_event(dumped.dump_dir, "COMMIT_TXN", lambda doc: doc["message"].update(txn_id=987654))
    before = _state_of(target)
    with pytest.raises(ReplicationTxnError, match=r"source txn 987654.*no open target txn.*run a bootstrap"):
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert _state_of(target) == before


def test_diverged_write_ids_are_refused(engine, source, target):
    bootstrap(engine)
    with privileged("test: a replica diverged before writes were protected"):
        [t] = target.txns.open_txns(1)
        target.txns.allocate_table_write_ids(
            [t], "sales_dr", "orders"
        )  # the replica's next write id moves on
        target.txns.commit_txn(t)
    write(source, "orders", b"x")
    before = repl_status(target, "sales_dr")
    with pytest.raises(ReplicationTxnError, match=r"write id 1 of 'sales_dr.orders'.*next write id .* is 2"):
        step(engine, None)
    assert repl_status(target, "sales_dr") == before


def test_dump_filters_commit_writes_to_the_policy(engine, source, tmp_path):
    bootstrap(engine)
    last = engine.execute("REPL STATUS sales_dr")
    txn = TwoTableTxn(source, b"y")
    txn.commit()
    dumped = engine.execute(f"REPL DUMP sales.['orders'] FROM {last}")
    bodies = read_events(dumped.dump_dir)
    kinds = [b["event_type"] for b in bodies]
    assert kinds.count("OPEN_TXN") == 1 and kinds.count("COMMIT_TXN") == 1
    assert all(b["table"] in (None, "orders") for b in bodies)
    [commit] = [b["message"] for b in bodies if b["event_type"] == "COMMIT_TXN"]
    assert [w["table"] for w in commit["writes"]] == ["orders"]
    assert json.dumps(commit).count("daily") == 0


def test_empty_overwrites_hide_older_rows_on_the_replica(engine, source, target):
    write(source, "daily", b"old d1", values=["d1"])
    with InsertOnlyWriter(source, "sales", "daily", ["d1"], mode="overwrite", heartbeat=False):
        pass  # an overwrite that wrote no rows: only the base directory's marker
    write(source, "orders", b"old orders")
    bootstrap(engine)
    assert snapshot(target, "sales_dr")["daily"] == {}
    with InsertOnlyWriter(source, "sales", "orders", mode="overwrite", heartbeat=False):
        pass
    while step(engine, None) < source.get_current_notification_event_id():
        pass
    assert snapshot(target, "sales_dr")["orders"] == {}
    assert snapshot(target, "sales_dr") == snapshot(source, "sales")
    assert verify(source, "sales", target, "sales_dr") == []


def test_rerun_after_a_failed_load_opens_and_commits_each_txn_once(engine, source, target):
    bootstrap(engine)
    write(source, "orders", b"first")
    TwoTableTxn(source, b"both").commit()
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    [*_, good] = read_events(dumped.dump_dir)
    assert good["event_type"] == "COMMIT_TXN"
    final = good["event_id"]
    bad = {**good, "message": {**good["message"], "txn_id": 424242}}
    rewrite_events(dumped.dump_dir, lambda doc: bad if doc["event_id"] == final else doc)
    with pytest.raises(ReplicationTxnError, match="424242"):  # fails after the first txn's files were copied
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert repl_status(target, "sales_dr") == last
    rewrite_events(dumped.dump_dir, lambda doc: good if doc["event_id"] == final else doc)  # repaired: re-run
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert snapshot(target, "sales_dr") == snapshot(source, "sales")
    assert target.txns.repl_txn_map("sales_dr") == {}
    with target.engine.connect() as conn:  # one target txn per source txn, none opened twice
        replayed = conn.execute(
            select(func.count())
            .select_from(txns)
            .where(txns.c.txn_type == "repl_created", txns.c.host_name == "hmsrepl-load")
        ).scalar_one()
        committed = conn.execute(
            select(func.count()).select_from(txns).where(txns.c.state == "c")
        ).scalar_one()
    assert replayed == 2 and committed == 2
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")  # and a third run changes nothing
    assert snapshot(target, "sales_dr") == snapshot(source, "sales")


def test_commit_files_are_planned_for_parallel_copiers_and_new_partitions_replicate(engine, source, target):
    from concurrent.futures import ThreadPoolExecutor

    from hmsrepl.replication.filecopy import run_copy_task
    from hmsrepl.replication.load import LoadEngine

    bootstrap(engine)
    write(source, "daily", b"new day", values=["d2"])  # the writer adds partition d2 (ADD_PARTITION)
    TwoTableTxn(source, b"both").commit()
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    load = parse_command(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    tasks = LoadEngine(target, source_roots=engine.load_source_roots).plan_copies(load)  # type: ignore[arg-type]
    planned = sorted("/".join(t.target_uri.split("/")[-4:-1]) for t in tasks)  # commits' files, mapped
    assert planned == [
        "daily/day=d1/delta_0000002_0000002_0000",
        "daily/day=d2/delta_0000001_0000001_0000",
        "sales_dr.db/orders/delta_0000001_0000001_0000",
    ]
    with ThreadPoolExecutor(3) as pool:  # what the Spark load app does on executors
        list(pool.map(run_copy_task, tasks))
    loaded = LoadEngine(target, source_roots=engine.load_source_roots).load(load)  # type: ignore[arg-type]
    assert loaded.stats.files_prefetched == loaded.stats.files_copied == 3
    assert target.catalog.get_partition("sales_dr", "daily", ["d2"]) is not None
    assert visible_files(target, "sales_dr", "daily", ["d2"])
    assert verify(source, "sales", target, "sales_dr") == []


def test_bootstrap_waits_for_open_txns_writing_the_database(engine, source):
    from hmsrepl.replication.acid_replay import open_txn_timeout_seconds, wait_for_open_txns

    writer = InsertOnlyWriter(source, "sales", "orders", heartbeat=False).begin()
    other = source.txns.open_txns(1)  # writes nothing in 'sales': not waited for, not aborted
    polls: list[float] = []

    def commit_while_waiting(seconds: float) -> None:  # the writer finishes during the dump's wait
        polls.append(seconds)
        writer.commit()

    assert wait_for_open_txns(source, "sales", 3600, sleep=commit_while_waiting) == []
    assert len(polls) == 1 and source.txns.txn_state(writer.txn_id) == "committed"
    assert source.txns.txn_state(other[0]) == "open"
    assert open_txn_timeout_seconds({}) == 3600
    assert open_txn_timeout_seconds({"hive.repl.bootstrap.dump.open.txn.timeout": "90s"}) == 90
    assert open_txn_timeout_seconds({"hive.repl.bootstrap.dump.open.txn.timeout": "2"}) == 7200  # Hive: hours
    with pytest.raises(
        InvalidObjectError, match=r"'hive.repl.bootstrap.dump.open.txn.timeout'='soon' is not a duration"
    ):
        engine.execute("REPL DUMP sales WITH ('hive.repl.bootstrap.dump.open.txn.timeout'='soon')")


def test_replayed_txns_are_not_aborted_by_the_replica_timeout(engine, source, target):
    bootstrap(engine)
    writer = InsertOnlyWriter(source, "sales", "orders", heartbeat=False).begin()
    step(engine, None)
    [replayed] = target.txns.repl_txn_map("sales_dr").values()
    assert target.txns.abort_timed_out(now=10**12) == []  # no client heartbeats it; the source decides
    assert target.txns.txn_state(replayed) == "open"
    writer.commit()
    step(engine, None)
    assert target.txns.txn_state(replayed) == "committed"
    assert verify(source, "sales", target, "sales_dr") == []


class StartTogether(StageClock):
    """Holds a load at its first 'apply' until the other load got there too: both have read the position."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__()
        self.barrier, self.waited = barrier, False

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if name == "apply" and not self.waited:
            self.waited = True
            self.barrier.wait(timeout=120)
        with super().stage(name):
            yield


def test_two_loads_of_one_replica_at_once_replay_each_txn_once(engine, source, target):
    """Orchestration keeps one load per replica, but a second one (a manual run, a retry racing the
    scheduler) must not replay what the first applied: each batch re-reads repl.last.id under a lock."""
    bootstrap(engine)
    write(source, "orders", b"first")
    TwoTableTxn(source, b"both").commit()
    write(source, "daily", b"third", values=["d1"])
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    barrier = threading.Barrier(2)
    stores = [_store(target.config.db_url, Path(target.config.warehouse).parent) for _ in range(2)]
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(
                pool.map(
                    lambda store: LoadEngine(store, StartTogether(barrier), engine.load_source_roots).load(
                        parse_command(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
                    ),
                    stores,
                )
            )
    finally:
        for store in stores:
            store.close()
    assert sorted(r.events_applied for r in results)[0] == 0  # the later one found nothing left to do
    assert repl_status(target, "sales_dr") == dumped.last_event_id
    assert snapshot(target, "sales_dr") == snapshot(source, "sales")
    assert verify(source, "sales", target, "sales_dr") == []
    with target.engine.connect() as conn:
        replayed = conn.execute(
            select(func.count()).select_from(txns).where(txns.c.txn_type == "repl_created")
        ).scalar_one()
    assert replayed == 3  # one target txn per source txn
    assert target.txns.repl_txn_map("sales_dr") == {}
