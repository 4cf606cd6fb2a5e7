"""Major compaction of insert-only tables: initiator, worker, cleaner, and what readers see throughout.

Readers are checked by the rows they read (sorted lines), before, during (an older snapshot) and after a
compaction; the cleaner by what stays on disk and what cmroot holds. Files are plain text written by hand,
so the expected rows are known without the code under test; the Spark path has its own test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hmsrepl.acid import InsertOnlyReader, InsertOnlyWriter
from hmsrepl.acid.aborted import AbortedCleanReport, clean_aborted
from hmsrepl.acid.cleaner import Cleaner
from hmsrepl.acid.compaction_cycle import run_cycle
from hmsrepl.acid.compaction_queue import CompactionQueue
from hmsrepl.acid.initiator import Initiator
from hmsrepl.cli import main
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.integration.test_insert_only import create_table, put, rows_of, table_dir

ROOT = Path(__file__).resolve().parents[2]


def compaction_killed_at(store: Metastore, point: str) -> None:
    """One compaction pass over ``store`` in a process of its own (``tests.compaction_child``), SIGKILLed at
    the fault point ``point``; fails if it was not killed there."""
    config = {key: getattr(store.config, key) for key in ("db_url", "warehouse", "cmroot")}
    env = {
        **os.environ,
        "HMSREPL_FAULT_POINT": point,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "include"), str(ROOT)]),
    }
    child = subprocess.run(
        [sys.executable, "-m", "tests.compaction_child", json.dumps(config)],
        env=env,
        cwd=ROOT,
        capture_output=True,
    )
    assert child.returncode == -9, child.stderr.decode()[-2000:]


@pytest.fixture
def store(metastore: Metastore) -> Metastore:
    metastore.catalog.create_database(Database(name="sales"))
    create_table(metastore, "events")
    create_table(metastore, "daily", partition_keys=("ds",))
    return metastore


@pytest.fixture
def lite(sqlite_metastore: Metastore) -> Metastore:
    sqlite_metastore.catalog.create_database(Database(name="sales"))
    create_table(sqlite_metastore, "events")
    create_table(sqlite_metastore, "daily", partition_keys=("ds",))
    return sqlite_metastore


def append(store: Metastore, n: int, table: str = "events", partition: list[str] | None = None) -> None:
    with InsertOnlyWriter(store, "sales", table, partition, heartbeat=False) as writer:
        put(writer.target_uri, "part-00000", [f"row-{n}-a", f"row-{n}-b"])


def aborted_append(store: Metastore, n: int) -> None:
    writer = InsertOnlyWriter(store, "sales", "events", heartbeat=False).begin()
    put(writer.target_uri, "part-00000", [f"aborted-{n}"])
    writer.abort()


def rows(store: Metastore, reader: InsertOnlyReader | None = None) -> list[str]:
    return rows_of((reader or InsertOnlyReader(store, "sales", "events")).files())


def expected(ids: range | list[int]) -> list[str]:
    return sorted(f"row-{n}-{s}" for n in ids for s in "ab")


def entries(store: Metastore, table: str = "events") -> list[str]:
    return sorted(os.listdir(table_dir(store, table)))


def test_compaction_keeps_every_snapshot_and_cleans_only_when_no_reader_needs_the_deltas(
    store: Metastore,
) -> None:
    for n in range(1, 41):
        append(store, n)
        if n % 15 == 0:
            aborted_append(store, n)
    location = table_dir(store, "events")
    delta_bytes = {
        name: Path(location, name, "part-00000").read_bytes()
        for name in entries(store)
        if name.startswith("delta_")
    }
    before = rows(store)
    assert before == expected(range(1, 41))
    old_snapshot = InsertOnlyReader(store, "sales", "events")  # a reader listing without a txn
    [query_txn] = store.txns.open_txns(1)  # a reader holding a txn (a Hive query) across the compaction

    report = run_cycle(store, delta_threshold=10, cleaner_delay_seconds=0)

    [outcome] = report.compacted
    assert outcome.state == "ready for cleaning" and outcome.input_dirs == 40
    [cleaning] = report.cleaned
    assert not cleaning.cleaned and f"txn {query_txn}" in cleaning.message
    bases = [name for name in entries(store) if name.startswith("base_")]
    assert bases == [outcome.base_dir] and outcome.base_dir.startswith("base_0000042_v")  # 42: last write id
    new_reader = InsertOnlyReader(store, "sales", "events")
    assert {Path(f).parent.name for f in new_reader.files()} == {outcome.base_dir}
    assert rows(store, new_reader) == before
    assert rows(store, old_snapshot) == before  # still reads its deltas, which are all still there
    assert all(Path(f).parent.name.startswith("delta_") for f in old_snapshot.files())

    store.txns.commit_txn(query_txn)
    [cleaned] = Cleaner(store, delay_seconds=0).run_all()
    assert cleaned.cleaned and cleaned.dirs_removed == 42  # 40 committed and 2 aborted deltas
    assert entries(store) == [outcome.base_dir]
    assert rows(store) == before
    cm_content = {p.read_bytes() for p in Path(store.config.cmroot).iterdir() if p.is_file()}
    assert set(delta_bytes.values()) <= cm_content  # every removed file can still be served from cmroot
    states = [row.state for row in CompactionQueue(store.events).records()]
    assert states == ["succeeded"]


def test_an_open_writer_caps_the_horizon_and_a_later_compaction_takes_the_rest(lite: Metastore) -> None:
    for n in range(1, 13):
        append(lite, n)
    slow = InsertOnlyWriter(lite, "sales", "events", heartbeat=False).begin()  # write id 13, still open
    put(slow.target_uri, "part-00000", ["row-13-a", "row-13-b"])
    for n in range(14, 19):
        append(lite, n)

    [first] = run_cycle(lite, force=True, cleaner_delay_seconds=0).compacted
    assert first.base_dir.startswith("base_0000012_v")
    assert rows(lite) == expected([*range(1, 13), *range(14, 19)])
    slow.commit()
    assert rows(lite) == expected(range(1, 19))
    report = run_cycle(lite, force=True, cleaner_delay_seconds=0)
    [second] = report.compacted
    assert second.base_dir.startswith("base_0000018_v")
    assert entries(lite) == [second.base_dir]  # the first base and every delta are obsolete now
    assert rows(lite) == expected(range(1, 19))


def test_a_snapshot_that_took_a_compacted_write_id_for_open_never_reads_the_base(lite: Metastore) -> None:
    slow = InsertOnlyWriter(lite, "sales", "events", heartbeat=False).begin()  # write id 1
    put(slow.target_uri, "part-00000", ["row-1-a", "row-1-b"])
    for n in range(2, 6):
        append(lite, n)
    snapshot = InsertOnlyReader(lite, "sales", "events")  # write id 1 open in it
    slow.commit()
    [outcome] = run_cycle(lite, force=True, cleaner_delay_seconds=3600).compacted
    assert outcome.base_dir.startswith("base_0000005_v")
    assert rows(lite, snapshot) == expected(range(2, 6))  # not write id 1's rows, which the base holds
    assert rows(lite) == expected(range(1, 6))


def test_initiator_queues_partitions_past_the_threshold_once(store: Metastore) -> None:
    for n in range(4):
        append(store, n, "daily", ["2024-01-01"])
    for n in range(4, 10):
        append(store, n, "daily", ["2024-01-02"])
    initiator = Initiator(store, delta_threshold=5)
    [queued] = initiator.run()
    assert (queued.table_name, queued.part_name, queued.deltas) == ("daily", "ds=2024-01-02", 6)
    assert queued.compaction_id is not None
    [again] = initiator.run()
    assert again.compaction_id is None  # already queued: not twice


def test_cleaner_waits_for_its_delay(lite: Metastore) -> None:
    for n in range(1, 4):
        append(lite, n)
    report = run_cycle(lite, force=True, cleaner_delay_seconds=60)
    [kept] = report.cleaned
    assert not kept.cleaned and "delay" in kept.message
    assert len(entries(lite)) == 4
    [cleaned] = Cleaner(lite, delay_seconds=60).run_all(now=time.time() + 61)
    assert cleaned.cleaned and len(entries(lite)) == 1


@pytest.mark.parametrize(
    "point",
    [
        "compaction_before_rewrite",
        "compaction_before_commit",
        "compaction_cleaner_before_commit",
        "after_commit_before_intent",
        "recycle_after_file@3",
        "intent_before_delete_row",
    ],
)
def test_a_kill_during_compaction_or_cleaning_loses_nothing(lite: Metastore, point: str) -> None:
    for n in range(1, 9):
        append(lite, n)
    aborted_append(lite, 9)
    before = rows(lite)
    compaction_killed_at(lite, point)
    assert rows(lite) == before  # right after the kill

    lite.txns.abort_timed_out(now=time.time() + 10 * lite.txns.timeout_seconds)  # the dead worker's txn
    report = run_cycle(lite, force=True, cleaner_delay_seconds=0)
    assert rows(lite) == before
    [base] = [name for name in entries(lite) if name.startswith("base_")]
    assert entries(lite) == [base]  # deltas, the aborted write and a killed worker's output are all gone
    assert not report.failed
    assert {row.state for row in CompactionQueue(lite.events).records()} <= {"succeeded", "refused"}


def test_cli_compacts_one_table_and_shows_the_queue(lite: Metastore) -> None:
    for n in range(1, 4):
        append(lite, n)
    base = [
        "--db-url",
        lite.config.db_url,
        "--warehouse",
        lite.config.warehouse,
        "--cmroot",
        lite.config.cmroot,
    ]
    result = CliRunner().invoke(
        main,
        [
            *base,
            "compact",
            "--table",
            "sales.events",
            "--engine",
            "copy",
            "--force",
            "--cleaner-delay-seconds",
            "0",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "queued 1, compacted 1, cleaned 1" in result.output
    shown = CliRunner().invoke(main, [*base, "compact", "--show"])
    assert "sales.events\tmajor\tsucceeded\tbase_0000003_v" in shown.output
    assert rows(lite) == expected(range(1, 4))


def test_aborted_writes_are_recycled_after_the_timeout_then_purged(store: Metastore) -> None:
    for n in (1, 2, 3):
        append(store, n)
    aborted_append(store, 4)
    append(store, 5)
    aborted_append(store, 6)
    append(store, 7)
    before = rows(store)
    assert clean_aborted(store, now=time.time()) == AbortedCleanReport(0, 0, 0)  # not silent long enough
    assert "delta_0000004_0000004_0000" in entries(store)

    report = clean_aborted(store, now=time.time() + 2 * store.txns.timeout_seconds)

    assert report == AbortedCleanReport(dirs_recycled=2, write_ids_purged=2, txns_purged=2)
    assert [name for name in entries(store) if name.endswith(("0004_0000", "0006_0000"))] == []
    assert rows(store) == before
    cm_content = {p.read_bytes() for p in Path(store.config.cmroot).iterdir() if p.is_file()}
    assert {b"aborted-4\n", b"aborted-6\n"} <= cm_content
    [entry] = store.txns.get_valid_write_ids(["sales.events"])
    assert (entry.write_ids.high_watermark, entry.write_ids.aborted_write_ids) == (7, frozenset())
    assert store.txns.get_valid_txns().aborted_txns == frozenset()
    append(store, 8)
    assert rows(store) == expected([1, 2, 3, 5, 7, 8])
    assert "delta_0000008_0000008_0000" in entries(store)  # write ids go on from the same watermark
