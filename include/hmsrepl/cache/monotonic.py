"""Monotonic reads per instance: never answer older than what this instance already answered for an object.

An instance answers a table either from its cache, which shows the log up to the updater's position, or from
the database, which shows the newest committed state. Alternating between the two can go backwards: a read
the database answered (after a local write, a miss, a reader whose list the cache is behind) shows commits
the lagging cache has not applied yet, and the next cache hit would show the older state again (seed 000
promises monotonic reads).

So every answer is placed in the log: a cache answer shows exactly the events up to ``max(position, the
entry's load position)``; a database answer shows at most the events committed when it was read, so the
log's head read right after it bounds it from above. Per object, the highest such position served is kept,
and a cache entry below it is refused (the caller waits briefly for the updater, then reads the database).
Event ids commit in order (the sequence row is locked by every writer), so a position is a prefix of the
log and "not older" is a comparison of two numbers.

The map is bounded: when it is full, the oldest keys are forgotten and their positions folded into one
floor that every forgotten key keeps, so forgetting never allows an older answer, only costs hits until the
updater passes that floor.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

UNKNOWN = 2**62
"""Served position of an answer whose place in the log could not be read: no cache entry is newer."""
DEFAULT_MAX_KEYS = 1_000_000


class ServedPositions:
    """Per key: the newest log position answered (by either path), and the newest the database answered.

    The second matters for transactional tables: the database shows changes of txns still open, which the
    cache holds back until they commit, so after a database answer at position P, an entry still holding a
    change made at or before P is older than that answer.
    """

    def __init__(self, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        self.max_keys = max_keys
        self._served: dict[Hashable, tuple[int, int]] = {}
        self._forgotten = (-1, -1)
        self._lock = threading.Lock()

    def floor(self, key: Hashable) -> int:
        """The newest log position answered for ``key`` so far (-1: none)."""
        return self._served.get(key, self._forgotten)[0]  # a single dict read: atomic, no lock needed

    def database_floor(self, key: Hashable) -> int:
        """The newest log position the database answered for ``key`` (-1: none)."""
        return self._served.get(key, self._forgotten)[1]

    def record(self, key: Hashable, position: int, *, from_database: bool = False) -> None:
        """Note an answer for ``key`` showing the log up to ``position``.

        A database answer also replaces an ``UNKNOWN`` mark: it is newer than anything answered before it.
        """
        with self._lock:
            current = self._served.get(key, self._forgotten)
            if from_database:
                wanted = (
                    position if current[0] == UNKNOWN else max(current[0], position),
                    position if current[1] == UNKNOWN else max(current[1], position),
                )
            else:
                wanted = (max(current[0], position), current[1])
            if wanted != current:
                if key not in self._served and len(self._served) >= self.max_keys:
                    self._forget_oldest()
                self._served[key] = wanted

    def record_unknown(self, key: Hashable) -> None:
        """An answer whose position is unknown: the cache may not answer ``key`` until the database did."""
        with self._lock:
            if key not in self._served and len(self._served) >= self.max_keys:
                self._forget_oldest()
            self._served[key] = (UNKNOWN, UNKNOWN)

    def _forget_oldest(self) -> None:
        for old in list(self._served)[: max(1, self.max_keys // 10)]:
            any_, db = self._served.pop(old)
            self._forgotten = (max(self._forgotten[0], any_), max(self._forgotten[1], db))

    def __len__(self) -> int:
        return len(self._served)
