"""The load's copies and the tree copy on Spark executors, with HDFS (a MiniDFSCluster) on either side.

Between two HDFS paths the executors copy through Hadoop's FileSystem API in their JVMs (``spark.hadoop_copy``):
the tests give the executors a dead WebHDFS address, so a copy that succeeds did not go through WebHDFS, and
the driver's log names the engine. Towards a local disk each executor's Python worker opens its own WebHDFS
client. Either way a copy is staged, verified against the checksum known before it and only then published.
A file rewritten at the source after its event is copied as the event saw it, from the HDFS snapshot that
pinned it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.replication.commands import LoadCommand
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.filecopy import CopyTask, publish_all, staging_name
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.source_roots import SourceRoots
from hmsrepl.replication.verify import verify
from hmsrepl.spark import hadoop_copy
from hmsrepl.spark.copy import SparkCopyError, spark_copy, spark_copy_tree
from hmsrepl.storage import filesystem_for
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.hdfs import ENDPOINTS_ENV, USER_ENV, HdfsFileSystem
from hmsrepl.storage.rooted import RootedFileSystem
from spark_apps.common import LazySpark
from spark_apps.repl_load import run_load
from tests.peers.hdfs import MiniDfs
from tests.store_replication import changes, open_stores, workload

pytestmark = pytest.mark.spark

HADOOP_LOG = f"through Hadoop's FileSystem API on the executors (engine {hadoop_copy.ENGINE})"


@contextmanager
def executor_env(spark: object, endpoints: str) -> Iterator[None]:
    """``endpoints`` as the WebHDFS addresses and ``hive`` as the user in the environment of the executors'
    Python workers (as ``spark.executorEnv.*`` puts them on a cluster)."""
    environment = spark.sparkContext.environment  # type: ignore[attr-defined]
    saved = dict(environment)
    environment.update({ENDPOINTS_ENV: endpoints, USER_ENV: "hive"})
    try:
        yield
    finally:
        environment.clear()
        environment.update(saved)


@pytest.fixture
def executors_reach_hdfs(spark: object, hdfs_env: MiniDfs) -> Iterator[None]:
    with executor_env(spark, hdfs_env.endpoints):
        yield


@pytest.fixture
def executors_without_webhdfs(spark: object, hdfs_env: MiniDfs) -> Iterator[None]:
    """A WebHDFS address nothing listens on for the executors: only the Hadoop client's RPC can copy there."""
    with executor_env(spark, f"{hdfs_env.namenode}=http://127.0.0.1:9"):
        yield


def hdfs(uri: str) -> HdfsFileSystem:
    fs = filesystem_for(uri)
    assert isinstance(fs, HdfsFileSystem)
    return fs


def checksums_below(root: str) -> dict[str, str]:
    fs = filesystem_for(root)
    return {status.uri[len(root) + 1 :]: fs.checksum(status.uri) for status in fs.list_files(root)}


def test_spark_copies_a_tree_from_hdfs_to_hdfs_and_to_a_local_disk(
    spark: object, hdfs_env: MiniDfs, hdfs_root: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    src = f"{hdfs_root}/src"
    expected = {f"p={i % 3}/part-{i:02d}": os.urandom(size) for i, size in enumerate([0, 1, 70_000] * 4)}
    for relative, data in expected.items():
        hdfs(src).write_bytes(f"{src}/{relative}", data)
    wanted = {relative: checksum_bytes(data) for relative, data in expected.items()}
    hdfs(src).write_bytes(f"{hdfs_root}/dst/p=1/part-01", b"an older file the copy replaces")
    caplog.set_level(logging.INFO, logger="hmsrepl.spark.copy")
    with executor_env(spark, f"{hdfs_env.namenode}=http://127.0.0.1:9"):  # no WebHDFS for the executors
        result = spark_copy_tree(spark, src, f"{hdfs_root}/dst")  # type: ignore[arg-type]
    assert result.files == len(expected) and result.bytes == sum(map(len, expected.values()))
    assert checksums_below(f"{hdfs_root}/dst") == wanted  # no staged or temporary names left either
    assert HADOOP_LOG in caplog.text
    caplog.clear()
    with executor_env(spark, hdfs_env.endpoints):  # to a local disk: the executors' Python, over WebHDFS
        result = spark_copy_tree(spark, src, str(tmp_path / "local"))  # type: ignore[arg-type]
    assert result.files == len(expected)
    assert checksums_below(str(tmp_path / "local")) == wanted
    assert HADOOP_LOG not in caplog.text


def test_spark_load_copies_from_an_hdfs_source_take_the_events_version_from_its_snapshot(
    spark: object, executors_without_webhdfs: None, hdfs_root: str, caplog: pytest.LogCaptureFixture
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
    caplog.set_level(logging.INFO, logger="hmsrepl.spark.copy")
    results = spark_copy(spark, tasks)  # type: ignore[arg-type]
    assert HADOOP_LOG in caplog.text
    assert ["@" in r.source_used for r in results] == [
        i == 0 for i in range(len(tasks))
    ]  # the rewritten file was read from its snapshot (the version reference), the others in place
    publish_all(RootedFileSystem([dst], purpose="test"), [task.target_uri for task in tasks])
    assert checksums_below(dst) == expected


def test_tampered_copies_are_caught_and_nothing_unverified_is_staged(
    spark: object, executors_without_webhdfs: None, hdfs_root: str
) -> None:
    """A source changed after its event (same size: the checksum differs; other size: refused before
    copying) fails, named, with nothing staged for it; a staged copy damaged before the re-run is not reused
    but copied again."""
    src, dst = f"{hdfs_root}/src", f"{hdfs_root}/dst"
    fs = hdfs(src)

    def task(name: str, data: bytes) -> CopyTask:
        fs.write_bytes(f"{src}/{name}", data)
        encoded = EncodedFileUri(f"{src}/{name}", checksum_bytes(data)).encode()
        return CopyTask(encoded, f"{dst}/{name}", (src,), target_roots=(dst,))

    good_data = os.urandom(3000)
    good, same_size, resized = task("good", good_data), task("same", b"a" * 100), task("resized", b"b" * 100)
    fs.write_bytes(f"{src}/same", b"c" * 100)
    fs.write_bytes(f"{src}/resized", b"b" * 101)
    with pytest.raises(SparkCopyError) as failed:
        spark_copy(spark, [good, same_size, resized])  # type: ignore[arg-type]
    reasons = {f.target.rsplit("/", 1)[1]: f.reason for f in failed.value.failures}
    assert set(reasons) == {"same", "resized"}
    assert "no copy of" in reasons["same"] and "checksum crc32c-" in reasons["same"]
    assert "101 bytes, expected 100" in reasons["resized"]
    assert sorted(s.uri.rsplit("/", 1)[1] for s in fs.list_files(dst)) == [staging_name("good")[1:]]

    fs.write_bytes(staging_name(good.target_uri), os.urandom(3000))  # damaged while waiting for the load
    [result] = spark_copy(spark, [good])  # type: ignore[arg-type]
    assert not result.prefetched and result.bytes_copied == 3000
    assert fs.checksum(staging_name(good.target_uri)) == checksum_bytes(good_data)


def test_the_jvm_copier_refuses_paths_the_driver_would_never_hand_it(
    spark: object, hdfs_env: MiniDfs, hdfs_root: str
) -> None:
    """Defence in depth: tasks crafted past the driver's checks copy nothing."""
    fs = hdfs(hdfs_root)
    fs.write_bytes(f"{hdfs_root}/src/f", b"data")
    fs.makedirs(f"{hdfs_root}/src/dir")
    staged = staging_name(f"{hdfs_root}/dst/f")
    crafted = [
        hadoop_copy.HadoopTask("load", staged, f"{hdfs_root}/dst/f", 4, "", (f"{hdfs_root}/src/../src/f",)),
        hadoop_copy.HadoopTask("load", staged, f"{hdfs_root}/dst/f", 4, "", ("file:///etc/hostname",)),
        hadoop_copy.HadoopTask(
            "load", f"{hdfs_root}/dst/f", f"{hdfs_root}/dst/f", 4, "", (f"{hdfs_root}/src/f",)
        ),
        hadoop_copy.HadoopTask(
            "tree", f"{hdfs_root}/dst/d", f"{hdfs_root}/dst/d", -1, "", (f"{hdfs_root}/src/dir",)
        ),
        hadoop_copy.HadoopTask("load", staged, f"{hdfs_root}/dst/f", 4, "", (f"{hdfs_root}/src/*",)),
    ]
    outcomes = hadoop_copy.run(spark, crafted, [list(range(len(crafted)))], 2)  # type: ignore[arg-type]
    assert [o.status for o in outcomes] == ["failed"] * len(crafted)
    assert "'..' segment" in outcomes[0].reason
    assert "is not an hdfs:// path" in outcomes[1].reason
    assert "staging name" in outcomes[2].reason
    assert "not a file" in outcomes[3].reason
    assert "missing" in outcomes[4].reason  # a glob is a name like any other, never expanded
    assert not fs.exists(f"{hdfs_root}/dst")


def test_a_spark_load_between_hdfs_warehouses_copies_through_hadoop_and_verifies_equal(
    spark: object,
    executors_without_webhdfs: None,
    hdfs_root: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The load app's copy (``run_load``) for a bootstrap and an incremental with an overwrite, a dropped
    partition and a rename; ``repl verify`` finds the replica equal after each."""
    opened = open_stores(tmp_path)
    stores = next(opened)
    source = stores("source", f"{hdfs_root}/src/warehouse", f"{hdfs_root}/src/cmroot")
    target = stores("target", f"{hdfs_root}/dst/warehouse", f"{hdfs_root}/dst/cmroot")
    roots = SourceRoots.from_settings(source.config.warehouse, source.config.cmroot)
    engine = ReplicationEngine(f"{hdfs_root}/src/repl", source, target)
    lazy = LazySpark("tests", None)
    lazy.session = spark  # type: ignore[assignment]
    caplog.set_level(logging.INFO, logger="hmsrepl.spark.copy")
    try:
        workload(source)
        dumped = engine.execute("REPL DUMP sales")
        summary = run_load(
            LoadCommand(dumped.dump_dir, "sales_dr"), target, lazy, 1, keep_spark=True, source_roots=roots
        )
        assert HADOOP_LOG in caplog.text, summary
        assert verify(source, "sales", target, "sales_dr") == []
        changes(source)
        inc = engine.execute(f"REPL DUMP sales FROM {dumped.last_event_id}")
        run_load(LoadCommand(inc.dump_dir, "sales_dr"), target, lazy, 1, keep_spark=True, source_roots=roots)
        assert verify(source, "sales", target, "sales_dr") == []
        assert repl_status(target, "sales_dr") == source.get_current_notification_event_id()
    finally:
        next(opened, None)
