"""Transactions and per-table write ids, with Hive's snapshot lists and their notification events.

Txn ids come from a locked sequence row like event ids. A table's write ids are dense per table and are
allocated inside a txn (once per txn and table), which is what lets a replica keep the same write ids as the
source while mapping txn ids. Aborted txns stay recorded so their write ids keep being reported as aborted
in every ValidWriteIdList (their files must stay invisible).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, delete, false, func, insert, or_, select, update

from hmsrepl.exceptions import (
    InvalidObjectError,
    InvalidOperationError,
    NoSuchTxnError,
    TxnAbortedError,
    TxnNotOpenError,
)
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.formats.writeids import ValidTxnList, ValidWriteIdList
from hmsrepl.metastore.catalog import CatalogService
from hmsrepl.metastore.catalog.held import forget_table
from hmsrepl.metastore.eventlog import EventLog, MetastoreTransaction
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.locks import LockService
from hmsrepl.metastore.payloads import (
    AbortTxnBody,
    AcidWriteBody,
    AllocWriteIdBody,
    CommitTxnBody,
    OpenTxnBody,
    PartitionSnapshot,
    TableSnapshot,
    TableWriteId,
    TxnWrite,
    TxnWriteIdPair,
    snapshot_of,
)
from hmsrepl.metastore.schema import (
    next_write_id,
    notification_sequence,
    partitions,
    repl_txn_map,
    tbls,
    txn_sequence,
    txn_to_write_id,
    txn_write_notifications,
    txns,
)

OPEN, COMMITTED, ABORTED = "o", "c", "a"
STATE_NAMES = {OPEN: "open", COMMITTED: "committed", ABORTED: "aborted"}
REPL_CREATED = "repl_created"
"""Type of the txns a replication load opens on a target (Hive's TxnType.REPL_CREATED): they replay a
source txn, live until its COMMIT/ABORT_TXN is loaded (possibly many loads later) and have no client to
heartbeat them, so the timeout housekeeping must leave them alone."""


class ReplicationTxnError(InvalidOperationError):
    """A replicated txn event cannot be replayed on this target (missing map entry, diverged write ids)."""


@dataclass(frozen=True)
class ReplicationSnapshot:
    """The source's txn state at exactly one event id, for a bootstrap dump.

    ``open_txns`` are every txn open at ``event_id``: their OPEN_TXN events lie at or below it, so the
    incremental dumps after the bootstrap will not carry them and the bootstrap must. ``tables`` maps each
    table of the database that has write ids to its ValidWriteIdList and the source txn owning each open
    write id.
    """

    event_id: int
    valid_txns: ValidTxnList
    open_txns: tuple[int, ...]
    tables: dict[str, tuple[ValidWriteIdList, dict[int, int]]]


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
    def open_txns(
        self, count: int = 1, *, user: str = "hive", host: str = "localhost", txn_type: str = "default"
    ) -> list[int]:
        if count < 1:
            raise InvalidObjectError(f"cannot open {count} transactions; ask for at least one")
        with self.events.transaction() as tx:
            ids = self._new_txns(tx.conn, count, OPEN, user, host, txn_type)
            tx.emit(EventType.OPEN_TXN, None, None, OpenTxnBody(txn_ids=ids, user=user, host=host))
        return ids

    @staticmethod
    def _new_txns(conn: Connection, count: int, state: str, user: str, host: str, txn_type: str) -> list[int]:
        now = int(time.time())
        seq = txn_sequence
        first = conn.execute(select(seq.c.next_txn_id).where(seq.c.id == 1).with_for_update()).scalar_one()
        ids = list(range(first, first + count))
        conn.execute(update(seq).where(seq.c.id == 1).values(next_txn_id=first + count))
        conn.execute(
            insert(txns),
            [
                {
                    "txn_id": txn_id,
                    "state": state,
                    "started_at": now,
                    "last_heartbeat": now,
                    "user_name": user,
                    "host_name": host,
                    "txn_type": txn_type,
                }
                for txn_id in ids
            ],
        )
        return ids

    def heartbeat(self, txn_id: int) -> None:
        with self.events.transaction() as tx:
            conn = tx.conn
            self._require_open(conn, txn_id)
            conn.execute(update(txns).where(txns.c.txn_id == txn_id).values(last_heartbeat=int(time.time())))

    def commit_txn(self, txn_id: int) -> int | None:
        """Commit; the COMMIT_TXN event names every write id and file the txn wrote. Returns its event id
        (None inside a caller's open metastore transaction: ids are assigned when that one commits)."""
        with self.events.transaction() as tx:
            self._require_open(tx.conn, txn_id, lock=True)
            write_ids = self._write_ids_of(tx.conn, txn_id)
            writes = [
                TxnWrite(
                    db=row.db_name,
                    table=row.tbl_name,
                    partition=row.part_name,
                    write_id=row.write_id,
                    files=json.loads(row.files),
                )
                for row in tx.conn.execute(
                    select(txn_write_notifications)
                    .where(txn_write_notifications.c.txn_id == txn_id)
                    .order_by(txn_write_notifications.c.id)
                )
            ]
            tx.conn.execute(update(txns).where(txns.c.txn_id == txn_id).values(state=COMMITTED))
            LockService.release_txn_locks(tx.conn, txn_id)
            tx.conn.execute(delete(txn_write_notifications).where(txn_write_notifications.c.txn_id == txn_id))
            tx.emit(
                EventType.COMMIT_TXN,
                None,
                None,
                CommitTxnBody(txn_id=txn_id, write_ids=write_ids, writes=writes),
            )
        return tx.event_ids[-1] if tx.event_ids else None

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
        LockService.release_txn_locks(tx.conn, txn_id)
        tx.conn.execute(delete(txn_write_notifications).where(txn_write_notifications.c.txn_id == txn_id))
        tx.emit(
            EventType.ABORT_TXN, None, None, AbortTxnBody(txn_id=txn_id, write_ids=write_ids, reason=reason)
        )

    def abort_timed_out(self, now: float | None = None) -> list[int]:
        """Abort open txns without a heartbeat for the timeout (Hive's AcidHouseKeeperService)."""
        cutoff = int((time.time() if now is None else now) - self.timeout_seconds)
        with self.events.reader() as conn:
            stale = list(
                conn.execute(
                    select(txns.c.txn_id).where(
                        txns.c.state == OPEN, txns.c.last_heartbeat < cutoff, txns.c.txn_type != REPL_CREATED
                    )
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
            self.catalog.core.load_table(tx.conn, table.db_name, table.table_name, for_update=True)
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
                    AllocWriteIdBody(
                        db=table.db_name,
                        table=table.table_name,
                        txn_to_write_ids=[
                            TxnWriteIdPair(txn_id=p.txn_id, write_id=p.write_id) for p in allocated
                        ],
                    ),
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
            forget_table(tx, table.id or 0)  # a held copy of the row has the old write id
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
                AcidWriteBody(
                    txn_id=txn_id,
                    write_id=write_id,
                    table=snapshot_of(table, TableSnapshot),
                    partition=snapshot_of(partition, PartitionSnapshot) if partition else None,
                    files=list(files),
                ),
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
                table_id, _ = self.catalog.core.load_table(conn, db_name, table_name)
                out.append(
                    TableWriteIds(table_id, self._table_write_ids(conn, db_name, table_name, snapshot))
                )
        return out

    def _table_write_ids(
        self,
        conn: Connection,
        db_name: str,
        table_name: str,
        snapshot: ValidTxnList,
        owners: dict[int, int] | None = None,
    ) -> ValidWriteIdList:
        """``owners``, when given, receives the txn holding each open write id (write id -> txn id)."""
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
                if owners is not None:
                    owners[row.write_id] = row.txn_id
        return ValidWriteIdList(f"{db_name}.{table_name}", hwm, frozenset(open_ids), frozenset(aborted_ids))

    def txn_state(self, txn_id: int) -> str:
        with self.events.reader() as conn:
            return STATE_NAMES[self._state(conn, txn_id)]

    def write_ids_of_txn(self, txn_id: int) -> list[TableWriteId]:
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

    def open_txns_writing(self, db_name: str) -> list[int]:
        """Open txns that hold write ids on a table of ``db_name`` (what a bootstrap dump waits for)."""
        t2w = txn_to_write_id
        with self.events.reader() as conn:
            return list(
                conn.execute(
                    select(txns.c.txn_id)
                    .distinct()
                    .join(t2w, t2w.c.txn_id == txns.c.txn_id)
                    .where(txns.c.state == OPEN, t2w.c.db_name == db_name.lower())
                    .order_by(txns.c.txn_id)
                ).scalars()
            )

    def txn_states(self, txn_ids: Sequence[int]) -> dict[int, str]:
        """State name of each known txn among ``txn_ids`` (one query, for pollers)."""
        if not txn_ids:
            return {}
        with self.events.reader() as conn:
            rows = conn.execute(
                select(txns.c.txn_id, txns.c.state).where(txns.c.txn_id.in_(sorted(set(txn_ids))))
            ).all()
        return {row.txn_id: STATE_NAMES[row.state] for row in rows}

    # -- replication: source side ---------------------------------------------------------------------
    def replication_snapshot(self, db_name: str) -> ReplicationSnapshot:
        """The current event id together with the txn and write-id state as of exactly that event.

        Every change to txns and write ids logs an event, and every writing transaction locks the event
        sequence row as its last step; holding that lock while reading therefore freezes both, on every
        backend, for the few queries this takes.
        """
        db_name = db_name.lower()
        t2w = txn_to_write_id
        with self.events.transaction() as tx:
            seq = notification_sequence
            event_id = (
                tx.conn.execute(
                    select(seq.c.next_event_id).where(seq.c.id == 1).with_for_update()
                ).scalar_one()
                - 1
            )
            valid_txns = self.get_valid_txns()
            names = tx.conn.execute(
                select(t2w.c.tbl_name).distinct().where(t2w.c.db_name == db_name).order_by(t2w.c.tbl_name)
            ).scalars()
            tables: dict[str, tuple[ValidWriteIdList, dict[int, int]]] = {}
            for name in list(names):
                owners: dict[int, int] = {}
                write_ids = self._table_write_ids(tx.conn, db_name, name, valid_txns, owners)
                tables[name] = (write_ids, owners)
        return ReplicationSnapshot(event_id, valid_txns, tuple(sorted(valid_txns.open_txns)), tables)

    # -- replication: target side ---------------------------------------------------------------------
    def repl_txn_map(self, replica_db: str) -> dict[int, int]:
        """Source txn id -> target txn id of every replayed txn of ``replica_db`` still open."""
        m = repl_txn_map
        with self.events.reader() as conn:
            rows = conn.execute(
                select(m.c.src_txn_id, m.c.target_txn_id).where(m.c.replica_db == replica_db.lower())
            )
            return {row[0]: row[1] for row in rows}

    def repl_open_txns(
        self, replica_db: str, src_txn_ids: Sequence[int], *, user: str = "hive", host: str = "localhost"
    ) -> dict[int, int]:
        """Open one target txn per source txn not replayed yet and record the pair; returns the map.

        Source txns already in the map are left alone, so replaying an OPEN_TXN twice opens nothing twice.
        """
        m = repl_txn_map
        replica_db = replica_db.lower()
        with self.events.transaction() as tx:
            known: dict[int, int] = {}
            for start in range(0, len(src_txn_ids), 500):
                chunk = sorted(set(src_txn_ids[start : start + 500]))
                known.update(
                    tx.conn.execute(
                        select(m.c.src_txn_id, m.c.target_txn_id).where(
                            m.c.replica_db == replica_db, m.c.src_txn_id.in_(chunk)
                        )
                    )
                    .tuples()
                    .all()
                )
            missing = sorted({src for src in src_txn_ids if src not in known})
            if missing:
                targets = self.open_txns(len(missing), user=user, host=host, txn_type=REPL_CREATED)
                tx.conn.execute(
                    insert(m),
                    [
                        {"replica_db": replica_db, "src_txn_id": src, "target_txn_id": target}
                        for src, target in zip(missing, targets, strict=True)
                    ],
                )
                known.update(zip(missing, targets, strict=True))
        return {src: known[src] for src in src_txn_ids}

    def repl_target_txn(self, replica_db: str, src_txn_id: int, *, event: str) -> int:
        """The target txn replaying ``src_txn_id``; a clear error naming the txn when there is none."""
        m = repl_txn_map
        with self.events.reader() as conn:
            target: int | None = conn.execute(
                select(m.c.target_txn_id).where(
                    m.c.replica_db == replica_db.lower(), m.c.src_txn_id == src_txn_id
                )
            ).scalar()
        if target is None:
            raise ReplicationTxnError(
                f"{event} names source txn {src_txn_id}, but replica database '{replica_db}' has no open "
                f"target txn for it (no repl_txn_map entry): its OPEN_TXN was never loaded here, or the map "
                "was lost. Nothing was applied; run a bootstrap of this replica"
            )
        return target

    def repl_allocate_write_id(
        self, replica_db: str, src_txn_id: int, db_name: str, table_name: str, write_id: int
    ) -> int:
        """Allocate on the target the write id the source allocated, to the mapped target txn.

        Write ids are what readers and file names use, so they must be the same on both sides; if the
        target's next write id for the table is not the source's, the replica has diverged and replaying on
        would put files under ids that mean something else here: refuse. Returns the target txn.
        """
        db_name, table_name = db_name.lower(), table_name.lower()
        with self.events.transaction() as tx:  # the map is read in the txn that relies on it
            target = self.repl_target_txn(
                replica_db, src_txn_id, event=f"ALLOC_WRITE_ID of '{db_name}.{table_name}'"
            )
            t2w = txn_to_write_id
            held = tx.conn.execute(
                select(t2w.c.write_id).where(
                    t2w.c.txn_id == target, t2w.c.db_name == db_name, t2w.c.tbl_name == table_name
                )
            ).scalar()
            if held == write_id:
                return target
            key = (next_write_id.c.db_name == db_name) & (next_write_id.c.tbl_name == table_name)
            expected = tx.conn.execute(select(next_write_id.c.next_write_id).where(key)).scalar() or 1
            if held is not None or expected != write_id:
                raise ReplicationTxnError(
                    f"cannot replay write id {write_id} of '{db_name}.{table_name}' for source txn {src_txn_id}: "
                    f"the target's next write id for that table is {expected}"
                    + (f" and its txn {target} already holds write id {held}" if held is not None else "")
                    + "; the replica diverged from the source (written outside replication, or events were "
                    "skipped). Nothing was applied; run a bootstrap of this replica"
                )
            self.allocate_table_write_ids([target], db_name, table_name)
        return target

    def repl_close_txn(self, replica_db: str, src_txn_id: int, *, commit: bool) -> int:
        """Commit or abort the target txn replaying ``src_txn_id`` and drop its map entry (one DB txn)."""
        kind = "COMMIT_TXN" if commit else "ABORT_TXN"
        with self.events.transaction() as tx:  # the map is read in the txn that relies on it
            target = self.repl_target_txn(replica_db, src_txn_id, event=kind)
            if commit:
                self.commit_txn(target)
            else:
                self.abort_txns([target], reason=f"replayed abort of source txn {src_txn_id}")
            m = repl_txn_map
            tx.conn.execute(
                delete(m).where(m.c.replica_db == replica_db.lower(), m.c.src_txn_id == src_txn_id)
            )
        return target

    def repl_forget(self, replica_db: str) -> int:
        """Abort every target txn still replaying a source txn of ``replica_db`` and clear its map.

        A re-bootstrap supersedes whatever an earlier replay left open; returns how many were aborted.
        """
        mapping = self.repl_txn_map(replica_db)
        with self.events.transaction() as tx:
            if mapping:
                states = self.txn_states(list(mapping.values()))
                still_open = [t for t in mapping.values() if states.get(t) == "open"]
                if still_open:
                    self.abort_txns(still_open, reason="superseded by a bootstrap of the replica")
            tx.conn.execute(delete(repl_txn_map).where(repl_txn_map.c.replica_db == replica_db.lower()))
        return len(mapping)

    def set_table_write_id_state(
        self, db_name: str, table_name: str, write_ids: ValidWriteIdList, open_owners: Mapping[int, int]
    ) -> None:
        """Make the table's ValidWriteIdList here equal ``write_ids`` (a bootstrap load; Hive's
        replTableWriteIdState): same high watermark, same aborted ids, open ids owned by ``open_owners``'
        (mapped, open) target txns, and the next allocation gets the watermark plus one.

        Committed ids below the watermark need no rows; the watermark needs one (it is computed as the
        highest allocated id), so a committed "bootstrap" txn owns it, and a txn aborted here owns the
        aborted ids, as on the source they stay invalid forever.
        """
        db_name, table_name = db_name.lower(), table_name.lower()
        missing = sorted(set(write_ids.open_write_ids) - set(open_owners))
        if missing:
            raise InvalidObjectError(
                f"write-id state of '{db_name}.{table_name}' has open write ids {missing} without an owning txn"
            )
        t2w = txn_to_write_id
        with self.events.transaction() as tx:
            conn = tx.conn
            for table in (next_write_id, t2w):
                conn.execute(delete(table).where(table.c.db_name == db_name, table.c.tbl_name == table_name))
            hwm = write_ids.high_watermark
            if hwm == 0:
                return
            rows = {w: open_owners[w] for w in write_ids.open_write_ids}
            if write_ids.aborted_write_ids:
                [aborted] = self._new_txns(conn, 1, ABORTED, "hive", "repl-bootstrap", REPL_CREATED)
                rows.update(dict.fromkeys(write_ids.aborted_write_ids, aborted))
            if hwm not in rows:
                [committed] = self._new_txns(conn, 1, COMMITTED, "hive", "repl-bootstrap", REPL_CREATED)
                rows[hwm] = committed
            conn.execute(
                insert(t2w),
                [
                    {"db_name": db_name, "tbl_name": table_name, "write_id": w, "txn_id": t}
                    for w, t in sorted(rows.items())
                ],
            )
            conn.execute(
                insert(next_write_id).values(db_name=db_name, tbl_name=table_name, next_write_id=hwm + 1)
            )

    # -- helpers --------------------------------------------------------------------------------------
    @staticmethod
    def _state(conn: Connection, txn_id: int, *, lock: bool = False) -> str:
        query = select(txns.c.state).where(txns.c.txn_id == txn_id)
        state: str | None = conn.execute(query.with_for_update() if lock else query).scalar()
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
    def _write_ids_of(conn: Connection, txn_id: int) -> list[TableWriteId]:
        rows = conn.execute(
            select(txn_to_write_id.c.db_name, txn_to_write_id.c.tbl_name, txn_to_write_id.c.write_id)
            .where(txn_to_write_id.c.txn_id == txn_id)
            .order_by(txn_to_write_id.c.db_name, txn_to_write_id.c.tbl_name)
        )
        return [TableWriteId(db=r.db_name, table=r.tbl_name, write_id=r.write_id) for r in rows]
