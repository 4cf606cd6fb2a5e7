"""A metadata replay's client work per event: the cyclic collector paused for bursts, each event parsed once.

Every full collection rescans every live object: the documents a load validated and keeps for its apply,
the events a dump parsed for its writing pass. A dump and a load each run paused, with young passes at the
ends of segments, chunks and batches, the collector is back on after a replay however it ends, and a dump with a LIMIT parses no event past it. A
dump's writing pass takes the events its planning pass parsed, each only for the row it was parsed from.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.event_specs import UnknownEventTypeError
from hmsrepl.metastore.model import Database
from hmsrepl.replication import dump as dump_module
from hmsrepl.replication.dump_checks import DumpValidationError
from hmsrepl.replication.dump_events import DumpEvent, ParsedEvents
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.layout import DumpDir
from hmsrepl.replication.load import repl_status
from tests.helpers import make_partition, make_table, open_replica

METADATA_ONLY = "WITH ('hive.repl.dump.metadata.only'='true', 'hmsrepl.repl.compact.events'='false')"


@pytest.fixture
def target(tmp_path: Path) -> Iterator[Metastore]:
    """A SQLite replica: what is measured is the client's collector, whatever the database."""
    store = open_replica(f"sqlite:///{tmp_path}/replica.db", tmp_path)
    yield store
    store.close()


@contextmanager
def low_thresholds() -> Iterator[list[int]]:
    """The collector tuned to run very often, and the generations of the collections that ran. A full pass
    first empties the generations' counts, so no pass owed to the work before (the source's 600 events) falls
    in what is measured."""
    thresholds = gc.get_threshold()
    collected: list[int] = []
    gc.collect()

    def record(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collected.append(info["generation"])

    gc.set_threshold(50, 2, 2)
    gc.callbacks.append(record)
    try:
        yield collected
    finally:
        gc.callbacks.remove(record)
        gc.set_threshold(*thresholds)


def _bootstrap_then_events(source: Metastore, engine: ReplicationEngine, events: int) -> int:
    source.catalog.create_database(Database(name="g"))
    table = source.catalog.create_table(make_table("g", "t", partition_keys=("p",)))
    dumped = engine.execute("REPL DUMP g WITH ('hive.repl.dump.metadata.only'='true')")
    engine.execute(f"REPL LOAD g FROM '{dumped.dump_dir}'")
    for i in range(events // 2):
        [part] = source.catalog.add_partitions("g", "t", [make_partition(table, f"v{i}")])
        source.catalog.alter_partitions("g", "t", [part.model_copy(update={"parameters": {"n": str(i)}})])
    return dumped.last_event_id


def test_replay_leaves_collections_to_chunk_and_batch_ends_and_the_collector_on(
    source: Metastore, target: Metastore, tmp_path: Path
) -> None:
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    start = _bootstrap_then_events(source, engine, 600)
    with low_thresholds() as dump_runs:
        dumped = engine.execute(f"REPL DUMP g FROM {start} {METADATA_ONLY}")
    with low_thresholds() as load_runs:
        loaded = engine.execute(f"REPL LOAD g FROM '{dumped.dump_dir}'")
    assert loaded.events_applied == 600
    assert repl_status(target, "g") == source.get_current_notification_event_id()
    # Unpaused, these thresholds run the collector every 50 objects: about 70 times in this dump and 1,100
    # in its load (measured). Paused for the whole dump and the whole load, young passes at the ends of
    # chunks, segments and batches, and only what runs outside them may see a middle pass: never a full one
    # over the kept documents (paused per chunk and batch, the same replay made 16 and 32 passes, full ones
    # among them).
    assert len(dump_runs) <= 12 and len(load_runs) <= 12, (dump_runs, load_runs)
    assert 2 not in dump_runs and 2 not in load_runs, (dump_runs, load_runs)
    assert gc.isenabled()


def test_a_refused_load_leaves_the_collector_on(source: Metastore, target: Metastore, tmp_path: Path) -> None:
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    start = _bootstrap_then_events(source, engine, 4)
    dumped = engine.execute(f"REPL DUMP g FROM {start} {METADATA_ONLY}")
    dump = DumpDir(dumped.dump_dir)
    [(_, segment)] = dump.event_segments(dump.require_complete().format)
    path = Path(dump.path(segment).removeprefix("file:"))
    path.write_bytes(path.read_bytes().replace(b'"event_type":"ALTER_PARTITION"', b'"event_type":"NO_SUCH"'))
    with pytest.raises(DumpValidationError, match="NO_SUCH"):
        engine.execute(f"REPL LOAD g FROM '{dumped.dump_dir}'")
    assert gc.isenabled()
    assert repl_status(target, "g") == start  # nothing applied


def test_a_dump_with_a_limit_parses_no_event_past_it(
    source: Metastore, target: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event this version cannot read stops a dump that reaches it, not one whose LIMIT ends before."""
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    start = _bootstrap_then_events(source, engine, 6)
    unreadable = start + 4
    parse = DumpEvent.of

    def of(row: Any) -> DumpEvent[Any]:
        if row.event_id == unreadable:
            raise UnknownEventTypeError(f"event {row.event_id}: unknown event type 'FROM_THE_FUTURE'")
        return parse(row)

    monkeypatch.setattr(dump_module.DumpEvent, "of", staticmethod(of))
    dumped = engine.execute(f"REPL DUMP g FROM {start} LIMIT 3 {METADATA_ONLY}")
    assert dumped.last_event_id == start + 3
    with pytest.raises(UnknownEventTypeError, match="FROM_THE_FUTURE"):
        engine.execute(f"REPL DUMP g FROM {start} {METADATA_ONLY}")
    assert gc.isenabled()


def test_a_dump_parses_each_event_once_for_both_of_its_passes(
    source: Metastore, target: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    start = _bootstrap_then_events(source, engine, 10)
    parse = DumpEvent.of
    parsed: list[int] = []

    def of(row: Any) -> DumpEvent[Any]:
        parsed.append(row.event_id)
        return parse(row)

    monkeypatch.setattr(dump_module.DumpEvent, "of", staticmethod(of))
    dumped = engine.execute(f"REPL DUMP g FROM {start} {METADATA_ONLY}")
    assert sorted(parsed) == list(range(start + 1, start + 11))  # planned and written from one parse
    monkeypatch.undo()
    loaded = engine.execute(f"REPL LOAD g FROM '{dumped.dump_dir}'")
    assert loaded.events_applied == 10


def test_a_kept_event_is_handed_over_only_for_the_row_it_was_parsed_from(source: Metastore) -> None:
    source.catalog.create_database(Database(name="k"))
    [row] = source.events.next_events(0, db_name="k")
    parsed = ParsedEvents(room=1)
    first = parsed.parse(row, keep=True)
    assert parsed.parse(row, keep=False) is first  # the same row: handed over, once
    assert parsed.parse(row, keep=False) is not first
    parsed.parse(row, keep=True)
    other = row._replace(db_name="planted")  # same id, another row
    assert parsed.parse(other, keep=False).event.db_name == "planted"  # parsed afresh
