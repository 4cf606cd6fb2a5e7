"""Transactions, write ids and locks over Thrift."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from hmsrepl.exceptions import InvalidObjectError, InvalidOperationError, NoSuchTxnError, TxnAbortedError
from hmsrepl.formats.writeids import ValidTxnList, ValidWriteIdList
from hmsrepl.metastore.locks import LockComponent, LockInfo
from hmsrepl.thrift import compactions
from hmsrepl.thrift.api.base import Area
from hmsrepl.thrift.idl import hms


def _lock_component(c: Any) -> LockComponent:
    type_name = hms.LockType._VALUES_TO_NAMES.get(c.type)
    if type_name is None:
        raise InvalidObjectError(
            f"lock component on '{c.dbname}': unknown lock type {c.type}; send a Hive LockType"
        )
    level = hms.LockLevel._VALUES_TO_NAMES.get(c.level, "TABLE")
    table = c.tablename if level != "DB" else None
    partition = c.partitionname if level == "PARTITION" else None
    operation = hms.DataOperationType._VALUES_TO_NAMES.get(c.operationType) if c.operationType else None
    return LockComponent(type_name, c.dbname or "", table or None, partition or None, operation)


def _lock_response(result: Any) -> Any:
    state = getattr(hms.LockState, result.state)
    return hms.LockResponse(lockid=result.lock_id, state=state, errorMessage=result.message)


def _show_lock(info: LockInfo) -> Any:
    return hms.ShowLocksResponseElement(
        lockid=info.lock_id,
        dbname=info.db_name,
        tablename=info.table_name,
        partname=info.partition_name,
        state=getattr(hms.LockState, info.state),
        type=getattr(hms.LockType, info.lock_type),
        txnid=info.txn_id or None,
        lastheartbeat=info.last_heartbeat,
        acquiredat=info.acquired_at,
        user=info.user,
        hostname=info.host,
        heartbeatCount=info.heartbeat_count,
        agentInfo=info.agent_info,
        blockedByExtId=info.blocked_by,
        lockIdInternal=info.component,
    )


def _host() -> str:
    return socket.gethostname()


def java_bitset_bytes(positions: Sequence[int]) -> bytes:
    """Java's BitSet.toByteArray for the given set bits (little-endian, trailing zero bytes trimmed)."""
    if not positions:
        return b""
    out = bytearray(max(positions) // 8 + 1)
    for pos in positions:
        out[pos // 8] |= 1 << (pos % 8)
    return bytes(out)


def _open_txns_response(snapshot: ValidTxnList) -> Any:
    invalid = sorted(snapshot.open_txns | snapshot.aborted_txns)
    bits = [i for i, txn in enumerate(invalid) if txn in snapshot.aborted_txns]
    return hms.GetOpenTxnsResponse(
        txn_high_water_mark=snapshot.high_watermark,
        open_txns=invalid,
        min_open_txn=min(snapshot.open_txns) if snapshot.open_txns else None,
        abortedBits=java_bitset_bytes(bits),
    )


def _table_write_ids(wids: ValidWriteIdList) -> Any:
    invalid = sorted(wids.exceptions)
    bits = [i for i, w in enumerate(invalid) if w in wids.aborted_write_ids]
    return hms.TableValidWriteIds(
        fullTableName=wids.table_name,
        writeIdHighWaterMark=wids.high_watermark,
        invalidWriteIds=invalid,
        minOpenWriteId=min(wids.open_write_ids) if wids.open_write_ids else None,
        abortedBits=java_bitset_bytes(bits),
    )


class TransactionApi(Area):
    """ACID transactions, their write ids, and locks."""

    def get_open_txns(self) -> Any:
        snapshot = self.store.txns.get_valid_txns()
        return _open_txns_response(snapshot)

    def open_txns(self, rqst: Any) -> Any:
        if rqst.replPolicy:
            raise InvalidOperationError(
                "open_txns with replPolicy (replicated txns) is not supported by this server"
            )
        ids = self.store.txns.open_txns(
            rqst.num_txns, user=rqst.user or "hive", host=rqst.hostname or _host()
        )
        return hms.OpenTxnsResponse(txn_ids=ids)

    def abort_txn(self, rqst: Any) -> None:
        self.store.txns.abort_txns([rqst.txnid])

    def abort_txns(self, rqst: Any) -> None:
        self.store.txns.abort_txns(list(rqst.txn_ids or []))

    def commit_txn(self, rqst: Any) -> None:
        """A commit naming write events of its own (Hive 4's REPL LOAD of ACID writes, ``writeEventInfos``) is
        refused before anything changes: this metastore logs a transaction's writes itself, and replicates
        with its own REPL LOAD, so such a commit would lose them."""
        if rqst.writeEventInfos:
            raise InvalidOperationError(
                f"commit_txn of txn {rqst.txnid} with writeEventInfos (Hive's REPL LOAD of ACID writes) is not "
                "supported: this metastore logs a transaction's writes itself; replicate with hmsrepl's REPL LOAD"
            )
        self.store.txns.commit_txn(rqst.txnid)

    def heartbeat_txn_range(self, txns: Any) -> Any:
        aborted, nosuch = set(), set()
        for txn_id in range(txns.min, txns.max + 1):
            try:
                self.store.txns.heartbeat(txn_id)
            except NoSuchTxnError:
                nosuch.add(txn_id)
            except (TxnAbortedError, InvalidOperationError):
                aborted.add(txn_id)
        return hms.HeartbeatTxnRangeResponse(aborted=aborted, nosuch=nosuch)

    def get_valid_write_ids(self, rqst: Any) -> Any:
        snapshot = ValidTxnList.parse(rqst.validTxnList) if rqst.validTxnList else None
        entries = self.store.txns.get_valid_write_ids(list(rqst.fullTableNames or []), snapshot)
        return hms.GetValidWriteIdsResponse(tblValidWriteIds=[_table_write_ids(e.write_ids) for e in entries])

    def allocate_table_write_ids(self, rqst: Any) -> Any:
        if rqst.replPolicy or rqst.srcTxnToWriteIdList:
            raise InvalidOperationError(
                "allocating write ids for replicated txns is not supported by this server"
            )
        pairs = self.store.txns.allocate_table_write_ids(list(rqst.txnIds or []), rqst.dbName, rqst.tableName)
        return hms.AllocateTableWriteIdsResponse(
            txnToWriteIds=[hms.TxnToWriteId(txnId=p.txn_id, writeId=p.write_id) for p in pairs]
        )

    def lock(self, rqst: Any) -> Any:
        components = [_lock_component(c) for c in rqst.component or []]
        result = self.store.locks.lock(
            components,
            txn_id=rqst.txnid or None,
            user=rqst.user or self.caller or "unknown",
            host=rqst.hostname or "unknown",
            agent_info=rqst.agentInfo,
            zero_wait=bool(rqst.zeroWaitReadEnabled),
        )
        return _lock_response(result)

    def check_lock(self, rqst: Any) -> Any:
        return _lock_response(self.store.locks.check_lock(rqst.lockid, rqst.txnid or None))

    def unlock(self, rqst: Any) -> None:
        self.store.locks.unlock(rqst.lockid)

    def heartbeat(self, ids: Any) -> None:
        self.store.locks.heartbeat(ids.lockid or None, ids.txnid or None)

    def show_locks(self, rqst: Any) -> Any:
        found = self.store.locks.show_locks(rqst.dbname, rqst.tablename, rqst.partname, rqst.txnid or None)
        return hms.ShowLocksResponse(locks=[_show_lock(info) for info in found])

    # -- compaction (thrift.compactions) --------------------------------------------------------------------
    def compact(self, rqst: Any) -> None:
        compactions.compact2(self.store, rqst)

    def compact2(self, rqst: Any) -> Any:
        return compactions.compact2(self.store, rqst)

    def show_compact(self, rqst: Any) -> Any:
        return compactions.show_compact(self.store, rqst)
