"""Local listings and checksums take regular files only: no FIFO, socket, device or symlink is read."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from hmsrepl.exceptions import StorageError
from hmsrepl.metastore.file_capture import stat_listing
from hmsrepl.storage.local import LocalFileSystem
from hmsrepl.storage.rooted import RootedFileSystem


def _hostile_location(tmp_path: Path) -> Path:
    """A location holding two data files (one in a partition subdirectory, two levels deep), hidden files
    and subtrees, a FIFO, a socket's place, and links to a device, a foreign file and a foreign directory."""
    outside = tmp_path / "outside"
    (outside / "d").mkdir(parents=True)
    (outside / "secret").write_bytes(b"foreign")
    (outside / "d" / "inner").write_bytes(b"foreign too")
    location = tmp_path / "t"
    (location / "p=k%3Av" / "q=1").mkdir(parents=True)
    (location / "_temporary" / "0").mkdir(parents=True)
    (location / "_temporary" / "0" / "part-0").write_bytes(b"uncommitted")
    (location / "_SUCCESS").write_bytes(b"")
    (location / ".b.crc").write_bytes(b"crc")
    (location / "b").write_bytes(b"bb")
    (location / "p=k%3Av" / "q=1" / "a").write_bytes(b"a")
    os.mkfifo(location / "fifo")
    (location / "zero").symlink_to("/dev/zero")
    (location / "stolen").symlink_to(outside / "secret")
    (location / "dir_link").symlink_to(outside / "d", target_is_directory=True)
    return location


def test_listing_skips_special_files_and_never_follows_links(tmp_path: Path) -> None:
    location = _hostile_location(tmp_path)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(location / "sock"))
    try:
        start = time.monotonic()
        listed = [status.uri for status in LocalFileSystem().list_files(f"file:{location}")]
        assert time.monotonic() - start < 5
    finally:
        sock.close()
    # files first, then subdirectories; the file system lists hidden entries (callers filter them)
    assert [uri for uri in listed if "/_" not in uri and "/." not in uri] == [
        f"file:{location}/b",
        f"file:{location}/p=k%3Av/q=1/a",
    ]


def test_a_writes_listing_takes_the_same_files_and_keeps_no_descriptor_open(tmp_path: Path) -> None:
    """The capture's own listing (by directory descriptors, not paths) follows the same rules, hidden
    entries and subtrees left out, exact nanosecond times, and the root followed when it is a link."""
    location = _hostile_location(tmp_path)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(location / "sock"))
    link = tmp_path / "location_link"
    link.symlink_to(location, target_is_directory=True)
    open_before = len(os.listdir("/proc/self/fd"))
    try:
        for root in (location, link):
            listed = stat_listing(RootedFileSystem([str(tmp_path)], purpose="test"), f"file:{root}")
            assert listed == {
                "b": (2, (location / "b").stat().st_mtime_ns),
                "p=k%3Av/q=1/a": (1, (location / "p=k%3Av" / "q=1" / "a").stat().st_mtime_ns),
            }
        assert len(os.listdir("/proc/self/fd")) == open_before
    finally:
        sock.close()
    assert stat_listing(RootedFileSystem([str(tmp_path)], purpose="test"), f"file:{location}/b") == {
        "b": (2, (location / "b").stat().st_mtime_ns)
    }
    assert (
        stat_listing(RootedFileSystem([str(tmp_path)], purpose="test"), f"file:{location}/nothing-here") == {}
    )


@pytest.mark.parametrize("name", ["fifo", "zero", "stolen"])
def test_checksum_refuses_what_is_not_a_regular_file(tmp_path, name: str) -> None:
    (tmp_path / "real").write_bytes(b"x")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "stolen").symlink_to(tmp_path / "real")
    with pytest.raises(StorageError, match=name):
        LocalFileSystem().checksum(str(tmp_path / name))
    assert LocalFileSystem().checksum(str(tmp_path / "real")).startswith("crc32c-")


def test_file_ids_list_the_same_data_files_by_identity_and_stay_in_the_roots(tmp_path: Path) -> None:
    """``file_ids`` (a standby compared with the current version) lists what ``stat_listing`` lists, each
    file with its inode, so a hard link shares its original's id; nothing outside the roots is listed."""
    location = _hostile_location(tmp_path)
    rooted = RootedFileSystem([str(tmp_path / "t")], purpose="test")
    ids = rooted.file_ids(f"file:{location}")
    assert ids == {
        "b": (location / "b").stat().st_ino,
        "p=k%3Av/q=1/a": (location / "p=k%3Av" / "q=1" / "a").stat().st_ino,
    }
    os.link(location / "b", location / "b2")
    assert rooted.file_ids(f"file:{location}")["b2"] == ids["b"]
    with pytest.raises(StorageError, match="outside the roots"):
        rooted.file_ids(f"file:{tmp_path / 'outside'}")
