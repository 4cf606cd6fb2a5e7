"""How the metadata cache follows the log: held-back txn changes, aborts, DDL, drops, renames, loads, gaps.

Each test drives one in-process cache on a SQLite metastore and steps its updater by hand (``sync``), so
every interleaving is exact. What a reader must see is computed from the database's own write-id lists.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.cache import CachedReads, CacheSettings, Freshness, MetadataCache
from hmsrepl.cache.attribution import TXN_WRITE_PARAM, TxnWriter
from hmsrepl.cache.loader import SnapshotLoader
from hmsrepl.exceptions import (
    EventsCleanedUpError,
    InvalidObjectError,
    NoSuchPartitionError,
    WriteNotVisibleError,
    is_retryable,
)
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, TableType
from hmsrepl.metastore.transactions import TableWriteIds
from tests.helpers import make_partition, make_table

DB = "c"


def sync(cache: MetadataCache) -> None:
    """Run the updater until it has nothing left to do (reload, events, requested loads)."""
    for _ in range(100):
        if not cache.updater.run_once():
            return
    raise AssertionError("the updater never ran out of work")


def ids(store: Metastore, table: str, *, own_txn: int | None = None) -> TableWriteIds:
    """The reader's list as Hive builds it; with ``own_txn`` the reader's own txn counts as committed."""
    snapshot = store.txns.get_valid_txns()
    if own_txn is not None:
        snapshot = type(snapshot)(
            snapshot.high_watermark, snapshot.open_txns - {own_txn}, snapshot.aborted_txns
        )
    [found] = store.txns.get_valid_write_ids([f"{DB}.{table}"], snapshot)
    return found


def misses(cache: MetadataCache) -> dict[str, int]:
    return dict(cache.metrics()["misses"])


@pytest.fixture
def store(sqlite_metastore: Metastore) -> Metastore:
    sqlite_metastore.catalog.create_database(Database(name=DB))
    return sqlite_metastore


def new_cache(store: Metastore, **settings: Any) -> MetadataCache:
    cache = MetadataCache(store, CacheSettings(**settings))
    sync(cache)
    return cache


@pytest.fixture
def cache(store: Metastore) -> Iterator[MetadataCache]:
    yield new_cache(store)


def acid_table(store: Metastore, name: str = "t", *keys: str) -> Any:
    return store.catalog.create_table(
        make_table(
            DB, name, partition_keys=keys, transactional="true", transactional_properties="insert_only"
        )
    )


def txn_alter(store: Metastore, table: str, **params: str) -> int:
    """Open a txn, allocate its write id and change the table's parameters inside it; returns the txn."""
    [txn] = store.txns.open_txns()
    store.txns.allocate_table_write_ids([txn], DB, table)
    writer = TxnWriter(store)
    current = store.catalog.get_table(DB, table)
    writer.alter_table(
        DB,
        table,
        current.model_copy(update={"parameters": {**current.parameters, **params}}),
        writer.resolve(txn, None, DB, table),
    )
    return txn


def read_params(reads: CachedReads, table: str, wids: TableWriteIds) -> dict[str, str]:
    return reads.table(DB, table, wids.write_ids, wids.table_id).parameters


def test_prewarm_tags_tables_with_the_write_ids_of_one_snapshot(store: Metastore) -> None:
    acid_table(store)
    done = txn_alter(store, "t", v="1")
    store.txns.commit_txn(done)
    still_open = txn_alter(store, "t", v="2")
    cache = new_cache(store)
    state = cache.store.table((DB, "t"))
    assert state is not None and state.write_ids == ids(store, "t").write_ids
    # Loaded content may hold the open txn's change (the database applied it): not served until it ends.
    assert state.unsettled == {2}
    reads = CachedReads(store.catalog, cache)
    # The database holds the open txn's change, which the reader's list does not count: refused, retryable.
    with pytest.raises(WriteNotVisibleError, match=r"write id 2 \(open") as refused:
        read_params(reads, "t", ids(store, "t"))
    assert is_retryable(refused.value)
    assert misses(cache) == {"unsettled": 1}
    store.txns.commit_txn(still_open)
    sync(cache)
    assert read_params(reads, "t", ids(store, "t"))["v"] == "2"
    assert cache.metrics()["hits"] == 1


def test_a_txn_change_is_held_back_until_commit(store: Metastore, cache: MetadataCache) -> None:
    acid_table(store)
    sync(cache)
    reads = CachedReads(store.catalog, cache)
    txn = txn_alter(store, "t", v="1")
    sync(cache)
    during = ids(store, "t")
    assert "v" not in read_params(reads, "t", during)  # a hit: the committed version
    assert cache.metrics()["hits"] == 1
    # Read-your-writes: the txn's own list marks its write committed; the cache's tag does not yet.
    assert read_params(reads, "t", ids(store, "t", own_txn=txn))["v"] == "1"
    assert misses(cache) == {"cache_behind": 1}
    store.txns.commit_txn(txn)
    after = ids(store, "t")
    assert read_params(reads, "t", after)["v"] == "1"  # from the database: the cache has not applied it
    sync(cache)
    table = reads.table(DB, "t", after.write_ids, after.table_id)
    assert table.parameters["v"] == "1" and table.write_id == 1
    assert cache.metrics()["hits"] == 2
    # The older reader's list has write id 1 open: neither the cache nor the database holds the version
    # without it any more, so the read is refused (retryable, naming the write id), never answered with it.
    with pytest.raises(WriteNotVisibleError, match=r"write id 1 \(open in the reader's list"):
        read_params(reads, "t", during)
    assert misses(cache)["write_not_committed"] == 1


def test_equal_policy_refuses_newer_entries(store: Metastore) -> None:
    acid_table(store)
    cache = new_cache(store, freshness=Freshness.EQUAL)
    before = ids(store, "t")
    txn = txn_alter(store, "t", v="1")
    store.txns.commit_txn(txn)
    sync(cache)
    reads = CachedReads(store.catalog, cache)
    read_params(reads, "t", before)
    assert misses(cache) == {"cache_newer": 1}


def test_an_aborted_txn_change_is_never_served(store: Metastore, cache: MetadataCache) -> None:
    acid_table(store)
    reads = CachedReads(store.catalog, cache)
    txn = txn_alter(store, "t", v="aborted")
    store.txns.abort_txns([txn])
    sync(cache)
    after = ids(store, "t")
    assert after.write_ids.aborted_write_ids == {1}
    table = reads.table(DB, "t", after.write_ids, after.table_id)
    assert "v" not in table.parameters and table.write_id == 0
    assert cache.metrics()["hits"] == 1
    # The database itself keeps the aborted change (catalog rows are not rolled back): documented.
    assert store.catalog.get_table(DB, "t").parameters["v"] == "aborted"


def test_unclaimed_ddl_on_a_transactional_table_waits_for_open_writes(
    store: Metastore, cache: MetadataCache
) -> None:
    table = acid_table(store)
    [txn] = store.txns.open_txns()
    store.txns.allocate_table_write_ids([txn], DB, "t")
    store.catalog.alter_table(
        DB, "t", table.model_copy(update={"parameters": {**table.parameters, "ddl": "x"}})
    )
    sync(cache)
    reads = CachedReads(store.catalog, cache)
    read_params(reads, "t", ids(store, "t"))
    assert misses(cache) == {"unsettled": 1}  # it may be that open txn's change: no snapshot is safe
    store.txns.abort_txns([txn])
    sync(cache)
    assert read_params(reads, "t", ids(store, "t"))["ddl"] == "x"  # settled: what the database holds
    assert cache.metrics()["hits"] == 1


def test_unclaimed_ddl_with_no_open_writes_is_applied_at_once(store: Metastore, cache: MetadataCache) -> None:
    table = acid_table(store)
    store.catalog.alter_table(
        DB, "t", table.model_copy(update={"parameters": {**table.parameters, "ddl": "y"}})
    )
    sync(cache)
    reads = CachedReads(store.catalog, cache)
    assert read_params(reads, "t", ids(store, "t"))["ddl"] == "y"
    assert cache.metrics()["hits"] == 1


def test_a_second_txn_on_the_same_object_unsettles_it(store: Metastore, cache: MetadataCache) -> None:
    acid_table(store)
    first = txn_alter(store, "t", a="1")
    second = txn_alter(store, "t", b="2")
    sync(cache)
    state = cache.store.table((DB, "t"))
    assert state is not None and state.unsettled == {1, 2} and not state.pending_objects
    store.txns.commit_txn(second)
    store.txns.commit_txn(first)
    sync(cache)
    reads = CachedReads(store.catalog, cache)
    params = read_params(reads, "t", ids(store, "t"))
    assert (params["a"], params["b"]) == ("1", "2")
    assert cache.metrics()["hits"] == 1


def test_a_stamp_copied_from_the_previous_version_claims_nothing(
    store: Metastore, cache: MetadataCache
) -> None:
    acid_table(store)
    store.txns.commit_txn(txn_alter(store, "t", v="1"))
    current = store.catalog.get_table(DB, "t")
    assert TXN_WRITE_PARAM in current.parameters
    store.catalog.alter_table(
        DB, "t", current.model_copy(update={"parameters": {**current.parameters, "w": "2"}})
    )
    sync(cache)
    state = cache.store.table((DB, "t"))
    assert state is not None and not state.pending and state.table_model.parameters["w"] == "2"


def test_drop_and_recreate_under_the_same_name_is_a_miss(store: Metastore, cache: MetadataCache) -> None:
    acid_table(store)
    # SQLite hands the highest dropped rowid out again (tbls has no AUTOINCREMENT), which would give the new
    # table the old id; with a later table present it cannot. PostgreSQL never reuses ids (integration tests).
    store.catalog.create_table(make_table(DB, "spare"))
    sync(cache)
    old = ids(store, "t")
    store.catalog.drop_table(DB, "t")
    acid_table(store)
    new = ids(store, "t")
    assert new.table_id != old.table_id
    reads = CachedReads(store.catalog, cache)
    assert reads.table(DB, "t", new.write_ids, new.table_id).id == new.table_id  # cache not caught up
    assert misses(cache) == {"table_id_mismatch": 1}
    sync(cache)
    assert reads.table(DB, "t", new.write_ids, new.table_id).id == new.table_id
    assert cache.metrics()["hits"] == 1
    reads.table(DB, "t", old.write_ids, old.table_id)  # the dropped table's id never matches again
    assert misses(cache)["table_id_mismatch"] == 2


def test_rename_forgets_the_old_name_and_loads_the_new_one(store: Metastore, cache: MetadataCache) -> None:
    table = acid_table(store, "t", "p")
    store.catalog.add_partitions(DB, "t", [make_partition(table, "a")])
    sync(cache)
    store.catalog.alter_table(DB, "t", table.model_copy(update={"table_name": "u"}))
    sync(cache)
    assert cache.store.table((DB, "t")) is None
    renamed = cache.store.table((DB, "u"))
    assert renamed is not None and renamed.table_id == table.id
    assert [p.model.table_name for p in (renamed.partitions or {}).values()] == ["u"]


def test_acid_writes_show_only_after_commit_and_whole(store: Metastore, cache: MetadataCache) -> None:
    table = acid_table(store, "t", "p")
    store.catalog.add_partitions(DB, "t", [make_partition(table, v) for v in "ab"])
    sync(cache)
    reads = CachedReads(store.catalog, cache)
    [txn] = store.txns.open_txns()
    [pair] = store.txns.allocate_table_write_ids([txn], DB, "t")
    for value in "ab":
        store.txns.add_write_notification(txn, pair.write_id, DB, "t", [value], [])
    sync(cache)
    during = ids(store, "t")
    assert [p.write_id for p in reads.partitions(DB, "t", -1, during.write_ids, during.table_id)] == [0, 0]
    store.txns.commit_txn(txn)
    sync(cache)
    after = ids(store, "t")
    parts = reads.partitions(DB, "t", -1, after.write_ids, after.table_id)
    assert [p.write_id for p in parts] == [1, 1]
    assert cache.metrics()["hits"] == 2 and not misses(cache)


def test_partition_reads_answer_like_the_database(store: Metastore, cache: MetadataCache) -> None:
    table = make_table(DB, "ext", partition_keys=("region", "hour"), EXTERNAL="TRUE")
    hour = table.partition_keys[1].model_copy(update={"type": "int"})
    table = store.catalog.create_table(
        table.model_copy(
            update={"table_type": TableType.EXTERNAL_TABLE, "partition_keys": [table.partition_keys[0], hour]}
        )
    )
    combos = [(r, str(h)) for r in ("eu", "us", "apac") for h in (1, 3, 10, 12)]
    store.catalog.add_partitions(DB, "ext", [make_partition(table, r, h) for r, h in combos])
    sync(cache)
    reads, db = CachedReads(store.catalog, cache), CachedReads(store.catalog)
    filters = ['region = "eu"', "hour > 3", "hour >= 3 and hour < 12", 'not region = "us" or hour = 1', ""]
    for text in filters:
        assert reads.partitions_by_filter(DB, "ext", text) == db.partitions_by_filter(DB, "ext", text), text
    assert reads.partitions_by_filter(DB, "ext", "hour > 1", 2) == db.partitions_by_filter(
        DB, "ext", "hour > 1", 2
    )
    hits = cache.metrics()["hits"]
    for text in ("region like 'e%'", 'region > "eu"'):  # backend-dependent: always the database's answer
        assert reads.partitions_by_filter(DB, "ext", text) == db.partitions_by_filter(DB, "ext", text)
    assert misses(cache) == {"unsupported_filter": 2} and cache.metrics()["hits"] == hits
    assert reads.partitions(DB, "ext", 5) == db.partitions(DB, "ext", 5)
    assert reads.partition_names(DB, "ext") == db.partition_names(DB, "ext")
    assert reads.partitions_ps(DB, "ext", ["", "3"]) == db.partitions_ps(DB, "ext", ["", "3"])
    assert reads.partition_names_ps(DB, "ext", ["us"]) == db.partition_names_ps(DB, "ext", ["us"])
    names = ["region=eu/hour=1", "region=us/hour=12", "region=xx/hour=1"]
    assert reads.partitions_by_names(DB, "ext", names) == db.partitions_by_names(DB, "ext", names)
    with pytest.raises(NoSuchPartitionError):
        reads.partition(DB, "ext", ["xx", "1"])
    assert reads.partition(DB, "ext", ["eu", "3"]) == db.partition(DB, "ext", ["eu", "3"])


def test_transactional_reads_without_a_list_or_table_id_go_to_the_database(
    store: Metastore, cache: MetadataCache
) -> None:
    acid_table(store)
    sync(cache)
    reads = CachedReads(store.catalog, cache)
    reads.table(DB, "t")
    wids = ids(store, "t")
    reads.table(DB, "t", wids.write_ids, None)
    assert misses(cache) == {"no_write_id_list": 1, "no_table_id": 1}
    with pytest.raises(InvalidObjectError, match=r"is for table 'c\.other'"):
        reads.table(DB, "t", wids.write_ids.__class__("c.other", 0), wids.table_id)


def test_eventual_reads_wait_for_this_instances_own_writes(store: Metastore, cache: MetadataCache) -> None:
    table = store.catalog.create_table(make_table(DB, "plain"))
    sync(cache)
    reads = CachedReads(store.catalog, cache)
    assert reads.table(DB, "plain").parameters == {}
    store.catalog.alter_table(DB, "plain", table.model_copy(update={"parameters": {"k": "v"}}))
    cache.note_local_write()
    assert reads.table(DB, "plain").parameters == {"k": "v"}  # from the database
    assert misses(cache) == {"local_write_pending": 1}
    sync(cache)
    assert reads.table(DB, "plain").parameters == {"k": "v"}
    assert cache.metrics()["hits"] == 2
    assert reads.database(DB).name == DB


def test_a_load_raced_by_a_write_is_retried_never_installed_stale(store: Metastore) -> None:
    acid_table(store)
    raced: list[int] = []

    def write_during_load(keys: list[tuple[str, str]]) -> None:
        if not raced:  # one write, inside the first load's window
            raced.append(txn_alter(store, "t", v="racing"))
            store.txns.commit_txn(raced[0])

    cache = MetadataCache(store, CacheSettings(), loader=SnapshotLoader(store, after_read=write_during_load))
    sync(cache)
    assert cache.metrics()["load_races"] == 1
    state = cache.store.table((DB, "t"))
    assert state is not None and state.table_model.parameters["v"] == "racing"
    assert state.write_ids == ids(store, "t").write_ids and not state.unsettled


def test_a_gap_in_the_log_forces_a_full_reload(store: Metastore, cache: MetadataCache) -> None:
    table = store.catalog.create_table(make_table(DB, "plain"))
    sync(cache)
    store.catalog.alter_table(DB, "plain", table.model_copy(update={"parameters": {"k": "1"}}))
    store.catalog.alter_table(DB, "plain", table.model_copy(update={"parameters": {"k": "2"}}))
    store.events.cleanup(ttl_seconds=-10)  # every event is gone, including two the cache never applied
    with pytest.raises(EventsCleanedUpError):
        cache.updater.run_once()
    sync(cache)
    assert cache.metrics()["full_reloads"] == 1
    state = cache.store.table((DB, "plain"))
    assert state is not None and state.table_model.parameters == {"k": "2"}


def test_least_recently_used_tables_are_evicted_and_loaded_again_on_demand(store: Metastore) -> None:
    for name in ("a", "b", "c"):
        store.catalog.create_table(make_table(DB, name))
    cache = new_cache(store, max_entries=2)
    assert cache.metrics()["tables"] == 2 and cache.metrics()["evictions"] >= 1
    reads = CachedReads(store.catalog, cache)
    evicted = next(name for name in "abc" if cache.store.table((DB, name)) is None)
    reads.table(DB, evicted)
    assert misses(cache) == {"not_cached": 1}
    sync(cache)
    assert cache.store.table((DB, evicted)) is not None and cache.store.entries <= 2
    reads.table(DB, evicted)
    assert cache.metrics()["hits"] == 1


def test_a_table_too_big_for_the_budget_is_cached_without_partitions(store: Metastore) -> None:
    table = store.catalog.create_table(make_table(DB, "big", partition_keys=("p",)))
    store.catalog.add_partitions(DB, "big", [make_partition(table, str(i)) for i in range(5)])
    cache = new_cache(store, max_entries=3)
    reads = CachedReads(store.catalog, cache)
    assert len(reads.partitions(DB, "big")) == 5
    assert reads.table(DB, "big").table_name == "big"
    assert misses(cache) == {"partitions_not_cached": 1} and cache.metrics()["hits"] == 1


def test_metrics_report_lag_in_events(store: Metastore, cache: MetadataCache, tmp_path: Path) -> None:
    store.catalog.create_table(make_table(DB, "plain"))
    cache.updater.latest = store.events.current_event_id()
    metrics = cache.metrics()
    assert metrics["lag_events"] == 1 and metrics["applied_event_id"] == metrics["latest_event_id"] - 1
    sync(cache)
    assert cache.metrics()["lag_events"] == 0


def test_reads_are_answered_from_the_database_while_prewarm_runs(store: Metastore) -> None:
    store.catalog.create_table(make_table(DB, "plain"))
    inside, release = threading.Event(), threading.Event()

    def hold(keys: list[tuple[str, str]]) -> None:
        inside.set()
        assert release.wait(30)

    cache = MetadataCache(
        store, CacheSettings(refresh_interval_seconds=0.01), loader=SnapshotLoader(store, after_read=hold)
    )
    cache.start()
    try:
        assert inside.wait(30)  # prewarm is in the middle of loading
        reads = CachedReads(store.catalog, cache)
        assert reads.table(DB, "plain").table_name == "plain"
        assert not cache.metrics()["ready"] and misses(cache) == {"not_cached": 1}
        release.set()
        assert cache.updater.ready.wait(30)
        assert reads.table(DB, "plain").table_name == "plain"
        assert cache.metrics()["hits"] == 1
    finally:
        release.set()
        cache.stop()


def test_a_requested_load_never_replaces_a_table_the_log_keeps(
    store: Metastore, cache: MetadataCache
) -> None:
    """A miss can ask for a table just before its CREATE_TABLE is applied; the load must not win over it."""
    reads = CachedReads(store.catalog, cache)
    acid_table(store)
    reads.table(DB, "t")  # not cached yet: asks for a load
    txn = txn_alter(store, "t", v="1")
    sync(cache)  # applies CREATE_TABLE etc., then runs the requested load
    state = cache.store.table((DB, "t"))
    assert state is not None and not state.unsettled and txn in state.pending
    during = ids(store, "t")
    assert "v" not in read_params(reads, "t", during)
    assert cache.metrics()["hits"] == 1


def test_a_table_growing_past_the_budget_keeps_only_its_table_object(store: Metastore) -> None:
    table = store.catalog.create_table(make_table(DB, "grows", partition_keys=("p",)))
    cache = new_cache(store, max_entries=4)
    store.catalog.add_partitions(DB, "grows", [make_partition(table, str(i)) for i in range(6)])
    sync(cache)
    state = cache.store.table((DB, "grows"))
    assert state is not None and state.partitions is None
    assert cache.store.entries == 1 and cache.store.bytes == state.size
