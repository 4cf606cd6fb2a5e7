"""Housekeeping of aborted writes to insert-only tables (the part of Hive's cleaner and AcidHouseKeeperService
that deals with aborted txns): their files go to cmroot, then their write-id rows and txns are purged.

An aborted write's directory is never read, but it stays on disk, and its write id and txn are listed as
aborted in every snapshot, forever. Here, once the txn has been silent for the txn timeout (so a writer
whose txn was aborted under it has stopped writing), its directories are recycled through an intent (as
drops are); on a later look, when no directory of such a write id is left in any location of its table,
its ``txn_to_write_id`` row is deleted (the id then reads as committed: there is nothing to read, and the
table's high watermark and next write id do not move, so the replica's write ids stay equal), and an aborted
txn holding no write id any more is deleted too. Txns of compactions are kept: a failed compaction's output
is named after its txn, which must stay aborted until the cleaner removed that output.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sqlalchemy import and_, delete, func, select

from hmsrepl.acid.compactor import COMPACTION_TXN_TYPE
from hmsrepl.acid.directories import DirKind, parse_directory_name
from hmsrepl.acid.initiator import insert_only_tables
from hmsrepl.acid.layout import entries, locations
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.schema import txn_to_write_id, txns
from hmsrepl.metastore.service import Metastore
from hmsrepl.metastore.transactions import ABORTED
from hmsrepl.storage.base import is_hidden, join_uri, relative_to

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AbortedCleanReport:
    dirs_recycled: int
    write_ids_purged: int
    txns_purged: int


def _aborted_write_ids(metastore: Metastore, table: Table, silent_before: int) -> set[int]:
    t2w = txn_to_write_id
    with metastore.events.reader() as conn:
        return set(
            conn.execute(
                select(t2w.c.write_id)
                .join(txns, txns.c.txn_id == t2w.c.txn_id)
                .where(
                    t2w.c.db_name == table.db_name,
                    t2w.c.tbl_name == table.table_name,
                    txns.c.state == ABORTED,
                    txns.c.last_heartbeat < silent_before,
                )
            ).scalars()
        )


def _aborted_dirs(names: list[str], aborted: set[int]) -> list[str]:
    """Deltas and overwrite bases written under aborted write ids only (a compactor's output is the
    compaction cleaner's)."""
    out = []
    for name in names:
        parsed = parse_directory_name(name)
        if parsed is None or parsed.visibility_txn_id is not None or parsed.kind is DirKind.DELETE_DELTA:
            continue
        if all(w in aborted for w in range(parsed.min_write_id, parsed.max_write_id + 1)):
            out.append(name)
    return out


def clean_aborted(
    metastore: Metastore, tables: list[Table] | None = None, *, now: float | None = None
) -> AbortedCleanReport:
    """Recycle aborted writes' directories and purge what no longer has any (see the module docstring)."""
    silent_before = int((time.time() if now is None else now) - metastore.txns.timeout_seconds)
    recycled = purged_ids = 0
    for table in insert_only_tables(metastore) if tables is None else tables:
        aborted = _aborted_write_ids(metastore, table, silent_before)
        if not aborted:
            continue
        remaining: set[int] = set()
        for _, location in locations(metastore, table):
            listing = entries(metastore.cm.files, location)
            names = _aborted_dirs(list(listing), aborted)
            if not names:
                continue
            statuses = [s for n in names for s in listing[n] if not is_hidden(relative_to(s.uri, location))]
            files = describe_files(location, metastore.cm, statuses)
            with metastore.events.transaction() as tx:
                metastore.catalog.intents.recycle(tx, files, [join_uri(location, n) for n in names])
            recycled += len(names)
            left = _aborted_dirs(
                list(entries(metastore.cm.files, location)), aborted
            )  # the intent ran at the commit
            for name in left:
                parsed = parse_directory_name(name)
                if parsed is not None:
                    remaining.update(range(parsed.min_write_id, parsed.max_write_id + 1))
        purged_ids += _purge_write_ids(metastore, table, aborted - remaining)
    txns_purged = _purge_empty_aborted_txns(metastore, silent_before)
    if recycled or purged_ids or txns_purged:
        log.info(
            "aborted writes: %d directories recycled, %d write ids and %d txns purged",
            recycled,
            purged_ids,
            txns_purged,
        )
    return AbortedCleanReport(recycled, purged_ids, txns_purged)


def _purge_write_ids(metastore: Metastore, table: Table, write_ids: set[int]) -> int:
    """Delete the rows of ``write_ids`` below the table's highest allocated one (which fixes its watermark)."""
    if not write_ids:
        return 0
    t2w = txn_to_write_id
    key = and_(t2w.c.db_name == table.db_name, t2w.c.tbl_name == table.table_name)
    with metastore.events.transaction() as tx:
        highest = tx.conn.execute(select(func.max(t2w.c.write_id)).where(key)).scalar() or 0
        doomed = sorted(w for w in write_ids if w < highest)
        for start in range(0, len(doomed), 500):
            tx.conn.execute(delete(t2w).where(key, t2w.c.write_id.in_(doomed[start : start + 500])))
    return len(doomed)


def _purge_empty_aborted_txns(metastore: Metastore, silent_before: int) -> int:
    """Delete aborted txns (not compactions') that hold no write id any more: snapshots stop listing them."""
    t2w = txn_to_write_id
    with metastore.events.transaction() as tx:
        holding = select(t2w.c.txn_id).where(t2w.c.txn_id == txns.c.txn_id).exists()
        doomed = list(
            tx.conn.execute(
                select(txns.c.txn_id).where(
                    txns.c.state == ABORTED,
                    txns.c.txn_type != COMPACTION_TXN_TYPE,
                    txns.c.last_heartbeat < silent_before,
                    ~holding,
                )
            ).scalars()
        )
        for start in range(0, len(doomed), 500):
            tx.conn.execute(delete(txns).where(txns.c.txn_id.in_(doomed[start : start + 500])))
    return len(doomed)
