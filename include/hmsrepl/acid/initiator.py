"""The compaction initiator: queues a compaction of each insert-only location with too many deltas, major or
minor as Hive's initiator chooses.

Hive's initiator counts the deltas a reader would open above the current base; past
``hive.compactor.delta.num.threshold`` it queues a compaction. Here the count is of committed deltas above
the newest valid base (``compaction_delta_threshold``), so aborted writes' directories, which no reader opens,
do not trigger one. Its type follows Hive's ``determineCompactionType``: major when there is no base (nor
pre-ACID originals) or when the deltas' bytes exceed ``compaction_delta_pct_threshold`` of the base's (a
rewrite of the base is then worth it), else minor (the deltas are merged, the base stays). Unlike Hive, the
size ratio alone queues nothing: a location below the delta count is left alone, so one large append does not
make every cycle rewrite the base.

A location with a compaction already queued, working or waiting for its cleaner is skipped; rows left
``working`` by a killed worker are requeued first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hmsrepl.acid.compaction_queue import MAJOR, MINOR, CompactionQueue, now_ms
from hmsrepl.acid.directories import DirKind, parse_directory_name, visible_directories
from hmsrepl.acid.insert_only import InsertOnlyReader
from hmsrepl.acid.layout import entries, locations
from hmsrepl.exceptions import StorageError
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.service import Metastore
from hmsrepl.storage.base import is_hidden, relative_to

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Candidate:
    db_name: str
    table_name: str
    part_name: str | None
    deltas: int
    compaction_id: int | None
    """The queued row, or ``None`` when one was queued already."""
    type: str = MAJOR


@dataclass(frozen=True)
class LocationShape:
    """What a reader's snapshot opens in one location, as the initiator weighs it."""

    deltas: int
    delta_bytes: int
    base_bytes: int
    """Bytes of the base and of pre-ACID originals (Hive counts both as the base)."""

    def compaction_type(self, pct_threshold: float) -> str:
        """Hive's choice: major without a base or when the deltas outweigh ``pct_threshold`` of it."""
        if self.base_bytes == 0 or self.delta_bytes / self.base_bytes > pct_threshold:
            return MAJOR
        return MINOR


def insert_only_tables(metastore: Metastore, db_name: str | None = None) -> list[Table]:
    catalog = metastore.catalog
    out: list[Table] = []
    for db in [db_name] if db_name else catalog.get_databases():
        names = catalog.get_tables(db)
        out.extend(table for table in catalog.get_table_objects(db, names) if table.is_insert_only)
    return out


def location_shape(reader: InsertOnlyReader, location: str) -> LocationShape:
    """Deltas ``reader``'s snapshot opens in ``location`` and their bytes, and the bytes of what they sit on."""
    listing = entries(reader.metastore.cm.files, location)
    names = visible_directories(listing, reader.valid_write_ids, valid_txns=reader.valid_txns)
    deltas = delta_bytes = base_bytes = 0
    for name in names:
        size = sum(s.size for s in listing[name] if not is_hidden(relative_to(s.uri, location)))
        parsed = parse_directory_name(name)
        if parsed is not None and parsed.kind is DirKind.DELTA:
            deltas += 1
            delta_bytes += size
        else:
            base_bytes += size
    return LocationShape(deltas, delta_bytes, base_bytes)


def visible_delta_count(reader: InsertOnlyReader, location: str) -> int:
    """Deltas ``reader``'s snapshot opens in ``location`` (what a compaction would save)."""
    return location_shape(reader, location).deltas


class Initiator:
    def __init__(
        self,
        metastore: Metastore,
        *,
        delta_threshold: int | None = None,
        delta_pct_threshold: float | None = None,
    ) -> None:
        self.metastore = metastore
        self.queue = CompactionQueue(metastore.events)
        config = metastore.config
        self.delta_threshold = (
            config.compaction_delta_threshold if delta_threshold is None else delta_threshold
        )
        self.delta_pct_threshold = (
            config.compaction_delta_pct_threshold if delta_pct_threshold is None else delta_pct_threshold
        )

    def run(self, tables: list[Table] | None = None, *, force: bool = False) -> list[Candidate]:
        """Queue compactions of the locations of ``tables`` (default: every insert-only table) above the
        threshold, or with ``force`` a major one of every location with at least one delta; returns what
        qualified."""
        stale = now_ms() - self.metastore.txns.timeout_seconds * 1000
        requeued = self.queue.reclaim_abandoned(stale)
        if requeued:
            log.warning("requeued compactions %s: their workers stopped", requeued)
        out: list[Candidate] = []
        for table in insert_only_tables(self.metastore) if tables is None else tables:
            reader = InsertOnlyReader(self.metastore, table.db_name, table.table_name)
            for part_name, location in locations(self.metastore, table):
                try:
                    shape = location_shape(reader, location)
                except (OSError, StorageError) as exc:  # one unreadable location must not stop the pass
                    log.warning(
                        "cannot examine %s.%s %s: %s", table.db_name, table.table_name, part_name, exc
                    )
                    error = f"cannot list {location}: {type(exc).__name__}: {exc}"
                    self.queue.record_not_initiated(table.db_name, table.table_name, part_name, error)
                    continue
                if shape.deltas == 0 or (not force and shape.deltas <= self.delta_threshold):
                    continue
                type_ = MAJOR if force else shape.compaction_type(self.delta_pct_threshold)
                queued = self.queue.enqueue(table.db_name, table.table_name, part_name, type_)
                out.append(Candidate(table.db_name, table.table_name, part_name, shape.deltas, queued, type_))
        return out
