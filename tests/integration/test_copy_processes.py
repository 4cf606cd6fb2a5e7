"""The copies of a big partition staged by several processes (``replication.copy_processes``).

A bootstrap load of a partition with at least ``HMSREPL_COPY_PROCESS_THRESHOLD`` files hands its copies to
``HMSREPL_COPY_PROCESSES`` worker processes; smaller partitions stay in the load's own threads. The tests use
a threshold of a few files, so a pool of two real processes runs on small files: the replica must be the one
a single process makes, a path the roots refuse must still be refused by a worker with nothing changed, and a
worker killed mid-slice must fail the load cleanly, so that the next load completes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hmsrepl.exceptions import StorageError
from hmsrepl.faults import FAULT_ENV
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication import copy_processes, prestage
from hmsrepl.replication.copy_processes import (
    FAULT_POINT,
    PROCESSES_ENV,
    THRESHOLD_ENV,
    CopyProcessSettings,
    big_directories,
    copy_process_settings,
)
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.filecopy import CopyTask
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.replications import ReplicationConfigError
from hmsrepl.replication.verify import verify
from hmsrepl.storage.base import parent_uri
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.local import local_path
from hmsrepl.storage.rooted import RootedFileSystem
from tests.helpers import (
    make_partition,
    make_table,
    open_replica,
    open_sqlite_source,
    repl_run_cli,
    write_file,
)
from tests.security.untouched import tree_hashes

REPO = Path(__file__).resolve().parents[2]
BIG, SMALL = 24, 3  # files of partition p=big (copied by the processes) and p=small (by threads)


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Two copy processes from 8 files a partition; yields the number of copies each pool made, per load."""
    monkeypatch.setenv(PROCESSES_ENV, "2")
    monkeypatch.setenv(THRESHOLD_ENV, "8")
    monkeypatch.delenv(FAULT_ENV, raising=False)
    made: list[int] = []
    real = prestage.CopyPool.stage

    def counted(pool: prestage.CopyPool, *args: object, **kwargs: object) -> Iterator[object]:
        made.append(0)
        for outcome in real(pool, *args, **kwargs):  # type: ignore[arg-type]
            made[-1] += 1
            yield outcome

    monkeypatch.setattr(prestage.CopyPool, "stage", counted)
    yield made


def _source(
    root: Path, partitions: tuple[tuple[str, int], ...] = (("big", BIG), ("small", SMALL))
) -> Metastore:
    source = open_sqlite_source(root)
    source.catalog.create_database(Database(name="shop"))
    table = source.catalog.create_table(make_table("shop", "t", partition_keys=("p",)))
    for value, files in partitions:
        [part] = source.catalog.add_partitions("shop", "t", [make_partition(table, value)])
        for i in range(files):
            write_file(part.sd.location, f"part-{i:03d}.parquet", f"{value} row {i} ".encode() * (i + 1))
        source.catalog.insert("shop", "t", [value])
    return source


def _contents(location: str) -> dict[str, str]:
    """Every data file below ``location`` by relative path and content hash."""
    top = Path(local_path(location))
    return {
        str(path.relative_to(top)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(top.rglob("*"))
        if path.is_file() and not path.name.startswith((".", "_"))
    }


def _partition_contents(store: Metastore, db: str) -> dict[str, dict[str, str]]:
    parts = store.catalog.get_partitions(db, "t")
    return {p.values[0]: _contents(p.sd.location or "") for p in parts}


@pytest.mark.parametrize("own_listing", [False, True], ids=["listing in a page", "listing of its own"])
def test_several_processes_make_the_replica_one_process_makes(
    tmp_path: Path, pooled: list[int], monkeypatch: pytest.MonkeyPatch, own_listing: bool
) -> None:
    """With its listing in its own directory of the dump, the big partition's copies are made by the processes
    straight into its new version, under the files' own names."""
    if own_listing:
        monkeypatch.setattr("hmsrepl.replication.layout.PAGE_FILES", 10)
    in_place: list[bool] = []
    real_slices = copy_processes._slices

    def slices(indexed: Iterator[tuple[int, CopyTask, str]], size: int) -> object:
        listed = list(indexed)
        in_place.extend(task.in_place for _, task, _ in listed)
        return real_slices(iter(listed), size)

    monkeypatch.setattr(copy_processes, "_slices", slices)
    source = _source(tmp_path)
    target = open_replica(f"sqlite:///{tmp_path}/target.db", tmp_path)
    try:
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
        dump = engine.execute("REPL DUMP shop").dump_dir
        engine.execute(f"REPL LOAD shop_many FROM '{dump}'")
        assert pooled == [BIG], "only the big partition's copies go to the processes"
        os.environ[PROCESSES_ENV] = "1"  # restored by the fixture's monkeypatch
        engine.execute(f"REPL LOAD shop_one FROM '{dump}'")
        assert pooled == [BIG], "one process: no pool"
        expected = _partition_contents(source, "shop")
        assert len(expected["big"]) == BIG and len(expected["small"]) == SMALL
        assert _partition_contents(target, "shop_many") == expected == _partition_contents(target, "shop_one")
        assert verify(source, "shop", target, "shop_many") == []
        assert in_place == [own_listing] * BIG, "the processes' copies go straight into the version, or not"
        staged = [p for p in (tmp_path / "dst_wh").rglob("*") if p.name.startswith(".hmsrepl")]
        assert not [p for p in staged if p.is_file()], "no staged copy is left behind"
    finally:
        source.close()
        target.close()


def test_each_partition_is_staged_by_one_process_and_two_side_by_side(
    tmp_path: Path, pooled: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Processes creating files in one directory take turns on its lock in the kernel, spinning while they
    wait: a partition's copies all go to one process (its lane), and two big partitions to two. The lanes
    here are threads (one each, as a lane has one process) that record what they were given."""
    lanes: list[str] = []
    given: dict[str, set[str]] = {}  # a target directory -> the lanes that staged copies into it
    mixed: list[set[str]] = []  # slices naming more than one directory

    def lane_pool(processes: int) -> ThreadPoolExecutor:
        assert processes == 1, "a lane is one process"
        lanes.append(f"lane{len(lanes)}")
        return ThreadPoolExecutor(processes, thread_name_prefix=lanes[-1])

    real = copy_processes._copy_slice

    def recorded(tasks: list[CopyTask], fresh: frozenset[str]) -> copy_processes.SliceOutcome:
        parents = {parent_uri(task.target_uri) for task in tasks}
        if len(parents) > 1:
            mixed.append(parents)
        for parent in parents:
            given.setdefault(parent, set()).add(threading.current_thread().name.split("_")[0])
        return real(tasks, fresh)

    monkeypatch.setattr(copy_processes, "worker_pool", lane_pool)
    monkeypatch.setattr(copy_processes, "_copy_slice", recorded)
    source = _source(tmp_path, (("big", BIG), ("huge", BIG + 5), ("small", SMALL)))
    target = open_replica(f"sqlite:///{tmp_path}/target.db", tmp_path)
    try:
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
        dump = engine.execute("REPL DUMP shop").dump_dir
        engine.execute(f"REPL LOAD shop_dr FROM '{dump}'")
        assert pooled == [2 * BIG + 5], "both big partitions' copies, not the small one's, went to the pool"
        assert not mixed, f"a slice named several directories: {mixed}"
        assert sorted(Path(d).name for d in given) == ["p=big", "p=huge"], given
        assert [len(staged_by) for staged_by in given.values()] == [1, 1], (
            f"a partition had two lanes: {given}"
        )
        assert set().union(*given.values()) == {"lane0", "lane1"}, "the two partitions shared a lane"
        assert _partition_contents(target, "shop_dr") == _partition_contents(source, "shop")
        assert verify(source, "shop", target, "shop_dr") == []
    finally:
        source.close()
        target.close()


def test_settings_are_checked_with_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROCESSES_ENV, raising=False)
    monkeypatch.delenv(THRESHOLD_ENV, raising=False)
    default = copy_process_settings()
    assert default.processes >= 1 and default.threshold == 50_000
    for name, bad in (
        (PROCESSES_ENV, "0"),
        (PROCESSES_ENV, "lots"),
        (PROCESSES_ENV, "65"),
        (THRESHOLD_ENV, "0"),
    ):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ReplicationConfigError) as info:
            copy_process_settings()
        assert str(info.value).startswith(f"{name}={bad!r} is not ") and "\n" not in str(info.value)
        monkeypatch.delenv(name)


def test_only_partitions_at_the_threshold_use_processes(tmp_path: Path) -> None:
    fs = RootedFileSystem([str(tmp_path)], purpose="test")

    def tasks(directory: str, count: int) -> list[CopyTask]:
        return [CopyTask("x", f"{tmp_path}/{directory}/f{i}", ()) for i in range(count)]

    mixed = [parent_uri(task.target_uri) for task in tasks("p=a", 5) + tasks("p=b", 4) + tasks("p=c", 1)]
    assert big_directories(fs, mixed, CopyProcessSettings(2, 4)) == {f"{tmp_path}/p=a", f"{tmp_path}/p=b"}
    assert big_directories(fs, mixed, CopyProcessSettings(2, 6)) == frozenset()
    assert big_directories(fs, mixed, CopyProcessSettings(1, 1)) == frozenset(), "one process: no pool"


# -- a path the roots refuse, met by a worker -----------------------------------------------------------------
def _planted_tasks(root: Path, bad: str) -> list[CopyTask]:
    """Copy tasks of a partition of 12 good files and one planted ``bad`` entry (at position 7)."""
    src, dst, victim = root / "src", root / "dst", root / "victim"
    for directory in (src / "p=a", dst, victim):
        directory.mkdir(parents=True)
    secret = victim / "secret.txt"
    secret.write_bytes(b"outside every root")
    (src / "p=a" / "link").symlink_to(secret)
    entries = []
    for i in range(12):
        data = f"row {i}".encode()
        (src / "p=a" / f"f{i:02d}").write_bytes(data)
        entries.append((f"{src}/p=a/f{i:02d}", checksum_bytes(data)))
    planted = {
        "outside the roots": str(secret),
        "'..'": f"{src}/p=a/../../victim/secret.txt",
        "a symlink": f"{src}/p=a/link",
    }[bad]
    entries.insert(7, (planted, checksum_bytes(secret.read_bytes())))
    tasks = [
        CopyTask(EncodedFileUri(uri, token).encode(), f"{dst}/p=a/g{i:02d}", (f"{src}/p=a",), "", (str(dst),))
        for i, (uri, token) in enumerate(entries)
    ]
    return tasks


@pytest.mark.parametrize("bad", ["outside the roots", "'..'", "a symlink"])
def test_a_worker_refuses_a_planted_path_and_nothing_changes(
    tmp_path: Path, pooled: list[int], bad: str
) -> None:
    tasks = _planted_tasks(tmp_path, bad)
    before = tree_hashes(tmp_path)
    with pytest.raises(
        StorageError
    ) as info:  # as the load's own threads refuse it (OutsideRootsError is one)
        prestage.stage_ahead(tasks, "dump")
    assert pooled == [pooled[0]] and pooled[0] < len(tasks), "the pool ran, and stopped at the planted path"
    message = str(info.value)
    assert "\n" not in message and ("secret.txt" in message or "/link" in message), message
    assert tree_hashes(tmp_path) == before, "a refused copy changed files (or left a staged one)"
    assert not (tmp_path / "dst" / "p=a").exists()


# -- a worker that dies -------------------------------------------------------------------------------------------
def test_a_killed_worker_fails_the_load_cleanly_and_the_next_load_completes(
    tmp_path: Path, pooled: list[int]
) -> None:
    """Through the CLI: one line naming the files being copied, a non-zero exit, nothing on the replica;
    the next load of the same dump loads it whole."""
    source = _source(tmp_path)
    target = open_replica(f"sqlite:///{tmp_path}/target.db", tmp_path)
    try:
        dump = ReplicationEngine(str(tmp_path / "dumps"), source, target).execute("REPL DUMP shop").dump_dir

        def load(**env: str) -> subprocess.CompletedProcess[str]:
            return repl_run_cli(f"REPL LOAD shop_dr FROM '{dump}'", target, source, "--no-progress", env=env)

        replica_files = tmp_path / "dst_wh"
        before = tree_hashes(replica_files) if replica_files.exists() else {}
        failed = load(**{FAULT_ENV: f"{FAULT_POINT}@5"})  # each worker dies at its 5th file
        assert failed.returncode != 0 and "Traceback" not in failed.stderr, failed.stderr
        lines = failed.stderr.strip().splitlines()
        assert len(lines) == 1, failed.stderr
        [line] = lines
        assert "copy process stopped" in line and "part-" in line and "p=big" in line, line
        assert "nothing was applied" in line and "REPL LOAD again" in line, line
        assert repl_status(target, "shop_dr") is None
        assert "shop_dr" not in target.catalog.get_databases()
        after = tree_hashes(replica_files) if replica_files.exists() else {}
        assert {k: v for k, v in after.items() if v != "dir"} == {
            k: v for k, v in before.items() if v != "dir"
        }

        ReplicationEngine(str(tmp_path / "dumps"), source, target).execute(f"REPL LOAD shop_dr FROM '{dump}'")
        assert verify(source, "shop", target, "shop_dr") == []
        assert _partition_contents(target, "shop_dr") == _partition_contents(source, "shop")
        assert not [p for p in replica_files.rglob("*") if p.is_file() and p.name.startswith(".hmsrepl")]
    finally:
        source.close()
        target.close()
