"""A bootstrap load works through a big partition's files a page at a time: the validation hands the pre-flight
its checked entries in pages, and the copies are planned and staged in pages. Pages are made small here, so a
partition of 40 files spans several of each.

What must not change: every file is examined and copied once, in full; a file whose content is not the one
the dump records, found on the last page, still refuses the whole dump, and every copy staged on the pages
before it is removed again (nothing of the dump is left on the target).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.replication import prestage
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.filecopy import CopyTask
from hmsrepl.replication.load import LoadResult
from hmsrepl.replication.preflight import Preflight
from hmsrepl.replication.prestage import DumpContentMismatchError
from hmsrepl.replication.replica_versions import VersionPublisher
from hmsrepl.replication.verify import verify
from hmsrepl.storage.local import local_path
from hmsrepl.storage.rooted import RootedFileSystem
from hmsrepl.storage.staging import STAGING_PREFIX
from tests.helpers import one_partition_directory, open_store

FILES = 40
LISTING_PAGE, FILES_PAGE, COPY_PAGE = 7, 6, 9


@dataclass
class Scene:
    """A dumped partition of FILES files in one directory, and the pages its load works in."""

    engine: ReplicationEngine
    dump_dir: str
    directory: Path  # the source partition's
    root: Path
    target: Metastore
    checked: list[int]  # the size of each page the pre-flight looked at
    staged: list[int]  # the size of each page of copies staged

    def load(self) -> LoadResult:
        result = self.engine.execute(f"REPL LOAD big_dr FROM '{self.dump_dir}'")
        assert isinstance(result, LoadResult)
        return result


def content(i: int) -> bytes:
    return f"rows of file {i:03d}".encode()


@pytest.fixture
def scene(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scene]:
    monkeypatch.setattr("hmsrepl.replication.layout.PAGE_FILES", 10)  # the partition gets its own _files
    monkeypatch.setattr("hmsrepl.replication.layout.LISTING_PAGE", LISTING_PAGE)
    monkeypatch.setattr("hmsrepl.replication.dump_snapshot_checks.FILES_PAGE", FILES_PAGE)
    monkeypatch.setattr("hmsrepl.replication.staging_along.COPY_PAGE", COPY_PAGE)
    checked: list[int] = []
    staged: list[int] = []
    real_check, real_stage = Preflight.check, prestage._stage_page

    def check(self: Preflight, files: Sequence[str]) -> None:
        checked.append(len(files))
        real_check(self, files)

    def stage_page(tasks: Sequence[CopyTask], *args: object) -> object:
        staged.append(len(tasks))
        return real_stage(tasks, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Preflight, "check", check)
    monkeypatch.setattr(prestage, "_stage_page", stage_page)
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    _, directory = one_partition_directory(source, "big")
    for i in range(FILES):
        (directory / f"part-{i:05d}.parquet").write_bytes(content(i))
    source.catalog.insert("big", "t", ["a"])
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    dumped = engine.execute("REPL DUMP big")
    assert (Path(dumped.dump_dir) / "big" / "t" / "p=a" / "_files").exists()  # type: ignore[union-attr]
    try:
        yield Scene(engine, dumped.dump_dir, directory, tmp_path, target, checked, staged)  # type: ignore[union-attr]
    finally:
        source.close()
        target.close()


def test_a_partition_of_many_pages_is_checked_and_copied_whole(scene: Scene) -> None:
    result = scene.load()

    assert scene.checked == [FILES_PAGE] * (FILES // FILES_PAGE) + [FILES % FILES_PAGE], (
        "each file examined once"
    )
    assert sum(scene.staged) == FILES and max(scene.staged) <= COPY_PAGE and len(scene.staged) > 1
    assert result.stats.files_copied == FILES
    [part] = scene.target.catalog.get_partitions_by_names("big_dr", "t", ["p=a"])
    held = Path(local_path(part.sd.location or ""))
    assert sorted(p.name for p in held.iterdir()) == [f"part-{i:05d}.parquet" for i in range(FILES)]
    assert all((held / f"part-{i:05d}.parquet").read_bytes() == content(i) for i in range(FILES))
    assert not list((scene.root / "target_wh").rglob(f"{STAGING_PREFIX}*")), "a staged copy left behind"


def test_a_forged_file_on_the_last_page_refuses_the_dump_and_removes_every_page_staged(scene: Scene) -> None:
    """The last file is rewritten in place with as many bytes (the pre-flight's size check passes, cmroot
    has no copy): only its copy finds the content is not the one the dump records, after the pages before
    it were staged."""
    (scene.directory / f"part-{FILES - 1:05d}.parquet").write_bytes(content(999))

    with pytest.raises(DumpContentMismatchError, match="nothing was applied"):
        scene.load()

    assert len(scene.staged) > 1, "copies of earlier pages were staged before the forged file was met"
    assert "big_dr" not in scene.target.catalog.get_databases()
    left = [p for p in (scene.root / "target_wh").rglob("*") if p.is_file()]
    assert [p for p in left if STAGING_PREFIX in p.name] == [], "a staged copy of an earlier page is left"
    assert not (scene.root / "target_wh" / "big_dr.db" / "t").exists(), (
        "a directory made for the copies is left"
    )


def test_a_big_partition_is_copied_straight_into_its_version_and_published_without_a_rename(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition whose listing has its own directory in the dump is staged under the files' own names in
    the version directory it takes, which no metadata names before the load commits: publishing it renames
    nothing (a partition of 1,000,000 files renamed each one)."""
    renamed: list[str] = []
    real_rename = RootedFileSystem.rename

    def rename(self: RootedFileSystem, src: str, dst: str) -> bool:
        renamed.append(dst)
        return real_rename(self, src, dst)

    monkeypatch.setattr(RootedFileSystem, "rename", rename)
    monkeypatch.setattr(
        "hmsrepl.storage.directory_copies.os.rename", lambda *a, **k: renamed.append(str(a[1]))
    )

    result = scene.load()

    assert renamed == [], "a copy staged ahead was renamed"
    assert result.stats.files_copied == FILES
    [part] = scene.target.catalog.get_partitions_by_names("big_dr", "t", ["p=a"])
    held = Path(local_path(part.sd.location or ""))
    assert held.name.startswith("p=a.hmsrepl-v")
    assert all((held / f"part-{i:05d}.parquet").read_bytes() == content(i) for i in range(FILES))
    table_dir = held.parent
    assert sorted(p.name for p in table_dir.iterdir()) == [held.name], "a staging area or another version"


def test_a_load_failing_before_it_publishes_removes_the_version_its_copies_were_staged_in(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the replica's database went away")

    monkeypatch.setattr(VersionPublisher, "publish_version", fail)

    with pytest.raises(RuntimeError, match="went away"):
        scene.load()

    assert sum(scene.staged) == FILES, "the copies were staged before the failure"
    table_dir = scene.root / "target_wh" / "big_dr.db" / "t"
    assert not table_dir.exists() or list(table_dir.iterdir()) == [], "the staged version is left"


def test_a_big_partition_whose_files_are_all_in_a_subdirectory_keeps_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only files directly in a version are staged in it: a union's subdirectory is staged as any other
    copy, and no directory the load published is removed afterwards as unused."""
    monkeypatch.setattr("hmsrepl.replication.layout.PAGE_FILES", 10)
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    try:
        _, directory = one_partition_directory(source, "big")
        (directory / "HIVE_UNION_SUBDIR_1").mkdir()
        for i in range(24):
            (directory / "HIVE_UNION_SUBDIR_1" / f"part-{i:05d}.parquet").write_bytes(content(i))
        source.catalog.insert("big", "t", ["a"])
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
        dump = engine.execute("REPL DUMP big").dump_dir  # type: ignore[union-attr]
        assert (Path(dump) / "big" / "t" / "p=a" / "_files").exists()

        engine.execute(f"REPL LOAD big_dr FROM '{dump}'")

        assert verify(source, "big", target, "big_dr") == []
        [part] = target.catalog.get_partitions_by_names("big_dr", "t", ["p=a"])
        held = Path(local_path(part.sd.location or "")) / "HIVE_UNION_SUBDIR_1"
        assert sorted(p.name for p in held.iterdir()) == [f"part-{i:05d}.parquet" for i in range(24)]
        assert all((held / f"part-{i:05d}.parquet").read_bytes() == content(i) for i in range(24))
    finally:
        source.close()
        target.close()
