"""Replication with warehouses, cmroots and dump roots on HDFS (a MiniDFSCluster), and mixed with local disks
and S3.

The source and the replica each get a directory of their own on the one cluster, standing for two clusters'
file systems. Data files are written with the storage layer (as a Hive or Spark writer on HDFS would) and
registered with the metastore; the replica is compared with ``verify``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import FileLostError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.intents import FileIntents
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.lost_files import STALE
from hmsrepl.replication.verify import verify
from hmsrepl.storage import filesystem_for
from hmsrepl.storage.hdfs import HdfsFileSystem, parse_hdfs_uri
from tests.helpers import make_table
from tests.s3server import create_bucket, new_bucket_name
from tests.store_replication import OpenStore, bootstrap_then_incremental, open_stores, put, read, workload


def file_id(fs: HdfsFileSystem, uri: str) -> int:
    """HDFS's inode id of a file, which a rename keeps and a copy does not."""
    return int(fs.client.info(parse_hdfs_uri(uri)[1])["fileId"])


def names_below(uri: str) -> set[str]:
    return {status.uri.rsplit("/", 1)[1] for status in filesystem_for(uri).list_files(uri)}


@pytest.fixture
def stores(tmp_path: Path, hdfs_env: object) -> Iterator[OpenStore]:
    yield from open_stores(tmp_path)


LAYOUTS = {
    # name: (source on HDFS, target on HDFS)
    "all-hdfs": (True, True),
    "hdfs-source-local-target": (True, False),
    "local-source-hdfs-target": (False, True),
}


def roots(hdfs_root: str, tmp_path: Path, side: str, on_hdfs: bool) -> tuple[str, str]:
    base = f"{hdfs_root}/{side}" if on_hdfs else str(tmp_path / side)
    return f"{base}/warehouse", f"{base}/cmroot"


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_replication_on_hdfs(stores: OpenStore, hdfs_root: str, tmp_path: Path, layout: str) -> None:
    source_on_hdfs, target_on_hdfs = LAYOUTS[layout]
    source = stores("source", *roots(hdfs_root, tmp_path, "src", source_on_hdfs))
    target = stores("target", *roots(hdfs_root, tmp_path, "dst", target_on_hdfs))
    dump_root = f"{hdfs_root}/src/repl" if source_on_hdfs else str(tmp_path / "dumps")
    d1 = bootstrap_then_incremental(source, target, dump_root)
    assert d1.sd.location.startswith(target.config.warehouse)
    if source_on_hdfs:  # the replaced file was recycled into the source's cmroot on HDFS by a rename
        assert any(name.startswith("part-0.parquet") for name in names_below(source.config.cmroot))


def test_a_file_overwritten_after_its_event_is_replayed_from_the_hdfs_cmroot(
    stores: OpenStore, hdfs_root: str
) -> None:
    """The metastore's own overwrite recycles the old file into cmroot (a rename on HDFS); a load of the
    earlier event reads it from there."""
    source = stores("source", f"{hdfs_root}/src/warehouse", f"{hdfs_root}/src/cmroot")
    target = stores("target", f"{hdfs_root}/dst/warehouse", f"{hdfs_root}/dst/cmroot")
    engine = ReplicationEngine(f"{hdfs_root}/src/repl", source, target)
    source.catalog.create_database(Database(name="sales"))
    table = source.catalog.create_table(make_table("sales", "t"))
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    data = put(f"{table.sd.location}/data.csv", b"version of the event")
    source.catalog.insert("sales", "t")
    fs = filesystem_for(data)
    assert isinstance(fs, HdfsFileSystem)
    inode = file_id(fs, data)
    newer = put(f"{table.sd.location}/data2.csv", b"newer")
    source.catalog.insert("sales", "t", new_files=[newer], replace=True)
    assert not fs.exists(data)
    [recycled] = [s.uri for s in fs.list_files(source.config.cmroot) if "data.csv" in s.uri]
    assert file_id(fs, recycled) == inode, "recycling within HDFS copied the file instead of a rename"
    inc = engine.execute(f"REPL DUMP sales FROM {dumped.last_event_id} LIMIT 1")  # just the first INSERT
    loaded = engine.execute(f"REPL LOAD sales_dr FROM '{inc.dump_dir}'")
    replica = target.catalog.get_table("sales_dr", "t")
    assert read(f"{replica.sd.location}/data.csv") == b"version of the event"
    assert loaded.stats.files_from_cmroot == 1
    rest = engine.execute(f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}")
    engine.execute(f"REPL LOAD sales_dr FROM '{rest.dump_dir}'")
    assert verify(source, "sales", target, "sales_dr") == []


def test_a_file_lost_on_hdfs_is_refused_or_skipped_as_the_load_says(
    stores: OpenStore, hdfs_root: str
) -> None:
    """A recorded file rewritten behind the metastore's back: the load refuses before its first change by
    default, and with ``skip-objects`` marks the partition stale and goes on.

    HDFS has no hard links, so a write leaves no cmroot pin of its files (as on an unversioned S3 bucket);
    any pin is removed here all the same, as retention would."""
    source = stores("source", f"{hdfs_root}/src/warehouse", f"{hdfs_root}/src/cmroot")
    target = stores("target", f"{hdfs_root}/dst/warehouse", f"{hdfs_root}/dst/cmroot")
    engine = ReplicationEngine(f"{hdfs_root}/src/repl", source, target)
    workload(source)
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    d1 = source.catalog.get_partition("sales", "orders", ["d1"])
    lost = put(f"{d1.sd.location}/lost.parquet", b"rows nobody can fetch any more")
    source.catalog.insert("sales", "orders", ["d1"], new_files=[lost])
    cm_fs = filesystem_for(source.config.cmroot)
    for pin in [s.uri for s in cm_fs.list_files(source.config.cmroot) if "lost.parquet" in s.uri]:
        cm_fs.delete(pin)
    put(lost, b"other rows, written without the metastore")
    plain = source.catalog.get_table("sales", "plain")
    source.catalog.insert("sales", "plain", new_files=[put(f"{plain.sd.location}/000001_0", b"b,2\n")])
    position = repl_status(target, "sales_dr")
    inc = engine.execute(f"REPL DUMP sales FROM {position}")
    with pytest.raises(FileLostError, match=r"lost\.parquet.*nothing was applied"):
        engine.execute(f"REPL LOAD sales_dr FROM '{inc.dump_dir}'")
    assert repl_status(target, "sales_dr") == position
    engine.execute(
        f"REPL LOAD sales_dr FROM '{inc.dump_dir}' WITH ('hmsrepl.repl.lost.files'='skip-objects')"
    )
    assert repl_status(target, "sales_dr") == source.get_current_notification_event_id()
    replica_d1 = target.catalog.get_partition("sales_dr", "orders", ["d1"])
    assert replica_d1.parameters.get(STALE)
    assert "lost.parquet" not in names_below(replica_d1.sd.location)
    replica_plain = target.catalog.get_table("sales_dr", "plain")
    assert read(f"{replica_plain.sd.location}/000001_0") == b"b,2\n"


def test_files_a_writer_moved_to_the_hdfs_trash_are_adopted_into_cmroot_by_rename(
    tmp_path: Path, hdfs_root: str
) -> None:
    """A Hive client with Hadoop trash moves the files it overwrites to ``<trash>/Current/<path>`` before
    telling the metastore; the metastore adopts them into its HDFS cmroot (a rename: the trash keeps nothing
    and the file keeps its HDFS inode id), so the earlier event still replays."""
    trash = f"{hdfs_root}/user/hive/.Trash"
    source = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/source.db",
            warehouse=f"{hdfs_root}/src/warehouse",
            cmroot=f"{hdfs_root}/src/cmroot",
            trash_root=trash,
        )
    )
    target = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/target.db",
            warehouse=f"{hdfs_root}/dst/warehouse",
            cmroot=f"{hdfs_root}/dst/cmroot",
            trash_root="",
        )
    )
    try:
        engine = ReplicationEngine(f"{hdfs_root}/src/repl", source, target)
        source.catalog.create_database(Database(name="sales"))
        table = source.catalog.create_table(make_table("sales", "t"))
        dumped = engine.execute("REPL DUMP sales")
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
        old = put(f"{table.sd.location}/000000_0", b"first rows")
        source.catalog.insert("sales", "t")
        fs = filesystem_for(old)
        assert isinstance(fs, HdfsFileSystem)
        inode = file_id(fs, old)
        trashed = f"{trash}/Current/{old.split('://', 1)[1].partition('/')[2]}"
        fs.move(old, trashed)  # what the writer's Hadoop client does on INSERT OVERWRITE
        new = put(f"{table.sd.location}/000000_1", b"second rows")
        source.catalog.insert("sales", "t", new_files=[new], replace=True)
        assert list(fs.list_files(f"{trash}/Current")) == [], "the trash still holds the adopted file"
        [recycled] = [s for s in fs.list_files(source.config.cmroot) if "000000_0" in s.uri]
        assert file_id(fs, recycled.uri) == inode, "adoption into cmroot on HDFS copied the file"
        first = engine.execute(f"REPL DUMP sales FROM {dumped.last_event_id} LIMIT 1")
        loaded = engine.execute(f"REPL LOAD sales_dr FROM '{first.dump_dir}'")
        assert loaded.stats.files_from_cmroot == 1
        replica = target.catalog.get_table("sales_dr", "t")
        assert read(f"{replica.sd.location}/000000_0") == b"first rows"
        rest = engine.execute(f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}")
        engine.execute(f"REPL LOAD sales_dr FROM '{rest.dump_dir}'")
        assert verify(source, "sales", target, "sales_dr") == []
    finally:
        source.close()
        target.close()


def test_an_hdfs_load_that_dies_after_its_commit_publishes_the_staged_file_by_rename_on_restart(
    stores: OpenStore, hdfs_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load killed right after its commit leaves its copy staged under a hidden name; housekeeping
    publishes it by a rename over the final name (the staged file's inode becomes the published file)."""
    source = stores("source", f"{hdfs_root}/src/warehouse", f"{hdfs_root}/src/cmroot")
    target = stores("target", f"{hdfs_root}/dst/warehouse", f"{hdfs_root}/dst/cmroot")
    engine = ReplicationEngine(f"{hdfs_root}/src/repl", source, target)
    workload(source)
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    d1 = source.catalog.get_partition("sales", "orders", ["d1"])
    new = put(f"{d1.sd.location}/part-new.parquet", b"new rows")
    source.catalog.insert("sales", "orders", ["d1"], new_files=[new])
    monkeypatch.setattr(FileIntents, "_after_commit", lambda self, intents: None)  # killed after commit
    inc = engine.execute(f"REPL DUMP sales FROM {repl_status(target, 'sales_dr')}")
    engine.execute(f"REPL LOAD sales_dr FROM '{inc.dump_dir}'")
    monkeypatch.undo()
    location = target.catalog.get_partition("sales_dr", "orders", ["d1"]).sd.location
    fs = filesystem_for(location)
    assert isinstance(fs, HdfsFileSystem)
    staged, final = f"{location}/.hmsrepl-staging-part-new.parquet", f"{location}/part-new.parquet"
    assert fs.exists(staged) and not fs.exists(final)
    inode = file_id(fs, staged)
    assert target.complete_file_intents(lease_seconds=0).completed == 1
    assert not fs.exists(staged) and read(final) == b"new rows"
    assert file_id(fs, final) == inode, "the staged copy was copied again instead of renamed"
    assert target.catalog.intents.pending() == []
    assert verify(source, "sales", target, "sales_dr") == []


@pytest.mark.parametrize("direction", ["hdfs-to-s3", "s3-to-hdfs"])
def test_replication_between_hdfs_and_s3(
    stores: OpenStore, hdfs_root: str, s3_env: object, s3_client: Any, direction: str
) -> None:
    """An HDFS source with a replica on S3, and the reverse: copies between the two are streamed and
    verified against the source's checksum."""
    bucket = create_bucket(s3_client, new_bucket_name("hdfs-mix"), versioned=True)
    on_hdfs, on_s3 = f"{hdfs_root}/side", f"s3://{bucket}/side"
    src_base, dst_base = (on_hdfs, on_s3) if direction == "hdfs-to-s3" else (on_s3, on_hdfs)
    source = stores("source", f"{src_base}/warehouse", f"{src_base}/cmroot")
    target = stores("target", f"{dst_base}/warehouse", f"{dst_base}/cmroot")
    d1 = bootstrap_then_incremental(source, target, f"{src_base}/repl")
    assert d1.sd.location.startswith(f"{dst_base}/warehouse/")
