"""Iceberg tables through pyiceberg's HiveCatalog (from PyPI) against a real ``hmsrepl metastore serve`` process.

Iceberg's Hive catalog commits by taking an exclusive table lock, checking that the table's
``metadata_location`` is still the one its change was based on, and swapping in the new one with
``alter_table``; a writer that lost the race must get ``CommitFailedException``, never overwrite.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pytest
from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from hmsrepl.metastore import Metastore
from tests.backends import temporary_database
from tests.servers import RunningMetastore, metastore_server

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)


@pytest.fixture(scope="module", params=["sqlite", "postgres", "mysql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningMetastore]:
    root = tmp_path_factory.mktemp(f"iceberg-{request.param}")
    with temporary_database(request.param, str(root)) as url, metastore_server(root, url) as running:
        yield running


def catalog(server: RunningMetastore) -> HiveCatalog:
    return HiveCatalog(
        "hms", uri=server.uri, **{"lock-check-min-wait-time": "0.05", "lock-check-retries": "8"}
    )


def rows(ids: list[int], names: list[str] | None = None) -> pa.Table:
    names = names if names is not None else [f"n{i}" for i in ids]
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array(names, pa.string())})


def test_namespace_table_appends_schema_change_and_overwrite(server: RunningMetastore) -> None:
    cat = catalog(server)
    cat.create_namespace("ice")
    assert ("ice",) in cat.list_namespaces()
    table = cat.create_table("ice.events", SCHEMA)
    table.append(rows([1, 2]))
    table.append(rows([3]))
    table.append(rows([4, 5]))
    reloaded = cat.load_table("ice.events")
    assert sorted(reloaded.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3, 4, 5]
    assert len(reloaded.history()) == 3

    # The metastore keeps what the catalog sent: metadata_location and previous_metadata_location.
    with _store(server) as store:
        params = store.catalog.get_table("ice", "events").parameters
    assert params["table_type"] == "ICEBERG"
    assert params["metadata_location"] == reloaded.metadata_location
    assert params["previous_metadata_location"] != params["metadata_location"]

    with reloaded.update_schema() as update:
        update.add_column("country", StringType())
    reloaded.append(
        pa.table(
            {
                "id": pa.array([6], pa.int64()),
                "name": pa.array(["n6"], pa.string()),
                "country": pa.array(["NL"], pa.string()),
            }
        )
    )
    again = cat.load_table("ice.events")
    assert [f.name for f in again.schema().fields] == ["id", "name", "country"]
    got = again.scan().to_arrow().sort_by("id")
    assert got["country"].to_pylist() == [None] * 5 + ["NL"]
    # The Hive columns follow the Iceberg schema (the catalog sends them with alter_table).
    with _store(server) as store:
        assert [c.name for c in store.catalog.get_table("ice", "events").sd.cols] == ["id", "name", "country"]

    again.overwrite(rows([10, 11]).append_column("country", pa.array(["DE", "FR"], pa.string())))
    final = cat.load_table("ice.events")
    assert sorted(final.scan().to_arrow()["id"].to_pylist()) == [10, 11]
    assert len(final.history()) == 6  # 3 appends, 1 after the schema change, overwrite = delete + append


def test_partitioned_table(server: RunningMetastore) -> None:
    cat = catalog(server)
    cat.create_namespace("icep")
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="name")
    )
    table = cat.create_table("icep.parted", SCHEMA, partition_spec=spec)
    table.append(rows([1, 2, 3], ["a", "b", "a"]))
    scanned = cat.load_table("icep.parted").scan(row_filter="name == 'a'").to_arrow()
    assert sorted(scanned["id"].to_pylist()) == [1, 3]


def _race(writers: list, values: list[int]) -> dict[int, str]:
    """Both writers append at the same moment; returns each one's outcome."""
    barrier = threading.Barrier(len(writers))
    outcome: dict[int, str] = {}

    def commit(index: int) -> None:
        barrier.wait()
        try:
            writers[index].append(rows([values[index]]))
            outcome[index] = "committed"
        except CommitFailedException:
            outcome[index] = "failed"

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(len(writers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return outcome


def test_concurrent_commits_one_wins_the_other_fails_cleanly_and_retries(server: RunningMetastore) -> None:
    cat = catalog(server)
    cat.create_namespace("icec")
    # pyiceberg retries a failed append by itself; with retries off the failure reaches the caller.
    cat.create_table("icec.race", SCHEMA, properties={"commit.retry.num-retries": "0"}).append(rows([0]))
    writers = [catalog(server).load_table("icec.race") for _ in range(2)]
    assert writers[0].metadata_location == writers[1].metadata_location
    outcome = _race(writers, [100, 101])
    assert sorted(outcome.values()) == ["committed", "failed"], outcome
    loser = next(i for i, v in outcome.items() if v == "failed")
    winner = 1 - loser
    after_race = cat.load_table("icec.race")
    assert sorted(after_race.scan().to_arrow()["id"].to_pylist()) == [0, 100 + winner]  # nothing overwritten
    # The loser retries on the refreshed table and succeeds; both rows are there.
    writers[loser].refresh()
    writers[loser].append(rows([100 + loser]))
    final = cat.load_table("icec.race")
    assert sorted(final.scan().to_arrow()["id"].to_pylist()) == [0, 100, 101]
    assert len(final.history()) == 3

    # With pyiceberg's own retries on (the default), both racing appends land, neither is lost.
    with final.transaction() as txn:
        txn.set_properties({"commit.retry.num-retries": "4"})
    writers = [catalog(server).load_table("icec.race") for _ in range(2)]
    assert sorted(_race(writers, [200, 201]).values()) == ["committed", "committed"]
    ids = cat.load_table("icec.race").scan().to_arrow()["id"].to_pylist()
    assert sorted(ids) == [0, 100, 101, 200, 201]
    with _store(server) as store:
        assert store.locks.show_locks("icec") == []  # every commit unlocked


@contextmanager
def _store(server: RunningMetastore) -> Iterator[Metastore]:
    """An in-process Metastore on the server's database, closed afterwards."""
    store = Metastore(server.config)
    try:
        yield store
    finally:
        store.close()


def test_commit_against_changed_metadata_location_fails(server: RunningMetastore) -> None:
    """A stale writer (sequential, not racing) also fails instead of overwriting."""
    cat = catalog(server)
    cat.create_namespace("ices")
    fresh = cat.create_table("ices.t", SCHEMA, properties={"commit.retry.num-retries": "0"})
    stale = cat.load_table("ices.t")
    fresh.append(rows([1]))
    with pytest.raises(CommitFailedException):
        stale.append(rows([2]))
    assert cat.load_table("ices.t").scan().to_arrow()["id"].to_pylist() == [1]


def test_catalog_listing_rename_properties_and_drop(server: RunningMetastore) -> None:
    cat = catalog(server)
    cat.create_namespace("icel", {"owner": "analytics"})
    assert cat.load_namespace_properties("icel")["owner"] == "analytics"
    cat.update_namespace_properties("icel", updates={"team": "bi"})
    assert cat.load_namespace_properties("icel")["team"] == "bi"
    table = cat.create_table("icel.a", SCHEMA)
    table.append(rows([1]))
    assert cat.list_tables("icel") == [("icel", "a")]
    assert cat.table_exists("icel.a") and not cat.table_exists("icel.b")
    cat.rename_table("icel.a", "icel.b")
    assert cat.list_tables("icel") == [("icel", "b")]
    assert cat.load_table("icel.b").scan().to_arrow()["id"].to_pylist() == [1]
    cat.drop_table("icel.b")
    assert cat.list_tables("icel") == []
    cat.drop_namespace("icel")
    assert ("icel",) not in cat.list_namespaces()
