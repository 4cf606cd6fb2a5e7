"""Empty version directories made by a worker process while the load goes on (``replication.dir_processes``).

Past ``HMSREPL_DIR_PROCESS_THRESHOLD`` directories a load hands the empty version directories of its
partitions to one worker process. The tests use a threshold of a few directories, so a real worker makes most
of a small table's: the replica must be the one a single process makes (on every backend, whose loads use one
writer or several), a directory an interrupted attempt left must be emptied as the load's own would be, a
name the roots refuse must be refused with the same line and nothing changed, and a worker killed mid-slice
must fail the load cleanly, so that the next load completes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.faults import FAULT_ENV
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication import dir_processes
from hmsrepl.replication.copy_processes import PROCESSES_ENV
from hmsrepl.replication.dir_processes import FAULT_POINT, THRESHOLD_ENV, dir_process_threshold
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.filecopy import VERSION_MARK
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.replications import ReplicationConfigError
from hmsrepl.replication.verify import verify
from hmsrepl.storage.local import local_path
from hmsrepl.storage.rooted import OutsideRootsError, RootedFileSystem
from tests import helpers
from tests.helpers import make_partition, make_table, open_replica, open_sqlite_source, write_file
from tests.security.untouched import tree_hashes

PARTITIONS = 40  # of table t, none with a file: each one's version directory is empty
FULL = 3  # partitions with a file (their versions are made by the load, which links into them)
THRESHOLD = 5


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The worker from the 6th directory of a writer; yields every directory handed to it."""
    monkeypatch.setenv(PROCESSES_ENV, "2")
    monkeypatch.setenv(THRESHOLD_ENV, str(THRESHOLD))
    monkeypatch.delenv(FAULT_ENV, raising=False)
    taken: list[str] = []
    real = dir_processes.DirectoriesAhead.take

    def counted(self: dir_processes.DirectoriesAhead, uri: str) -> bool:
        handed = real(self, uri)
        if handed:
            taken.append(uri)
        return handed

    monkeypatch.setattr(dir_processes.DirectoriesAhead, "take", counted)
    yield taken


def _source(root: Path) -> Metastore:
    source = open_sqlite_source(root)
    source.catalog.create_database(Database(name="shop"))
    table = source.catalog.create_table(make_table("shop", "t", partition_keys=("p",)))
    values = [f"{i:03d}" for i in range(PARTITIONS)]
    source.catalog.add_partitions("shop", "t", [make_partition(table, value) for value in values])
    for value in values[:FULL]:
        [part] = source.catalog.get_partitions_by_names("shop", "t", [f"p={value}"])
        write_file(part.sd.location, "part-0.parquet", f"row {value}".encode())
        source.catalog.insert("shop", "t", [value])
    return source


def _layout(store: Metastore, db: str) -> dict[str, list[str]]:
    """Each partition's directory (without its version mark) and the names in it; every one must exist."""
    out = {}
    for part in store.catalog.get_partitions(db, "t"):
        directory = Path(local_path(part.sd.location or ""))
        assert directory.is_dir(), f"{directory} is named by the replica but missing"
        out[directory.name.split(VERSION_MARK)[0]] = sorted(p.name for p in directory.iterdir())
    return out


def test_the_worker_makes_the_replica_one_process_makes(
    db_url: str, tmp_path: Path, pooled: list[str]
) -> None:
    source = _source(tmp_path)
    target = open_replica(db_url, tmp_path)
    try:
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
        dump = engine.execute("REPL DUMP shop").dump_dir
        engine.execute(f"REPL LOAD shop_many FROM '{dump}'")
        assert len(pooled) >= PARTITIONS - FULL - 4 * THRESHOLD, "the worker made most empty versions"
        assert all(uri.startswith(str(tmp_path / "dst_wh")) for uri in pooled)
        handed = len(pooled)
        os.environ[PROCESSES_ENV] = "1"  # restored by the fixture's monkeypatch
        engine.execute(f"REPL LOAD shop_one FROM '{dump}'")
        assert len(pooled) == handed, "one process: no worker"
        assert verify(source, "shop", target, "shop_many") == []
        assert _layout(target, "shop_many") == _layout(target, "shop_one")
        assert _layout(target, "shop_many")["p=000"] == ["part-0.parquet"]
    finally:
        source.close()
        target.close()


@pytest.fixture
def dumped(tmp_path: Path, pooled: list[str]) -> Iterator[tuple[Metastore, Metastore, str]]:
    """The source, a SQLite replica and the source's bootstrap dump (the worker from the 6th directory)."""
    source = _source(tmp_path)
    target = open_replica(f"sqlite:///{tmp_path}/target.db", tmp_path)
    dump = ReplicationEngine(str(tmp_path / "dumps"), source, target).execute("REPL DUMP shop").dump_dir
    yield source, target, dump
    source.close()
    target.close()


def test_a_version_an_interrupted_attempt_left_is_emptied(
    dumped: tuple[Metastore, Metastore, str], pooled: list[str]
) -> None:
    """The worker finds the directory there already; the load removes what the attempt left in it."""
    source, target, dump = dumped
    last = f"p={PARTITIONS - 1:03d}"  # made by the worker: past the threshold
    left = _table_dir(target, "shop") / f"{last}{VERSION_MARK}{source.events.current_event_id()}"
    left.mkdir(parents=True)
    (left / "part-9.parquet").write_bytes(b"an interrupted attempt's file")
    ReplicationEngine(str(Path(dump).parent), source, target).execute(f"REPL LOAD shop FROM '{dump}'")
    assert str(left) in {local_path(uri) for uri in pooled}
    assert _layout(target, "shop")[last] == []
    assert verify(source, "shop", target, "shop") == []


def test_a_version_name_leading_out_is_refused_as_in_one_process(
    tmp_path: Path, dumped: tuple[Metastore, Metastore, str]
) -> None:
    """A symlink planted at a version's name, to a directory outside the replica: refused in one line naming
    it, with the worker as without it, the directory it leads to untouched and no replica left. Without the
    worker the load's own ``mkdir`` refuses it; with it, the worker's (the same line) or, when the page's
    metadata gets there first, the catalog's location check, which resolves the name too."""
    source, target, dump = dumped
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "secret.txt").write_bytes(b"outside every root")
    before = tree_hashes(victim)
    lines = {}
    for processes in ("2", "1"):
        replica = f"shop_{processes}"
        table_dir = _table_dir(target, replica)
        table_dir.mkdir(parents=True)
        last = f"p={PARTITIONS - 1:03d}"  # past the threshold: the worker's, with two processes
        (table_dir / f"{last}{VERSION_MARK}{source.events.current_event_id()}").symlink_to(victim)
        command = f"REPL LOAD {replica} FROM '{dump}'"
        failed = helpers.repl_run_cli(
            command, target, source, "--no-progress", env={PROCESSES_ENV: processes}
        )
        assert failed.returncode != 0 and "Traceback" not in failed.stderr, failed.stderr
        [line] = failed.stderr.strip().splitlines()
        assert "outside" in line and last in line, line
        lines[processes] = line.replace(replica, "REPLICA")
        assert tree_hashes(victim) == before
        assert repl_status(target, replica) is None
        assert not [p for p in table_dir.iterdir() if not p.is_symlink()], "the failed batch left directories"
    catalog_check = "is outside the managed roots" in lines["2"] and "HMSREPL_MANAGED_ROOTS" in lines["2"]
    assert lines["2"] == lines["1"] or catalog_check, lines


def test_the_worker_refuses_a_name_leading_out_with_the_load_s_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Handed straight to the worker: the name that is a symlink out of the roots is refused with the error the
    load's own ``mkdir`` raises (type and message), once the batch's other slices have ended; an existing
    directory is told apart from a made one."""
    monkeypatch.setenv(PROCESSES_ENV, "2")
    monkeypatch.setenv(THRESHOLD_ENV, "1")
    root, victim = tmp_path / "wh", tmp_path / "victim"
    root.mkdir()
    victim.mkdir()
    (root / "out").symlink_to(victim)
    (root / "there").mkdir()
    fs = RootedFileSystem([str(root)], purpose="replica files")
    with pytest.raises(OutsideRootsError) as own:
        fs.make_directory(str(root / "out"))
    ahead = dir_processes.DirectoriesAhead(fs.roots, fs.purpose)
    assert not ahead.take(str(root / "first")), "below the threshold: the caller makes it"
    assert ahead.take(str(root / "there")) and ahead.take(str(root / "made"))
    assert ahead.settle() == [str(root / "there")]
    assert (root / "made").is_dir() and not (root / "first").exists()
    for name in [f"a{i}" for i in range(dir_processes.SLICE_DIRS)] + ["out", "last"]:
        assert ahead.take(str(root / name))
    with pytest.raises(OutsideRootsError) as theirs:
        ahead.settle()
    assert str(theirs.value) == str(own.value)
    # The slice before it was made whole; its own stopped at the refusal (the batch then fails).
    assert (root / "a0").is_dir() and not (root / "last").exists()
    assert list(victim.iterdir()) == [] and not ahead.pending


def _table_dir(target: Metastore, replica: str) -> Path:
    """Table t's directory in replica database ``replica``."""
    return Path(local_path(target.catalog.default_db_location(replica))) / "t"


def test_a_killed_worker_fails_the_load_cleanly_and_the_next_load_completes(
    tmp_path: Path, dumped: tuple[Metastore, Metastore, str]
) -> None:
    """Through the CLI: one line naming the directories being made, a non-zero exit, nothing on the replica;
    the next load of the same dump loads it whole."""
    source, target, dump = dumped
    command = f"REPL LOAD shop_dr FROM '{dump}'"
    # The worker dies at its 3rd directory.
    failed = helpers.repl_run_cli(
        command, target, source, "--no-progress", env={FAULT_ENV: f"{FAULT_POINT}@3"}
    )
    assert failed.returncode != 0 and "Traceback" not in failed.stderr, failed.stderr
    [line] = failed.stderr.strip().splitlines()
    assert "directory process stopped" in line and "p=0" in line, line
    assert "nothing of the batch was applied" in line and "REPL LOAD again" in line, line
    assert repl_status(target, "shop_dr") is None
    table_dir = _table_dir(target, "shop_dr")
    assert not table_dir.exists() or not list(table_dir.iterdir()), "the failed batch left directories"
    ReplicationEngine(str(tmp_path / "dumps"), source, target).execute(command)
    assert verify(source, "shop", target, "shop_dr") == []


def test_the_threshold_is_checked_with_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(THRESHOLD_ENV, raising=False)
    monkeypatch.setenv(PROCESSES_ENV, "2")
    assert dir_process_threshold() == dir_processes.DEFAULT_THRESHOLD
    monkeypatch.setenv(PROCESSES_ENV, "1")
    assert dir_process_threshold() is None, "one process: no worker"
    for bad in ("0", "many", "-3"):
        monkeypatch.setenv(THRESHOLD_ENV, bad)
        with pytest.raises(ReplicationConfigError) as info:
            dir_process_threshold()
        assert str(info.value).startswith(f"{THRESHOLD_ENV}={bad!r} is not ") and "\n" not in str(info.value)


def test_a_load_past_the_threshold_starts_the_forkserver_before_its_first_change(
    dumped: tuple[Metastore, Metastore, str], pooled: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forkserver imports while the load makes its first directories itself, so the first slice does not
    wait for it; a load whose tables each fit in the threshold starts none ahead."""
    source, target, dump = dumped
    started: list[bool] = []  # whether the replica existed then
    real = dir_processes.start_forkserver

    def start() -> None:
        started.append("shop" in target.catalog.get_databases())
        real()

    monkeypatch.setattr(dir_processes, "start_forkserver", start)
    engine = ReplicationEngine(str(Path(dump).parent), source, target)
    engine.execute(f"REPL LOAD shop FROM '{dump}'")
    assert started == [False] and pooled, "started once, in the pre-flight; the worker then made directories"
    monkeypatch.setenv(THRESHOLD_ENV, str(PARTITIONS))  # the table's partitions: none past it
    engine.execute(f"REPL LOAD shop_one FROM '{dump}'")
    assert started == [False], "no directory for the worker: no forkserver started for it"
    assert verify(source, "shop", target, "shop") == verify(source, "shop", target, "shop_one") == []
