"""One pass of compaction housekeeping: cleaner, initiator, worker, cleaner again, then aborted writes and the
queue's history past its retention (what ``hmsrepl compact`` and the compaction DAG run).

Pending file intents are completed first, so a cleaner killed after it committed finishes its recycling
before anything new is decided. Every step is safe to repeat after a kill (see each module).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hmsrepl.acid.aborted import AbortedCleanReport, clean_aborted
from hmsrepl.acid.cleaner import Cleaner, CleanOutcome
from hmsrepl.acid.compaction_history import HistoryRetention, purge_history
from hmsrepl.acid.compactor import CompactionOutcome, Rewriter, Worker, copy_rewriter
from hmsrepl.acid.initiator import Candidate, Initiator
from hmsrepl.acid.insert_only import require_insert_only
from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.service import Metastore


@dataclass
class CycleReport:
    queued: list[Candidate] = field(default_factory=list)
    compacted: list[CompactionOutcome] = field(default_factory=list)
    cleaned: list[CleanOutcome] = field(default_factory=list)
    aborted: AbortedCleanReport | None = None
    history_purged: int = 0  # ended queue rows past their retention (compaction_history)

    @property
    def failed(self) -> list[CompactionOutcome]:
        return [outcome for outcome in self.compacted if outcome.state == "failed"]


def parse_table_name(text: str) -> tuple[str, str]:
    """``db.table`` -> (db, table); anything else is refused with the expected form."""
    db_name, dot, table_name = text.partition(".")
    if not dot or not db_name or not table_name or "." in table_name:
        raise InvalidObjectError(f"table '{text}' must be named as <database>.<table>, e.g. sales.events")
    return db_name.lower(), table_name.lower()


def resolve_table(metastore: Metastore, text: str) -> Table:
    """The insert-only table named ``db.table``; a clear error when it is missing or not insert-only."""
    db_name, table_name = parse_table_name(text)
    table = metastore.catalog.get_table(db_name, table_name)
    require_insert_only(table, "compact")
    return table


def run_cycle(
    metastore: Metastore,
    *,
    table: str | None = None,
    rewriter: Rewriter = copy_rewriter,
    force: bool = False,
    delta_threshold: int | None = None,
    cleaner_delay_seconds: float | None = None,
) -> CycleReport:
    """Queue, compact and clean every insert-only table (or only ``table``, ``db.table``)."""
    db_name = table_name = None
    tables = None
    if table is not None:
        found = resolve_table(metastore, table)
        db_name, table_name, tables = found.db_name, found.table_name, [found]
    metastore.complete_file_intents(lease_seconds=0)
    report = CycleReport()
    cleaner = Cleaner(metastore, delay_seconds=cleaner_delay_seconds)
    # Clean first: a location waiting for its cleaner is not queued again, and its readers may be gone now.
    report.cleaned = cleaner.run_all(db_name=db_name, table_name=table_name)
    report.queued = Initiator(metastore, delta_threshold=delta_threshold).run(tables, force=force)
    report.compacted = Worker(metastore, rewriter).run_all(db_name=db_name, table_name=table_name)
    cleaned_before = {outcome.record.id for outcome in report.cleaned if outcome.cleaned}
    report.cleaned = [
        *[outcome for outcome in report.cleaned if outcome.cleaned],
        *[
            o
            for o in cleaner.run_all(db_name=db_name, table_name=table_name)
            if o.record.id not in cleaned_before
        ],
    ]
    report.aborted = clean_aborted(metastore, tables)
    report.history_purged = purge_history(metastore.events, HistoryRetention.of(metastore.config))
    return report
