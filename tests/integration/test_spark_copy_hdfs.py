"""The load's copies and the tree copy on Spark executors, with HDFS (a MiniDFSCluster) on either side.

Each executor's Python worker opens its own WebHDFS client (the storage layer pickles without one), copies
under a staging name, verifies the copy against the checksum known before it and only then publishes it. A
file rewritten at the source after its event is copied as the event saw it, from the HDFS snapshot that
pinned it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.replication.filecopy import CopyTask, publish_all
from hmsrepl.spark.copy import spark_copy, spark_copy_tree
from hmsrepl.storage import filesystem_for
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.hdfs import ENDPOINTS_ENV, USER_ENV, HdfsFileSystem
from hmsrepl.storage.rooted import RootedFileSystem
from tests.peers.hdfs import MiniDfs

pytestmark = pytest.mark.spark


@pytest.fixture
def executors_reach_hdfs(spark: object, hdfs_env: MiniDfs) -> Iterator[None]:
    """The cluster's WebHDFS address and user in the environment of the executors' Python workers (as
    ``spark.executorEnv.*`` puts them on a cluster)."""
    environment = spark.sparkContext.environment  # type: ignore[attr-defined]
    saved = dict(environment)
    environment.update({ENDPOINTS_ENV: hdfs_env.endpoints, USER_ENV: "hive"})
    yield
    environment.clear()
    environment.update(saved)


def hdfs(uri: str) -> HdfsFileSystem:
    fs = filesystem_for(uri)
    assert isinstance(fs, HdfsFileSystem)
    return fs


def checksums_below(root: str) -> dict[str, str]:
    fs = filesystem_for(root)
    return {status.uri[len(root) + 1 :]: fs.checksum(status.uri) for status in fs.list_files(root)}


def test_spark_copies_a_tree_from_hdfs_to_hdfs_and_to_a_local_disk(
    spark: object, executors_reach_hdfs: None, hdfs_root: str, tmp_path: Path
) -> None:
    src = f"{hdfs_root}/src"
    expected = {f"p={i % 3}/part-{i:02d}": os.urandom(size) for i, size in enumerate([0, 1, 70_000] * 4)}
    for relative, data in expected.items():
        hdfs(src).write_bytes(f"{src}/{relative}", data)
    wanted = {relative: checksum_bytes(data) for relative, data in expected.items()}
    for dst in (f"{hdfs_root}/dst", str(tmp_path / "local")):
        result = spark_copy_tree(spark, src, dst)  # type: ignore[arg-type]
        assert result.files == len(expected)
        assert checksums_below(dst) == wanted, dst  # no staged or temporary names left either


def test_spark_load_copies_from_an_hdfs_source_take_the_events_version_from_its_snapshot(
    spark: object, executors_reach_hdfs: None, hdfs_root: str
) -> None:
    src, dst, cmroot = f"{hdfs_root}/src", f"{hdfs_root}/dst", f"{hdfs_root}/cm"
    fs = hdfs(src)
    fs.makedirs(src)
    fs._call("ALLOWSNAPSHOT", src, "put")
    fs._pins._directories = None
    tasks, expected = [], {}
    for i in range(12):
        relative, data = f"p={i % 2}/part-{i:02d}", os.urandom(5_000 + i)
        fs.write_bytes(f"{src}/{relative}", data)
        identity = fs.identify(f"{src}/{relative}")  # what the metastore records with the event
        encoded = EncodedFileUri(
            f"{src}/{relative}", identity.checksum, cmroot, "", identity.version_id or ""
        )
        tasks.append(CopyTask(encoded.encode(), f"{dst}/{relative}", (src, cmroot), target_roots=(dst,)))
        expected[relative] = identity.checksum
    fs.write_bytes(f"{src}/p=0/part-00", b"rewritten after its event, behind the metastore")
    results = spark_copy(spark, tasks)  # type: ignore[arg-type]
    assert len(results) == len(tasks)
    publish_all(RootedFileSystem([dst], purpose="test"), [task.target_uri for task in tasks])
    assert checksums_below(dst) == expected
