"""Hive's compaction calls over Thrift: ``compact``/``compact2`` queue a compaction, ``show_compact`` lists the
queue in Hive's states ("initiated", "working", "ready for cleaning", "succeeded", "failed", and "refused"
when the worker found nothing to compact).

Struct translation only; the checks and the queue are ``hmsrepl.acid.compaction_requests``'s.
"""

from __future__ import annotations

from typing import Any

from hmsrepl.acid.compaction_queue import CompactionRecord
from hmsrepl.acid.compaction_requests import ShowFilter, request_compaction, show_compactions
from hmsrepl.exceptions import InvalidInputError
from hmsrepl.metastore.service import Metastore
from hmsrepl.thrift.idl import hms

#: The kinds of Hive's ``CompactionType`` the queue runs; Hive 4's later one (REBALANCE) is refused.
_QUEUED_TYPES = {hms.CompactionType.MINOR: "minor", hms.CompactionType.MAJOR: "major"}


def compaction_type(value: int | None, what: str) -> str:
    """Hive's ``CompactionType`` (MINOR=1, MAJOR=2) as the queue spells it; Hive 4's later kinds are refused."""
    name = _QUEUED_TYPES.get(value) if value is not None else None
    if name is None:
        hive_name = hms.CompactionType._VALUES_TO_NAMES.get(value) if value is not None else None
        kind = f"{value} ({hive_name})" if hive_name else str(value)
        raise InvalidInputError(
            f"compaction of {what}: compaction type {kind} is not supported; ask for MAJOR (2) or MINOR (1)"
        )
    return name


def compact2(store: Metastore, rqst: Any) -> Any:
    """Queue the compaction ``rqst`` asks for; accepted, or the id and state of the one already active."""
    what = f"'{rqst.dbname}.{rqst.tablename}'"
    queued = request_compaction(
        store, rqst.dbname, rqst.tablename, rqst.partitionname or None, compaction_type(rqst.type, what)
    )
    message = None
    if not queued.accepted:
        message = f"a compaction of this location is already {queued.state} with id {queued.id}"
    return hms.CompactionResponse(
        id=queued.id, state=queued.state, accepted=queued.accepted, errormessage=message
    )


def show_compact(store: Metastore, rqst: Any) -> Any:
    """Every queue row (Hive 3's empty request), or those Hive 4's filters select."""
    show = ShowFilter()
    if rqst is not None:
        type_ = compaction_type(rqst.type, "show_compact") if rqst.type is not None else None
        show = ShowFilter(
            id=rqst.id if rqst.id else None,
            db_name=rqst.dbName,
            table_name=rqst.tbName,
            part_name=rqst.partName,
            type_=type_,
            state=rqst.state,
            limit=rqst.limit,
            newest_first="desc" in (rqst.order or "").lower(),
        )
    return hms.ShowCompactResponse(compacts=[_element(row) for row in show_compactions(store, show)])


def _element(row: CompactionRecord) -> Any:
    return hms.ShowCompactResponseElement(
        dbname=row.db_name,
        tablename=row.table_name,
        partitionname=row.part_name,
        type=getattr(hms.CompactionType, row.type.upper()),
        state=row.state,
        workerid=row.worker,
        start=row.started_at,
        endTime=row.ended_at,
        id=row.id,
        errorMessage=row.error,
        enqueueTime=row.enqueued_at,
        nextTxnId=row.next_txn_id,
        txnId=row.txn_id,
        hightestWriteId=row.highest_write_id,
        metaInfo=row.base_dir,  # the directory the compaction wrote (Hive keeps its own notes here)
    )
