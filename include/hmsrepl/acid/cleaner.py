"""The cleaner: removes what a compaction's base (or minor delta) made obsolete, once no reader's snapshot can
need it.

Hive's rule: a reader whose snapshot predates the compaction's commit cannot take the new base
(``directories.is_valid_base``) and reads the deltas; such a reader holds a txn opened before the commit,
that is one with an id below the txn high watermark recorded at the commit (``next_txn_id``). So the
cleaner waits until no txn below it is open, plus ``compaction_cleaner_delay_seconds`` for readers that
took a snapshot without a txn (a Spark job listing its files, then reading them).

Obsolete in a compacted location: deltas up to the horizon, older bases, pre-ACID originals (the base
rewrote them all), and directories of compactor txns that aborted (a killed or failed worker); after a minor
compaction, the deltas inside its range. Their files go to cmroot through a recycle intent recorded in the
same DB transaction that marks the compaction ``succeeded``: events that named them (a replica's next load,
a point-in-time restore) still find them, and a kill at any point leaves either the row ``ready for
cleaning`` (redone) or the intent (completed by the housekeeping, or by the next run).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sqlalchemy import func, select

from hmsrepl.acid.compaction_queue import (
    FAILED,
    READY_FOR_CLEANING,
    SUCCEEDED,
    CompactionQueue,
    CompactionRecord,
)
from hmsrepl.acid.directories import DirKind, is_hidden_name, looks_like_acid_name, parse_directory_name
from hmsrepl.acid.layout import entries, location_of
from hmsrepl.faults import fault_point
from hmsrepl.formats.writeids import ValidTxnList
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.schema import txns
from hmsrepl.metastore.service import Metastore
from hmsrepl.metastore.transactions import OPEN
from hmsrepl.storage.base import is_hidden, join_uri, relative_to

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanOutcome:
    record: CompactionRecord
    cleaned: bool
    dirs_removed: int = 0
    files_recycled: int = 0
    message: str = ""


def min_open_txn(metastore: Metastore) -> int | None:
    """The lowest open txn id, any type (a replica's replayed txns hold snapshots as well)."""
    with metastore.events.reader() as conn:
        return conn.execute(select(func.min(txns.c.txn_id)).where(txns.c.state == OPEN)).scalar()


def obsolete_entries(names: list[str], horizon: int, base_dir: str, valid_txns: ValidTxnList) -> list[str]:
    """Entries of a location made obsolete by the compacted base ``base_dir`` at write id ``horizon``.

    Kept: the base itself, anything above the horizon, hidden names, delete deltas (full ACID), and
    directories of compactor txns that are still open (a running compaction). When ``base_dir`` is a minor
    compaction's delta, only the deltas inside its write-id range are obsolete: the base and originals stay.
    """
    output = parse_directory_name(base_dir)
    minor = output is not None and output.kind is DirKind.DELTA
    out = []
    for name in sorted(names):
        if name == base_dir or is_hidden_name(name):
            continue
        parsed = parse_directory_name(name)
        if parsed is None:
            if not looks_like_acid_name(name) and not minor:
                out.append(name)  # a pre-ACID original: the base rewrote it
            continue
        if parsed.kind is DirKind.DELETE_DELTA:
            continue
        if parsed.visibility_txn_id is not None:
            txn = parsed.visibility_txn_id
            if txn in valid_txns.aborted_txns:
                out.append(name)  # a failed or killed compaction's output: never visible
                continue
            if not valid_txns.is_txn_valid(txn):
                continue  # still open: a compaction at work
        if minor:
            assert output is not None
            covered = parsed.kind is DirKind.DELTA and (
                output.min_write_id <= parsed.min_write_id and parsed.max_write_id <= output.max_write_id
            )
        elif parsed.kind is DirKind.BASE:
            covered = parsed.max_write_id < horizon
        else:
            covered = parsed.max_write_id <= horizon
        if covered:
            out.append(name)
    return out


class Cleaner:
    """Cleans every compaction ``ready for cleaning`` whose readers are gone (see the module docstring)."""

    def __init__(self, metastore: Metastore, *, delay_seconds: float | None = None) -> None:
        self.metastore = metastore
        self.queue = CompactionQueue(metastore.events)
        self.delay_seconds = (
            metastore.config.compaction_cleaner_delay_seconds if delay_seconds is None else delay_seconds
        )

    def run_all(
        self, *, db_name: str | None = None, table_name: str | None = None, now: float | None = None
    ) -> list[CleanOutcome]:
        ready = self.queue.records(states=[READY_FOR_CLEANING], db_name=db_name, table_name=table_name)
        return [self.clean(record, now=now) for record in ready]

    def blocked_by(self, record: CompactionRecord, now: float | None = None) -> str | None:
        """Why ``record`` cannot be cleaned yet, or ``None`` when it can."""
        lowest = min_open_txn(self.metastore)
        if lowest is not None and record.next_txn_id is not None and lowest < record.next_txn_id:
            return f"txn {lowest}, opened before the compaction committed, is still open"
        current = time.time() if now is None else now
        if record.ended_at is not None and current * 1000 < record.ended_at + self.delay_seconds * 1000:
            return f"within compaction_cleaner_delay_seconds ({self.delay_seconds:g}) of the compaction"
        return None

    def clean(self, record: CompactionRecord, *, now: float | None = None) -> CleanOutcome:
        blocked = self.blocked_by(record, now)
        if blocked is not None:
            return CleanOutcome(record, False, message=f"not yet: {blocked}")
        metastore = self.metastore
        try:
            table = metastore.catalog.get_table(record.db_name, record.table_name)
            location = location_of(metastore, table, record.part_name)
        except Exception as exc:  # the table or partition was dropped: its files went with it
            self.queue.finish(record.id, FAILED, f"not cleaned: {type(exc).__name__}: {exc}")
            return CleanOutcome(record, False, message=str(exc))
        listing = entries(metastore.cm.files, location)
        assert record.base_dir is not None and record.highest_write_id is not None
        if record.base_dir not in listing:
            message = f"base '{record.base_dir}' is missing from '{location}'; nothing was removed"
            self.queue.finish(record.id, FAILED, message)
            return CleanOutcome(record, False, message=message)
        valid_txns = metastore.txns.get_valid_txns()
        obsolete = obsolete_entries(list(listing), record.highest_write_id, record.base_dir, valid_txns)
        statuses = [
            status
            for name in obsolete
            for status in listing[name]
            if not is_hidden(relative_to(status.uri, location))  # markers go with their directory
        ]
        files = describe_files(location, metastore.cm, statuses)
        dirs = [join_uri(location, name) for name in obsolete if parse_directory_name(name) is not None]
        fault_point("compaction_cleaner_before_commit")
        with metastore.events.transaction() as tx:
            metastore.catalog.intents.recycle(tx, files, dirs)
            self.queue.finish(record.id, SUCCEEDED, conn=tx.conn)
        log.info("cleaned %s: %d directories, %d files to cmroot", record.target, len(obsolete), len(files))
        return CleanOutcome(record, True, len(obsolete), len(files), f"{len(obsolete)} entries removed")
