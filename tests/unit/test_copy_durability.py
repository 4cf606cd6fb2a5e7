"""The verified local copy: one read pass, its checksum, and when its bytes are made durable.

Durability is observed by counting the real ``fdatasync``/``syncfs`` calls (each still runs): the modes
differ in nothing else a test can see without pulling the power.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.exceptions import FileLostError, StorageError
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.replication.filecopy import (
    CopyTask,
    below_any,
    copy_verified,
    publish_all,
    run_copy_task,
    staging_name,
)
from hmsrepl.replication.prestage import stage_ahead
from hmsrepl.replication.prestage import target_files as replica_files
from hmsrepl.spark.copy import FileFailure, _copy_failure, _copy_task_outcome, _run_group
from hmsrepl.storage import local
from hmsrepl.storage.base import copy_file
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.local import COPY_CHUNK_BYTES, WRITEBACK_BYTES, LocalFileSystem, deferred_sync
from hmsrepl.storage.rooted import OutsideRootsError, RootedFileSystem


class SyncCounter:
    """Counts per-file and per-file-system syncs while letting them happen."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, syncfs_result: int | None = None) -> None:
        self.fdatasync = 0
        self.syncfs = 0
        real_fdatasync, real_syncfs = os.fdatasync, local._syncfs
        assert real_syncfs is not None, "these tests need Linux's syncfs"

        def fdatasync(fd: int) -> None:
            self.fdatasync += 1
            real_fdatasync(fd)

        def syncfs(fd: int) -> int:
            self.syncfs += 1
            result = real_syncfs(fd)
            if syncfs_result is not None:  # a failing disk: the sync ran, the kernel reported an error
                import ctypes

                ctypes.set_errno(errno.EIO)
                return syncfs_result
            return result

        monkeypatch.setattr(local.os, "fdatasync", fdatasync)
        monkeypatch.setattr(local, "_syncfs", syncfs)


def write_source(path: Path, size: int) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = os.urandom(size)
    path.write_bytes(data)
    return checksum_bytes(data)


def make_tasks(tmp_path: Path, sizes: list[int]) -> list[CopyTask]:
    src, dst = tmp_path / "src", tmp_path / "dst"
    tasks = []
    for index, size in enumerate(sizes):
        path = src / f"p={index % 3}" / f"part-{index:03d}"
        token = write_source(path, size)
        target = dst / path.relative_to(src)
        tasks.append(
            CopyTask(
                EncodedFileUri(str(path), token).encode(), str(target), (str(src),), target_roots=(str(dst),)
            )
        )
    return tasks


@pytest.mark.parametrize(
    "size", [0, 1, COPY_CHUNK_BYTES, COPY_CHUNK_BYTES + 7, WRITEBACK_BYTES + COPY_CHUNK_BYTES + 3]
)
def test_local_copy_returns_the_checksum_of_an_exact_copy(tmp_path: Path, size: int) -> None:
    token = write_source(tmp_path / "a", size)
    assert LocalFileSystem().copy(str(tmp_path / "a"), f"file:{tmp_path}/b/c") == token
    assert (tmp_path / "b" / "c").read_bytes() == (tmp_path / "a").read_bytes()
    assert os.listdir(tmp_path / "b") == ["c"]  # no temporary file left beside it


def test_local_copy_of_a_missing_source_names_it(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match=re.escape(f"cannot read '{tmp_path}/missing'")):
        LocalFileSystem().copy(str(tmp_path / "missing"), str(tmp_path / "b"))
    assert not (tmp_path / "b").exists()


def test_file_mode_syncs_each_copy_batch_mode_once_per_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = SyncCounter(monkeypatch)
    sources = [tmp_path / f"s{i}" for i in range(5)]
    for path in sources:
        write_source(path, 1000)
    for path in sources:  # no context: each copy is durable when it returns
        copy_file(str(path), str(tmp_path / "file" / path.name))
    assert (counter.fdatasync, counter.syncfs) == (5, 0)

    with deferred_sync("batch"):
        for path in sources:
            copy_file(str(path), str(tmp_path / "batch" / path.name))
        assert (counter.fdatasync, counter.syncfs) == (5, 0)  # nothing synced yet: the batch is open
    assert (counter.fdatasync, counter.syncfs) == (5, 1)  # one syncfs for all five

    with deferred_sync("none"):
        for path in sources:
            copy_file(str(path), str(tmp_path / "none" / path.name))
    assert (counter.fdatasync, counter.syncfs) == (5, 1)
    for mode in ("file", "batch", "none"):
        assert sorted(os.listdir(tmp_path / mode)) == [p.name for p in sources]


def test_a_batch_that_fails_is_not_synced_and_modes_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = SyncCounter(monkeypatch)
    write_source(tmp_path / "s", 10)
    with pytest.raises(RuntimeError), deferred_sync("batch"):
        copy_file(str(tmp_path / "s"), str(tmp_path / "t"))
        raise RuntimeError("the copier stopped")
    assert counter.syncfs == 0
    with (
        pytest.raises(ValueError, match="durability 'fast' is not one of file, batch, none"),
        deferred_sync("fast"),  # type: ignore[arg-type]
    ):
        pass


def test_a_spark_task_syncs_its_threads_copies_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor side of ``spark_copy``: copies in a thread pool share the task's one sync."""
    counter = SyncCounter(monkeypatch)
    tasks = make_tasks(tmp_path, [5, 70_000, 0, 3 * 1024 * 1024] + [4096] * 20)
    outcomes = _run_group(list(enumerate(tasks)), _copy_task_outcome, 8, "batch", _copy_failure)
    assert [index for index, _ in outcomes] == list(range(len(tasks)))
    assert not [o for _, o in outcomes if isinstance(o, FileFailure)]
    assert (counter.fdatasync, counter.syncfs) == (0, 1)
    for task in tasks:
        source = EncodedFileUri.decode(task.encoded).file_uri
        assert Path(staging_name(task.target_uri)).read_bytes() == Path(source).read_bytes()


def test_a_failed_sync_fails_every_copy_of_its_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    SyncCounter(monkeypatch, syncfs_result=-1)
    tasks = make_tasks(tmp_path, [100, 200, 300])
    outcomes = [
        o for _, o in _run_group(list(enumerate(tasks)), _copy_task_outcome, 4, "batch", _copy_failure)
    ]
    assert all(isinstance(o, FileFailure) for o in outcomes)
    failure: Any = outcomes[1]
    assert failure.target == tasks[1].target_uri
    assert "not trusted: copy them again" in failure.reason and "Input/output error" in failure.reason


def test_a_damaged_staged_copy_is_copied_again_never_published(tmp_path: Path) -> None:
    (task,) = make_tasks(tmp_path, [50_000])
    staged = Path(staging_name(task.target_uri))
    first = run_copy_task(task)
    assert not first.prefetched and staged.exists()
    data = bytearray(staged.read_bytes())
    data[1234] ^= 0xFF  # same size, one bit pattern changed: only the checksum tells
    staged.write_bytes(bytes(data))
    again = run_copy_task(task)
    assert not again.prefetched and again.bytes_copied == 50_000
    assert staged.read_bytes() == Path(EncodedFileUri.decode(task.encoded).file_uri).read_bytes()


def test_changed_source_falls_back_to_cmroot_or_fails_leaving_nothing(tmp_path: Path) -> None:
    cmroot = tmp_path / "cm"
    original = os.urandom(8192)
    token = checksum_bytes(original)
    source = tmp_path / "src" / "part-0"
    source.parent.mkdir()
    source.write_bytes(os.urandom(8192))  # changed after the event recorded ``token``
    encoded = EncodedFileUri(str(source), token, str(cmroot)).encode()
    target = str(tmp_path / "dst" / "part-0")
    allowed = (str(source.parent), str(cmroot))
    replica = RootedFileSystem([str(tmp_path / "dst")], purpose="replica")

    with pytest.raises(FileLostError, match=re.escape(f"no copy of '{source}' with checksum {token}")):
        copy_verified(encoded, target, target=replica, allowed=below_any(*allowed))
    assert not os.path.exists(staging_name(target)) and not os.path.exists(target)
    assert os.listdir(tmp_path / "dst") == []  # no temporary file either

    cmroot.mkdir()
    (cmroot / f"part-0_{token}").write_bytes(original)
    result = copy_verified(encoded, target, target=replica, allowed=below_any(*allowed))
    assert result.from_cmroot and Path(staging_name(target)).read_bytes() == original


def test_publish_all_renames_then_syncs_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = make_tasks(tmp_path, [10, 20, 30, 40])
    with deferred_sync("none"):
        for task in tasks:
            run_copy_task(task)
    counter = SyncCounter(monkeypatch)
    publish_all(replica_files(tasks), [task.target_uri for task in tasks])
    assert counter.syncfs == 1
    for task in tasks:
        assert (
            Path(task.target_uri).read_bytes()
            == Path(EncodedFileUri.decode(task.encoded).file_uri).read_bytes()
        )
        assert not os.path.exists(staging_name(task.target_uri))


@pytest.mark.parametrize("count", [1, 3])
def test_publish_all_leaves_the_sync_to_a_caller_that_batches_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """A load publishes object by object and syncs once per batch: publishing alone must not sync."""
    tasks = make_tasks(tmp_path, [10] * count)
    with deferred_sync("none"):
        for task in tasks:
            run_copy_task(task)
    counter = SyncCounter(monkeypatch)
    publish_all(replica_files(tasks), [task.target_uri for task in tasks], durable=False)
    assert counter.syncfs == 0
    assert all(os.path.exists(task.target_uri) for task in tasks)
    assert not any(os.path.exists(staging_name(task.target_uri)) for task in tasks)


def test_copies_staged_ahead_are_synced_once_not_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load stages every copy before its first change and makes them durable with one sync of the file
    system before it goes on (a partition of 1,000,000 files waited on a million ``fdatasync``)."""
    counter = SyncCounter(monkeypatch)
    tasks = make_tasks(tmp_path, [10, 2000, 0, 70_000, 5])
    (tmp_path / "dst").mkdir()  # the replica's root
    ahead = stage_ahead(tasks, "dump")
    assert (counter.fdatasync, counter.syncfs) == (0, 1)
    assert len(ahead.copies) == len(tasks)
    assert all(ahead.copies.take(t.target_uri, t.encoded) for t in tasks), "every copy is held as staged"
    for task in tasks:
        source = EncodedFileUri.decode(task.encoded).file_uri
        assert Path(staging_name(task.target_uri)).read_bytes() == Path(source).read_bytes()


def test_a_staged_copy_never_writes_through_a_link_under_its_name(tmp_path: Path) -> None:
    """A staged name may be a hard link of a published file (a version links its batch's staged copies) or a
    planted symlink: the copy replaces the name, and the file it named keeps its bytes."""
    (task,) = make_tasks(tmp_path, [4096])
    staged = Path(staging_name(task.target_uri))
    staged.parent.mkdir(parents=True)
    published = staged.parent / "published"
    published.write_bytes(b"published bytes")
    os.link(published, staged)
    run_copy_task(task)
    assert published.read_bytes() == b"published bytes"
    assert staged.read_bytes() == Path(EncodedFileUri.decode(task.encoded).file_uri).read_bytes()

    outside = tmp_path / "outside"
    outside.write_bytes(b"not the replica's")
    staged.unlink()
    staged.symlink_to(outside)
    with pytest.raises(OutsideRootsError, match="resolves to"):
        run_copy_task(task)
    assert outside.read_bytes() == b"not the replica's"
    staged.unlink()
    staged.symlink_to(published)  # a link inside the replica: replaced, never followed
    run_copy_task(task)
    assert published.read_bytes() == b"published bytes" and not staged.is_symlink()
    assert oct(staged.stat().st_mode & 0o777) == "0o600"  # as the temporary files of ``copy`` are
