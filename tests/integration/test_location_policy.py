"""The location policy on the catalog: what a drop may remove, and renames of empty managed tables."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import update

from hmsrepl.cli import main
from hmsrepl.exceptions import InvalidObjectError, InvalidOperationError, MetastoreError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Partition
from hmsrepl.metastore.schema import dbs, tbls
from hmsrepl.replication.filecopy import logical_location
from hmsrepl.replication.verify import verify
from hmsrepl.storage.local import local_path
from tests.conftest import make_config
from tests.helpers import create_db_and_table, make_partition, make_table, side_args, write_file


def _tree(path: str | Path) -> dict[str, str]:
    out = {}
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            full = os.path.join(dirpath, name)
            out[full] = hashlib.sha256(Path(full).read_bytes()).hexdigest()
    return out


def _relocate_db(store: Metastore, name: str, location: str) -> None:
    """Put a database where the policy would refuse it (as an old metastore may have stored it)."""
    db = store.catalog.get_database(name).model_copy(update={"location_uri": location})
    with store.engine.begin() as conn:
        conn.execute(update(dbs).where(dbs.c.name == name).values(doc=db.model_dump_json()))


def _relocate_table(store: Metastore, db: str, name: str, location: str) -> None:
    table = store.catalog.get_table(db, name)
    table = table.model_copy(update={"sd": table.sd.model_copy(update={"location": location})})
    with store.engine.begin() as conn:
        conn.execute(
            update(tbls)
            .where(tbls.c.tbl_id == table.id)
            .values(location=location, doc=table.model_dump_json(exclude={"id", "write_id"}))
        )


def test_rename_of_an_empty_managed_table_keeps_its_directory(metastore: Metastore) -> None:
    table = create_db_and_table(metastore, "sales", "x0")
    assert os.path.isdir(local_path(table.sd.location))
    metastore.catalog.alter_table("sales", "x0", table.model_copy(update={"table_name": "x1"}))
    renamed = metastore.catalog.get_table("sales", "x1")
    assert renamed.sd.location.endswith("/sales.db/x1")
    assert os.path.isdir(local_path(renamed.sd.location))
    assert not os.path.exists(local_path(table.sd.location))
    # and it is still a table one can write to and drop
    write_file(renamed.sd.location, "000000_0", b"1\n")
    metastore.catalog.insert("sales", "x1")
    metastore.catalog.drop_table("sales", "x1")
    assert not os.path.exists(local_path(renamed.sd.location))


def test_rename_of_an_empty_partitioned_table_moves_its_partitions(metastore: Metastore) -> None:
    table = create_db_and_table(metastore, "sales", "p0", partition_keys=("d",))
    metastore.catalog.add_partitions("sales", "p0", [make_partition(table, "1")])
    metastore.catalog.alter_table("sales", "p0", table.model_copy(update={"table_name": "p1"}))
    part = metastore.catalog.get_partition("sales", "p1", ["1"])
    assert part.sd.location.endswith("/sales.db/p1/d=1")
    assert os.path.isdir(local_path(metastore.catalog.get_table("sales", "p1").sd.location))


def test_rename_moves_every_partition_directory_empty_ones_included(metastore: Metastore) -> None:
    table = create_db_and_table(metastore, "sales", "p0", partition_keys=("d",))
    empty, full = metastore.catalog.add_partitions(
        "sales", "p0", [make_partition(table, "empty"), make_partition(table, "full")]
    )
    write_file(full.sd.location, "part-0.parquet", b"rows")
    metastore.catalog.insert("sales", "p0", ["full"])
    metastore.catalog.alter_table("sales", "p0", table.model_copy(update={"table_name": "p1"}))
    for values, files in ((["empty"], []), (["full"], ["part-0.parquet"])):
        moved = metastore.catalog.get_partition("sales", "p1", values)
        assert moved.sd.location.endswith(f"/sales.db/p1/d={values[0]}")
        assert os.path.isdir(local_path(moved.sd.location)), moved.sd.location
        assert sorted(os.listdir(local_path(moved.sd.location))) == files
    assert not os.path.exists(local_path(table.sd.location))
    assert not os.path.exists(local_path(empty.sd.location))


def test_drop_database_recycles_loose_files_instead_of_deleting(metastore: Metastore) -> None:
    metastore.catalog.create_database(Database(name="loose"))
    location = metastore.catalog.get_database("loose").location_uri
    write_file(location, "notes.txt", b"left here by hand")
    metastore.catalog.drop_database("loose", delete_data=True, cascade=True)
    assert not os.path.exists(local_path(location))
    kept = [name for name in os.listdir(metastore.config.cmroot) if name.startswith("notes.txt_")]
    assert len(kept) == 1


def test_drop_never_removes_a_directory_holding_another_object(metastore: Metastore) -> None:
    victim = create_db_and_table(metastore, "victim", "facts")
    write_file(victim.sd.location, "000000_0", b"victim rows")
    victim_dir = metastore.catalog.get_database("victim").location_uri
    metastore.catalog.create_database(Database(name="evil"))
    evil = metastore.catalog.create_table(make_table("evil", "t"))
    before = _tree(local_path(victim_dir))
    # Stored before the policy existed: a database at another's directory, a table at another's table.
    _relocate_db(metastore, "evil", victim_dir)
    _relocate_table(metastore, "evil", "t", victim.sd.location)
    with pytest.raises(InvalidOperationError, match="is not its own"):
        metastore.catalog.truncate_table("evil", "t")
    metastore.catalog.drop_database("evil", delete_data=True, cascade=True)
    assert _tree(local_path(victim_dir)) == before
    assert metastore.catalog.get_table("victim", "facts").id == victim.id
    assert not os.path.exists(local_path(evil.sd.location)) or not os.listdir(local_path(evil.sd.location))


def test_drop_of_a_table_stored_outside_the_warehouse_leaves_its_files(
    metastore: Metastore, tmp_path
) -> None:
    outside = tmp_path / "outside"
    data = write_file(str(outside), "precious.bin", b"not ours")
    create_db_and_table(metastore, "legacy", "t")
    _relocate_table(metastore, "legacy", "t", str(outside))
    metastore.catalog.drop_table("legacy", "t")
    assert Path(local_path(data)).read_bytes() == b"not ours"
    assert os.listdir(metastore.config.cmroot) == [] if os.path.isdir(metastore.config.cmroot) else True


def test_partitions_follow_the_policy(metastore: Metastore, tmp_path) -> None:
    table = create_db_and_table(metastore, "sales", "orders", partition_keys=("d",))
    other = metastore.catalog.create_table(make_table("sales", "other"))
    for bad, fragment in (
        (str(tmp_path / "outside"), "outside the managed roots"),
        (other.sd.location, "table 'sales.other'"),
        (metastore.config.cmroot + "/p", "HMSREPL_CMROOT"),
    ):
        part = make_partition(table, "x").model_copy(
            update={"sd": table.sd.model_copy(update={"location": bad})}
        )
        with pytest.raises(InvalidObjectError, match=fragment):
            metastore.catalog.add_partitions("sales", "orders", [part])
    assert metastore.catalog.get_partition_names("sales", "orders") == []
    good = make_partition(table, "y")
    metastore.catalog.add_partitions("sales", "orders", [good])
    escaped = Partition.model_validate(
        {**good.model_dump(), "sd": {**table.sd.model_dump(), "location": f"{table.sd.location}/../../../x"}}
    )
    with pytest.raises(InvalidObjectError, match="outside the managed roots"):
        metastore.catalog.alter_partitions("sales", "orders", [escaped])


def test_configured_roots_allow_more(db_url: str, tmp_path) -> None:
    managed, external = tmp_path / "fast_disk", tmp_path / "landing"
    store = Metastore.open(
        make_config(db_url, tmp_path, managed_roots=[str(managed)], external_roots=[str(external)])
    )
    try:
        store.catalog.create_database(Database(name="fast", location_uri=f"file://{managed}/fast.db"))
        assert store.catalog.get_database("fast").location_uri == f"file://{managed}/fast.db"  # kept as sent
        with pytest.raises(InvalidObjectError, match="root itself"):
            store.catalog.create_database(Database(name="whole", location_uri=str(managed)))
        with pytest.raises(InvalidObjectError, match="HMSREPL_MANAGED_ROOTS"):
            store.catalog.create_database(Database(name="land", location_uri=str(external / "land.db")))
    finally:
        store.close()


def test_a_table_sharing_a_custom_partitions_directory_never_deletes_its_files(metastore: Metastore) -> None:
    table = create_db_and_table(metastore, "sales", "orders", partition_keys=("d",))
    db_location = metastore.catalog.get_database("sales").location_uri
    custom = f"{db_location}/shared"
    part = make_partition(table, "1").model_copy(
        update={"sd": table.sd.model_copy(update={"location": custom})}
    )
    metastore.catalog.add_partitions("sales", "orders", [part])
    write_file(custom, "part-0", b"partition rows")
    # Creation compares tables with tables and databases only; the drop still sees the partition.
    shared = metastore.catalog.create_table(make_table("sales", "shared"))
    assert shared.sd.location == custom
    before = _tree(local_path(custom))
    metastore.catalog.drop_table("sales", "shared")
    assert _tree(local_path(custom)) == before
    metastore.catalog.drop_partitions("sales", "orders", [["1"]])
    assert _tree(local_path(custom)) == {}


def test_rename_of_an_empty_table_stays_readable_on_the_replica(
    engine, source: Metastore, target: Metastore
) -> None:
    source.catalog.create_database(Database(name="sales"))
    source.catalog.create_table(make_table("sales", "x0"))
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    x0 = source.catalog.get_table("sales", "x0")
    source.catalog.alter_table("sales", "x0", x0.model_copy(update={"table_name": "x1"}))
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    for store, db in ((source, "sales"), (target, "sales_dr")):
        location = store.catalog.get_table(db, "x1").sd.location
        # the replica names a version directory of x1 (location flip); readers list it, so it must exist
        assert logical_location(location).endswith(f"/{db}.db/x1"), (db, location)
        assert os.path.isdir(local_path(location)), (db, location)


def test_rename_of_a_table_with_an_empty_partition_keeps_it_on_source_and_replica(
    engine, source: Metastore, target: Metastore
) -> None:
    source.catalog.create_database(Database(name="sales"))
    p0 = source.catalog.create_table(make_table("sales", "p0", partition_keys=("d",)))
    _, full = source.catalog.add_partitions(
        "sales", "p0", [make_partition(p0, "empty"), make_partition(p0, "full")]
    )
    write_file(full.sd.location, "part-0.parquet", b"rows")
    source.catalog.insert("sales", "p0", ["full"])
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    source.catalog.alter_table("sales", "p0", p0.model_copy(update={"table_name": "p1"}))
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    for store, db in ((source, "sales"), (target, "sales_dr")):
        for values in (["empty"], ["full"]):
            location = store.catalog.get_partition(db, "p1", values).sd.location
            assert logical_location(location).endswith(f"/{db}.db/p1/d={values[0]}"), (db, location)
            assert os.path.isdir(local_path(location)), (db, location)
    assert verify(source, "sales", target, "sales_dr") == []


def test_verify_reports_each_location_missing_on_the_source(
    engine, source: Metastore, target: Metastore
) -> None:
    """A replica equal to a source that lost directories is no healthy pair: one line per missing location."""
    source.catalog.create_database(Database(name="sales"))
    p0 = source.catalog.create_table(make_table("sales", "p0", partition_keys=("d",)))
    first, second, kept = source.catalog.add_partitions(
        "sales", "p0", [make_partition(p0, v) for v in ("a", "b", "c")]
    )
    flat = source.catalog.create_table(make_table("sales", "flat"))
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    assert verify(source, "sales", target, "sales_dr") == []
    for gone in (first, second, flat):
        os.rmdir(local_path(gone.sd.location))
    runner = CliRunner()
    done = runner.invoke(
        main,
        ["repl", "verify", "sales", "sales_dr", *side_args("source", source), *side_args("target", target)],
    )
    assert done.exit_code == 1, done.output
    assert done.stdout.splitlines() == [
        f"missing on the source: table flat: location '{flat.sd.location}' does not exist",
        f"missing on the source: partition p0/d=a: location '{first.sd.location}' does not exist",
        f"missing on the source: partition p0/d=b: location '{second.sd.location}' does not exist",
    ]
    assert os.path.isdir(local_path(kept.sd.location))


def test_unusable_roots_stop_the_metastore_with_one_line(tmp_path) -> None:
    for overrides, message in (
        ({"external_roots": ["rel/dir"]}, "HMSREPL_EXTERNAL_ROOTS: root 'rel/dir' is a relative path"),
        (
            {"managed_roots": ["/ok", "/bad\x00"]},
            "HMSREPL_MANAGED_ROOTS: root '/bad\\x00' contains the control",
        ),
    ):
        with pytest.raises(MetastoreError, match=re.escape(message)):
            Metastore(make_config(f"sqlite:///{tmp_path}/m.db", tmp_path, **overrides))
