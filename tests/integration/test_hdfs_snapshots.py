"""HDFS snapshots as pseudo-versions (a MiniDFSCluster): below a snapshottable directory, a file rewritten
behind the metastore's back still replays the content its event recorded, read from the snapshot that pinned
it, as an S3 object version does; retention deletes the product's snapshots and never an operator's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import StorageError
from hmsrepl.formats.file_uri import versioned_reference
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.storage import filesystem_for
from hmsrepl.storage.hdfs import HdfsFileSystem, parse_hdfs_uri
from hmsrepl.storage.hdfs_snapshots import SNAPSHOT_PREFIX
from hmsrepl.storage.rooted import OutsideRootsError, RootedFileSystem
from tests.helpers import make_table
from tests.store_replication import put, read


def hdfs(uri: str) -> HdfsFileSystem:
    fs = filesystem_for(uri)
    assert isinstance(fs, HdfsFileSystem)
    return fs


def allow_snapshots(uri: str) -> None:
    """What ``hdfs dfsadmin -allowSnapshot`` does, through WebHDFS."""
    fs = hdfs(uri)
    fs.makedirs(uri)
    fs._call("ALLOWSNAPSHOT", uri, "put")
    fs._pins._directories = None  # the operator's change, seen at once rather than after the cache's TTL


def snapshots(uri: str) -> list[str]:
    fs = hdfs(uri)
    listing = fs._call("LISTSTATUS", f"{uri}/.snapshot")["FileStatuses"]["FileStatus"]
    return sorted(entry["pathSuffix"] for entry in listing)


@pytest.fixture
def pair(tmp_path: Path, hdfs_root: str) -> Iterator[tuple[Metastore, Metastore, ReplicationEngine, str]]:
    """A source whose warehouse is snapshottable and a replica, both on the cluster; database ``sales``."""
    warehouse = f"{hdfs_root}/src/warehouse"
    allow_snapshots(warehouse)
    source = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/source.db",
            warehouse=warehouse,
            cmroot=f"{hdfs_root}/src/cmroot",
            trash_root="",
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
    source.catalog.create_database(Database(name="sales"))
    try:
        yield source, target, ReplicationEngine(f"{hdfs_root}/src/repl", source, target), warehouse
    finally:
        source.close()
        target.close()


def test_a_file_rewritten_behind_the_metastore_replays_its_event_from_the_snapshot_that_pinned_it(
    pair: tuple[Metastore, Metastore, ReplicationEngine, str],
) -> None:
    source, target, engine, warehouse = pair
    table = source.catalog.create_table(make_table("sales", "t"))
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
    first = put(f"{table.sd.location}/000000_0", b"rows of the first insert")
    second = put(f"{table.sd.location}/000000_1", b"rows of the first insert, second file")
    source.catalog.insert("sales", "t", new_files=[first, second])
    assert len(snapshots(warehouse)) == 1, "one INSERT's files are pinned by one snapshot"
    put(first, b"rewritten by a writer that never told the metastore")
    hdfs(second).delete(second)
    inc = engine.execute(f"REPL DUMP sales FROM {dumped.last_event_id}")
    loaded = engine.execute(f"REPL LOAD sales_dr FROM '{inc.dump_dir}'")
    replica = target.catalog.get_table("sales_dr", "t").sd.location
    assert read(f"{replica}/000000_0") == b"rows of the first insert"
    assert read(f"{replica}/000000_1") == b"rows of the first insert, second file"
    assert loaded.stats.files_from_cmroot == 0  # the snapshot served them, not cmroot
    assert repl_status(target, "sales_dr") == source.get_current_notification_event_id()


def test_retention_deletes_the_products_snapshots_and_keeps_the_operators(
    pair: tuple[Metastore, Metastore, ReplicationEngine, str],
) -> None:
    source, _target, _engine, warehouse = pair
    hdfs(warehouse)._call("CREATESNAPSHOT", warehouse, "put", snapshotname="nightly")
    table = source.catalog.create_table(make_table("sales", "t"))
    source.catalog.insert("sales", "t", new_files=[put(f"{table.sd.location}/000000_0", b"a")])
    ours = [name for name in snapshots(warehouse) if name.startswith(SNAPSHOT_PREFIX)]
    assert len(ours) == 1
    assert source.cm.cleanup(retention_seconds=3600).deleted == 0  # still within the retention
    assert source.cm.cleanup(retention_seconds=0, now=time.time() + 1).deleted >= 1
    assert snapshots(warehouse) == ["nightly"]


def test_a_versioned_reference_reads_an_earlier_state_of_the_same_path_only(hdfs_root: str) -> None:
    directory = f"{hdfs_root}/snap"
    allow_snapshots(directory)
    data = put(f"{directory}/t/f", b"old")
    fs = hdfs(data)
    identity = fs.identify(data)
    assert identity.version_id and identity.version_id.startswith(
        parse_hdfs_uri(directory)[1] + "/.snapshot/"
    )
    assert fs.identify(data) == identity, "an unchanged file reuses its snapshot"
    put(data, b"new, longer content")
    pinned = versioned_reference(data, identity.version_id)
    assert read(pinned) == b"old" and fs.checksum(pinned) == identity.checksum
    assert fs.identify(data).version_id != identity.version_id
    with pytest.raises(StorageError, match="can only be read"):
        fs.write_bytes(pinned, b"x")
    with pytest.raises(StorageError, match="can only be read"):
        fs.delete(pinned)
    elsewhere = put(f"{hdfs_root}/elsewhere/secret", b"secret")
    for crafted in (  # a version id from a dump naming another directory's snapshot, or '..' out of it
        versioned_reference(elsewhere, identity.version_id),
        versioned_reference(data, identity.version_id.replace("/.snapshot/", "/../elsewhere/.snapshot/")),
        versioned_reference(data, f"{identity.version_id}/../../elsewhere"),
    ):
        with pytest.raises(StorageError):
            read(crafted)
    rooted = RootedFileSystem([directory], purpose="test")
    with pytest.raises(OutsideRootsError):  # the plain path decides containment, whatever the version
        rooted.open_read(versioned_reference(elsewhere, identity.version_id))
    assert read(elsewhere) == b"secret"
