"""The HDFS file system (``storage.hdfs``) against a real MiniDFSCluster: what the metastore, the change
manager and replication rely on, and composite CRC checksums equal to a read of the data."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import google_crc32c
import pytest

from hmsrepl.exceptions import StorageError
from hmsrepl.storage import copy_file, filesystem_for, move_file
from hmsrepl.storage.checksum import checksum_bytes, checksum_token
from hmsrepl.storage.hdfs import HdfsFileSystem, configured_endpoints, parse_hdfs_uri
from tests.peers.hdfs import MiniDfs


def read(uri: str) -> bytes:
    with filesystem_for(uri).open_read(uri) as stream:
        return stream.read()


def test_hdfs_uris_are_served_by_their_namenodes_webhdfs(hdfs_root: str, hdfs_env: MiniDfs) -> None:
    fs = filesystem_for(hdfs_root)
    assert isinstance(fs, HdfsFileSystem)
    assert fs.webhdfs == hdfs_env.webhdfs
    assert filesystem_for(f"{hdfs_root}/x") is fs
    assert HdfsFileSystem("nn.example:8020").webhdfs == "http://nn.example:9870"
    assert parse_hdfs_uri("hdfs://NN:8020/w/t/") == ("nn:8020", "/w/t")


def test_malformed_endpoint_configuration_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HMSREPL_WEBHDFS_ENDPOINTS", "hdfs://nn:8020=nn:9870")
    with pytest.raises(ValueError, match="hdfs://nn:8020=nn:9870"):
        configured_endpoints()


def test_files_are_written_listed_read_and_deleted_with_names_kept_verbatim(hdfs_root: str) -> None:
    fs = filesystem_for(hdfs_root)
    files = {
        f"{hdfs_root}/t/p=k%3Av/part-0": b"escaped partition value",
        f"{hdfs_root}/t/p=1/_SUCCESS": b"",
        f"{hdfs_root}/t/p=1/.hidden": b"h",
        f"{hdfs_root}/t/p=10/f": b"ten",
    }
    for uri, data in files.items():
        fs.write_bytes(uri, data)
    listed = {status.uri: status.size for status in fs.list_files(f"{hdfs_root}/t")}
    assert listed == {uri: len(data) for uri, data in files.items()}
    assert [s.uri for s in fs.list_files(f"{hdfs_root}/t/p=1")] == [
        f"{hdfs_root}/t/p=1/.hidden",
        f"{hdfs_root}/t/p=1/_SUCCESS",
    ]
    assert read(f"{hdfs_root}/t/p=k%3Av/part-0") == b"escaped partition value"
    assert not fs.exists(f"{hdfs_root}/t/p=k:v/part-0"), "the %3A was decoded into another directory"
    status = fs.status(f"{hdfs_root}/t/p=10/f")
    assert status is not None and status.size == 3 and abs(status.mtime - time.time()) < 60
    assert fs.status(f"{hdfs_root}/t/p=10") is None and fs.status(f"{hdfs_root}/none") is None
    assert list(fs.list_files(f"{hdfs_root}/none")) == []
    fs.delete(f"{hdfs_root}/t/p=10/f")
    fs.delete(f"{hdfs_root}/t/p=10/f")  # a missing file is not an error
    assert not fs.exists(f"{hdfs_root}/t/p=10/f")
    fs.delete_tree(f"{hdfs_root}/t")
    assert list(fs.list_files(hdfs_root)) == []
    with pytest.raises(StorageError, match="no such file"):
        fs.open_read(f"{hdfs_root}/t/p=1/_SUCCESS")


def test_writes_replace_whole_files_and_leave_no_temporary_file(hdfs_root: str) -> None:
    fs = filesystem_for(hdfs_root)
    uri = f"{hdfs_root}/d/f.csv"
    fs.write_bytes(uri, b"old")
    data = os.urandom(5 * 1024 * 1024 + 3)  # several 1 MiB blocks and write chunks
    assert fs.write_stream(uri, io.BytesIO(data)) == checksum_bytes(data)
    assert read(uri) == data
    assert [s.uri for s in fs.list_files(f"{hdfs_root}/d")] == [uri]


def test_composite_crc_equals_the_crc32c_of_the_data_across_blocks(hdfs_root: str) -> None:
    """HDFS's whole-file CRC32C (no read here) is our token for files of 0, 1 and several 1 MiB blocks."""
    composite = HdfsFileSystem(parse_hdfs_uri(hdfs_root)[0], checksum_mode="composite")
    reading = HdfsFileSystem(parse_hdfs_uri(hdfs_root)[0], checksum_mode="read")
    for size in (0, 1, 1024 * 1024, 3 * 1024 * 1024 + 17):
        data = os.urandom(size)
        uri = f"{hdfs_root}/c/{size}.bin"
        composite.write_bytes(uri, data)
        expected = checksum_token(google_crc32c.value(data), size)
        assert composite.checksum(uri) == expected == reading.checksum(uri)
    from hmsrepl.storage import hadoop_checksums

    assert hadoop_checksums.composite_checksum(f"{hdfs_root}/c/1.bin") is not None, "HDFS gave no CRC"
    with pytest.raises(StorageError, match="no such file"):
        composite.checksum(f"{hdfs_root}/c/none.bin")


def test_move_within_hdfs_is_a_rename_that_keeps_the_time(hdfs_root: str) -> None:
    fs = filesystem_for(hdfs_root)
    src, dst = f"{hdfs_root}/wh/t/f", f"{hdfs_root}/cm/a/b/f"
    fs.write_bytes(src, b"data")
    fs.touch(src, 1_700_000_000.0)
    fs.move(src, dst)
    moved = fs.status(dst)
    assert moved is not None and moved.mtime == 1_700_000_000.0
    assert not fs.exists(src) and read(dst) == b"data"
    fs.write_bytes(src, b"other")
    with pytest.raises(StorageError, match="the target exists"):
        fs.move(src, dst)
    assert read(dst) == b"data" and read(src) == b"other"
    with pytest.raises(StorageError, match="no such file"):
        fs.move(f"{hdfs_root}/none", f"{hdfs_root}/none2")


def test_copies_and_moves_across_file_systems_are_verified(hdfs_root: str, tmp_path: Path) -> None:
    data = os.urandom(2 * 1024 * 1024 + 5)
    token = checksum_bytes(data)
    local = tmp_path / "f.bin"
    local.write_bytes(data)
    on_hdfs = f"{hdfs_root}/x/f.bin"
    assert copy_file(str(local), on_hdfs, token) == token
    assert copy_file(on_hdfs, f"{hdfs_root}/y/f.bin", token) == token
    assert copy_file(on_hdfs, str(tmp_path / "back.bin"), token) == token
    assert (tmp_path / "back.bin").read_bytes() == data
    with pytest.raises(StorageError, match="expected"):
        copy_file(str(local), f"{hdfs_root}/z/f.bin", checksum_bytes(b"something else"))
    assert not filesystem_for(hdfs_root).exists(f"{hdfs_root}/z/f.bin"), "a wrong copy was left"
    move_file(on_hdfs, str(tmp_path / "moved.bin"))
    assert (tmp_path / "moved.bin").read_bytes() == data
    assert not filesystem_for(on_hdfs).exists(on_hdfs)


def test_an_unreachable_webhdfs_is_named_with_the_setting_that_fixes_it() -> None:
    from tests.servers import free_port

    port = free_port()
    fs = HdfsFileSystem(f"127.0.0.1:{port}", f"http://127.0.0.1:{port}")
    with pytest.raises(StorageError, match=r"does not answer.*HMSREPL_WEBHDFS_ENDPOINTS"):
        fs.exists(f"hdfs://127.0.0.1:{port}/w/t")
