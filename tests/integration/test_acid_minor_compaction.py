"""Minor compaction of insert-only tables: deltas above a base merged into ``delta_<min>_<max>_v<txn>``.

The initiator chooses it past the delta count when the deltas weigh little next to the base (Hive's rule);
readers see the same rows before, during (an older snapshot) and after, also with an aborted write inside the
merged range; the cleaner removes the merged deltas only; a later major compaction still takes everything,
and a bootstrap after a minor compaction gives the replica the same rows.
"""

from __future__ import annotations

import os
import time

import pytest

from hmsrepl.acid import InsertOnlyReader, InsertOnlyWriter
from hmsrepl.acid.aborted import clean_aborted
from hmsrepl.acid.cleaner import Cleaner
from hmsrepl.acid.compaction_cycle import run_cycle
from hmsrepl.acid.compaction_queue import MINOR, CompactionQueue
from hmsrepl.acid.initiator import Initiator
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.integration.test_acid_compaction import aborted_append, append, compaction_killed_at, entries, rows
from tests.integration.test_acid_compaction_replication import lines
from tests.integration.test_acid_replication import (  # noqa: F401 - fixtures
    bootstrap,
    engine,
    source,
    step,
    target,
    write,
)
from tests.integration.test_insert_only import create_table, put


def big_base(store: Metastore) -> str:
    """A base holding many rows (a major compaction of one large append), so small deltas weigh little."""
    with InsertOnlyWriter(store, "sales", "events", heartbeat=False) as writer:
        put(writer.target_uri, "part-00000", [f"bulk-{i:05d}" for i in range(2000)])
    [outcome] = run_cycle(store, table="sales.events", force=True, cleaner_delay_seconds=0).compacted
    assert outcome.base_dir.startswith("base_0000001_v")
    return outcome.base_dir


def test_the_initiator_picks_minor_when_deltas_weigh_little_and_major_without_a_base(
    metastore: Metastore,
) -> None:
    metastore.catalog.create_database(Database(name="sales"))
    create_table(metastore, "events")
    create_table(metastore, "daily", partition_keys=("ds",))
    for n in range(4):
        append(metastore, n, "daily", ["2024-01-01"])  # no base: major
    big_base(metastore)
    for n in range(2, 6):
        append(metastore, n)  # 4 small deltas over a 2,000-row base: minor
    queued = Initiator(metastore, delta_threshold=3).run()
    assert sorted((c.table_name, c.type) for c in queued) == [("daily", "major"), ("events", "minor")]
    # Past the size ratio, the same location gets a major compaction instead.
    [row] = CompactionQueue(metastore.events).records(table_name="events", states=["initiated"])
    CompactionQueue(metastore.events).finish(row.id, "failed", "test: discarded")
    heavy = Initiator(metastore, delta_threshold=3, delta_pct_threshold=0.001).run()
    assert [(c.table_name, c.type) for c in heavy if c.compaction_id] == [("events", "major")]


def test_minor_compaction_merges_deltas_keeps_the_base_and_every_snapshot(
    sqlite_metastore: Metastore,
) -> None:
    store = sqlite_metastore
    store.catalog.create_database(Database(name="sales"))
    create_table(store, "events")
    base = big_base(store)
    for n in range(2, 8):
        append(store, n)
        if n == 4:
            aborted_append(store, n)  # write id 5, inside the merged range
    before = rows(store)
    old_snapshot = InsertOnlyReader(store, "sales", "events")
    [query_txn] = store.txns.open_txns(1)

    report = run_cycle(store, delta_threshold=3, cleaner_delay_seconds=0)

    [outcome] = report.compacted
    assert outcome.record.type == MINOR and outcome.input_dirs == 6
    merged = outcome.base_dir
    assert merged.startswith("delta_0000002_0000008_v")  # write ids 2..8, the aborted 5 among them
    assert not report.cleaned or not report.cleaned[0].cleaned  # the query's txn holds the inputs
    new_reader = InsertOnlyReader(store, "sales", "events")
    assert sorted({os.path.basename(os.path.dirname(f)) for f in new_reader.files()}) == [base, merged]
    assert rows(store, new_reader) == before
    assert rows(store, old_snapshot) == before
    assert merged not in {os.path.basename(os.path.dirname(f)) for f in old_snapshot.files()}

    store.txns.commit_txn(query_txn)
    [cleaned] = Cleaner(store, delay_seconds=0).run_all()
    assert cleaned.cleaned
    # The six merged deltas and the aborted one inside the range are gone; the base stays.
    assert entries(store) == [base, merged]
    assert rows(store) == before
    assert clean_aborted(store).dirs_recycled == 0  # nothing left of the aborted write

    # A second minor compaction takes the first one's delta; a major one then takes everything.
    for n in range(8, 12):
        append(store, n)
    [second] = run_cycle(store, delta_threshold=3, cleaner_delay_seconds=0).compacted
    assert second.record.type == MINOR and second.base_dir.startswith("delta_0000002_0000012_v")
    assert entries(store) == [base, second.base_dir]
    assert rows(store) == sorted([*before, *(f"row-{n}-{s}" for n in range(8, 12) for s in "ab")])
    after_minor = rows(store)
    [major] = run_cycle(store, force=True, cleaner_delay_seconds=0).compacted
    assert entries(store) == [major.base_dir] and major.base_dir.startswith("base_0000012_v")
    assert rows(store) == after_minor


def test_a_minor_compaction_of_one_write_id_is_refused(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    store.catalog.create_database(Database(name="sales"))
    create_table(store, "events")
    big_base(store)
    append(store, 2)
    CompactionQueue(store.events).enqueue("sales", "events", None, MINOR)
    [outcome] = run_cycle(store, delta_threshold=100, cleaner_delay_seconds=0).compacted
    assert outcome.state == "refused" and "one write id" in outcome.message


@pytest.mark.parametrize("backend", ["sqlite"])  # what the backend does here is tested elsewhere
def test_bootstrap_after_a_minor_compaction_gives_the_replica_the_same_rows(engine, source, target) -> None:  # noqa: F811
    location = source.catalog.get_table("sales", "orders").sd.location
    write(source, "orders", b"\n".join(b"bulk %d" % i for i in range(500)))
    run_cycle(source, force=True, cleaner_delay_seconds=0)
    for n in range(4):
        write(source, "orders", f"small {n}".encode())
    [minor] = run_cycle(source, delta_threshold=2, cleaner_delay_seconds=0).compacted
    assert minor.record.type == MINOR and minor.base_dir in os.listdir(location)

    bootstrap(engine)

    assert lines(target, "sales_dr") == lines(source, "sales")
    replica_dirs = os.listdir(target.catalog.get_table("sales_dr", "orders").sd.location)
    assert "delta_0000002_0000005" in replica_dirs  # the source txn's suffix is dropped
    write(source, "orders", b"after")
    step(engine, None)
    assert lines(target, "sales_dr") == lines(source, "sales")


@pytest.mark.parametrize(
    "point", ["compaction_before_commit", "compaction_cleaner_before_commit", "recycle_after_file@3"]
)
def test_a_kill_during_a_minor_compaction_or_its_cleaning_loses_nothing(
    sqlite_metastore: Metastore, point: str
) -> None:
    store = sqlite_metastore
    store.catalog.create_database(Database(name="sales"))
    create_table(store, "events")
    base = big_base(store)
    for n in range(2, 8):
        append(store, n)
    aborted_append(store, 8)
    before = rows(store)
    CompactionQueue(store.events).enqueue("sales", "events", None, MINOR)  # the child's worker takes it
    compaction_killed_at(store, point)
    assert rows(store) == before  # right after the kill

    store.txns.abort_timed_out(now=time.time() + 10 * store.txns.timeout_seconds)  # the dead worker's txn
    report = run_cycle(store, delta_threshold=100, cleaner_delay_seconds=0)
    assert not report.failed and rows(store) == before
    aborted = "delta_0000008_0000008_0000"  # above the merged range: the aborted-write cleanup's, later
    [merged] = [name for name in entries(store) if name.startswith("delta_") and name != aborted]
    assert entries(store) == [base, merged, aborted] and merged.startswith("delta_0000002_0000007_v")
    assert {row.state for row in CompactionQueue(store.events).records()} == {"succeeded"}
