"""The compaction worker: a major compaction of one insert-only location into ``base_<horizon>_v<txn>``, or a
minor one of its deltas above the base into ``delta_<min>_<max>_v<txn>`` (the base stays as it is).

Hive's rule, kept here: the compaction runs in a txn of its own (type ``compaction``); its horizon is the
highest write id below which no write id is open in that txn's snapshot (below the table's lowest open
write id), so every id up to it is committed or aborted for good and the rows of the committed ones can be
read once and written as a base. The base is named with the worker's txn as visibility suffix: readers take
it only once that txn committed, so a killed or failed compaction leaves a directory nobody reads. Readers
whose snapshot predates the commit cannot take the base either (``directories.is_valid_base``) and keep
reading the deltas, which the cleaner removes only once no such reader can exist.

The commit allocates no write id and names no files (its COMMIT_TXN event carries no writes), so a replica
copies nothing: its deltas stay and it compacts on its own schedule, with the same write ids.

How rows are rewritten is the ``Rewriter``'s job: ``copy_rewriter`` (format-agnostic: the files themselves,
fewer directories) or ``hmsrepl.acid.spark.spark_rewriter`` (reads and writes the table's format with
Spark, fewer files).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import select

from hmsrepl.acid.compaction_queue import FAILED, MINOR, REFUSED, CompactionQueue, CompactionRecord
from hmsrepl.acid.directories import (
    DirKind,
    ParsedDirectory,
    compacted_base_dir_name,
    compacted_delta_dir_name,
    parse_directory_name,
    visible_directories,
)
from hmsrepl.acid.insert_only import _Heartbeat, require_insert_only
from hmsrepl.acid.layout import entries, location_of
from hmsrepl.faults import fault_point
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.schema import txn_sequence
from hmsrepl.metastore.service import Metastore
from hmsrepl.storage.base import base_name, is_hidden, join_uri, relative_to
from hmsrepl.storage.rooted import RootedFileSystem

log = logging.getLogger(__name__)

COMPACTION_TXN_TYPE = "compaction"
"""Type of the worker's txns (Hive's TxnType.COMPACTION)."""

ACID_METADATA_FILE = "_metadata_acid"
ACID_METADATA = b'{"thisFileFormat":"0","dataFormat":"compacted"}'
"""What Hive's compactor writes into the bases it makes (``AcidUtils.MetaDataFile``)."""

Rewriter = Callable[[Table, Sequence[str], str, RootedFileSystem], None]
"""``(table, input file URIs in read order, target directory URI)``: write the inputs' rows into the target."""


@dataclass(frozen=True)
class CompactionOutcome:
    record: CompactionRecord
    state: str
    base_dir: str | None = None
    input_dirs: int = 0
    input_files: int = 0
    message: str = ""


def copy_rewriter(table: Table, inputs: Sequence[str], target: str, fs: RootedFileSystem) -> None:
    """Copy each input file into the base, named after its directory (``delta_..._0000-part-0``), verified.

    Any format stays readable (an insert-only reader reads every file of the base), and readers list one
    directory instead of hundreds; the file count stays. Use the Spark rewriter to merge files. ``fs``: the
    metastore's roots (an input or target outside them is refused).
    """
    for uri in inputs:
        parent = base_name(uri.rsplit("/", 1)[0])
        fs.copy_file(uri, join_uri(target, f"{parent}-{base_name(uri)}"))


def compaction_horizon(write_ids: ValidWriteIdList) -> int:
    """Highest write id with no open write id at or below it (0: nothing can be compacted yet)."""
    return min(write_ids.high_watermark, write_ids.min_open_write_id - 1)


class Worker:
    """Runs queued compactions: claim, compact in a txn, commit (or abort and record the error)."""

    def __init__(
        self, metastore: Metastore, rewriter: Rewriter = copy_rewriter, *, name: str | None = None
    ) -> None:
        self.metastore = metastore
        self.queue = CompactionQueue(metastore.events)
        self.rewriter = rewriter
        self.name = name or socket.gethostname()

    def run_all(
        self, *, db_name: str | None = None, table_name: str | None = None
    ) -> list[CompactionOutcome]:
        """Compact every claimable queued location (of one table if named); failures are recorded, not raised."""
        outcomes: list[CompactionOutcome] = []
        while (record := self.queue.claim(self.name, db_name=db_name, table_name=table_name)) is not None:
            outcomes.append(self.compact(record))
        return outcomes

    def compact(self, record: CompactionRecord) -> CompactionOutcome:
        """Compact one claimed location; the row ends ``ready for cleaning``, ``refused`` or ``failed``."""
        txns = self.metastore.txns
        try:
            table = self.metastore.catalog.get_table(record.db_name, record.table_name)
            require_insert_only(table, "compact")
            location = location_of(self.metastore, table, record.part_name)
        except Exception as exc:
            self.queue.finish(record.id, FAILED, f"{type(exc).__name__}: {exc}")
            return CompactionOutcome(record, FAILED, message=str(exc))
        [txn_id] = txns.open_txns(1, user="hive", host=self.name, txn_type=COMPACTION_TXN_TYPE)
        self.queue.set_txn(record.id, txn_id)
        heartbeat = _Heartbeat(self.metastore, txn_id, max(txns.timeout_seconds / 3, 1.0))
        try:
            outcome = self._compact_in_txn(record, table, location, txn_id, heartbeat)
        except Exception as exc:
            heartbeat.stop()
            log.warning("compaction of %s failed: %s", record.target, exc)
            try:
                txns.abort_txns([txn_id], reason=f"compaction failed: {exc}"[:200])
            finally:
                self.queue.finish(record.id, FAILED, f"{type(exc).__name__}: {exc}")
            return CompactionOutcome(record, FAILED, message=str(exc))
        return outcome

    def _compact_in_txn(
        self, record: CompactionRecord, table: Table, location: str, txn_id: int, heartbeat: _Heartbeat
    ) -> CompactionOutcome:
        txns = self.metastore.txns
        valid_txns = txns.get_valid_txns()
        [entry] = txns.get_valid_write_ids([table.qualified_name], valid_txns)
        write_ids = entry.write_ids
        horizon = compaction_horizon(write_ids)
        listing = entries(self.metastore.cm.files, location)
        chosen: list[str] = []
        if horizon >= 1:
            capped = ValidWriteIdList(
                table.qualified_name,
                horizon,
                frozenset(),
                frozenset(w for w in write_ids.aborted_write_ids if w <= horizon),
            )
            chosen = visible_directories(listing, capped, valid_txns=valid_txns)
        kinds = [parse_directory_name(name) for name in chosen]
        if any(parsed is not None and parsed.kind is DirKind.DELETE_DELTA for parsed in kinds):
            raise ValueError(f"'{location}' holds delete deltas, which only full ACID tables have")
        if record.type == MINOR:
            chosen, output, reason = _minor_plan(chosen, txn_id, horizon)
        else:
            output = compacted_base_dir_name(horizon, txn_id)
            reason = None
            if not chosen:
                reason = f"nothing to compact: horizon {horizon}, nothing visible"
            elif len(chosen) == 1 and kinds[0] is not None and kinds[0].kind is DirKind.BASE:
                reason = f"nothing to compact: no committed delta at or below write id {horizon}"
        if reason is not None:
            heartbeat.stop()
            txns.commit_txn(txn_id)
            self.queue.finish(record.id, REFUSED, reason)
            return CompactionOutcome(record, REFUSED, message=reason)
        inputs = [
            status.uri
            for name in chosen
            for status in sorted(listing[name], key=lambda s: s.uri)
            if not is_hidden(relative_to(status.uri, location))
        ]
        base = output
        target = join_uri(location, base)
        fs = self.metastore.cm.files
        fs.makedirs(target)
        # Hive's marker of a compactor's base; it also makes the directory show in file listings from the
        # start, so the cleaner finds it even if this worker dies before writing any row.
        fs.write_bytes(join_uri(target, ACID_METADATA_FILE), ACID_METADATA)
        fault_point("compaction_before_rewrite")
        self.rewriter(table, inputs, target, fs)
        fault_point("compaction_before_commit")
        heartbeat.stop()
        with self.metastore.events.transaction() as tx:
            txns.commit_txn(txn_id)
            # Locked: a txn opened from here on gets an id at or above this one and its snapshot sees the base.
            next_txn_id = tx.conn.execute(
                select(txn_sequence.c.next_txn_id).where(txn_sequence.c.id == 1).with_for_update()
            ).scalar_one()
            highest = horizon if record.type != MINOR else _parsed(base).max_write_id
            self.queue.mark_compacted(
                tx.conn, record.id, highest_write_id=highest, next_txn_id=next_txn_id, base_dir=base
            )
        log.info(
            "compacted %s: %d directories, %d files into %s", record.target, len(chosen), len(inputs), base
        )
        state = "ready for cleaning"
        return CompactionOutcome(
            record, state, base, len(chosen), len(inputs), f"{len(chosen)} directories into {base}"
        )


def _parsed(name: str) -> ParsedDirectory:
    parsed = parse_directory_name(name)
    assert parsed is not None  # only names this module made or chose are parsed here
    return parsed


def _minor_plan(chosen: Sequence[str], txn_id: int, horizon: int) -> tuple[list[str], str, str | None]:
    """A minor compaction's inputs (the deltas a reader opens above the base, which stays), its output
    ``delta_<min>_<max>_v<txn>``, and why there is nothing to do, if so.

    It needs deltas of at least two write ids: merging the statements of one write id would give a delta
    with the same range as its inputs, which readers could not tell apart from them.
    """
    deltas = [name for name in chosen if _parsed(name).kind is DirKind.DELTA]
    if not deltas:
        return [], "", f"nothing to compact: no committed delta at or below write id {horizon}"
    low = min(_parsed(name).min_write_id for name in deltas)
    high = max(_parsed(name).max_write_id for name in deltas)
    if low == high or len(deltas) < 2:
        return [], "", f"nothing to merge: the deltas at or below write id {horizon} cover one write id"
    return deltas, compacted_delta_dir_name(low, high, txn_id), None
