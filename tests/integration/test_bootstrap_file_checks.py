"""A bootstrap load of a many-file partition: each source file is examined once in the pre-flight (a regular
file in the source roots, of the recorded size) and each copy is renamed into its version directory once.

The cheaper checks must refuse what the older ones refused: a link planted among the files is refused with a
one-line error before anything changes, and a file the source replaced after the dump is still taken from
cmroot.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.replication.dump_checks import DumpValidationError
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import LoadResult
from hmsrepl.storage.local import local_path
from hmsrepl.storage.rooted import OutsideRootsError, RootedFileSystem
from hmsrepl.storage.staging import STAGING_PREFIX
from tests.helpers import one_partition_directory, open_store

FILES = 40


@dataclass
class Scene:
    root: Path
    source: Metastore
    target: Metastore
    engine: ReplicationEngine
    directory: Path  # the source partition's directory
    dump_dir: str

    def load(self) -> LoadResult:
        result = self.engine.execute(f"REPL LOAD big_dr FROM '{self.dump_dir}'")
        assert isinstance(result, LoadResult)
        return result

    def replica_directory(self) -> Path:
        [part] = self.target.catalog.get_partitions_by_names("big_dr", "t", ["p=a"])
        return Path(local_path(part.sd.location or ""))


def content(i: int) -> bytes:
    return f"rows of file {i}".encode()


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    _, directory = one_partition_directory(source, "big")
    for i in range(FILES):
        (directory / f"part-{i:05d}.parquet").write_bytes(content(i))
    source.catalog.insert("big", "t", ["a"])  # lists and checksums the partition's files
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    dumped = engine.execute("REPL DUMP big")
    try:
        yield Scene(tmp_path, source, target, engine, directory, dumped.dump_dir)  # type: ignore[union-attr]
    finally:
        source.close()
        target.close()


def tree_digest(*roots: Path) -> str:
    """Every name below ``roots`` (links and hidden names included) with its content or link target."""
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*")) if root.exists() else []:
            digest.update(str(path).encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            elif path.is_file():
                digest.update(path.read_bytes())
    return digest.hexdigest()


def test_a_link_planted_among_many_files_is_refused_before_anything_changes(scene: Scene) -> None:
    """The link names a file outside the source roots with the very content and size the dump records: only
    the look at the entry itself can refuse it."""
    outside = scene.root / "victim"
    outside.mkdir()
    secret = outside / "secret.parquet"
    secret.write_bytes(content(17))
    planted = scene.directory / "part-00017.parquet"
    planted.unlink()
    planted.symlink_to(secret)
    target_files = (scene.root / "target_wh", scene.root / "target_cm", scene.root / "target.db")
    before, victim_before = tree_digest(*target_files), tree_digest(outside)

    with pytest.raises(DumpValidationError) as refused:
        scene.load()

    message = str(refused.value)
    assert "\n" not in message
    assert "part-00017.parquet" in message and "not a regular file" in message
    assert "nothing was applied" in message
    assert "big_dr" not in scene.target.catalog.get_databases()
    assert tree_digest(*target_files) == before
    assert tree_digest(outside) == victim_before


def test_a_fifo_among_many_files_is_refused_without_opening_it(scene: Scene) -> None:
    planted = scene.directory / "part-00003.parquet"
    planted.unlink()
    os.mkfifo(planted)  # opening it for a read would block the load for good

    with pytest.raises(DumpValidationError, match=r"part-00003\.parquet.* not a regular file"):
        scene.load()
    assert "big_dr" not in scene.target.catalog.get_databases()


def test_a_file_the_source_replaced_with_another_size_is_copied_from_cmroot(scene: Scene) -> None:
    """The pre-flight's one look sees the wrong size and asks cmroot, whose copy the load then takes."""
    replaced = scene.directory / "part-00005.parquet"
    replaced.unlink()  # a new file under the old name: the source's cmroot keeps the one the dump names
    replaced.write_bytes(b"a rewrite of other length")

    result = scene.load()

    assert result.stats.files_from_cmroot == 1
    held = scene.replica_directory()
    assert (held / "part-00005.parquet").read_bytes() == content(5)
    assert sorted(p.name for p in held.iterdir()) == [f"part-{i:05d}.parquet" for i in range(FILES)]


def test_each_copy_is_renamed_into_its_version_directory_once(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy staged ahead goes straight to its name in the new version directory (no reader lists it before
    the commit): one rename per file, no staged name left, every file as the source has it."""
    renames: list[str] = []
    for name in ("rename", "replace"):
        real = getattr(os, name)

        def counted(src: str, dst: str, *args: object, _real: object = real, **kwargs: object) -> None:
            if STAGING_PREFIX in os.fspath(src):
                renames.append(os.fspath(dst))
            _real(src, dst, *args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(os, name, counted)

    scene.load()
    monkeypatch.undo()

    held = scene.replica_directory()
    assert ".hmsrepl-v" in held.name
    assert sorted(p.name for p in held.iterdir()) == [f"part-{i:05d}.parquet" for i in range(FILES)]
    assert all((held / f"part-{i:05d}.parquet").read_bytes() == content(i) for i in range(FILES))
    assert sorted(renames) == sorted(str(held / f"part-{i:05d}.parquet") for i in range(FILES))
    assert not [p for p in (scene.root / "target_wh").rglob(f"{STAGING_PREFIX}*")]


def test_entry_size_looks_at_the_name_only_and_inside_the_roots(tmp_path: Path) -> None:
    """What the pre-flight asks of each file in one ``lstat``: a regular file's size; a link is "other" (never
    followed), nothing is None, and a name outside the roots is refused before any look."""
    root, outside = tmp_path / "wh", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "f").write_bytes(b"12345")
    (outside / "g").write_bytes(b"123")
    (root / "link").symlink_to(outside / "g")
    files = RootedFileSystem([str(root)], purpose="source files").batch()

    assert files.entry_size(str(root / "f")) == ("file", 5)
    assert files.entry_size(str(root / "link")) == ("other", None)
    assert files.entry_size(str(root / "gone")) == (None, None)
    assert files.entry_size(str(root)) == ("directory", None)
    with pytest.raises(OutsideRootsError):
        files.entry_size(str(outside / "g"))


def test_a_rename_makes_a_missing_target_directory_and_reports_a_missing_source(tmp_path: Path) -> None:
    """The target's directory is made only when the rename needs it; a missing source is still an error
    (a copy staged ahead that is gone: the load copies again)."""
    files = RootedFileSystem([str(tmp_path)], purpose="replica files")
    (tmp_path / "staged").write_bytes(b"data")

    assert files.rename(str(tmp_path / "staged"), str(tmp_path / "new/dir/file"))
    assert (tmp_path / "new/dir/file").read_bytes() == b"data"
    with pytest.raises(FileNotFoundError):
        files.rename(str(tmp_path / "staged"), str(tmp_path / "new/dir/other"))
    with pytest.raises(FileNotFoundError):
        files.rename(str(tmp_path / "staged"), str(tmp_path / "elsewhere/other"))
    assert not (tmp_path / "new/dir/other").exists()
