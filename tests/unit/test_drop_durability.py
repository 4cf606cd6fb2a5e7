"""What a drop makes durable before its intent is recorded done: the renames into cmroot and the removals.

A file renamed out of a directory could come back there after a power cut unless that directory is synced,
or the directory itself is gone durably (its parent synced). A drop that removes a table's tree syncs
cmroot and the tree's parent, not each of its directories; a directory it must keep (it holds files the
drop did not name) is synced itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.storage.directory_syncs import DirectorySyncs
from hmsrepl.storage.local import LocalFileSystem
from hmsrepl.storage.rooted import RootedFileSystem
from tests.helpers import make_partition, make_table, write_file


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = LocalFileSystem.sync_directory

    def record(self: LocalFileSystem, uri: str) -> None:
        calls.append(uri)
        real(self, uri)

    monkeypatch.setattr(LocalFileSystem, "sync_directory", record)
    return calls


def test_dropping_a_partitioned_table_syncs_cmroot_and_the_parent_once(
    sqlite_metastore: Metastore, synced: list[str], tmp_path: Path
) -> None:
    catalog = sqlite_metastore.catalog
    catalog.create_database(Database(name="d"))
    table = catalog.create_table(make_table("d", "t", partition_keys=("p",)))
    catalog.add_partitions("d", "t", [make_partition(table, str(n)) for n in range(20)])
    for part in catalog.get_partitions("d", "t"):
        write_file(part.sd.location or "", "f", part.values[0].encode())
    location = Path(table.sd.location or "")
    synced.clear()
    catalog.drop_table("d", "t")
    assert not location.exists()
    assert sorted(synced) == sorted([str(tmp_path / "cmroot"), str(location.parent)])
    assert len(list((tmp_path / "cmroot").iterdir())) == 20


def test_a_directory_the_work_keeps_is_synced_itself(tmp_path: Path, synced: list[str]) -> None:
    root = tmp_path / "w"
    for name in ("kept", "gone/a", "gone/b"):
        (root / "t" / name).mkdir(parents=True)
    fs = RootedFileSystem([str(root)], purpose="test")
    syncs = DirectorySyncs()
    syncs.add(fs, f"{root}/t/kept", f"{root}/t/gone/a", f"{root}/t/gone/b")
    (root / "t" / "gone" / "a").rmdir()
    (root / "t" / "gone" / "b").rmdir()
    (root / "t" / "gone").rmdir()
    syncs.removed(fs, f"{root}/t/gone")
    syncs.flush()
    assert sorted(synced) == [f"{root}/t", f"{root}/t/kept"]


def test_a_removed_root_is_synced_before_it_goes(tmp_path: Path, synced: list[str]) -> None:
    """The parent of a root lies outside the roots: what lies in the root is synced before removal."""
    root = tmp_path / "w"
    (root / "a").mkdir(parents=True)
    fs = RootedFileSystem([str(root)], purpose="test")
    syncs = DirectorySyncs()
    syncs.add(fs, f"{root}/a")
    syncs.before_removing(fs, str(root))
    assert synced == [f"{root}/a"]
    syncs.removed(fs, str(root))
    syncs.flush()
    assert synced == [f"{root}/a"]
