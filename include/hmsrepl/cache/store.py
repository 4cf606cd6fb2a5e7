"""The cache's memory: cached tables in least-recently-used order within an entry and a byte budget.

One lock guards everything. Readers hold it only to check a tag and collect references; the updater holds
it while it applies one event or installs loaded tables, so a reader never sees half of a change (a
COMMIT_TXN that touches several tables or partitions lands all at once). An evicted table is simply gone:
later reads miss and ask for it to be loaded again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from hmsrepl.cache.entries import CachedObject, TableKey, TableState


@dataclass
class DatabaseEntry:
    """A cached database (eventually consistent: databases have no write ids)."""

    entry: CachedObject
    base_event_id: int


class CacheStore:
    def __init__(self, *, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.lock = threading.RLock()
        self._tables: OrderedDict[TableKey, TableState] = OrderedDict()
        self._databases: dict[str, DatabaseEntry] = {}
        self.entries = 0
        self.bytes = 0
        self.evictions = 0

    # -- tables ---------------------------------------------------------------------------------------------
    def table(self, key: TableKey, *, touch: bool = False) -> TableState | None:
        """The cached table, if any; ``touch`` marks it recently used (reads do, the updater does not)."""
        state = self._tables.get(key)
        if state is not None and touch:
            self._tables.move_to_end(key)
        return state

    def tables(self) -> list[TableKey]:
        return list(self._tables)

    def install(self, state: TableState) -> bool:
        """Cache ``state`` (replacing any entry for its name); False when it can never fit the budget.

        A table too big for the budget on its own is cached without its partitions, so at least the table
        object serves reads; other tables are evicted, least recently used first, to make room.
        """
        if state.entries > self.max_entries or state.size > self.max_bytes:
            if state.partitions is None or self.max_entries < 1 or state.table.size > self.max_bytes:
                self.remove(state.key)
                return False
            state.forget_partitions()
        self.remove(state.key)
        self._tables[state.key] = state
        self.entries += state.entries
        self.bytes += state.size
        self._evict(keep=state.key)
        return True

    def remove(self, key: TableKey) -> TableState | None:
        state = self._tables.pop(key, None)
        if state is not None:
            self.entries -= state.entries
            self.bytes -= state.size
        return state

    @contextmanager
    def changing(self, state: TableState) -> Iterator[TableState]:
        """Apply in-place changes to a cached table and keep the totals (and the budget) right."""
        entries, size = state.entries, state.size
        yield state
        if self._tables.get(state.key) is state:
            if state.partitions is not None and (
                state.entries > self.max_entries or state.size > self.max_bytes
            ):
                state.forget_partitions()  # outgrew the budget on its own, as install() would have found
            self.entries += state.entries - entries
            self.bytes += state.size - size
            self._evict(keep=state.key)

    def _evict(self, keep: TableKey) -> None:
        while (self.entries > self.max_entries or self.bytes > self.max_bytes) and len(self._tables) > 1:
            victim = next(iter(self._tables))
            if victim == keep:
                self._tables.move_to_end(victim)
                victim = next(iter(self._tables))
            self.remove(victim)
            self.evictions += 1

    # -- databases ------------------------------------------------------------------------------------------
    def database(self, name: str) -> DatabaseEntry | None:
        return self._databases.get(name)

    def put_database(self, name: str, entry: DatabaseEntry) -> None:
        self._databases[name] = entry

    def remove_database(self, name: str) -> None:
        self._databases.pop(name, None)

    def clear(self) -> None:
        self._tables.clear()
        self._databases.clear()
        self.entries = 0
        self.bytes = 0
