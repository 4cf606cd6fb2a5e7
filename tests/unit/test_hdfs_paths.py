"""``hdfs://`` locations without a cluster: one canonical spelling, containment, the trash place of a
location, the endpoint configuration, and the file system chosen for the scheme."""

from __future__ import annotations

import pickle

import pytest

from hmsrepl.exceptions import StorageError
from hmsrepl.formats.paths import InvalidPathError, canonical_uri, is_below
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.trash import TrashAdopter
from hmsrepl.storage import filesystem_for
from hmsrepl.storage.hdfs import HdfsFileSystem, parse_hdfs_uri, reset_hdfs_filesystems, webhdfs_url


@pytest.mark.parametrize(
    ("uri", "canonical"),
    [
        ("hdfs://NN.example:8020/wh/db/t/", "hdfs://nn.example:8020/wh/db/t"),
        ("HDFS://nn:8020/wh/t/p=k%3Av", "hdfs://nn:8020/wh/t/p=k%3Av"),
        ("hdfs://nn:8020/", "hdfs://nn:8020/"),
    ],
)
def test_hdfs_uris_have_one_canonical_spelling(uri: str, canonical: str) -> None:
    assert canonical_uri(uri) == canonical


@pytest.mark.parametrize(
    "uri", ["hdfs:/nn/w", "hdfs://@nn/w", "hdfs:///w", "hdfs://nn/w/../x", "hdfs://nn/w//x", "webhdfs://nn/w"]
)
def test_hdfs_uris_that_could_escape_are_refused(uri: str) -> None:
    with pytest.raises(InvalidPathError):
        canonical_uri(uri)


def test_containment_is_per_namenode() -> None:
    root = canonical_uri("hdfs://nn:8020/wh")
    assert is_below(canonical_uri("hdfs://NN:8020/wh/t"), root)
    assert not is_below(canonical_uri("hdfs://nn:8021/wh/t"), root)
    assert not is_below(canonical_uri("hdfs://nn:8020/wh2/t"), root)


def test_the_trash_place_of_an_hdfs_location_stays_in_its_namenodes_trash() -> None:
    adopter = TrashAdopter("hdfs://nn:8020/user/hive/.Trash", ChangeManager("hdfs://nn:8020/cm"))
    assert (
        adopter.trashed_dir("hdfs://nn:8020/wh/t/p=1") == "hdfs://nn:8020/user/hive/.Trash/Current/wh/t/p=1"
    )
    assert adopter.trashed_dir("hdfs://other:8020/wh/t") is None, "another NameNode's trash"
    assert adopter.trashed_dir("s3://bucket/wh/t") is None
    assert adopter.trashed_dir("/local/wh/t") is None, "a local location in an HDFS trash"
    lexical = adopter.trashed_dir("hdfs://nn:8020/wh/../../x")
    assert lexical == "hdfs://nn:8020/user/hive/.Trash/Current/x"


def test_webhdfs_endpoints_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "HMSREPL_WEBHDFS_ENDPOINTS", "hdfs://NN:8020=https://nn-web:9871/ , hdfs://b:1=http://b:2"
    )
    assert webhdfs_url("nn:8020") == "https://nn-web:9871"
    assert webhdfs_url("b:1") == "http://b:2"
    assert webhdfs_url("c:8020") == "http://c:9870"
    reset_hdfs_filesystems()
    fs = filesystem_for("hdfs://NN:8020/wh/t")
    assert isinstance(fs, HdfsFileSystem) and fs.webhdfs == "https://nn-web:9871"
    assert filesystem_for("hdfs://nn:8020/other") is fs
    assert not fs.same_store(filesystem_for("hdfs://b:1/w"))
    copy = pickle.loads(pickle.dumps(fs))  # shipped to Spark executors without its HTTP session
    assert (copy.namenode, copy.webhdfs, copy.checksum_mode) == (fs.namenode, fs.webhdfs, fs.checksum_mode)
    assert copy.same_store(fs)
    reset_hdfs_filesystems()


def test_bad_hdfs_settings_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(StorageError, match="names no NameNode"):
        parse_hdfs_uri("hdfs:///w")
    monkeypatch.setenv("HMSREPL_HDFS_CHECKSUM", "md5")
    with pytest.raises(ValueError, match="HMSREPL_HDFS_CHECKSUM='md5'"):
        HdfsFileSystem("nn:8020")


def test_no_jvm_is_started_for_checksums_inside_a_spark_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """An executor's Python worker reads files rather than start a JVM gateway of its own per worker."""
    import pyspark
    import pyspark.java_gateway

    from hmsrepl.storage import hadoop_checksums

    def no_gateway(*args: object, **kwargs: object) -> None:
        raise AssertionError("a JVM gateway was started inside a Spark task")

    monkeypatch.setattr(pyspark.TaskContext, "get", staticmethod(lambda: object()))
    # An executor's Python worker has no SparkContext (a driver's, left by another test, must not count).
    monkeypatch.setattr(pyspark.SparkContext, "_active_spark_context", None)
    monkeypatch.setattr(pyspark.java_gateway, "launch_gateway", no_gateway)
    assert hadoop_checksums.composite_checksum("hdfs://nn:8020/wh/t/f") is None
