"""Iceberg tables replicate: a pyiceberg reader on the replica sees the source's snapshot as of each load.

pyiceberg's HiveCatalog (from PyPI) writes through a real ``hmsrepl metastore serve`` process on the source;
REPL DUMP/LOAD runs in-process; a second server on the replica's database serves another pyiceberg reader.
The source's warehouse is moved away before every read on the replica, so a replica that still named
source files (in its ``metadata_location`` or in the metadata, manifest list and manifest files) fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from hmsrepl.storage.local import local_path
from tests.backends import temporary_database
from tests.servers import RunningMetastore, metastore_server

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)


def rows(ids: list[int], names: list[str] | None = None) -> pa.Table:
    names = names if names is not None else [f"n{i}" for i in ids]
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array(names, pa.string())})


def catalog(server: RunningMetastore) -> HiveCatalog:
    return HiveCatalog("hms", uri=server.uri, **{"lock-check-min-wait-time": "0.05"})


@contextmanager
def _store(server: RunningMetastore) -> Iterator[Metastore]:
    store = Metastore.open(server.config)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def sides(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[RunningMetastore, RunningMetastore]]:
    """A source server (SQLite) and a replica server on the parametrised backend."""
    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    with (
        temporary_database("sqlite", str(tmp_path / "src")) as src_url,
        metastore_server(tmp_path / "src", src_url) as source,
        temporary_database(request.param, str(tmp_path / "dst")) as dst_url,
        metastore_server(tmp_path / "dst", dst_url) as target,
    ):
        yield source, target


@contextmanager
def source_moved_away(source: RunningMetastore) -> Iterator[None]:
    """While reading the replica, the source's files are not where the source's metadata names them."""
    warehouse = local_path(source.warehouse)
    hidden = warehouse + ".away"
    os.rename(warehouse, hidden)
    try:
        yield
    finally:
        os.rename(hidden, warehouse)


def replicate(source: RunningMetastore, target: RunningMetastore, dumps: Path) -> int:
    """One REPL DUMP/LOAD cycle of database ``ice`` into ``ice_dr`` (bootstrap first); the last event id."""
    with _store(source) as src, _store(target) as dst:
        engine = ReplicationEngine(str(dumps), src, dst)
        last = repl_status(dst, "ice_dr")
        command = "REPL DUMP ice" if last is None else f"REPL DUMP ice FROM {last}"
        dumped = engine.execute(command)
        engine.execute(f"REPL LOAD ice_dr FROM '{dumped.dump_dir}'")
        assert repl_status(dst, "ice_dr") == dumped.last_event_id
        return dumped.last_event_id


def read(server: RunningMetastore, name: str) -> tuple[list[tuple[int, str]], int | None, list[str]]:
    """The table's rows (by id), current snapshot id and column names, as a pyiceberg reader sees them."""
    table = catalog(server).load_table(name)
    got = table.scan().to_arrow().sort_by("id")
    snapshot = table.current_snapshot()
    columns = [field.name for field in table.schema().fields]
    return (
        list(zip(got["id"].to_pylist(), got["name"].to_pylist(), strict=True)),
        snapshot.snapshot_id if snapshot else None,
        columns,
    )


def test_iceberg_table_reads_the_same_on_the_replica_after_every_load(sides, tmp_path: Path) -> None:
    source, target = sides
    cat = catalog(source)
    cat.create_namespace("ice")
    table = cat.create_table("ice.events", SCHEMA)
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="name")
    )
    parted = cat.create_table("ice.parted", SCHEMA, partition_spec=spec)
    table.append(rows([1, 2]))
    parted.append(rows([1, 2, 3], ["a", "b", "a"]))

    history = []
    steps = [
        lambda: None,  # bootstrap of what is there
        lambda: table.append(rows([3])),
        lambda: (table.append(rows([4, 5])), parted.append(rows([4], ["c"]))),
        lambda: table.update_schema().add_column("country", StringType()).commit(),  # metadata only
        lambda: table.overwrite(rows([10, 11]).append_column("country", pa.array(["NL", None]))),
    ]
    for step in steps:
        step()
        expected = {name: read(source, f"ice.{name}") for name in ("events", "parted")}
        event_id = replicate(source, target, tmp_path / "dumps")
        with source_moved_away(source):
            got = {name: read(target, f"ice_dr.{name}") for name in ("events", "parted")}
        history.append(event_id)
        assert got == expected, f"after event {event_id}"
        with _store(source) as src, _store(target) as dst:
            assert verify(src, "ice", dst, "ice_dr") == []
            for name in ("events", "parted"):
                replica = dst.catalog.get_table("ice_dr", name)
                assert replica.parameters["metadata_location"].startswith(
                    replica.sd.location.rstrip("/") + "/"
                ), replica.parameters
                assert local_path(replica.sd.location).startswith(local_path(target.warehouse))
    assert history == sorted(set(history))

    # The last load again: nothing is copied or rewritten, the replica names the same metadata.
    with _store(source) as src, _store(target) as dst:
        before = dst.catalog.get_table("ice_dr", "events").parameters["metadata_location"]
        engine = ReplicationEngine(str(tmp_path / "dumps"), src, dst)
        last_dump = max((tmp_path / "dumps").iterdir(), key=lambda p: p.stat().st_mtime)
        again = engine.execute(f"REPL LOAD ice_dr FROM '{last_dump}'")
        assert again.stats.files_copied == 0
        assert dst.catalog.get_table("ice_dr", "events").parameters["metadata_location"] == before


def test_a_snapshot_naming_files_outside_the_location_is_refused_and_the_replica_keeps_the_last(
    sides, tmp_path: Path
) -> None:
    """``add_files`` registers a Parquet file where it lies; outside the table it is never copied, so the
    load must fail with a clear error before the replica names a snapshot it does not hold."""
    import pyarrow.parquet as pq

    from hmsrepl.replication.iceberg import IcebergReplicationError

    source, target = sides
    cat = catalog(source)
    cat.create_namespace("ice")
    table = cat.create_table("ice.events", SCHEMA)
    table.append(rows([1]))
    replicate(source, target, tmp_path / "dumps")
    before = read(target, "ice_dr.events")

    outside = tmp_path / "elsewhere" / "extra.parquet"
    outside.parent.mkdir()
    pq.write_table(rows([2]), outside)
    table.add_files([str(outside)])
    with pytest.raises(IcebergReplicationError, match=r"'ice_dr\.events'.*outside its location"):
        replicate(source, target, tmp_path / "dumps")
    with source_moved_away(source):
        assert read(target, "ice_dr.events") == before


def test_a_replica_replicates_its_iceberg_tables_onwards(sides, tmp_path: Path) -> None:
    """source -> mid -> end: the mid's rewritten metadata is not data; the end rewrites the mid's copies."""
    source, mid = sides
    cat = catalog(source)
    cat.create_namespace("ice")
    table = cat.create_table("ice.events", SCHEMA)
    table.append(rows([1, 2]))
    replicate(source, mid, tmp_path / "dumps")
    (tmp_path / "end").mkdir()
    with (
        temporary_database("sqlite", str(tmp_path / "end")) as end_url,
        metastore_server(tmp_path / "end", end_url) as end,
    ):
        for step in (lambda: None, lambda: table.append(rows([3]))):
            step()
            replicate(source, mid, tmp_path / "dumps")
            with _store(mid) as src, _store(end) as dst:
                engine = ReplicationEngine(str(tmp_path / "dumps2"), src, dst)
                last = repl_status(dst, "ice_end")
                dumped = engine.execute("REPL DUMP ice_dr" + (f" FROM {last}" if last is not None else ""))
                engine.execute(f"REPL LOAD ice_end FROM '{dumped.dump_dir}'")
            expected = read(source, "ice.events")
            with source_moved_away(source), source_moved_away(mid):
                assert read(end, "ice_end.events") == expected
