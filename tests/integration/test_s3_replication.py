"""Replication with warehouses, cmroots and dump root on S3 (a real S3-protocol server process), and mixed.

Two versioned buckets stand for two clusters' stores. Data files are written with the storage layer
(as a writer on S3 would) and registered with the metastore; the replica is compared with ``verify``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.intents import FileIntents
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.verify import verify
from hmsrepl.storage import filesystem_for
from hmsrepl.storage.s3 import S3FileSystem
from tests.helpers import make_partition, make_table
from tests.s3server import create_bucket, new_bucket_name
from tests.store_replication import OpenStore, bootstrap_then_incremental, open_stores, put, read


@pytest.fixture
def stores(tmp_path: Path, s3_env: object, s3_client: Any) -> Iterator[OpenStore]:
    yield from open_stores(tmp_path)


@pytest.mark.parametrize("layout", ["all-s3", "local-source-s3-target"])
def test_replication_on_s3(stores: Any, s3_client: Any, tmp_path: Path, layout: str) -> None:
    src_bucket = create_bucket(s3_client, new_bucket_name("src"), versioned=True)
    dst_bucket = create_bucket(s3_client, new_bucket_name("dst"), versioned=True)
    if layout == "all-s3":
        source = stores("source", f"s3://{src_bucket}/warehouse", f"s3://{src_bucket}/cmroot")
        dump_root = f"s3://{src_bucket}/repl"
    else:
        source = stores("source", str(tmp_path / "src_wh"), str(tmp_path / "src_cm"))
        dump_root = str(tmp_path / "dumps")
    target = stores("target", f"s3://{dst_bucket}/warehouse", f"s3://{dst_bucket}/cmroot")
    d1 = bootstrap_then_incremental(source, target, dump_root)
    assert d1.sd.location.startswith(f"s3://{dst_bucket}/warehouse/")


def two_clusters(
    stores: Any, s3_client: Any, *, source_versioned: bool = True
) -> tuple[Metastore, Metastore, ReplicationEngine, str]:
    """A source and a replica, each with its warehouse and cmroot in a bucket of its own (the replica's
    versioned), the dumps in the source's bucket, and database ``sales`` on the source; and the replica's
    bucket."""
    src_bucket = create_bucket(s3_client, new_bucket_name("src"), versioned=source_versioned)
    dst_bucket = create_bucket(s3_client, new_bucket_name("dst"), versioned=True)
    source = stores("source", f"s3://{src_bucket}/warehouse", f"s3://{src_bucket}/cmroot")
    target = stores("target", f"s3://{dst_bucket}/warehouse", f"s3://{dst_bucket}/cmroot")
    source.catalog.create_database(Database(name="sales"))
    return source, target, ReplicationEngine(f"s3://{src_bucket}/repl", source, target), dst_bucket


@pytest.mark.parametrize("versioned", [True, False])
def test_file_overwritten_and_deleted_after_its_event_replays_that_version(
    stores: Any, s3_client: Any, versioned: bool
) -> None:
    """Bypassing the metastore, a file is overwritten and then deleted after its INSERT event; the load
    restores the event's version: from the bucket's version history, or without versioning from cmroot."""
    source, target, engine, _ = two_clusters(stores, s3_client, source_versioned=versioned)
    table = source.catalog.create_table(make_table("sales", "t"))
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    data = put(f"{table.sd.location}/data.csv", b"version of the event")
    source.catalog.insert("sales", "t")
    if not versioned:  # the metastore's own overwrite path keeps the old content in cmroot
        newer = put(f"{table.sd.location}/data2.csv", b"newer")
        source.catalog.insert("sales", "t", new_files=[newer], replace=True)
    else:  # a writer that bypasses the metastore: only the bucket's versions remember
        put(data, b"overwritten behind the metastore's back")
        filesystem_for(data).delete(data)
    inc = engine.execute(f"REPL DUMP sales FROM {dumped.last_event_id} LIMIT 1")  # just the first INSERT
    loaded = engine.execute(f"REPL LOAD sales_dr FROM '{inc.dump_dir}'")
    replica = target.catalog.get_table("sales_dr", "t")
    assert read(f"{replica.sd.location}/data.csv") == b"version of the event"
    assert loaded.stats.files_from_cmroot == (0 if versioned else 1)


KEPT = 30


def _keys(s3_client: Any, bucket: str, prefix: str = "warehouse/") -> set[str]:
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {obj["Key"] for page in pages for obj in page.get("Contents", [])}


@pytest.fixture
def s3_pair(stores: Any, s3_client: Any) -> tuple[Metastore, Metastore, ReplicationEngine, str]:
    """A source and its replica, both on S3, with one partition of ``KEPT`` files replicated."""
    source, target, engine, dst_bucket = two_clusters(stores, s3_client)
    orders = source.catalog.create_table(make_table("sales", "orders", partition_keys=("day",)))
    [part] = source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d1")])
    for i in range(KEPT):
        put(f"{part.sd.location}/part-{i:05d}.parquet", f"rows {i}".encode())
    source.catalog.insert("sales", "orders", ["d1"])
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    return source, target, engine, dst_bucket


def _append(source: Metastore, name: str, data: bytes) -> None:
    part = source.catalog.get_partition("sales", "orders", ["d1"])
    source.catalog.insert("sales", "orders", ["d1"], new_files=[put(f"{part.sd.location}/{name}", data)])


def _incremental(engine: ReplicationEngine) -> Any:
    last = engine.execute("REPL STATUS sales_dr")
    dumped = engine.execute(f"REPL DUMP sales FROM {last}")
    return engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")


def _replica_location(target: Metastore) -> str:
    return target.catalog.get_partition("sales_dr", "orders", ["d1"]).sd.location or ""


def test_one_new_file_into_an_s3_replica_copies_that_file_only(s3_pair: Any, s3_client: Any) -> None:
    """An append to a partition on an S3 replica adds one object to the partition's prefix: the files it
    keeps are not copied to a new version, and no staged object is left."""
    source, target, engine, dst_bucket = s3_pair
    location = _replica_location(target)
    before = _keys(s3_client, dst_bucket)
    _append(source, "part-new.parquet", b"new rows")
    loaded = _incremental(engine)
    assert _replica_location(target) == location, "the partition's location moved"
    assert (loaded.stats.files_copied, loaded.stats.files_kept) == (1, KEPT)
    added = _keys(s3_client, dst_bucket) - before
    assert [key.rsplit("/", 1)[1] for key in added] == ["part-new.parquet"]
    assert before <= _keys(s3_client, dst_bucket)
    assert read(f"{location}/part-new.parquet") == b"new rows"
    assert target.catalog.intents.pending() == []
    assert verify(source, "sales", target, "sales_dr") == []


def test_an_s3_load_that_dies_after_its_commit_publishes_the_file_on_restart(
    s3_pair: Any, s3_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Housekeeping publishes the staged object; one that dies between the copy and the staged object's
    delete is run again without ever deleting the published file (readers may already list it)."""
    source, target, engine, dst_bucket = s3_pair
    location = _replica_location(target)
    final, staged = f"{location}/part-new.parquet", f"{location}/.hmsrepl-staging-part-new.parquet"
    _append(source, "part-new.parquet", b"new rows")
    monkeypatch.setattr(FileIntents, "_after_commit", lambda self, intents: None)  # gone right after commit
    _incremental(engine)
    monkeypatch.undo()
    names = {key.rsplit("/", 1)[1] for key in _keys(s3_client, dst_bucket)}
    assert "part-new.parquet" not in names and ".hmsrepl-staging-part-new.parquet" in names
    real_delete = S3FileSystem.delete
    deleted: list[str] = []

    def dies_before_removing_the_staged_copy(self: S3FileSystem, uri: str) -> None:
        raise OSError("killed")

    def spy(self: S3FileSystem, uri: str) -> None:
        deleted.append(uri)
        real_delete(self, uri)

    monkeypatch.setattr(S3FileSystem, "delete", dies_before_removing_the_staged_copy)
    assert target.complete_file_intents(lease_seconds=0).failed == 1
    assert read(final) == b"new rows"  # published: readers list it from here on
    monkeypatch.setattr(S3FileSystem, "delete", spy)
    assert target.complete_file_intents(lease_seconds=0).completed == 1
    assert deleted == [staged], "the published file was deleted and copied again"
    assert read(final) == b"new rows" and target.catalog.intents.pending() == []
    monkeypatch.undo()
    assert verify(source, "sales", target, "sales_dr") == []


def test_an_object_written_behind_an_s3_replicas_back_takes_a_new_version(s3_pair: Any) -> None:
    source, target, engine, _ = s3_pair
    location = _replica_location(target)
    put(f"{location}/part-stray.parquet", b"refused write")
    _append(source, "part-new.parquet", b"new rows")
    _incremental(engine)
    assert _replica_location(target) != location
    assert verify(source, "sales", target, "sales_dr") == []


def test_appends_between_two_loads_into_an_s3_replica_copy_only_the_new_objects(
    s3_pair: Any, s3_client: Any
) -> None:
    source, target, engine, dst_bucket = s3_pair
    location = _replica_location(target)
    before = _keys(s3_client, dst_bucket)
    for name in ("part-x.parquet", "part-y.parquet"):
        _append(source, name, name.encode())
    loaded = _incremental(engine)
    assert _replica_location(target) == location and loaded.stats.files_copied == 2
    added = sorted(key.rsplit("/", 1)[1] for key in _keys(s3_client, dst_bucket) - before)
    assert added == ["part-x.parquet", "part-y.parquet"]
    assert verify(source, "sales", target, "sales_dr") == []


def test_appends_to_two_partitions_of_an_s3_replica_copy_only_the_new_objects(
    s3_pair: Any, s3_client: Any
) -> None:
    """One partition's appends, then the next one's, in one load: both get their new objects in place (the
    partitions' prefixes are not copied to new versions), in the order the source wrote them."""
    source, target, engine, dst_bucket = s3_pair
    orders = source.catalog.get_table("sales", "orders")
    [d2] = source.catalog.add_partitions("sales", "orders", [make_partition(orders, "d2")])
    put(f"{d2.sd.location}/part-00000.parquet", b"d2 rows")
    source.catalog.insert("sales", "orders", ["d2"])
    _incremental(engine)
    locations = {
        day: target.catalog.get_partition("sales_dr", "orders", [day]).sd.location for day in ("d1", "d2")
    }
    before = _keys(s3_client, dst_bucket)
    _append(source, "part-x.parquet", b"x")
    source.catalog.insert(
        "sales", "orders", ["d2"], new_files=[put(f"{d2.sd.location}/part-y.parquet", b"y")]
    )
    loaded = _incremental(engine)
    after = {day: target.catalog.get_partition("sales_dr", "orders", [day]).sd.location for day in locations}
    assert after == locations and loaded.stats.files_copied == 2
    added = sorted(key.rsplit("/", 1)[1] for key in _keys(s3_client, dst_bucket) - before)
    assert added == ["part-x.parquet", "part-y.parquet"]
    assert target.catalog.intents.pending() == []
    assert verify(source, "sales", target, "sales_dr") == []
