"""Hive 3/4 transaction events translated into this product's txn events (the ``acid_replay`` path).

What a stock metastore with ``DbNotificationListener`` as transactional listener logs (checked against
Hive 3.1.3 and 4.2.0): ``OPEN_TXN`` (``fromTxnId``..``toTxnId``, no database), ``ALLOC_WRITE_ID_EVENT``
(``dbName``, ``tableName``, ``txnIdList``, ``writeIdList``), ``COMMIT_TXN`` and ``ABORT_TXN`` (``txnid``
only). ``ACID_WRITE`` is logged only by Hive 4's ``add_write_notification_log`` (Hive 3.1.3 does not have
that call) and is not needed: a commit's writes are its allocations, and each write's files are read from
the write id's directories when the commit is read (``write_dirs``), with this product's checksums. So a
commit here carries what an hmsrepl source's does (write ids and files), and the load replays it the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hmsrepl.hive_source.allocations import ALLOC_WRITE_ID, allocations, opened_txns
from hmsrepl.metastore.events import EventType

if TYPE_CHECKING:
    from hmsrepl.hive_source.messages import Body, HiveEvent, Lookups, Translator

#: Hive's event types that belong to no database (Hive logs them with the database "null").
TXN_TYPES = frozenset({"OPEN_TXN", "COMMIT_TXN", "ABORT_TXN"})


def _open_txn(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    return {"txn_ids": opened_txns(doc)}


def _alloc_write_id(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    pairs = allocations(doc)
    if not pairs:
        return None
    db, table = pairs[0][1].db, pairs[0][1].table
    return {
        "db": db,
        "table": table,
        "txn_to_write_ids": [{"txn_id": txn, "write_id": a.write_id} for txn, a in pairs],
    }


def _write_ids(txn: int, event: HiveEvent, lookups: Lookups) -> list[dict[str, Any]]:
    held = lookups.txn_allocations(txn, event.event_id)
    return [{"db": a.db, "table": a.table, "write_id": a.write_id} for a in held]


def _commit_txn(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    """The commit with its write ids and, per table (and partition) it wrote, the write id's files now."""
    txn = int(doc["txnid"])
    write_ids = _write_ids(txn, event, lookups)
    writes = [
        w for held in write_ids for w in lookups.write_files(held["db"], held["table"], held["write_id"])
    ]
    return {"txn_id": txn, "write_ids": write_ids, "writes": writes}


def _abort_txn(event: HiveEvent, doc: dict[str, Any], lookups: Lookups) -> Body:
    txn = int(doc["txnid"])
    return {"txn_id": txn, "write_ids": _write_ids(txn, event, lookups)}


TXN_TRANSLATORS: dict[EventType, Translator] = {
    EventType.OPEN_TXN: _open_txn,
    EventType.COMMIT_TXN: _commit_txn,
    EventType.ABORT_TXN: _abort_txn,
}
TXN_ALIASES: dict[str, tuple[EventType, Translator]] = {
    ALLOC_WRITE_ID: (EventType.ALLOC_WRITE_ID, _alloc_write_id)
}


def table_of(event_type: str, body: dict[str, Any]) -> str | None:
    """The table an ALLOC_WRITE_ID_EVENT names in its message (Hive logs the event without one)."""
    return body.get("table") if event_type == ALLOC_WRITE_ID else None
