"""The replication engine end to end on real metastores: bootstrap, incremental, LIMIT, idempotence, bad input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hmsrepl.exceptions import EventsCleanedUpError, FileLostError, NoSuchDatabaseError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Function
from hmsrepl.replication.commands import CommandError
from hmsrepl.replication.dump import DumpEngine
from hmsrepl.replication.dump_checks import DumpValidationError
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.layout import ACK, DumpDir, DumpError
from hmsrepl.replication.load import ReplicationStateError, repl_status
from hmsrepl.replication.target import TargetWriter
from hmsrepl.replication.verify import capture_state, diff_states, verify
from hmsrepl.storage.local import local_path
from tests.helpers import make_partition, make_table, write_file


def seed(store: Metastore) -> None:
    catalog = store.catalog
    catalog.create_database(Database(name="sales", parameters={"owner_team": "finance"}))
    orders = catalog.create_table(make_table("sales", "orders", partition_keys=("day",)))
    for day in ("d1", "d2"):
        [part] = catalog.add_partitions("sales", "orders", [make_partition(orders, day)])
        write_file(part.sd.location, f"part-{day}.parquet", f"rows of {day}".encode())
        catalog.insert("sales", "orders", [day])
    plain = catalog.create_table(make_table("sales", "plain"))
    write_file(plain.sd.location, "000000_0", b"a,1\nb,2\n")
    catalog.insert("sales", "plain")
    catalog.create_function(Function(function_name="myudf", db_name="sales", class_name="com.example.Udf"))


def bootstrap(engine: ReplicationEngine, target_db: str = "sales_dr") -> int:
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD {target_db} FROM '{dumped.dump_dir}'")
    return dumped.last_event_id


def incremental(engine: ReplicationEngine, target_db: str = "sales_dr", limit: int | None = None):
    last = engine.execute(f"REPL STATUS {target_db}")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}" + (f" LIMIT {limit}" if limit else ""))
    return dumped, engine.execute(f"REPL LOAD {target_db} FROM '{dumped.dump_dir}'")


def test_bootstrap_then_incremental_keeps_replica_equal(engine, source, target) -> None:
    seed(source)
    last = bootstrap(engine)
    assert verify(source, "sales", target, "sales_dr") == []
    assert repl_status(target, "sales_dr") == last == source.get_current_notification_event_id()
    replica = target.catalog.get_database("sales_dr")
    assert replica.location_uri.startswith(target.config.warehouse)
    # Changes of every kind, then one incremental cycle.
    catalog = source.catalog
    orders = catalog.get_table("sales", "orders")
    [d3] = catalog.add_partitions("sales", "orders", [make_partition(orders, "d3")])
    write_file(d3.sd.location, "part-d3.parquet", b"rows of d3")
    catalog.insert("sales", "orders", ["d3"])
    d1 = catalog.get_partition("sales", "orders", ["d1"])
    new = write_file(d1.sd.location, "part-d1-v2.parquet", b"rows of d1, version 2")
    catalog.insert("sales", "orders", ["d1"], new_files=[new], replace=True)
    catalog.drop_partitions("sales", "orders", [["d2"]])
    plain = catalog.get_table("sales", "plain")
    catalog.alter_table("sales", "plain", plain.model_copy(update={"table_name": "plain_v2"}))
    catalog.create_table(make_table("sales", "scratch"))
    catalog.drop_table("sales", "scratch")
    catalog.drop_function("sales", "myudf")
    db = catalog.get_database("sales")
    catalog.alter_database("sales", db.model_copy(update={"parameters": {"owner_team": "ops"}}))
    assert verify(source, "sales", target, "sales_dr") != []
    dumped, loaded = incremental(engine)
    assert verify(source, "sales", target, "sales_dr") == []
    assert loaded.last_event_id == dumped.last_event_id == source.get_current_notification_event_id()
    assert repl_status(target, "sales_dr") == dumped.last_event_id
    # The target's files are copies in its own warehouse, not links to the source.
    part = target.catalog.get_partition("sales_dr", "orders", ["d1"])
    assert part.sd.location.startswith(target.config.warehouse)
    assert os.listdir(local_path(part.sd.location)) == ["part-d1-v2.parquet"]


def test_load_is_idempotent_and_rerun_changes_nothing(engine, source, target) -> None:
    seed(source)
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    before = target.get_current_notification_event_id()
    again = engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert again.stats.files_copied == 0 and target.get_current_notification_event_id() == before
    source.catalog.create_table(make_table("sales", "later"))
    dumped, _ = incremental(engine)
    state = capture_state(target, "sales_dr")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert diff_states(state, capture_state(target, "sales_dr")) == []
    assert verify(source, "sales", target, "sales_dr") == []


def test_limit_cuts_incremental_dumps_into_batches(engine, source, target) -> None:
    seed(source)
    bootstrap(engine)
    for i in range(7):
        source.catalog.create_table(make_table("sales", f"t{i}"))
    # Events of another database do not count against LIMIT.
    source.catalog.create_database(Database(name="other"))
    source.catalog.create_table(make_table("other", "noise"))
    batches = []
    while repl_status(target, "sales_dr") < source.get_current_notification_event_id():
        dumped, _ = incremental(engine, limit=3)
        batches.append(dumped.events)
        if dumped.events == 0:
            break
    assert batches[:3] == [3, 3, 1]
    assert verify(source, "sales", target, "sales_dr") == []


def test_seed_bootstrap_consolidation_example(source, target, tmp_path) -> None:
    """Seed 003: T1 is read mid-dump; Px dropped and Pa added before, Pb added and Py dropped after."""
    catalog = source.catalog
    catalog.create_database(Database(name="sales"))
    t0 = catalog.create_table(make_table("sales", "t0"))
    write_file(t0.sd.location, "f", b"t0 data")
    catalog.insert("sales", "t0")
    t1 = catalog.create_table(make_table("sales", "t1", partition_keys=("p",)))
    for name in ("px", "py", "pz"):
        [part] = catalog.add_partitions("sales", "t1", [make_partition(t1, name)])
        write_file(part.sd.location, "data", f"{name} data".encode())

    def during_dump(table_name: str) -> None:
        if table_name == "t0":  # before T1 is read
            catalog.drop_partitions("sales", "t1", [["px"]])
            [pa] = catalog.add_partitions("sales", "t1", [make_partition(t1, "pa")])
            write_file(pa.sd.location, "data", b"pa data")
            catalog.insert("sales", "t1", ["pa"])
        if table_name == "t1":  # after T1 is read, before the dump ends
            [pb] = catalog.add_partitions("sales", "t1", [make_partition(t1, "pb")])
            write_file(pb.sd.location, "data", b"pb data")
            catalog.insert("sales", "t1", ["pb"])
            catalog.drop_partitions("sales", "t1", [["py"]])
            catalog.drop_table("sales", "t0")
            catalog.create_table(make_table("sales", "t2"))

    dumped = DumpEngine(source, str(tmp_path / "dumps"), on_table_dumped=during_dump).dump(
        ReplicationEngine(str(tmp_path), source).execute.__self__
        and __import__("hmsrepl.replication.commands", fromlist=["parse_command"]).parse_command(
            "REPL DUMP sales"
        )
    )
    assert dumped.last_event_id == source.get_current_notification_event_id()
    # Counted as written, the result equals what the dump holds once consolidated: t1's pa, pb, pz
    # with a file each, and the two tables (t0 dropped meanwhile, t2 created).
    held = DumpEngine._count(DumpDir(dumped.dump_dir), "sales")
    assert (dumped.tables, dumped.partitions, dumped.files, dumped.bytes) == held == (2, 3, 3, 21)
    ReplicationEngine(str(tmp_path / "dumps"), source, target).execute(
        f"REPL LOAD sales FROM '{dumped.dump_dir}'"
    )
    assert target.catalog.get_partition_names("sales", "t1") == ["p=pa", "p=pb", "p=pz"]
    assert sorted(target.catalog.get_tables("sales")) == ["t1", "t2"]
    assert verify(source, "sales", target, "sales") == []


def test_replaced_file_is_copied_from_cmroot(engine, source, target) -> None:
    seed(source)
    bootstrap(engine)
    catalog = source.catalog
    orders = catalog.get_table("sales", "orders")
    [p] = catalog.add_partitions("sales", "orders", [make_partition(orders, "d9")])
    write_file(p.sd.location, "data.parquet", b"version at the ADD event")
    catalog.insert("sales", "orders", ["d9"])
    # Later the source drops the partition: its files move to cmroot, and a new partition reuses the name.
    catalog.drop_partitions("sales", "orders", [["d9"]])
    [p] = catalog.add_partitions("sales", "orders", [make_partition(orders, "d9")])
    write_file(p.sd.location, "data.parquet", b"a newer version")
    catalog.insert("sales", "orders", ["d9"])
    last = repl_status(target, "sales_dr")
    first_events = engine.execute(
        f"REPL DUMP sales FROM {last} LIMIT 2"
    )  # ADD_PARTITION + INSERT of version 1
    loaded = engine.execute(f"REPL LOAD sales_dr FROM '{first_events.dump_dir}'")
    assert loaded.stats.files_from_cmroot == 1
    copy = target.catalog.get_partition("sales_dr", "orders", ["d9"]).sd.location + "/data.parquet"
    assert Path(local_path(copy)).read_bytes() == b"version at the ADD event"
    incremental(engine)  # a new version directory: the partition's location moves with the new data
    copy = target.catalog.get_partition("sales_dr", "orders", ["d9"]).sd.location + "/data.parquet"
    assert Path(local_path(copy)).read_bytes() == b"a newer version"
    assert verify(source, "sales", target, "sales_dr") == []


def test_files_staged_ahead_by_a_parallel_copier_are_published_not_copied_again(engine, source, target):
    from concurrent.futures import ThreadPoolExecutor

    from hmsrepl.replication.commands import parse_command
    from hmsrepl.replication.filecopy import run_copy_task
    from hmsrepl.replication.load import LoadEngine

    seed(source)
    for command_text in ("REPL DUMP sales", None):
        if command_text is None:  # then an incremental dump with new data
            orders = source.catalog.get_table("sales", "orders")
            [part] = source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d5")])
            write_file(part.sd.location, "new.parquet", b"new rows")
            source.catalog.insert("sales", "orders", ["d5"])
            command_text = f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}"
        dumped = engine.execute(command_text)
        load = parse_command(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
        tasks = LoadEngine(target, source_roots=engine.load_source_roots).plan_copies(load)
        assert tasks, "the dump names files"
        with ThreadPoolExecutor(4) as pool:  # what the Spark load app does on executors
            results = list(pool.map(run_copy_task, tasks))
        assert all(r.bytes_copied > 0 for r in results)
        loaded = LoadEngine(target, source_roots=engine.load_source_roots).load(load)
        assert loaded.stats.files_prefetched == loaded.stats.files_copied > 0
        assert verify(source, "sales", target, "sales_dr") == []


def test_lost_file_fails_clearly_and_leaves_target_unchanged(engine, source, target) -> None:
    seed(source)
    bootstrap(engine)
    orders = source.catalog.get_table("sales", "orders")
    [p] = source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d7")])
    path = write_file(p.sd.location, "data.parquet", b"original")
    source.catalog.insert("sales", "orders", ["d7"])
    Path(local_path(path)).write_bytes(b"changed behind the metastore's back")  # no cmroot copy exists
    before_state, before_id = capture_state(target, "sales_dr"), repl_status(target, "sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {before_id}")
    with pytest.raises(FileLostError, match=r"data\.parquet.*nothing was applied.*bootstrap"):
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert repl_status(target, "sales_dr") == before_id
    assert diff_states(before_state, capture_state(target, "sales_dr")) == []


def test_content_changed_in_place_fails_the_batch_and_leaves_target_unchanged(engine, source, target) -> None:
    """Same size, other bytes: only the copy's checksum can tell; the batch rolls back, nothing is published."""
    seed(source)
    bootstrap(engine)
    orders = source.catalog.get_table("sales", "orders")
    [p] = source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d8")])
    path = write_file(p.sd.location, "data.parquet", b"original")
    source.catalog.insert("sales", "orders", ["d8"])
    Path(local_path(path)).write_bytes(b"ORIGINAL")  # same length, different content, no cmroot copy
    before_state, before = capture_state(target, "sales_dr"), repl_status(target, "sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {before}")
    with pytest.raises(FileLostError, match="checksum"):
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert repl_status(target, "sales_dr") == before
    assert diff_states(before_state, capture_state(target, "sales_dr")) == []


def test_bad_dumps_and_states_are_rejected(engine, source, target, tmp_path) -> None:
    seed(source)
    with pytest.raises(CommandError):
        engine.execute("REPL DUMP sales.['(']")
    with pytest.raises(NoSuchDatabaseError, match="nosuch"):
        engine.execute("REPL DUMP nosuch")
    dumped = engine.execute("REPL DUMP sales")
    # Incremental before any bootstrap.
    inc = engine.execute("REPL DUMP sales FROM 0")
    with pytest.raises(ReplicationStateError, match="run a bootstrap"):
        engine.execute(f"REPL LOAD sales_dr FROM '{inc.dump_dir}'")
    # A dump without its acknowledgement is incomplete.
    os.unlink(local_path(f"{dumped.dump_dir}/{ACK}"))
    with pytest.raises(DumpError, match="interrupted"):
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    with pytest.raises(DumpError, match="not a dump directory"):
        engine.execute(f"REPL LOAD sales_dr FROM '{tmp_path}/nothing'")
    # Bootstrap into a non-empty database that is not a replica is refused.
    target.catalog.create_database(Database(name="busy"))
    target.catalog.create_table(make_table("busy", "mine"))
    good = engine.execute("REPL DUMP sales")
    with pytest.raises(ReplicationStateError, match="not a replica"):
        engine.execute(f"REPL LOAD busy FROM '{good.dump_dir}'")
    assert target.catalog.get_tables("busy") == ["mine"]
    # A dump starting after the replica's position would skip events.
    engine.execute(f"REPL LOAD sales_dr FROM '{good.dump_dir}'")
    source.catalog.create_table(make_table("sales", "x1"))
    source.catalog.create_table(make_table("sales", "x2"))
    skipping = engine.execute(f"REPL DUMP sales FROM {good.last_event_id + 1}")
    with pytest.raises(ReplicationStateError, match="would be skipped"):
        engine.execute(f"REPL LOAD sales_dr FROM '{skipping.dump_dir}'")


def test_files_outside_source_locations_are_refused(engine, source, target, tmp_path) -> None:
    seed(source)
    dumped = engine.execute("REPL DUMP sales")
    secret = tmp_path / "elsewhere" / "secret"
    secret.parent.mkdir()
    secret.write_bytes(b"not warehouse data")
    files = Path(local_path(dumped.dump_dir)) / "sales" / "plain" / "_files"
    files.write_text(f"{secret}#crc32c-00000000-18##\n")
    with pytest.raises(DumpValidationError, match="outside the source warehouse"):
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert repl_status(target, "sales_dr") is None
    assert "sales_dr" not in target.catalog.get_databases()  # refused before the first change


def test_cleaned_up_events_need_a_bootstrap(engine, source, target) -> None:
    seed(source)
    last = bootstrap(engine)
    source.catalog.create_table(make_table("sales", "late"))
    source.events.cleanup(ttl_seconds=-10)
    with pytest.raises(EventsCleanedUpError, match="run a bootstrap"):
        engine.execute(f"REPL DUMP sales FROM {last}")


def test_published_files_are_made_durable_before_the_position_records_them(
    engine, source, target, monkeypatch
) -> None:
    """A crash after the position commits must not find a replicated file still under its staged name."""
    import hmsrepl.replication.replica_versions as target_module

    seed(source)
    bootstrap(engine)
    orders = source.catalog.get_table("sales", "orders")
    [d3] = source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d3")])
    write_file(d3.sd.location, "part-d3.parquet", b"rows of d3")
    source.catalog.insert("sales", "orders", ["d3"])
    synced: list[tuple[set[str], int | None]] = []
    real_sync = target_module.sync_uris

    def recording_sync(uris) -> None:
        uris = set(uris)
        synced.append((uris, repl_status(target, "sales_dr")))
        real_sync(uris)

    monkeypatch.setattr(target_module, "sync_uris", recording_sync)
    before = repl_status(target, "sales_dr")
    incremental(engine)
    d3_dir = target.catalog.get_partition("sales_dr", "orders", ["d3"]).sd.location
    assert any(d3_dir in paths and position == before for paths, position in synced), synced
    assert repl_status(target, "sales_dr") > before


def test_incremental_loads_wait_for_an_interrupted_bootstrap_to_be_finished(
    engine, source, target, monkeypatch
) -> None:
    """A re-bootstrap that stopped half way leaves tables from two points in time: replaying older events
    on top would mix them further, so incremental loads refuse until that bootstrap load is completed."""
    seed(source)
    first = bootstrap(engine)
    catalog = source.catalog
    orders = catalog.get_table("sales", "orders")
    [d3] = catalog.add_partitions("sales", "orders", [make_partition(orders, "d3")])
    write_file(d3.sd.location, "part-d3.parquet", b"rows of d3")
    catalog.insert("sales", "orders", ["d3"])
    again = engine.execute("REPL DUMP sales")
    real_put_table = TargetWriter.put_table

    def stop_at_plain(writer, snapshot, files, location):  # the load stops (a crash) at the second table
        if snapshot["table_name"] == "plain":
            raise DumpError("interrupted while loading table 'plain'")
        return real_put_table(writer, snapshot, files, location)

    monkeypatch.setattr(TargetWriter, "put_table", stop_at_plain)  # tables load in name order: orders first
    with pytest.raises(DumpError, match="plain"):
        engine.execute(f"REPL LOAD sales_dr FROM '{again.dump_dir}'")
    assert repl_status(target, "sales_dr") == first
    catalog.drop_partitions("sales", "orders", [["d1"]])
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    before = capture_state(target, "sales_dr")
    with pytest.raises(ReplicationStateError, match=f"unfinished bootstrap load of '{again.dump_dir}'"):
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert diff_states(before, capture_state(target, "sales_dr")) == []
    assert repl_status(target, "sales_dr") == first
    monkeypatch.undo()  # the bootstrap load is finished
    engine.execute(f"REPL LOAD sales_dr FROM '{again.dump_dir}'")
    assert repl_status(target, "sales_dr") == again.last_event_id
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert verify(source, "sales", target, "sales_dr") == []
