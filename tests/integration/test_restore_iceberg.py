"""Reverting an Iceberg table (written by pyiceberg over Thrift) to an event: its metadata_location goes back
to the file it named then, readers read exactly the rows they read then, files the old snapshot needs that
were deleted come back from cmroot, and a replica follows the revert."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hmsrepl.replication.verify import verify
from hmsrepl.restore.errors import RestoreError
from hmsrepl.restore.executor import RestoreExecutor
from hmsrepl.restore.planner import RestorePlanner
from hmsrepl.storage.local import local_path
from tests.integration.test_iceberg_replication import SCHEMA, _store, catalog, read, replicate, rows, sides

__all__ = ["sides"]  # the fixture, used by name


def test_revert_an_iceberg_overwrite_and_a_replica_follows(sides, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source, target = sides
    cat = catalog(source)
    cat.create_namespace("ice")
    table = cat.create_table("ice.events", SCHEMA)
    table.append(rows([1, 2]))
    table.append(rows([3]))
    before = read(source, "ice.events")[0]
    replicate(source, target, tmp_path / "dumps")
    with _store(source) as store:
        good = store.events.current_event_id()
    with _store(source) as store:
        data_dir = Path(local_path(store.catalog.get_table("ice", "events").sd.location), "data")
    kept_by_the_good_snapshot = sorted(data_dir.rglob("*.parquet"))
    table.overwrite(rows([99], ["bad"]))  # the accident
    assert read(source, "ice.events")[0] == [(99, "bad")]
    with _store(source) as store:  # a data file the old snapshot needs is deleted behind the catalog's back
        victim = kept_by_the_good_snapshot[0]  # not the overwrite's own file (its name is random too)
        os.unlink(victim)
        with pytest.raises(RestoreError, match="only reverted in place"):
            RestorePlanner(store).revert_table("ice", "events", good, into="events_copy")
        plan = RestorePlanner(store).revert_table("ice", "events", good)
        assert [(p.rel, p.from_cmroot) for p in plan.placements] == [(f"data/{victim.name}", True)]
        RestoreExecutor(store).run(plan)
    assert read(source, "ice.events")[0] == before
    replicate(source, target, tmp_path / "dumps")
    assert read(target, "ice_dr.events")[0] == before
    with _store(source) as src, _store(target) as dst:
        assert verify(src, "ice", dst, "ice_dr") == []
