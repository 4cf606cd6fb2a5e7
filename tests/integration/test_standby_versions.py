"""An append of several files (one Spark append of several tasks) into a big replica partition costs what
was added: its new version starts from the partition's standby (``replication.standby``), the version it
replaced, parked once its readers' grace period passed, instead of linking every kept file again.

Readers stay atomic: the version is a directory no metadata names until the batch commits, so a reader of
the partition's location sees all the new files or none, and never loses a kept one; a load killed at any
step leaves the old or the new version, and its rerun converges to the source.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.model import Database
from hmsrepl.replication import leftovers, replica_versions, standby
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.failures import KILL_AT_ENV
from hmsrepl.replication.filecopy import STANDBY_MARK, is_staging_name
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import replica_leftovers, verify
from hmsrepl.storage.local import local_path
from hmsrepl.storage.rooted import RootedFileSystem
from tests import python_forks
from tests.helpers import make_partition, make_table, open_store, side_args, write_file
from tests.integration.test_replica_listing import FILES, append_two, bootstrap, incremental, seed


def location(target: Metastore, db: str = "sales_dr") -> Path:
    return Path(local_path(target.catalog.get_partition(db, "orders", ["d1"]).sd.location or ""))


def listing(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if not p.name.startswith((".", "_"))}


def append_several(source: Metastore, tag: str, count: int = 4) -> list[str]:
    """One INSERT of ``count`` new files (they must appear at once)."""
    part = source.catalog.get_partition("sales", "orders", ["d1"])
    names = [f"part-{tag}-{i}.parquet" for i in range(count)]
    files = [write_file(part.sd.location, name, f"{tag} {i}".encode()) for i, name in enumerate(names)]
    source.catalog.insert("sales", "orders", ["d1"], new_files=files)
    return names


def standbys(target: Metastore) -> list[str]:
    root = Path(local_path(target.config.warehouse))
    return sorted(p.name for p in root.rglob(f"*{STANDBY_MARK}"))


def count_links(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    linked: list[str] = []
    real = RootedFileSystem.link_or_copy

    def spy(self: RootedFileSystem, src: str, dst: str) -> None:
        linked.append(dst.rsplit("/", 1)[1])
        real(self, src, dst)

    monkeypatch.setattr(RootedFileSystem, "link_or_copy", spy)
    return linked


def test_an_append_of_several_files_starts_from_the_standby_and_links_only_what_changed(
    engine, source, target, monkeypatch
):
    seed(source)
    bootstrap(engine)
    assert FILES >= replica_versions.STANDBY_MIN_FILES
    append_two(source)  # the first new version links every kept file; its predecessor is parked
    incremental(engine)
    assert standbys(target) == [f"day=d1{STANDBY_MARK}"]
    linked = count_links(monkeypatch)
    for round_ in ("a", "b"):
        before, held = location(target), listing(location(target))
        names = append_several(source, round_)
        replica_head = target.get_current_notification_event_id()
        _, loaded = incremental(engine)
        after = location(target)
        assert after != before, "several files must appear at once: a new version"
        assert listing(after) == held | set(names)
        assert not before.exists(), "the replaced version was not parked (grace 0)"
        assert loaded.stats.files_copied == 4 and loaded.stats.files_kept >= FILES
        assert verify(source, "sales", target, "sales_dr") == []
        assert standbys(target) == [f"day=d1{STANDBY_MARK}"] and replica_leftovers(target, "sales_dr") == []
        # Only the files the standby lacked (those added since it was current) were linked.
        assert len(linked) <= 4, linked
        linked.clear()
        # The replica's own event names only the new files, with the whole listing's summary.
        events = target.get_next_notification(replica_head, 10)
        [change] = [obj.change for event in events for obj in parse_event(event).objects()]
        assert sorted(os.path.basename(f.split("#")[0]) for f in change.added) == sorted(names)
        assert change.count == len(listing(after))
    # The record still matches every file on disk (links keep each file's identity).
    table = target.catalog.get_table("sales_dr", "orders")
    part = target.catalog.get_partition("sales_dr", "orders", ["d1"])
    [record] = target.catalog.recorded_listings(table, [part]).values()
    assert record.keys() == listing(location(target))


def test_readers_see_all_the_new_files_or_none_at_every_step(engine, source, target, monkeypatch):
    """At every step of the load (each link, unlink, copy, the commit, the parking of the old version), a
    reader taking the partition's metadata and listing its location sees the listing before the append or
    after it, and every file it lists is readable."""
    seed(source)
    bootstrap(engine)
    append_two(source)
    incremental(engine)
    old = listing(location(target))
    new = old | set(append_several(source, "x", 8))
    seen: list[frozenset[str]] = []

    def reader() -> None:
        here = location(target)
        names = listing(here)
        assert all((here / name).read_bytes() is not None for name in names)
        seen.append(frozenset(names))

    for module in (standby, replica_versions, leftovers):
        monkeypatch.setattr(module, "fault_point", reader)
    incremental(engine)
    assert len(seen) > 8 and set(seen) <= {frozenset(old), frozenset(new)}
    assert frozenset(new) in seen and listing(location(target)) == new
    assert verify(source, "sales", target, "sales_dr") == []


@pytest.mark.parametrize("backend", ["sqlite"])  # file-level behaviour: the backends are tested above
def test_an_overwrite_drops_the_standby_and_the_next_append_builds_from_nothing(engine, source, target):
    """A standby never holds content the partition lost: an overwrite's retirement removes it."""
    seed(source)
    bootstrap(engine)
    append_two(source)
    incremental(engine)
    assert standbys(target)
    part = source.catalog.get_partition("sales", "orders", ["d1"])
    fresh = write_file(part.sd.location, "part-fresh.parquet", b"fresh")
    source.catalog.insert("sales", "orders", ["d1"], new_files=[fresh], replace=True)
    incremental(engine)
    assert standbys(target) == []
    append_several(source, "y")
    incremental(engine)
    assert verify(source, "sales", target, "sales_dr") == []


@pytest.mark.parametrize("backend", ["sqlite"])  # file-level behaviour: the backends are tested above
@pytest.mark.parametrize("drop", ["partition", "table"])
def test_a_dropped_objects_standby_goes_with_it(engine, source, target, drop):
    seed(source)
    bootstrap(engine)
    append_two(source)
    incremental(engine)
    assert standbys(target)
    if drop == "partition":
        source.catalog.drop_partitions("sales", "orders", [["d1"]])
    else:
        source.catalog.drop_table("sales", "orders")
    incremental(engine)
    assert standbys(target) == []
    assert verify(source, "sales", target, "sales_dr") == []
    assert replica_leftovers(target, "sales_dr") == []


@pytest.mark.parametrize("backend", ["sqlite"])  # file-level behaviour: the backends are tested above
def test_a_replaced_version_is_parked_only_once_its_readers_grace_period_passed(
    engine, source, target, monkeypatch
):
    """With a grace period, the replaced version waits in a retirement ticket, untouched for the readers
    that took its metadata; the next retirement pass after the grace parks it, and the next append of several
    files builds from it."""
    monkeypatch.setenv(leftovers.RETIRE_GRACE_ENV, "0.5")
    seed(source)
    bootstrap(engine)
    old = location(target)
    held = listing(old)
    append_two(source)
    incremental(engine)
    assert standbys(target) == [] and listing(old) == held, "changed within its readers' grace period"
    time.sleep(0.6)
    assert leftovers.retire_due(target, "sales_dr").directories == 1
    assert standbys(target) == [f"day=d1{STANDBY_MARK}"] and not old.exists()
    linked = count_links(monkeypatch)
    append_several(source, "z")
    incremental(engine)
    assert len(linked) <= 2, linked  # the two files added since the standby was current
    assert verify(source, "sales", target, "sales_dr") == []


def _load(command: str, target_args: list[str], kill_at: int | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": python_forks.PYTHONPATH, "HMSREPL_REPL_RETIRE_GRACE_SECONDS": "0"}
    env.pop(KILL_AT_ENV, None)
    if kill_at is not None:
        env[KILL_AT_ENV] = str(kill_at)
    return python_forks.run_cli(["repl", "run", command, *target_args, "--no-progress"], env, timeout=300)


def test_loads_killed_while_building_from_the_standby_converge(tmp_path: Path) -> None:
    """Appends of several files, each load killed at a different step (claiming the standby, linking,
    copying, publishing, committing, parking the replaced version): after each kill the replica's partition
    holds the source's listing before or after the append, and the rerun converges to the source."""
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    target_args = [
        *side_args("target", target),
        *["--source-warehouse", str(source.config.warehouse), "--source-cmroot", str(source.config.cmroot)],
    ]
    source.catalog.create_database(Database(name="s"))
    table = source.catalog.create_table(make_table("s", "t", partition_keys=("p",)))
    [part] = source.catalog.add_partitions("s", "t", [make_partition(table, "a")])
    for i in range(40):
        write_file(part.sd.location, f"part-{i:05d}", f"rows {i}".encode())
    source.catalog.insert("s", "t", ["a"])
    engine = ReplicationEngine(str(tmp_path / "dumps"), source)

    def replica_listing() -> set[str]:
        where = target.catalog.get_partition("s_dr", "t", ["a"]).sd.location or ""
        return {p.name for p in Path(local_path(where)).iterdir() if not p.name.startswith((".", "_"))}

    def load_window(kill_at: int | None) -> None:
        before = {p.name for p in Path(local_path(part.sd.location or "")).iterdir()}
        step = len(before)
        files = [write_file(part.sd.location, f"new-{step}-{k}", os.urandom(512)) for k in range(4)]
        source.catalog.insert("s", "t", ["a"], new_files=files)
        after = before | {f.rsplit("/", 1)[1] for f in files}
        dump = engine.execute(f"REPL DUMP s FROM {repl_status(target, 's_dr')}")
        command = f"REPL LOAD s_dr FROM '{dump.dump_dir}'"
        if kill_at is not None:
            assert _load(command, target_args, kill_at).returncode == -9, "the load finished before its kill"
            assert replica_listing() in (before, after)
        done = _load(command, target_args, None)
        assert done.returncode == 0, done.stderr
        assert replica_listing() == after
        assert verify(source, "s", target, "s_dr") == []

    dump = engine.execute("REPL DUMP s")
    assert _load(f"REPL LOAD s_dr FROM '{dump.dump_dir}'", target_args, None).returncode == 0
    load_window(None)  # the first multi-file version is built from nothing; the old one becomes the standby
    for kill_at in (3, 7, 11, 14):
        load_window(kill_at)
    assert [str(p) for p in (tmp_path / "target_wh").rglob("*") if is_staging_name(p.name)] == []
    source.close()
    target.close()
