"""Purging the compaction queue's history, as Hive's housekeeping purges COMPLETED_COMPACTIONS.

Ended rows are kept for ``show_compact`` and ``hmsrepl compact --show``, but a table compacted every few
minutes would add rows forever. Per table or partition location, newest first, the pass keeps the last
``succeeded`` (Hive's ``hive.compactor.history.retention.succeeded``, 3), ``failed`` (``.failed``, 3),
``did not initiate`` (``.did.not.initiate``, formerly ``.attempted``, 2) and ``refused`` (Hive 4's
``.refused``, 3) rows and deletes the older ones. Hive 4 also bounds them in time
(``metastore.compactor.history.retention.timeout``, 7 days): a failed, not initiated or refused row older
than that goes once a later compaction of its location succeeded, since that success says more about the
location than the old failure does.

Rows of active states (initiated, working, ready for cleaning) are never touched: they are work, not
history.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import delete, select

from hmsrepl.acid.compaction_queue import DID_NOT_INITIATE, FAILED, REFUSED, SUCCEEDED, now_ms
from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore.eventlog import EventLog
from hmsrepl.metastore.schema import compaction_queue

ENDED_STATES = (SUCCEEDED, FAILED, DID_NOT_INITIATE, REFUSED)
_DELETE_CHUNK = 500


@dataclass(frozen=True)
class HistoryRetention:
    """How many ended rows of each state a location keeps, and how long failures outlive a success."""

    succeeded: int = 3
    failed: int = 3
    did_not_initiate: int = 2
    refused: int = 3
    timeout_seconds: float = 7 * 24 * 3600

    @classmethod
    def of(cls, config: MetastoreConfig) -> HistoryRetention:
        return cls(
            succeeded=config.compaction_history_retention_succeeded,
            failed=config.compaction_history_retention_failed,
            did_not_initiate=config.compaction_history_retention_did_not_initiate,
            refused=config.compaction_history_retention_refused,
            timeout_seconds=config.compaction_history_retention_timeout_seconds,
        )

    def keeps(self, state: str) -> int:
        return {
            SUCCEEDED: self.succeeded,
            FAILED: self.failed,
            DID_NOT_INITIATE: self.did_not_initiate,
            REFUSED: self.refused,
        }[state]


@dataclass(frozen=True)
class HistoryRow:
    id: int
    location: tuple[str, str, str | None]  # db, table, partition (None: the table's own location)
    state: str
    enqueued_at: int


def rows_to_purge(rows: Iterable[HistoryRow], retention: HistoryRetention, now: int) -> list[int]:
    """Ids of the ended rows the retention drops. ``rows``: grouped by location, newest first in each."""
    out: list[int] = []
    location: tuple[str, str, str | None] | None = None
    seen: dict[str, int] = {}
    succeeded_later = False
    too_old = now - int(retention.timeout_seconds * 1000)
    for row in rows:
        if row.location != location:
            location, seen, succeeded_later = row.location, {}, False
        seen[row.state] = seen.get(row.state, 0) + 1
        over = seen[row.state] > retention.keeps(row.state)
        stale = row.state != SUCCEEDED and succeeded_later and row.enqueued_at < too_old
        if over or stale:
            out.append(row.id)
        succeeded_later = succeeded_later or row.state == SUCCEEDED
    return out


def purge_history(events: EventLog, retention: HistoryRetention, *, now: int | None = None) -> int:
    """Delete the ended rows ``retention`` drops; returns how many. Safe to run anywhere, any time: it reads
    and deletes ended rows only, which nothing changes any more."""
    cq = compaction_queue
    query = (
        select(cq.c.id, cq.c.db_name, cq.c.tbl_name, cq.c.part_name, cq.c.state, cq.c.enqueued_at)
        .where(cq.c.state.in_(ENDED_STATES))
        .order_by(cq.c.db_name, cq.c.tbl_name, cq.c.part_name, cq.c.id.desc())
    )
    with events.reader() as conn:
        rows = [
            HistoryRow(r.id, (r.db_name, r.tbl_name, r.part_name), r.state, r.enqueued_at)
            for r in conn.execute(query)
        ]
    doomed = rows_to_purge(rows, retention, now_ms() if now is None else now)
    for start in range(0, len(doomed), _DELETE_CHUNK):
        with events.transaction() as tx:
            chunk = doomed[start : start + _DELETE_CHUNK]
            tx.conn.execute(delete(cq).where(cq.c.id.in_(chunk), cq.c.state.in_(ENDED_STATES)))
    return len(doomed)
