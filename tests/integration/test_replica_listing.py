"""The replica's own verified listing: a load applies each event's data change to what the replica recorded.

One new file into a partition of many reads none of the files already there; a file changed on the replica
behind its back is noticed by size and modification time and copied again; a missing event is refused in one
line before anything changes; and format-1 (complete listings) and format-2 (deltas) dumps load alike.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.messages import ListingMismatchError
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import capture_state, diff_states, verify
from hmsrepl.storage.local import LocalFileSystem, local_path
from tests.dump_events import read_events, rewrite_events, to_layout_format_1
from tests.format2 import bootstrap_listings, message_versions, to_format_1, to_format_2
from tests.helpers import make_partition, make_table, record_listing_writes, write_file

FILES = 40


def seed(source: Metastore) -> None:
    catalog = source.catalog
    catalog.create_database(Database(name="sales"))
    orders = catalog.create_table(make_table("sales", "orders", partition_keys=("day",)))
    [part] = catalog.add_partitions("sales", "orders", [make_partition(orders, "d1")])
    for i in range(FILES):
        write_file(part.sd.location, f"part-{i:05d}.parquet", f"rows {i}".encode())
    catalog.insert("sales", "orders", ["d1"])
    plain = catalog.create_table(make_table("sales", "plain"))
    write_file(plain.sd.location, "000000_0", b"a,1\n")
    catalog.insert("sales", "plain")


def append(source: Metastore, name: str, data: bytes, day: str = "d1") -> None:
    part = source.catalog.get_partition("sales", "orders", [day])
    new = write_file(part.sd.location, name, data)
    source.catalog.insert("sales", "orders", [day], new_files=[new])


def append_two(source: Metastore, day: str = "d1") -> None:
    """One INSERT of two new files: the load publishes it as a new version of the partition."""
    part = source.catalog.get_partition("sales", "orders", [day])
    new = [write_file(part.sd.location, f"part-two-{i}.parquet", f"two {i}".encode()) for i in range(2)]
    source.catalog.insert("sales", "orders", [day], new_files=new)


def bootstrap(engine: ReplicationEngine, target_db: str = "sales_dr") -> str:
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD {target_db} FROM '{dumped.dump_dir}'")
    return dumped.dump_dir


def replica_file(target: Metastore, name: str, db: str = "sales_dr") -> Path:
    part = target.catalog.get_partition(db, "orders", ["d1"])
    return Path(local_path(part.sd.location)) / name


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file a local checksum call reads, from the moment the test asks for it."""
    calls: list[str] = []
    real = LocalFileSystem.checksum

    def counting(self: LocalFileSystem, uri: str) -> str:
        calls.append(uri)
        return real(self, uri)

    monkeypatch.setattr(LocalFileSystem, "checksum", counting)
    return calls


def test_one_new_file_into_a_partition_of_many_reads_no_file_already_there(engine, source, target, hashed):
    seed(source)
    bootstrap(engine)
    append(source, "part-new.parquet", b"new rows")
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    hashed.clear()
    loaded = engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    target_dir = local_path(target.config.warehouse)
    assert [uri for uri in hashed if local_path(uri).startswith(target_dir)] == []
    assert loaded.stats.files_copied == 1 and loaded.stats.files_kept == FILES
    assert verify(source, "sales", target, "sales_dr") == []


def test_loads_record_only_what_changed_in_the_replicas_listing(engine, source, target, monkeypatch):
    """Each load of one new file writes that file's record, never the kept files' records again (a listing
    that states times in float seconds must not look changed to a record in nanoseconds)."""
    written = record_listing_writes(monkeypatch)
    seed(source)
    bootstrap(engine)
    for round_ in range(3):
        append(source, f"part-new-{round_}.parquet", f"new rows {round_}".encode())
        written.clear()
        incremental(engine)
        assert set(written) == {f"part-new-{round_}.parquet"}, written[:5]
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_file_changed_behind_the_replicas_back_is_noticed_and_copied_again(engine, source, target):
    seed(source)
    bootstrap(engine)
    drifted = replica_file(target, "part-00007.parquet")
    drifted.write_bytes(b"rows X")  # same size, other content: only the modification time tells
    os.utime(drifted, ns=(drifted.stat().st_atime_ns, drifted.stat().st_mtime_ns + 5_000_000_000))
    append_two(source)  # a new version (one new file alone is added in place, trusting no kept file)
    _, loaded = incremental(engine)
    assert loaded.stats.files_reverified == 1
    assert replica_file(target, "part-00007.parquet").read_bytes() == b"rows 7"
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_touched_file_with_the_same_content_is_kept(engine, source, target):
    seed(source)
    bootstrap(engine)
    touched = replica_file(target, "part-00003.parquet")
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 5_000_000_000))
    append_two(source)
    _, loaded = incremental(engine)
    assert loaded.stats.files_reverified == 1 and loaded.stats.files_copied == 2
    assert verify(source, "sales", target, "sales_dr") == []


def incremental(engine: ReplicationEngine, db: str = "sales_dr", convert: dict | None = None):
    last = engine.execute(f"REPL STATUS {db}")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    if convert is not None:
        to_format_2(dumped.dump_dir, convert)
    return dumped, engine.execute(f"REPL LOAD {db} FROM '{dumped.dump_dir}'")


def test_a_missing_event_is_one_line_naming_the_object_and_changes_nothing(engine, source, target):
    seed(source)
    bootstrap(engine)
    append(source, "part-a.parquet", b"a rows")
    append(source, "part-b.parquet", b"b rows")
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last} WITH ('hmsrepl.repl.compact.events'='false')")
    assert message_versions(dumped.dump_dir) == [2, 2]  # captured as deltas
    [first, *_] = read_events(dumped.dump_dir)
    assert first["event_type"] == "INSERT"
    rewrite_events(
        dumped.dump_dir, lambda doc: None if doc["event_id"] == first["event_id"] else doc
    )  # never arrives
    before = capture_state(target, "sales_dr")
    with pytest.raises(ListingMismatchError) as failure:
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    message = str(failure.value)
    assert "\n" not in message and "sales_dr.orders/day=d1" in message and "bootstrap" in message
    assert diff_states(before, capture_state(target, "sales_dr")) == []
    assert repl_status(target, "sales_dr") == last
    assert not replica_file(target, "part-b.parquet").exists()


def test_format_1_and_format_2_dumps_load_to_the_same_replica(engine, source, target):
    seed(source)
    boot = bootstrap(engine, "sales_v1")
    engine.execute(f"REPL LOAD sales_v2 FROM '{boot}'")
    listings = bootstrap_listings(boot, "sales")
    catalog = source.catalog
    orders = catalog.get_table("sales", "orders")
    append(source, "part-new.parquet", b"new rows")
    [d2] = catalog.add_partitions("sales", "orders", [make_partition(orders, "d2")])
    write_file(d2.sd.location, "x.parquet", b"d2 rows")
    catalog.insert("sales", "orders", ["d2"])
    append(source, "part-more.parquet", b"more", day="d2")
    d1 = catalog.get_partition("sales", "orders", ["d1"])
    os.remove(local_path(d1.sd.location) + "/part-00001.parquet")
    os.remove(local_path(d1.sd.location) + "/part-00002.parquet")  # writers replace files, never edit them
    replaced = write_file(d1.sd.location, "part-00002.parquet", b"rows 2, rewritten")
    assert replaced
    catalog.insert("sales", "orders", ["d1"])  # no files named: the whole partition is looked at
    plain = catalog.get_table("sales", "plain")
    overwrite = write_file(plain.sd.location, "000001_0", b"b,2\n")
    catalog.insert("sales", "plain", new_files=[overwrite], replace=True)
    catalog.drop_partitions("sales", "orders", [["d2"]])
    last = engine.execute("REPL STATUS sales_v1")
    v2 = engine.execute(f"REPL DUMP sales FROM {last}").dump_dir  # as captured: deltas
    v1 = v2.rstrip("/") + "-v1"
    shutil.copytree(local_path(v2), local_path(v1))
    assert to_format_1(v1, listings) > 0  # as a log written before format 2 holds it
    to_layout_format_1(v1)  # and as a dump written before event segments: a directory per event
    assert (Path(local_path(v1)) / "events").is_dir() and not list(
        Path(local_path(v1)).glob("events/*/_events")
    )
    assert set(message_versions(v1)) == {1} and 2 in message_versions(v2)
    engine.execute(f"REPL LOAD sales_v1 FROM '{v1}'")
    engine.execute(f"REPL LOAD sales_v2 FROM '{v2}'")
    assert verify(source, "sales", target, "sales_v1") == []
    assert verify(source, "sales", target, "sales_v2") == []
    assert diff_states(capture_state(target, "sales_v1"), capture_state(target, "sales_v2")) == []
