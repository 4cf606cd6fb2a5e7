"""Counters that tell an operator whether the cache pays off and how far behind the log it is.

Misses are counted by reason, because "the cache is behind" (lag; a read after a write), "not cached"
(budget too small), and "no write-id list" (a client that cannot use the cache) call for different fixes.
"""

from __future__ import annotations

import threading
from collections import Counter
from enum import StrEnum
from typing import Any


class MissReason(StrEnum):
    NOT_CACHED = "not_cached"  # never loaded, evicted, or dropped after a rename or a missed event
    TABLE_ID_MISMATCH = "table_id_mismatch"  # the name now belongs to another table (drop+recreate, rename)
    NO_WRITE_ID_LIST = "no_write_id_list"  # a transactional table read without a ValidWriteIdList
    NO_TABLE_ID = "no_table_id"  # a transactional table read without the table id
    UNSETTLED = "unsettled"  # content may hold changes of txns still open
    CACHE_BEHIND = "cache_behind"  # a write the reader must see is not applied yet
    CACHE_NEWER = "cache_newer"  # newer than the reader's snapshot, and the policy is 'equal'
    INCOMPARABLE = "incomparable"  # each side has a commit the other lacks
    PARTITIONS_NOT_CACHED = "partitions_not_cached"  # the table's partitions exceed the budget
    LOCAL_WRITE_PENDING = "local_write_pending"  # eventual read after a write here, not yet applied
    UNSUPPORTED_FILTER = "unsupported_filter"  # a filter the cache cannot evaluate exactly as the database
    OLDER_THAN_SERVED = (
        "older_than_served"  # this instance already answered a newer version (monotonic reads)
    )
    WRITE_NOT_COMMITTED = "write_not_committed"  # an object's write id is not committed in the reader's list


class CacheMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.hits = 0
        self.misses: Counter[str] = Counter()
        self.loaded_tables = 0
        self.load_races = 0  # loads discarded because a write committed while they ran
        self.full_reloads = 0
        self.events_applied = 0
        self.prewarm_seconds: float | None = None

    def hit(self) -> None:
        with self._lock:
            self.hits += 1

    def miss(self, reason: MissReason) -> None:
        with self._lock:
            self.misses[reason.value] += 1

    def snapshot(self, **gauges: Any) -> dict[str, Any]:
        """All counters plus the given gauges, as one JSON-ready dict."""
        with self._lock:
            total = self.hits + sum(self.misses.values())
            return {
                "hits": self.hits,
                "misses": dict(self.misses),
                "hit_ratio": round(self.hits / total, 4) if total else None,
                "loaded_tables": self.loaded_tables,
                "load_races": self.load_races,
                "full_reloads": self.full_reloads,
                "events_applied": self.events_applied,
                "prewarm_seconds": self.prewarm_seconds,
                **gauges,
            }
