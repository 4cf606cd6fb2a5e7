"""Transactions, per-table write ids, snapshot lists and their events."""

from __future__ import annotations

import pytest

from hmsrepl.exceptions import InvalidObjectError, NoSuchTxnError, TxnAbortedError, TxnNotOpenError
from hmsrepl.formats.writeids import MAX_ID, ValidWriteIdList
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.payloads import TableWriteId
from tests.helpers import create_db_and_table, make_table

ACID = {"transactional": "true", "transactional_properties": "insert_only"}


@pytest.fixture
def acid_store(metastore: Metastore) -> Metastore:
    create_db_and_table(metastore, db="sales", table="orders", **ACID)
    metastore.catalog.create_table(make_table("sales", "items", **ACID))
    return metastore


def test_write_ids_are_dense_per_table_and_stable_within_a_txn(acid_store: Metastore) -> None:
    t1, t2 = acid_store.txns.open_txns(2)
    assert [p.write_id for p in acid_store.txns.allocate_table_write_ids([t1, t2], "sales", "orders")] == [
        1,
        2,
    ]
    # Asking again in the same txn returns the same id; another table counts from 1.
    assert acid_store.txns.allocate_table_write_ids([t2], "sales", "orders")[0].write_id == 2
    assert acid_store.txns.allocate_table_write_ids([t2], "sales", "items")[0].write_id == 1
    assert acid_store.txns.write_ids_of_txn(t2) == [
        TableWriteId(db="sales", table="items", write_id=1),
        TableWriteId(db="sales", table="orders", write_id=2),
    ]


def test_valid_lists_follow_hive_semantics(acid_store: Metastore) -> None:
    txns = acid_store.txns
    committed, aborted, still_open = txns.open_txns(3)
    for txn in (committed, aborted, still_open):
        txns.allocate_table_write_ids([txn], "sales", "orders")
    txns.commit_txn(committed)
    txns.abort_txns([aborted])

    valid_txns = txns.get_valid_txns()
    assert valid_txns.high_watermark == still_open
    assert valid_txns.open_txns == {still_open} and valid_txns.aborted_txns == {aborted}
    assert valid_txns.to_string() == f"{still_open}:{still_open}:{still_open}:{aborted}"

    [entry] = txns.get_valid_write_ids(["sales.orders"])
    assert entry.table_id == acid_store.catalog.get_table("sales", "orders").id
    wids = entry.write_ids
    assert wids.to_string() == "sales.orders:3:3:3:2"
    assert [w for w in range(1, 5) if wids.is_write_id_valid(w)] == [1]
    [items] = txns.get_valid_write_ids(["sales.items"])
    assert items.write_ids.to_string() == f"sales.items:0:{MAX_ID}::"


def test_old_snapshot_keeps_seeing_what_it_saw(acid_store: Metastore) -> None:
    txns = acid_store.txns
    [writer] = txns.open_txns()
    txns.allocate_table_write_ids([writer], "sales", "orders")
    snapshot = txns.get_valid_txns()  # a reader starts while the writer is open
    txns.commit_txn(writer)
    [as_of_snapshot] = txns.get_valid_write_ids(["sales.orders"], snapshot)
    [now] = txns.get_valid_write_ids(["sales.orders"])
    assert not as_of_snapshot.write_ids.is_write_id_valid(1)
    assert now.write_ids.is_write_id_valid(1)


def test_write_id_of_txn_above_snapshot_hwm_is_invisible(acid_store: Metastore) -> None:
    txns = acid_store.txns
    first, second = txns.open_txns(2)
    # The later txn allocates first, so write id order differs from txn id order.
    txns.allocate_table_write_ids([second], "sales", "orders")
    txns.commit_txn(second)
    snapshot = txns.get_valid_txns()
    txns.allocate_table_write_ids([first], "sales", "orders")
    txns.commit_txn(first)
    [entry] = txns.get_valid_write_ids(["sales.orders"], snapshot)
    assert entry.write_ids.is_write_id_valid(1)
    # Write id 2 belongs to txn 'first', open in the snapshot: invisible to that reader.
    assert not entry.write_ids.is_write_id_valid(2)


def test_txn_events_name_write_ids_and_files(acid_store: Metastore) -> None:
    txns = acid_store.txns
    before = acid_store.get_current_notification_event_id()
    [txn] = txns.open_txns()
    [alloc] = txns.allocate_table_write_ids([txn], "sales", "orders")
    txns.add_write_notification(
        txn, alloc.write_id, "sales", "orders", None, ["f1#crc32c-00000001-1##delta_1"]
    )
    txns.commit_txn(txn)
    events = acid_store.get_next_notification(before)
    assert [e.event_type for e in events] == ["OPEN_TXN", "ALLOC_WRITE_ID", "ACID_WRITE", "COMMIT_TXN"]
    assert events[0].body()["txn_ids"] == [txn]
    assert events[1].body()["txn_to_write_ids"] == [{"txn_id": txn, "write_id": 1}]
    assert events[2].body()["files"] == ["f1#crc32c-00000001-1##delta_1"]
    commit = events[3].body()
    assert commit["txn_id"] == txn
    assert commit["write_ids"] == [{"db": "sales", "table": "orders", "write_id": 1}]
    assert commit["writes"][0]["files"] == ["f1#crc32c-00000001-1##delta_1"]
    assert acid_store.catalog.get_table("sales", "orders").write_id == 1


def test_abort_event_and_no_commit_after_abort(acid_store: Metastore) -> None:
    txns = acid_store.txns
    [txn] = txns.open_txns()
    txns.allocate_table_write_ids([txn], "sales", "orders")
    before = acid_store.get_current_notification_event_id()
    txns.abort_txns([txn])
    [event] = acid_store.get_next_notification(before)
    assert event.event_type == "ABORT_TXN"
    assert event.body()["write_ids"] == [{"db": "sales", "table": "orders", "write_id": 1}]
    with pytest.raises(TxnAbortedError, match=f"transaction {txn} was aborted"):
        txns.commit_txn(txn)
    with pytest.raises(TxnAbortedError):
        txns.allocate_table_write_ids([txn], "sales", "items")
    assert acid_store.get_current_notification_event_id() == before + 1
    assert txns.txn_state(txn) == "aborted"


def test_timed_out_txns_are_aborted(acid_store: Metastore) -> None:
    txns = acid_store.txns
    stale, fresh = txns.open_txns(2)
    txns.allocate_table_write_ids([stale], "sales", "orders")
    # Seen from one hour later, with a five-minute timeout, both txns are stale unless heartbeated then.
    aborted = txns.abort_timed_out(now=10**10)
    assert sorted(aborted) == [stale, fresh]
    with pytest.raises(TxnAbortedError):
        txns.commit_txn(stale)
    [entry] = txns.get_valid_write_ids(["sales.orders"])
    assert entry.write_ids.aborted_write_ids == {1}


def test_bad_txn_requests(acid_store: Metastore) -> None:
    txns = acid_store.txns
    with pytest.raises(NoSuchTxnError, match="transaction 999"):
        txns.commit_txn(999)
    [txn] = txns.open_txns()
    txns.commit_txn(txn)
    with pytest.raises(TxnNotOpenError, match="committed"):
        txns.commit_txn(txn)
    acid_store.catalog.create_table(make_table("sales", "plain"))
    [other] = txns.open_txns()
    with pytest.raises(InvalidObjectError, match="not transactional"):
        txns.allocate_table_write_ids([other], "sales", "plain")
    with pytest.raises(InvalidObjectError, match="does not belong to txn"):
        txns.add_write_notification(other, 7, "sales", "orders", None, [])


def test_valid_write_id_list_round_trip_through_store(acid_store: Metastore) -> None:
    txns = acid_store.txns
    for _ in range(3):
        [txn] = txns.open_txns()
        txns.allocate_table_write_ids([txn], "sales", "orders")
    [entry] = txns.get_valid_write_ids(["sales.orders"])
    assert ValidWriteIdList.parse(entry.write_ids.to_string()) == entry.write_ids
    assert entry.write_ids.open_write_ids == {1, 2, 3}


def test_write_ids_follow_rename_and_vanish_with_drop(acid_store: Metastore) -> None:
    txns = acid_store.txns
    [txn] = txns.open_txns()
    txns.allocate_table_write_ids([txn], "sales", "orders")
    txns.commit_txn(txn)
    table = acid_store.catalog.get_table("sales", "orders")
    acid_store.catalog.alter_table("sales", "orders", table.model_copy(update={"table_name": "orders2"}))
    [renamed] = txns.get_valid_write_ids(["sales.orders2"])
    assert renamed.write_ids.high_watermark == 1
    acid_store.catalog.drop_table("sales", "orders2")
    acid_store.catalog.create_table(make_table("sales", "orders2", **ACID))
    [fresh] = txns.get_valid_write_ids(["sales.orders2"])
    assert fresh.write_ids.high_watermark == 0
    [txn] = txns.open_txns()
    assert txns.allocate_table_write_ids([txn], "sales", "orders2")[0].write_id == 1
