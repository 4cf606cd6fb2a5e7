"""Event-window compaction on real metastores: a compacted dump loads to exactly the target a full one does.

The property test runs random sequences of table and partition changes (tests/compaction_workload.py) on a
SQLite source, bootstraps two replicas, then replicates the window twice, with and without compaction
(in LIMIT-sized batches when drawn), and compares the replicas with each other and with the source
(metadata and file checksums, verify.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.commands import parse_policy
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.layout import DumpDir
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import capture_state, diff_states
from tests.compaction_workload import apply_ops, ops_strategy, policy_text
from tests.helpers import make_partition, make_table, open_store, write_file

NO_COMPACTION = "WITH ('hmsrepl.repl.compact.events'='false')"


@pytest.fixture(scope="module")
def stores(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Metastore, Metastore, Metastore, Path]]:
    """Source, replica loaded from full dumps, replica loaded from compacted dumps (one database per example)."""
    root = tmp_path_factory.mktemp("compaction")
    opened = [open_store(root, name) for name in ("source", "full", "compacted")]
    yield opened[0], opened[1], opened[2], root / "dumps"
    for store in opened:
        store.close()


def replicate(
    engine: ReplicationEngine,
    policy: str,
    target_db: str,
    limit: int | None,
    extra: str = "",
    replaced: str | None = None,
) -> int:
    """Incremental dump+load cycles until the replica is at the source's current event; returns events skipped.

    With ``replaced``, the first dump switches from that policy to ``policy`` (REPLACE).
    """
    skipped = 0
    for _ in range(200):
        last = repl_status(engine.target, target_db)
        if last >= engine.source.get_current_notification_event_id():
            return skipped
        bound = f" LIMIT {limit}" if limit else ""
        switch = f" REPLACE {replaced}" if replaced else ""
        dumped = engine.execute(f"REPL DUMP {policy}{switch} FROM {last}{bound} {extra}")
        replaced = None
        skipped += DumpDir(dumped.dump_dir).read_metadata().skipped_events
        engine.execute(f"REPL LOAD {target_db} FROM '{dumped.dump_dir}'")
    raise AssertionError("replication did not catch up")


_examples = itertools.count()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=ops_strategy(10),
    window=ops_strategy(30),
    limit=st.none() | st.integers(1, 15),
    switch=st.booleans(),
)
# Overwrite, rename, overwrite: the rename checks the listing the first overwrite left.
@example(
    before=[(0, 0, 3, 0), (7, 0, 0, 0)],
    window=[(7, 0, 0, 0), (2, 0, 0, 0), (7, 0, 0, 0)],
    limit=None,
    switch=False,
)
# An older table written, renamed and dropped: its rename is written without the skipped write's data.
@example(before=[(0, 0, 1, 0)], window=[(6, 0, 0, 0), (2, 0, 0, 0), (1, 0, 0, 0)], limit=None, switch=False)
# REPLACE ... LIMIT 1 whose newly included table is renamed after the cut.
@example(
    before=[(4, 0, 0, 0), (2, 0, 0, 0), (5, 0, 0, 0), (0, 0, 0, 0), (0, 0, 0, 0), (1, 0, 0, 0), (0, 2, 7, 5)],
    window=[(1, 0, 0, 0), (2, 5, 0, 0)],
    limit=1,
    switch=True,
)
def test_compacted_and_full_dumps_load_to_the_same_target(stores, before, window, limit, switch) -> None:
    """With ``switch`` the replicas start on a narrower policy and the window's first dump REPLACEs it."""
    source, full, compacted, dumps = stores
    db = f"s{next(_examples)}"
    policy = policy_text(db)
    old = f"{db}.['t[0-2]']" if switch else None
    source.catalog.create_database(Database(name=db))
    apply_ops(source, db, before, "b")
    engines = [ReplicationEngine(str(dumps), source, target) for target in (full, compacted)]
    for engine in engines:
        dumped = engine.execute(f"REPL DUMP {old or policy}")
        engine.execute(f"REPL LOAD {db} FROM '{dumped.dump_dir}'")
    apply_ops(source, db, window, "w")
    if switch and source.get_current_notification_event_id() == repl_status(full, db):
        source.catalog.alter_database(db, source.catalog.get_database(db))  # the REPLACE dump needs an event
    replicate(engines[0], policy, db, limit, NO_COMPACTION, old)
    replicate(engines[1], policy, db, limit, replaced=old)
    assert diff_states(capture_state(full, db), capture_state(compacted, db)) == []
    assert diff_states(capture_state(source, db, parse_policy(policy)), capture_state(compacted, db)) == []


# -- what compaction skips, on purpose-built windows ------------------------------------------------------------
@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Metastore, Metastore, ReplicationEngine]]:
    source, target = open_store(tmp_path, "source"), open_store(tmp_path, "target")
    source.catalog.create_database(Database(name="sales"))
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    dumped = engine.execute("REPL DUMP sales")
    engine.execute(f"REPL LOAD sales FROM '{dumped.dump_dir}'")
    yield source, target, engine
    source.close()
    target.close()


def _dump(engine: ReplicationEngine, target: Metastore, extra: str = "") -> tuple[object, DumpDir]:
    dumped = engine.execute(f"REPL DUMP sales FROM {repl_status(target, 'sales')} {extra}")
    return dumped, DumpDir(dumped.dump_dir)


def test_create_then_drop_and_overwritten_data_are_skipped(pair) -> None:
    source, target, engine = pair
    catalog = source.catalog
    # A table created, filled, renamed and dropped inside the window: none of its 4 events is needed.
    scratch = catalog.create_table(make_table("sales", "scratch"))
    write_file(scratch.sd.location, "f", b"scratch rows")
    catalog.insert("sales", "scratch")
    catalog.alter_table(
        "sales",
        "scratch",
        catalog.get_table("sales", "scratch").model_copy(update={"table_name": "scratch2"}),
    )
    catalog.drop_table("sales", "scratch2")
    # An insert then an overwrite of the same partition: the first listing is never needed.
    orders = catalog.create_table(make_table("sales", "orders", partition_keys=("day",)))
    [d1] = catalog.add_partitions("sales", "orders", [make_partition(orders, "d1")])
    write_file(d1.sd.location, "v1", b"version 1")
    catalog.insert("sales", "orders", ["d1"])
    v2 = write_file(d1.sd.location, "v2", b"version 2")
    catalog.insert("sales", "orders", ["d1"], new_files=[v2], replace=True)
    # A partition added and dropped in the window.
    [d2] = catalog.add_partitions("sales", "orders", [make_partition(orders, "d2")])
    write_file(d2.sd.location, "x", b"short-lived")
    catalog.insert("sales", "orders", ["d2"])
    catalog.drop_partitions("sales", "orders", [["d2"]])
    window = source.get_current_notification_event_id() - repl_status(target, "sales")

    full, full_dir = _dump(engine, target, NO_COMPACTION)
    assert full.events == window and full_dir.read_metadata().skipped_events == 0
    dumped, dump_dir = _dump(engine, target)
    meta = dump_dir.read_metadata()
    # skipped: 4 of scratch, the first insert into d1, add+insert+drop of d2; kept: create, add d1, overwrite
    assert meta.skipped_events == 8 and dumped.events == window - 8 == meta.event_count == 3
    assert dumped.last_event_id == meta.last_event_id == source.get_current_notification_event_id()
    assert dumped.files == 1 and full.files > dumped.files  # only 'v2' is referenced
    loaded = engine.execute(f"REPL LOAD sales FROM '{dumped.dump_dir}'")
    assert loaded.stats.files_copied == 1
    assert repl_status(target, "sales") == dumped.last_event_id
    assert diff_states(capture_state(source, "sales"), capture_state(target, "sales")) == []


def test_limit_bounds_compaction_to_the_window(pair) -> None:
    source, target, engine = pair
    catalog = source.catalog
    catalog.create_table(make_table("sales", "tmp"))  # event 1 of the window
    catalog.create_table(make_table("sales", "keep"))  # event 2
    catalog.drop_table("sales", "tmp")  # event 3: outside a LIMIT 2 window
    dumped, dump_dir = _dump(engine, target, "LIMIT 2")
    assert dump_dir.read_metadata().skipped_events == 0 and dumped.events == 2
    engine.execute(f"REPL LOAD sales FROM '{dumped.dump_dir}'")
    assert repl_status(target, "sales") == dumped.last_event_id
    assert sorted(target.catalog.get_tables("sales")) == ["keep", "tmp"]
    dumped, _ = _dump(engine, target)
    engine.execute(f"REPL LOAD sales FROM '{dumped.dump_dir}'")
    assert diff_states(capture_state(source, "sales"), capture_state(target, "sales")) == []
