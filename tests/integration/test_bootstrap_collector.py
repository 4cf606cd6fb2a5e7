"""A bootstrap walks a big table's partitions with the cyclic collector paused, a page at a time: its full
passes over everything the load keeps until its batch commits were a quarter of the load's CPU. What a user
relies on: the pages are dumped and loaded paused, every partition arrives, and the collector is on again after.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore.model import Database
from hmsrepl.replication.dump import DumpEngine
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
    read_entry, put_partitions = DumpEngine._read_entry, TargetWriter.put_partitions

    def reading(self: DumpEngine, table: Any, with_data: bool, parts: Any = None) -> Any:
        if parts:
            dumped_with.append(gc.isenabled())
        return read_entry(self, table, with_data, parts)

    def putting(self: TargetWriter, table_name: str, parts: Any, *args: Any, **kwargs: Any) -> None:
        loaded_with.append((len(parts), gc.isenabled()))
        put_partitions(self, table_name, parts, *args, **kwargs)

    monkeypatch.setattr(DumpEngine, "_read_entry", reading)
    monkeypatch.setattr(TargetWriter, "put_partitions", putting)
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
