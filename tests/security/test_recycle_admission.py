"""Recycling a dropped tree admits each file once, as a name: that shortcut must not open a way out.

A dropped table's files are recycled through one batch of the change manager's rooted file system: each
file is checked once as a name (its checksum is read without following a final symlink, then it is renamed
and deleted), its cmroot name once in full, and their directories with them. Each test below plants what a
writer with access to the warehouse could, between the drop's listing and its recycling, and hashes the
directory outside every root before and after: nothing outside may be read, moved, changed or copied.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hmsrepl.exceptions import StorageError
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.rooted import OutsideRootsError, RootedFileSystem
from tests.security.untouched import tree_hashes

SECRET = b"outside every root"


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path, ChangeManager]:
    """A table of three one-file partitions in the warehouse, a secret outside, a change manager."""
    warehouse, outside = tmp_path / "warehouse", tmp_path / "elsewhere"
    for n in range(3):
        (warehouse / "t" / f"p={n}").mkdir(parents=True)
        (warehouse / "t" / f"p={n}" / "f").write_bytes(b"data %d" % n)
    outside.mkdir()
    (outside / "secret").write_bytes(SECRET)
    return warehouse / "t", outside, ChangeManager(str(tmp_path / "cmroot"), roots=[str(warehouse)])


def _encoded(cm: ChangeManager, table: Path) -> list[str]:
    return [
        cm.encode(f"{table}/p={n}/f", checksum_bytes(b"data %d" % n)) for n in range(3)
    ]  # as the drop listed them


def _cm_contents(cm: ChangeManager) -> list[bytes]:
    root = Path(cm.cmroot)
    return [p.read_bytes() for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_a_file_swapped_for_a_link_out_is_not_followed(tree) -> None:
    table, outside, cm = tree
    encoded = _encoded(cm, table)
    (table / "p=1" / "f").unlink()
    os.symlink(outside / "secret", table / "p=1" / "f")  # after the listing, before the recycling
    before = tree_hashes(outside)
    with pytest.raises((StorageError, OutsideRootsError)):
        cm.recycle(encoded)
    assert tree_hashes(outside) == before
    assert SECRET not in _cm_contents(cm)
    assert os.path.islink(table / "p=1" / "f")  # neither moved nor replaced
    cm.recycle([encoded[0], encoded[2]])  # the others are recycled as usual
    assert sorted(_cm_contents(cm)) == [b"data 0", b"data 2"]


def test_a_partition_directory_swapped_for_a_link_out_is_refused(tree) -> None:
    table, outside, cm = tree
    encoded = _encoded(cm, table)
    (outside / "f").write_bytes(SECRET)
    (table / "p=2" / "f").unlink()
    (table / "p=2").rmdir()
    os.symlink(outside, table / "p=2")
    before = tree_hashes(outside)
    with pytest.raises(OutsideRootsError, match="resolves to"):
        cm.recycle(encoded)
    assert tree_hashes(outside) == before
    assert SECRET not in _cm_contents(cm)


def test_a_name_admission_does_not_pass_what_follows_the_link(tree) -> None:
    """A path admitted as a name passes for its name and its checksum (not followed), never for an
    operation that would follow it out; its directory passes, a root's parent never does."""
    table, outside, _ = tree
    os.symlink(outside / "secret", table / "link")
    before = tree_hashes(outside)
    for fs in (
        RootedFileSystem([str(table.parent)], purpose="test"),
        RootedFileSystem([str(table.parent)], purpose="test").batch(),
    ):
        named = fs.admit(f"{table}/link", content=False)
        assert named.has_entry(f"{table}/link")
        with pytest.raises(StorageError):
            named.checksum(f"{table}/link")  # read without following: refused by the store
        for follows in (named.exists, named.size, named.open_read, lambda uri, fs=named: fs.touch(uri, 0)):
            with pytest.raises(OutsideRootsError):
                follows(f"{table}/link")
        named.sync_directory(str(table))  # its directory lies in the root
        root = fs.admit(str(table.parent))
        with pytest.raises(OutsideRootsError):
            root.sync_directory(str(table.parent.parent))  # the root's parent was never checked
        with pytest.raises(OutsideRootsError):
            list(root.list_files(str(table.parent.parent)))
    assert tree_hashes(outside) == before
