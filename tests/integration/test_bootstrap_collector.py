"""A bootstrap walks a big table's partitions with the cyclic collector paused, a page at a time: its full
passes over everything the load keeps until its batch commits were a quarter of the load's CPU. A load runs
paused from its validation to its last table, a young pass after each page. What a user relies on: the pages
are dumped and loaded paused, every partition arrives, and the collector is on again after.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore.model import Database
from hmsrepl.replication.dump import DumpEngine
from hmsrepl.replication.dump_snapshot_checks import SnapshotChecks
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.target import TargetWriter
from tests.helpers import make_partition, make_table, open_store

PARTS = 12


def test_the_pages_of_a_table_are_dumped_and_loaded_with_the_collector_paused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hmsrepl.replication.load.PARTITION_PAGE", 5)
    source, target = open_store(tmp_path, "src"), open_store(tmp_path, "dst")
    source.catalog.create_database(Database(name="big"))
    table = source.catalog.create_table(make_table("big", "t", partition_keys=("p",)))
    source.catalog.add_partitions("big", "t", [make_partition(table, f"{i:02d}") for i in range(PARTS)])
    dumped_with: list[bool] = []
    loaded_with: list[tuple[int, bool]] = []
    read_entry, prepare_partitions = DumpEngine._read_entry, TargetWriter.prepare_partitions

    def reading(self: DumpEngine, table: Any, with_data: bool, parts: Any = None) -> Any:
        if parts:
            dumped_with.append(gc.isenabled())
        return read_entry(self, table, with_data, parts)

    def putting(self: TargetWriter, table_name: str, parts: Any, *args: Any, **kwargs: Any) -> Any:
        loaded_with.append((len(parts), gc.isenabled()))
        return prepare_partitions(self, table_name, parts, *args, **kwargs)

    monkeypatch.setattr(DumpEngine, "_read_entry", reading)
    monkeypatch.setattr(TargetWriter, "prepare_partitions", putting)
    gc.enable()
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    dump = engine.execute("REPL DUMP big")
    engine.execute(f"REPL LOAD big FROM '{dump.dump_dir}'")

    assert dumped_with and not any(dumped_with)
    assert loaded_with == [(5, False), (5, False), (2, False)]
    assert gc.isenabled()
    assert len(target.catalog.get_partitions("big", "t")) == PARTS
    source.close()
    target.close()


def test_a_bootstrap_load_of_many_tables_runs_paused_from_validation_to_the_last_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between tables and between validated pages, the collector's middle and full passes rescanned what the
    load keeps; the whole load runs paused now, a young pass after each page, and the collector is on after."""
    source, target = open_store(tmp_path, "src"), open_store(tmp_path, "dst")
    source.catalog.create_database(Database(name="many"))
    for t in range(40):
        table = source.catalog.create_table(make_table("many", f"t{t:02d}", partition_keys=("p",)))
        source.catalog.add_partitions(
            "many", table.table_name, [make_partition(table, str(i)) for i in range(3)]
        )
    engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
    dump = engine.execute("REPL DUMP many")
    collector_on: list[bool] = []
    check_table, create_tables = SnapshotChecks.check_table, TargetWriter.create_tables

    def checking(self: SnapshotChecks, *args: Any, **kwargs: Any) -> Any:
        collector_on.append(gc.isenabled())
        return check_table(self, *args, **kwargs)

    def creating(self: TargetWriter, *args: Any, **kwargs: Any) -> Any:
        collector_on.append(gc.isenabled())
        return create_tables(self, *args, **kwargs)

    monkeypatch.setattr(SnapshotChecks, "check_table", checking)
    monkeypatch.setattr(TargetWriter, "create_tables", creating)
    gc.enable()
    engine.execute(f"REPL LOAD many FROM '{dump.dump_dir}'")

    assert len(collector_on) > 40 and not any(collector_on)  # each table checked, each batch created: paused
    assert gc.isenabled()
    assert len(target.catalog.get_tables("many")) == 40
    source.close()
    target.close()
