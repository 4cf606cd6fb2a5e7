"""Point-in-time restore through the catalog API with real files: after each accident, a restore brings back
exactly the files (content hashes) a snapshot taken before the accident holds, logged as ordinary events that
a replica replays; a restore whose files are gone, into a taken name or on a protected replica is refused and
changes nothing."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hmsrepl.cli import main
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Function, TableType
from hmsrepl.metastore.protection import privileged
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.verify import verify
from hmsrepl.restore.errors import RestoreError
from hmsrepl.restore.executor import RestoreExecutor
from hmsrepl.restore.planner import RestorePlanner
from hmsrepl.restore.preview import as_text
from hmsrepl.storage.local import local_path
from tests.helpers import disk_files, events_of, make_partition, make_table, write_file


def seed(store: Metastore, db: str = "sales") -> None:
    """``db.orders`` partitioned by day (two partitions, two files each) and ``db.plain`` with one file."""
    catalog = store.catalog
    catalog.create_database(Database(name=db))
    orders = catalog.create_table(make_table(db, "orders", partition_keys=("day",)))
    for day in ("d1", "d2"):
        [part] = catalog.add_partitions(db, "orders", [make_partition(orders, day)])
        files = [
            write_file(part.sd.location, f"part-{i}.parquet", f"{day} rows {i}".encode()) for i in range(2)
        ]
        catalog.insert(db, "orders", [day], new_files=files)
    plain = catalog.create_table(make_table(db, "plain"))
    write_file(plain.sd.location, "000000_0", b"a,1\nb,2\n")
    catalog.insert(db, "plain")


def snapshot(store: Metastore, db: str, table: str) -> dict[str, dict[str, str]]:
    """What a reader of the table reads: per partition (``""``: the table), relative path -> content hash."""
    found = store.catalog.get_table(db, table)
    locations = (
        {"": found.sd.location}
        if not found.partition_keys
        else {
            "/".join(
                f"{k}={v}" for k, v in zip(found.partition_key_names, p.values, strict=True)
            ): p.sd.location
            for p in store.catalog.get_partitions(db, table)
        }
    )
    out = {}
    for name, location in locations.items():
        root = local_path(location or "")
        out[name] = {path[len(root) + 1 :]: digest for path, digest in disk_files(location or "").items()}
    return out


def restore(store: Metastore, plan_of) -> None:  # type: ignore[no-untyped-def]
    plan = plan_of(RestorePlanner(store))
    RestoreExecutor(store).run(plan)


def tree_hash(*roots: str | Path) -> str:
    """Every file below the roots, path and content: what a refused restore must leave as it was."""
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(Path(root).rglob("*")):
            digest.update(str(path).encode())
            if path.is_file():
                digest.update(path.read_bytes())
    return digest.hexdigest()


def metadata_hash(store: Metastore) -> str:
    events = store.events.next_events(0)
    return hashlib.sha256(repr([(e.event_id, e.event_type, e.message) for e in events]).encode()).hexdigest()


def test_undrop_table_brings_back_every_partition_and_file(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    seed(store)
    before = snapshot(store, "sales", "orders")
    store.catalog.drop_table("sales", "orders")
    first = store.events.current_event_id()
    restore(store, lambda p: p.undrop_table("sales", "orders"))
    assert snapshot(store, "sales", "orders") == before
    assert [kind for kind, _, _ in events_of(store, first)] == ["CREATE_TABLE", "ADD_PARTITION"]


def test_revert_an_overwrite_with_a_bad_filter(metastore: Metastore) -> None:
    store = metastore
    seed(store)
    before = snapshot(store, "sales", "orders")
    good = store.events.current_event_id()
    part = store.catalog.get_partition("sales", "orders", ["d1"])
    bad = write_file(part.sd.location, "part-bad.parquet", b"only what the bad filter kept")
    store.catalog.insert("sales", "orders", ["d1"], new_files=[bad], replace=True)
    plain = store.catalog.get_table("sales", "plain")
    staged = write_file(plain.sd.location, ".staging-000000_0", b"overwritten\n")  # a writer's new file...
    os.replace(local_path(staged), local_path(plain.sd.location) + "/000000_0")  # ...moved over the old name
    store.catalog.insert("sales", "plain", replace=True)
    assert snapshot(store, "sales", "orders") != before
    restore(store, lambda p: p.revert_table("sales", "orders", good))
    restore(store, lambda p: p.revert_table("sales", "plain", good))
    assert snapshot(store, "sales", "orders") == before
    assert snapshot(store, "sales", "plain") == {"": {"000000_0": disk_digest(b"a,1\nb,2\n")}}


def disk_digest(data: bytes) -> str:
    import google_crc32c

    return f"crc32c-{google_crc32c.value(data):08x}-{len(data)}"


def test_undrop_a_dropped_partition(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    seed(store)
    before = snapshot(store, "sales", "orders")
    store.catalog.drop_partitions("sales", "orders", [["d2"]])
    plan = RestorePlanner(store).undrop_partitions("sales", "orders", ["day=d2"])
    result = RestoreExecutor(store, link=False).run(plan)  # copies, as to or from an object store
    assert (result.files, result.linked) == (2, 0)
    assert snapshot(store, "sales", "orders") == before


def test_undrop_a_dropped_database_with_its_tables_and_functions(metastore: Metastore) -> None:
    store = metastore
    seed(store)
    store.catalog.create_function(Function(function_name="f", db_name="sales", class_name="x.F"))
    before = {t: snapshot(store, "sales", t) for t in ("orders", "plain")}
    store.catalog.drop_database("sales", cascade=True)
    restore(store, lambda p: p.undrop_database("sales"))
    assert {t: snapshot(store, "sales", t) for t in ("orders", "plain")} == before
    assert store.catalog.get_functions("sales") == ["f"]


def test_rename_then_drop_is_undropped_under_the_last_name(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    seed(store)
    before = snapshot(store, "sales", "orders")
    renamed = store.catalog.get_table("sales", "orders").model_copy(update={"table_name": "orders_old"})
    store.catalog.alter_table("sales", "orders", renamed)
    store.catalog.drop_table("sales", "orders_old")
    restore(store, lambda p: p.undrop_table("sales", "orders_old"))
    assert snapshot(store, "sales", "orders_old") == before


def test_drop_recreate_then_restore_into_another_name(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    seed(store)
    before = snapshot(store, "sales", "plain")
    store.catalog.drop_table("sales", "plain")
    again = store.catalog.create_table(make_table("sales", "plain"))
    write_file(again.sd.location, "000000_0", b"new table's rows\n")
    store.catalog.insert("sales", "plain")
    new_rows = snapshot(store, "sales", "plain")
    with pytest.raises(
        RestoreError, match=r"table 'sales\.plain' exists; restore into another name with --into"
    ):
        RestorePlanner(store).undrop_table("sales", "plain")
    restore(store, lambda p: p.undrop_table("sales", "plain", into="plain_restored"))
    assert snapshot(store, "sales", "plain_restored") == before
    assert snapshot(store, "sales", "plain") == new_rows


def test_a_restore_whose_files_are_gone_is_refused_and_changes_nothing(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    seed(store)
    store.catalog.drop_table("sales", "orders")
    store.cm.cleanup(0, now=4_000_000_000)  # retention passed: cmroot is emptied
    plan = RestorePlanner(store).undrop_table("sales", "orders")
    assert "REFUSED: cannot restore table 'sales.orders': 4 needed files are gone" in as_text(plan)
    files, log = tree_hash(store.config.warehouse, store.config.cmroot), metadata_hash(store)
    with pytest.raises(
        RestoreError, match=r"part-0.parquet.*HMSREPL_CM_RETENTION_SECONDS.*nothing was changed"
    ):
        RestoreExecutor(store).run(plan)
    assert (tree_hash(store.config.warehouse, store.config.cmroot), metadata_hash(store)) == (files, log)
    assert store.catalog.find_table("sales", "orders") is None


def test_preview_names_the_cmroot_files_and_bytes_and_changes_nothing(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    seed(store)
    store.catalog.drop_table("sales", "orders")
    files, log = tree_hash(store.config.warehouse, store.config.cmroot), metadata_hash(store)
    text = as_text(RestorePlanner(store).undrop_table("sales", "orders"))
    assert "total: 4 files, 36 B to place (4 from cmroot)" in text
    assert f"{store.config.cmroot}/part-0.parquet_crc32c-" in text
    assert (tree_hash(store.config.warehouse, store.config.cmroot), metadata_hash(store)) == (files, log)


def test_a_replica_replays_the_restore_and_verify_holds(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    seed(source)
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    before = snapshot(source, "sales", "orders")
    source.catalog.drop_table("sales", "orders")
    incremental(engine)
    assert target.catalog.find_table("sales_dr", "orders") is None
    restore(source, lambda p: p.undrop_table("sales", "orders"))
    incremental(engine)
    assert snapshot(target, "sales_dr", "orders") == before
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_restore_on_a_protected_replica_is_refused(
    engine: ReplicationEngine, source: Metastore, target: Metastore
) -> None:
    seed(source)
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    source.catalog.drop_partitions("sales", "orders", [["d1"]])
    incremental(engine)
    log = metadata_hash(target)
    with pytest.raises(RestoreError, match="restore refused: database 'sales_dr' is a protected replica"):
        RestorePlanner(target).undrop_partitions("sales_dr", "orders")
    assert metadata_hash(target) == log
    with privileged("a replication load"):  # the replica's drop, as a load applies it
        target.catalog.drop_database("sales_dr", cascade=True)
    log = metadata_hash(target)
    with pytest.raises(RestoreError, match="restore refused: database 'sales_dr' is a protected replica"):
        RestorePlanner(target).undrop_database("sales_dr")
    assert metadata_hash(target) == log


def incremental(engine: ReplicationEngine) -> None:
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")


def test_the_cli_previews_then_restores(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    seed(store)
    before = snapshot(store, "sales", "orders")
    store.catalog.drop_table("sales", "orders")
    config = store.config
    roots = ["--db-url", config.db_url, "--warehouse", config.warehouse, "--cmroot", config.cmroot]
    runner = CliRunner()
    log = metadata_hash(store)
    preview = runner.invoke(main, [*roots, "restore", "table", "sales.orders", "--preview"])
    assert preview.exit_code == 0, preview.output
    assert "create table 'sales.orders' from 'sales.orders'" in preview.output
    assert "add partition 'sales.orders/day=d1': place 2 files, 18 B (2 from cmroot)" in preview.output
    assert metadata_hash(store) == log
    taken = runner.invoke(main, [*roots, "restore", "table", "sales.orders", "--into", "plain"])
    assert taken.exit_code == 1
    assert taken.stderr.strip().splitlines() == [
        "Error: table 'sales.plain' exists; restore into another name with --into NEW, or drop or rename it first"
    ]
    done = runner.invoke(main, [*roots, "restore", "table", "sales.orders"])
    assert done.exit_code == 0, done.output
    assert done.output.startswith("restored table 'sales.orders' as of event ")
    assert snapshot(store, "sales", "orders") == before


def test_undrop_an_external_table_reuses_the_files_left_in_place(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    store.catalog.create_database(Database(name="sales"))
    location = f"{store.config.warehouse}/external/ext"
    write_file(location, "000000_0", b"external rows\n")
    table = make_table("sales", "ext", EXTERNAL="TRUE")
    sd = table.sd.model_copy(update={"location": location})
    store.catalog.create_table(table.model_copy(update={"table_type": TableType.EXTERNAL_TABLE, "sd": sd}))
    before = snapshot(store, "sales", "ext")
    store.catalog.drop_table("sales", "ext")
    plan = RestorePlanner(store).undrop_table("sales", "ext")
    assert (len(plan.placements), [len(obj.keep) for obj in plan.objects]) == (0, [1])
    RestoreExecutor(store).run(plan)
    assert snapshot(store, "sales", "ext") == before
    assert store.catalog.get_table("sales", "ext").sd.location == location


def test_revert_by_time_adds_back_and_drops_partitions(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    seed(store)
    before = snapshot(store, "sales", "orders")
    time.sleep(1.1)  # event times are whole seconds
    moment = int(time.time()) - 1
    table = store.catalog.get_table("sales", "orders")
    store.catalog.add_partitions("sales", "orders", [make_partition(table, "d3")])
    store.catalog.drop_partitions("sales", "orders", [["d1"]])
    plan = RestorePlanner(store).revert_table("sales", "orders", RestorePlanner(store).event_for_time(moment))
    assert sorted((obj.action, obj.what) for obj in plan.objects) == [
        ("add", "partition 'sales.orders/day=d1'"),
        ("drop", "partition 'sales.orders/day=d3'"),
    ]
    RestoreExecutor(store).run(plan)
    assert snapshot(store, "sales", "orders") == before


def test_a_history_the_log_no_longer_holds_is_refused(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    seed(store)
    store.catalog.drop_table("sales", "plain")
    store.events.cleanup(0, now=4_000_000_000)  # every event is past its TTL
    store.catalog.create_database(Database(name="later"))  # the log goes on
    with pytest.raises(RestoreError, match=r"no drop of table 'sales\.plain'"):
        RestorePlanner(store).undrop_table("sales", "plain")
    with pytest.raises(RestoreError, match="the log no longer holds its creation"):
        RestorePlanner(store).revert_table("sales", "orders", store.events.current_event_id())


def test_a_bad_target_name_is_refused_before_any_file_is_placed(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    seed(store)
    store.catalog.drop_table("sales", "orders")
    files, log = tree_hash(store.config.warehouse, store.config.cmroot), metadata_hash(store)
    with pytest.raises(Exception, match="table name 'bad name!' is invalid"):
        RestorePlanner(store).undrop_table("sales", "orders", into="bad name!")
    with pytest.raises(Exception, match="database name 'no-dash' is invalid"):
        RestorePlanner(store).undrop_database("sales", into="no-dash")
    assert (tree_hash(store.config.warehouse, store.config.cmroot), metadata_hash(store)) == (files, log)
