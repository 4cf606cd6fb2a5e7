"""An HDFS snapshot version names an earlier state of the same path, and nothing else: the check applied to
a version id read from a dump before any HDFS call is made."""

from __future__ import annotations

import pytest

from hmsrepl.exceptions import StorageError
from hmsrepl.storage.hdfs_snapshots import path_in_snapshot, same_content, snapshot_directory


def test_a_snapshot_version_maps_a_path_into_the_snapshot() -> None:
    version = "/warehouse/.snapshot/hmsrepl-1-ab"
    assert snapshot_directory(version) == ("/warehouse", "hmsrepl-1-ab")
    assert path_in_snapshot(version, "/warehouse/db.db/t/f") == "/warehouse/.snapshot/hmsrepl-1-ab/db.db/t/f"
    assert path_in_snapshot("/.snapshot/s", "/w/f") == "/.snapshot/s/w/f"  # the root snapshottable


@pytest.mark.parametrize(
    ("version", "path"),
    [
        ("/other/.snapshot/s", "/warehouse/f"),  # another directory's snapshot
        ("/warehouse2/.snapshot/s", "/warehouse/f"),  # a sibling sharing a prefix
        ("/warehouse/../etc/.snapshot/s", "/warehouse/f"),
        ("/warehouse/.snapshot/s/../../etc", "/warehouse/f"),  # a name that is a path
        ("/warehouse/.snapshot/..", "/warehouse/f"),
        ("/warehouse/.snapshot/", "/warehouse/f"),
        ("warehouse/.snapshot/s", "/warehouse/f"),  # relative
        ("/warehouse/.snapshot/a/.snapshot/s", "/warehouse/f"),  # a snapshot inside a snapshot
        ("/warehouse//.snapshot/s", "/warehouse/f"),
        ("s3-version-id", "/warehouse/f"),
    ],
)
def test_a_crafted_version_is_refused(version: str, path: str) -> None:
    with pytest.raises(StorageError):
        path_in_snapshot(version, path)


def test_same_content_needs_the_same_inode_length_and_modification() -> None:
    status = {"type": "FILE", "fileId": 7, "length": 3, "modificationTime": 1000}
    assert same_content(status, dict(status))
    for change in ({"fileId": 8}, {"length": 4}, {"modificationTime": 1001}, {"type": "DIRECTORY"}):
        assert not same_content(status, {**status, **change})
    assert not same_content(status, None)
