"""Readers with a ValidWriteIdList never see an open or aborted txn's change, on any path of the cache.

The catalog applies a txn's change at once and never rolls it back, so after an abort the database keeps
a version no committed snapshot has. These tests walk each path that could show it: the database
fallback, a load (prewarm, restart), and an entry loaded while the txn was open that later aborts.
"""

from __future__ import annotations

import pytest

from hmsrepl.cache import CachedReads
from hmsrepl.cache.visibility import state_write_ids
from hmsrepl.exceptions import WriteNotVisibleError, is_retryable
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.helpers import make_partition
from tests.unit.test_cache_updates import DB, acid_table, ids, misses, new_cache, read_params, sync, txn_alter


@pytest.fixture
def store(sqlite_metastore: Metastore) -> Metastore:
    sqlite_metastore.catalog.create_database(Database(name=DB))
    return sqlite_metastore


def test_the_database_fallback_refuses_an_aborted_change_and_a_restart_does_not_load_it(
    store: Metastore,
) -> None:
    acid_table(store)
    store.txns.commit_txn(txn_alter(store, "t", v="1"))
    store.txns.abort_txns([txn_alter(store, "t", v="2")])
    assert store.catalog.get_table(DB, "t").parameters["v"] == "2"  # the database keeps the aborted change
    cache = new_cache(store)  # an instance (re)started now
    assert cache.store.table((DB, "t")) is None  # not installed: it shows an aborted write
    reads = CachedReads(store.catalog, cache)
    fresh = ids(store, "t")
    with pytest.raises(WriteNotVisibleError, match=r"write id 2 \(aborted in the reader's list\)") as refused:
        read_params(reads, "t", fresh)
    assert is_retryable(refused.value)
    assert cache.served.floor((DB, "t")) == -1  # a refused read answered nothing
    store.txns.commit_txn(txn_alter(store, "t", v="3"))  # a later committed write replaces it
    sync(cache)
    assert read_params(reads, "t", ids(store, "t"))["v"] == "3"  # the miss asks for a load
    sync(cache)
    hits = cache.metrics()["hits"]
    assert read_params(reads, "t", ids(store, "t"))["v"] == "3"
    assert cache.metrics()["hits"] == hits + 1  # cached again once a committed write replaced it


def test_an_entry_loaded_during_a_txn_that_aborts_is_forgotten_not_served(store: Metastore) -> None:
    acid_table(store)
    store.txns.commit_txn(txn_alter(store, "t", v="1"))
    txn = txn_alter(store, "t", v="bad")
    cache = new_cache(store)
    state = cache.store.table((DB, "t"))
    assert state is not None and state.unsettled == {2}  # its content has the open txn's change
    store.txns.abort_txns([txn])
    sync(cache)
    assert cache.store.table((DB, "t")) is None
    reads = CachedReads(store.catalog, cache)
    with pytest.raises(WriteNotVisibleError, match="write id 2"):
        read_params(reads, "t", ids(store, "t"))
    assert "not_cached" in misses(cache)


def test_an_entry_loaded_during_a_txn_that_aborts_before_changing_it_keeps_serving(store: Metastore) -> None:
    acid_table(store)
    store.txns.commit_txn(txn_alter(store, "t", v="1"))
    [txn] = store.txns.open_txns()
    store.txns.allocate_table_write_ids([txn], DB, "t")  # open, nothing changed yet
    cache = new_cache(store)
    assert cache.store.table((DB, "t")).unsettled == {2}  # type: ignore[union-attr]
    store.txns.abort_txns([txn])
    sync(cache)
    reads = CachedReads(store.catalog, cache)
    assert read_params(reads, "t", ids(store, "t"))["v"] == "1"
    assert cache.metrics()["hits"] == 1


def test_a_newer_committed_state_is_answered_and_a_newer_open_one_refused(store: Metastore) -> None:
    acid_table(store)
    reads = CachedReads(store.catalog)  # no cache: the database path alone
    old = ids(store, "t")
    store.txns.commit_txn(txn_alter(store, "t", v="1"))
    assert read_params(reads, "t", old)["v"] == "1"  # committed since the list was taken: the latest
    older = ids(store, "t")
    txn = txn_alter(store, "t", v="2")  # open, above the reader's watermark
    with pytest.raises(WriteNotVisibleError, match=r"write id 2 \(open\)"):
        read_params(reads, "t", older)
    assert read_params(reads, "t", ids(store, "t", own_txn=txn))["v"] == "2"  # the txn reads its own write


def test_partition_reads_with_a_list_are_judged_per_partition(store: Metastore) -> None:
    acid_table(store, "p", "k")
    table = store.catalog.get_table(DB, "p")
    store.catalog.add_partitions(DB, "p", [make_partition(table, "a")])
    [txn] = store.txns.open_txns()
    [pair] = store.txns.allocate_table_write_ids([txn], DB, "p")
    store.txns.add_write_notification(txn, pair.write_id, DB, "p", ["a"], [])  # the partition's write id
    reads = CachedReads(store.catalog)
    reader = ids(store, "p")
    with pytest.raises(WriteNotVisibleError, match=r"partition \['a'\] of table 'c.p'"):
        reads.partitions(DB, "p", -1, reader.write_ids, reader.table_id)
    assert state_write_ids(store.catalog.get_partition(DB, "p", ["a"])) == {pair.write_id}
    assert reads.partitions(DB, "p") != []  # a reader without a list is answered as before
