"""The compaction initiator: queues a major compaction of each insert-only location with too many deltas.

Hive's initiator counts the deltas a reader would open above the current base; past
``hive.compactor.delta.num.threshold`` it queues a compaction. Here the count is of committed deltas above
the newest valid base (``compaction_delta_threshold``), so aborted writes' directories, which no reader opens,
do not trigger one. A location with a compaction already queued, working or waiting for its cleaner is
skipped; rows left ``working`` by a killed worker are requeued first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hmsrepl.acid.compaction_queue import CompactionQueue, now_ms
from hmsrepl.acid.directories import DirKind, parse_directory_name, visible_directories
from hmsrepl.acid.insert_only import InsertOnlyReader
from hmsrepl.acid.layout import entries, locations
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.service import Metastore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Candidate:
    db_name: str
    table_name: str
    part_name: str | None
    deltas: int
    compaction_id: int | None
    """The queued row, or ``None`` when one was queued already."""


def insert_only_tables(metastore: Metastore, db_name: str | None = None) -> list[Table]:
    catalog = metastore.catalog
    out: list[Table] = []
    for db in [db_name] if db_name else catalog.get_databases():
        names = catalog.get_tables(db)
        out.extend(table for table in catalog.get_table_objects(db, names) if table.is_insert_only)
    return out


def visible_delta_count(reader: InsertOnlyReader, location: str) -> int:
    """Deltas ``reader``'s snapshot opens in ``location`` (what a compaction would save)."""
    names = visible_directories(
        entries(reader.metastore.cm.files, location), reader.valid_write_ids, valid_txns=reader.valid_txns
    )
    return sum(
        1 for name in names if (p := parse_directory_name(name)) is not None and p.kind is DirKind.DELTA
    )


class Initiator:
    def __init__(self, metastore: Metastore, *, delta_threshold: int | None = None) -> None:
        self.metastore = metastore
        self.queue = CompactionQueue(metastore.events)
        config_threshold = metastore.config.compaction_delta_threshold
        self.delta_threshold = config_threshold if delta_threshold is None else delta_threshold

    def run(self, tables: list[Table] | None = None, *, force: bool = False) -> list[Candidate]:
        """Queue compactions of the locations of ``tables`` (default: every insert-only table) above the
        threshold, or with ``force`` every location with at least one delta; returns what qualified."""
        stale = now_ms() - self.metastore.txns.timeout_seconds * 1000
        requeued = self.queue.reclaim_abandoned(stale)
        if requeued:
            log.warning("requeued compactions %s: their workers stopped", requeued)
        out: list[Candidate] = []
        for table in insert_only_tables(self.metastore) if tables is None else tables:
            reader = InsertOnlyReader(self.metastore, table.db_name, table.table_name)
            for part_name, location in locations(self.metastore, table):
                count = visible_delta_count(reader, location)
                if count == 0 or (not force and count <= self.delta_threshold):
                    continue
                queued = self.queue.enqueue(table.db_name, table.table_name, part_name)
                out.append(Candidate(table.db_name, table.table_name, part_name, count, queued))
        return out
