"""Local listings and checksums take regular files only: no FIFO, socket, device or symlink is read."""

from __future__ import annotations

import os
import socket
import time

import pytest

from hmsrepl.exceptions import StorageError
from hmsrepl.storage.local import LocalFileSystem


def test_listing_skips_special_files_and_never_follows_links(tmp_path) -> None:
    outside = tmp_path / "outside"
    (outside / "d").mkdir(parents=True)
    (outside / "secret").write_bytes(b"foreign")
    (outside / "d" / "inner").write_bytes(b"foreign too")
    location = tmp_path / "t"
    (location / "p=k%3Av").mkdir(parents=True)
    (location / "b").write_bytes(b"bb")
    (location / "p=k%3Av" / "a").write_bytes(b"a")
    os.mkfifo(location / "fifo")
    (location / "zero").symlink_to("/dev/zero")
    (location / "stolen").symlink_to(outside / "secret")
    (location / "dir_link").symlink_to(outside / "d", target_is_directory=True)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(location / "sock"))
    try:
        start = time.monotonic()
        listed = [status.uri for status in LocalFileSystem().list_files(f"file:{location}")]
        assert time.monotonic() - start < 5
    finally:
        sock.close()
    assert listed == [f"file:{location}/b", f"file:{location}/p=k%3Av/a"]  # files first, then subdirectories


@pytest.mark.parametrize("name", ["fifo", "zero", "stolen"])
def test_checksum_refuses_what_is_not_a_regular_file(tmp_path, name: str) -> None:
    (tmp_path / "real").write_bytes(b"x")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "stolen").symlink_to(tmp_path / "real")
    with pytest.raises(StorageError, match=name):
        LocalFileSystem().checksum(str(tmp_path / name))
    assert LocalFileSystem().checksum(str(tmp_path / "real")).startswith("crc32c-")
