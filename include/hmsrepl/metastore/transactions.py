"""Transactions and per-table write ids, with Hive's snapshot lists and their notification events.

Txn ids come from a locked sequence row like event ids. A table's write ids are dense per table and are
allocated inside a txn (once per txn and table), which is what lets a replica keep the same write ids as the
source while mapping txn ids. Aborted txns stay recorded so their write ids keep being reported as aborted
in every ValidWriteIdList (their files must stay invisible).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, delete, false, func, insert, or_, select, update

from hmsrepl.exceptions import InvalidObjectError, NoSuchTxnError, TxnAbortedError, TxnNotOpenError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.formats.writeids import ValidTxnList, ValidWriteIdList
from hmsrepl.metastore.catalog import CatalogService
from hmsrepl.metastore.eventlog import EventLog, MetastoreTransaction
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.schema import (
    next_write_id,
    partitions,
    tbls,
    txn_sequence,
    txn_to_write_id,
    txn_write_notifications,
    txns,
)

OPEN, COMMITTED, ABORTED = "o", "c", "a"
STATE_NAMES = {OPEN: "open", COMMITTED: "committed", ABORTED: "aborted"}


@dataclass(frozen=True)
class TxnToWriteId:
    txn_id: int
    write_id: int


@dataclass(frozen=True)
class TableWriteIds:
    """A table's write-id list plus the table id it was computed for (drop+recreate changes the id)."""

    table_id: int
    write_ids: ValidWriteIdList


class TransactionService:
    def __init__(self, events: EventLog, catalog: CatalogService, *, timeout_seconds: int = 300) -> None:
        self.events = events
        self.catalog = catalog
        self.timeout_seconds = timeout_seconds

    # -- lifecycle ------------------------------------------------------------------------------------
    def open_txns(self, count: int = 1, *, user: str = "hive", host: str = "localhost") -> list[int]:
        if count < 1:
            raise InvalidObjectError(f"cannot open {count} transactions; ask for at least one")
        now = int(time.time())
        with self.events.transaction() as tx:
            seq = txn_sequence
            first = tx.conn.execute(
                select(seq.c.next_txn_id).where(seq.c.id == 1).with_for_update()
            ).scalar_one()
            ids = list(range(first, first + count))
            tx.conn.execute(update(seq).where(seq.c.id == 1).values(next_txn_id=first + count))
            tx.conn.execute(
                insert(txns),
                [
                    {
                        "txn_id": txn_id,
                        "state": OPEN,
                        "started_at": now,
                        "last_heartbeat": now,
                        "user_name": user,
                        "host_name": host,
                        "txn_type": "default",
                    }
                    for txn_id in ids
                ],
            )
            tx.emit(EventType.OPEN_TXN, None, None, {"txn_ids": ids, "user": user, "host": host})
        return ids

    def heartbeat(self, txn_id: int) -> None:
        with self.events.transaction() as tx:
            conn = tx.conn
            self._require_open(conn, txn_id)
            conn.execute(update(txns).where(txns.c.txn_id == txn_id).values(last_heartbeat=int(time.time())))

    def commit_txn(self, txn_id: int) -> int:
        """Commit; the COMMIT_TXN event names every write id and file the txn wrote. Returns its event id."""
        with self.events.transaction() as tx:
            self._require_open(tx.conn, txn_id, lock=True)
            write_ids = self._write_ids_of(tx.conn, txn_id)
            writes = [
                {
                    "db": row.db_name,
                    "table": row.tbl_name,
                    "partition": row.part_name,
                    "write_id": row.write_id,
                    "files": json.loads(row.files),
                }
                for row in tx.conn.execute(
                    select(txn_write_notifications)
                    .where(txn_write_notifications.c.txn_id == txn_id)
                    .order_by(txn_write_notifications.c.id)
                )
            ]
            tx.conn.execute(update(txns).where(txns.c.txn_id == txn_id).values(state=COMMITTED))
            tx.conn.execute(delete(txn_write_notifications).where(txn_write_notifications.c.txn_id == txn_id))
            tx.emit(
                EventType.COMMIT_TXN, None, None, {"txn_id": txn_id, "write_ids": write_ids, "writes": writes}
            )
        return tx.event_ids[-1]

    def abort_txns(self, txn_ids: Sequence[int], *, reason: str = "client") -> None:
        with self.events.transaction() as tx:
            for txn_id in txn_ids:
                self._abort(tx, txn_id, reason)

    def _abort(self, tx: MetastoreTransaction, txn_id: int, reason: str) -> None:
        state = self._state(tx.conn, txn_id, lock=True)
        if state == ABORTED:
            return  # aborting twice is harmless (timeouts race with clients)
        if state != OPEN:
            raise TxnNotOpenError(txn_id, STATE_NAMES[state])
        write_ids = self._write_ids_of(tx.conn, txn_id)
        tx.conn.execute(update(txns).where(txns.c.txn_id == txn_id).values(state=ABORTED))
        tx.conn.execute(delete(txn_write_notifications).where(txn_write_notifications.c.txn_id == txn_id))
        tx.emit(EventType.ABORT_TXN, None, None, {"txn_id": txn_id, "write_ids": write_ids, "reason": reason})

    def abort_timed_out(self, now: float | None = None) -> list[int]:
        """Abort open txns without a heartbeat for the timeout (Hive's AcidHouseKeeperService)."""
        cutoff = int((time.time() if now is None else now) - self.timeout_seconds)
        with self.events.reader() as conn:
            stale = list(
                conn.execute(
                    select(txns.c.txn_id).where(txns.c.state == OPEN, txns.c.last_heartbeat < cutoff)
                ).scalars()
            )
        if stale:
            with self.events.transaction() as tx:
                for txn_id in stale:
                    if self._state(tx.conn, txn_id, lock=True) == OPEN:
                        self._abort(tx, txn_id, "timeout")
        return stale

    # -- write ids ------------------------------------------------------------------------------------
    def allocate_table_write_ids(
        self, txn_ids: Sequence[int], db_name: str, table_name: str
    ) -> list[TxnToWriteId]:
        """One write id per txn for the table (the same one again if the txn already has one)."""
        table = self.catalog.get_table(db_name, table_name)
        if not table.is_transactional:
            raise InvalidObjectError(
                f"table '{table.qualified_name}' is not transactional; set TBLPROPERTIES('transactional'='true')"
            )
        out: list[TxnToWriteId] = []
        allocated: list[TxnToWriteId] = []
        with self.events.transaction() as tx:
            # Lock the table row: the first allocation for a table inserts its counter row, and two first
            # allocations at once would otherwise both insert it.
            self.catalog._load_table(tx.conn, table.db_name, table.table_name, for_update=True)
            key = (next_write_id.c.db_name == table.db_name) & (next_write_id.c.tbl_name == table.table_name)
            next_id = tx.conn.execute(
                select(next_write_id.c.next_write_id).where(key).with_for_update()
            ).scalar()
            if next_id is None:
                next_id = 1
                tx.conn.execute(
                    insert(next_write_id).values(
                        db_name=table.db_name, tbl_name=table.table_name, next_write_id=1
                    )
                )
            for txn_id in txn_ids:
                self._require_open(tx.conn, txn_id, lock=True)
                existing = tx.conn.execute(
                    select(txn_to_write_id.c.write_id).where(
                        txn_to_write_id.c.txn_id == txn_id,
                        txn_to_write_id.c.db_name == table.db_name,
                        txn_to_write_id.c.tbl_name == table.table_name,
                    )
                ).scalar()
                if existing is not None:
                    out.append(TxnToWriteId(txn_id, existing))
                    continue
                tx.conn.execute(
                    insert(txn_to_write_id).values(
                        db_name=table.db_name, tbl_name=table.table_name, write_id=next_id, txn_id=txn_id
                    )
                )
                allocated.append(TxnToWriteId(txn_id, next_id))
                out.append(allocated[-1])
                next_id += 1
            tx.conn.execute(update(next_write_id).where(key).values(next_write_id=next_id))
            if allocated:
                tx.emit(
                    EventType.ALLOC_WRITE_ID,
                    table.db_name,
                    table.table_name,
                    {
                        "db": table.db_name,
                        "table": table.table_name,
                        "txn_to_write_ids": [{"txn_id": p.txn_id, "write_id": p.write_id} for p in allocated],
                    },
                )
        return out

    def add_write_notification(
        self,
        txn_id: int,
        write_id: int,
        db_name: str,
        table_name: str,
        partition_values: Sequence[str] | None,
        files: Sequence[str],
    ) -> None:
        """Record files written under a write id (ACID_WRITE event); COMMIT_TXN will list them again.

        The table's (and partition's) write id is advanced in the same transaction, which the metadata
        cache uses to tell which snapshot an entry belongs to.
        """
        table = self.catalog.get_table(db_name, table_name)
        partition = (
            self.catalog.get_partition(db_name, table_name, partition_values) if partition_values else None
        )
        part_name = make_partition_name(table.partition_key_names, partition.values) if partition else None
        if table.partition_keys and partition is None:
            raise InvalidObjectError(
                f"table '{table.qualified_name}' is partitioned; name the partition written"
            )
        with self.events.transaction() as tx:
            self._require_open(tx.conn, txn_id, lock=True)
            owner = tx.conn.execute(
                select(txn_to_write_id.c.txn_id).where(
                    txn_to_write_id.c.db_name == table.db_name,
                    txn_to_write_id.c.tbl_name == table.table_name,
                    txn_to_write_id.c.write_id == write_id,
                )
            ).scalar()
            if owner != txn_id:
                raise InvalidObjectError(
                    f"write id {write_id} of '{table.qualified_name}' does not belong to txn {txn_id}; "
                    "allocate it with allocate_table_write_ids in this txn"
                )
            tx.conn.execute(
                insert(txn_write_notifications).values(
                    txn_id=txn_id,
                    write_id=write_id,
                    db_name=table.db_name,
                    tbl_name=table.table_name,
                    part_name=part_name,
                    files=json.dumps(list(files)),
                )
            )
            tx.conn.execute(update(tbls).where(tbls.c.tbl_id == table.id).values(write_id=write_id))
            if part_name is not None:
                tx.conn.execute(
                    update(partitions)
                    .where(partitions.c.tbl_id == table.id, partitions.c.part_name == part_name)
                    .values(write_id=write_id)
                )
            tx.emit(
                EventType.ACID_WRITE,
                table.db_name,
                table.table_name,
                {
                    "txn_id": txn_id,
                    "write_id": write_id,
                    "table": table.model_dump(mode="json"),
                    "partition": partition.model_dump(mode="json") if partition else None,
                    "files": list(files),
                },
            )

    # -- snapshots ------------------------------------------------------------------------------------
    def get_valid_txns(self) -> ValidTxnList:
        """The global snapshot: every txn up to the high watermark is valid unless open or aborted."""
        with self.events.reader() as conn:
            hwm = (
                conn.execute(select(txn_sequence.c.next_txn_id).where(txn_sequence.c.id == 1)).scalar_one()
                - 1
            )
            rows = conn.execute(  # txns opened after the watermark was read are not part of this snapshot
                select(txns.c.txn_id, txns.c.state).where(txns.c.state != COMMITTED, txns.c.txn_id <= hwm)
            ).all()
        return ValidTxnList(
            hwm,
            frozenset(r.txn_id for r in rows if r.state == OPEN),
            frozenset(r.txn_id for r in rows if r.state == ABORTED),
        )

    def get_valid_write_ids(
        self, full_table_names: Sequence[str], valid_txns: ValidTxnList | None = None
    ) -> list[TableWriteIds]:
        """Each table's ValidWriteIdList as seen by a reader holding ``valid_txns`` (default: now).

        The write-id high watermark is the highest write id of a txn at or below the txn high watermark;
        a write id is an exception when its txn is open or aborted in the snapshot or above its watermark.
        """
        snapshot = valid_txns or self.get_valid_txns()
        out: list[TableWriteIds] = []
        with self.events.reader() as conn:
            for full_name in full_table_names:
                db_name, _, table_name = full_name.lower().partition(".")
                if not table_name:
                    raise InvalidObjectError(f"table name '{full_name}' must be 'db.table'")
                table_id, _ = self.catalog._load_table(conn, db_name, table_name)
                out.append(
                    TableWriteIds(table_id, self._table_write_ids(conn, db_name, table_name, snapshot))
                )
        return out

    def _table_write_ids(
        self, conn: Connection, db_name: str, table_name: str, snapshot: ValidTxnList
    ) -> ValidWriteIdList:
        t2w = txn_to_write_id
        invalid_txns = set(snapshot.open_txns) | set(snapshot.aborted_txns)
        # The watermark first: a write id allocated after it is above it and ignored; read the other way
        # round, an id allocated in between would count as committed while its txn is still open.
        hwm = (
            conn.execute(
                select(func.max(t2w.c.write_id)).where(
                    t2w.c.db_name == db_name,
                    t2w.c.tbl_name == table_name,
                    t2w.c.txn_id <= snapshot.high_watermark,
                )
            ).scalar()
            or 0
        )
        candidates = conn.execute(
            select(t2w.c.write_id, t2w.c.txn_id)
            .join(txns, txns.c.txn_id == t2w.c.txn_id)
            .where(
                t2w.c.db_name == db_name,
                t2w.c.tbl_name == table_name,
                or_(
                    txns.c.state != COMMITTED,
                    t2w.c.txn_id > snapshot.high_watermark,
                    t2w.c.txn_id.in_(sorted(snapshot.open_txns)) if snapshot.open_txns else false(),
                ),
            )
        ).all()
        open_ids: set[int] = set()
        aborted_ids: set[int] = set()
        for row in candidates:
            if row.write_id > hwm:
                continue
            if row.txn_id in snapshot.aborted_txns:
                aborted_ids.add(row.write_id)
            elif row.txn_id in invalid_txns or row.txn_id > snapshot.high_watermark:
                open_ids.add(row.write_id)
        return ValidWriteIdList(f"{db_name}.{table_name}", hwm, frozenset(open_ids), frozenset(aborted_ids))

    def txn_state(self, txn_id: int) -> str:
        with self.events.reader() as conn:
            return STATE_NAMES[self._state(conn, txn_id)]

    def write_ids_of_txn(self, txn_id: int) -> list[dict[str, object]]:
        with self.events.reader() as conn:
            return self._write_ids_of(conn, txn_id)

    def txn_write_id(self, txn_id: int, db_name: str, table_name: str) -> int | None:
        """The write id ``txn_id`` holds on the table, or None (read-only; the metadata cache's writers
        check it before changing anything on a txn's behalf)."""
        t2w = txn_to_write_id
        with self.events.reader() as conn:
            return conn.execute(
                select(t2w.c.write_id).where(
                    t2w.c.txn_id == txn_id,
                    t2w.c.db_name == db_name.lower(),
                    t2w.c.tbl_name == table_name.lower(),
                )
            ).scalar()

    # -- helpers --------------------------------------------------------------------------------------
    @staticmethod
    def _state(conn: Connection, txn_id: int, *, lock: bool = False) -> str:
        query = select(txns.c.state).where(txns.c.txn_id == txn_id)
        state = conn.execute(query.with_for_update() if lock else query).scalar()
        if state is None:
            raise NoSuchTxnError(txn_id)
        return state

    def _require_open(self, conn: Connection, txn_id: int, *, lock: bool = False) -> None:
        state = self._state(conn, txn_id, lock=lock)
        if state == ABORTED:
            raise TxnAbortedError(txn_id)
        if state != OPEN:
            raise TxnNotOpenError(txn_id, STATE_NAMES[state])

    @staticmethod
    def _write_ids_of(conn: Connection, txn_id: int) -> list[dict[str, object]]:
        rows = conn.execute(
            select(txn_to_write_id.c.db_name, txn_to_write_id.c.tbl_name, txn_to_write_id.c.write_id)
            .where(txn_to_write_id.c.txn_id == txn_id)
            .order_by(txn_to_write_id.c.db_name, txn_to_write_id.c.tbl_name)
        )
        return [{"db": r.db_name, "table": r.tbl_name, "write_id": r.write_id} for r in rows]
