"""The metadata cache of one metastore instance: lookups that decide hit or miss, and the updater behind them.

A lookup answers only when the cached entry shows what the reader must see (see ``freshness``); otherwise it
reports why not, and the caller reads the database. Transactional tables need the reader's ValidWriteIdList
and table id: without the list there is no way to know what the reader must see, so such reads go to the
database (the seeds' design raises an error instead; old clients such as Spark's Hive 2.3 client never send
a list, and must keep working). Tables without write ids (external and other non-transactional tables) and
databases are eventually consistent, as in Hive's CachedStore, except that a write made through this
instance is waited for: until the updater has applied it, eventual reads here go to the database.

Reads are monotonic per instance (see ``monotonic``): an entry older than what this instance already answered
for the same table (from the database or the cache) is refused. A reader passing a ValidWriteIdList never gets
from the cache an object whose write id its list does not count as committed, even when the entry's
committed ids contain the reader's (the ``contains`` freshness): such reads go to the database, which
answers only a state the list may see and otherwise refuses with a retryable error (see ``visibility``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from hmsrepl.cache.entries import CachedObject, TableKey, TableState
from hmsrepl.cache.filters import UnsupportedFilter
from hmsrepl.cache.freshness import Freshness, Verdict, compare, may_serve
from hmsrepl.cache.loader import SnapshotLoader
from hmsrepl.cache.metrics import CacheMetrics, MissReason
from hmsrepl.cache.monotonic import UNKNOWN, ServedPositions
from hmsrepl.cache.store import CacheStore
from hmsrepl.cache.updater import CacheUpdater
from hmsrepl.cache.visibility import state_write_ids
from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import InvalidObjectError, MetastoreError
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Partition, Table

T = TypeVar("T")
log = logging.getLogger(__name__)

_MISS_BY_VERDICT = {
    Verdict.CACHE_BEHIND: MissReason.CACHE_BEHIND,
    Verdict.CACHE_NEWER: MissReason.CACHE_NEWER,
    Verdict.INCOMPARABLE: MissReason.INCOMPARABLE,
}


@dataclass(frozen=True)
class CacheSettings:
    """The cache's settings (``HMSREPL_CACHE_*`` in ``MetastoreConfig``)."""

    prewarm: bool = True
    max_entries: int = 2_000_000
    max_bytes: int = 2 * 1024**3
    refresh_interval_seconds: float = 0.5
    event_batch_size: int = 1000
    freshness: Freshness = Freshness.CONTAINS
    metrics_log_interval_seconds: float = 60.0
    monotonic_wait_seconds: float = 0.05

    @classmethod
    def from_config(cls, config: MetastoreConfig) -> CacheSettings:
        return cls(
            prewarm=config.cache_prewarm,
            max_entries=config.cache_max_entries,
            max_bytes=config.cache_max_bytes,
            refresh_interval_seconds=config.cache_refresh_interval_seconds,
            event_batch_size=config.cache_event_batch_size,
            freshness=Freshness(config.cache_freshness),
            metrics_log_interval_seconds=config.cache_metrics_log_interval_seconds,
            monotonic_wait_seconds=config.cache_monotonic_wait_seconds,
        )


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A cache hit (``value``) or why not (``miss``)."""

    value: T | None = None
    miss: MissReason | None = None

    @property
    def hit(self) -> bool:
        return self.miss is None


class MetadataCache:
    def __init__(
        self,
        metastore: Metastore,
        settings: CacheSettings | None = None,
        *,
        loader: SnapshotLoader | None = None,
    ) -> None:
        self.metastore = metastore
        self.settings = settings or CacheSettings()
        self.store = CacheStore(max_entries=self.settings.max_entries, max_bytes=self.settings.max_bytes)
        self.stats = CacheMetrics()
        self.updater = CacheUpdater(
            metastore,
            self.store,
            self.stats,
            prewarm=self.settings.prewarm,
            refresh_interval=self.settings.refresh_interval_seconds,
            batch_size=self.settings.event_batch_size,
            metrics_log_interval=self.settings.metrics_log_interval_seconds,
            gauges=self._gauges,
            loader=loader,
        )
        self._fence = -1  # eventual reads wait until the updater has applied this instance's last write
        self._fence_lock = threading.Lock()
        self.served = ServedPositions()  # per table (and database): the newest log position answered

    @classmethod
    def from_config(cls, metastore: Metastore) -> MetadataCache:
        return cls(metastore, CacheSettings.from_config(metastore.config))

    # -- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the updater: it prewarms in the background while reads go to the database."""
        self.updater.start()

    def stop(self) -> None:
        self.updater.stop()

    @property
    def applied_event_id(self) -> int:
        return self.updater.position

    def wait_applied(self, event_id: int, timeout: float = 30.0) -> bool:
        return self.updater.wait_applied(event_id, timeout)

    def note_local_write(self) -> None:
        """A write went through this instance: eventual reads here wait for the updater to apply it."""
        try:
            event_id = self.metastore.events.current_event_id()
        except Exception:  # the write's own error matters more; wait at least for the next event instead
            log.warning("metadata cache: cannot read the log position after a write", exc_info=True)
            event_id = self.updater.position + 1
        with self._fence_lock:
            self._fence = max(self._fence, event_id)
        self.updater.wake()

    def note_database_answer(self, key: tuple[str, str]) -> None:
        """A read of ``key`` (a table key, or ``database_key(name)``) was answered from the database.

        The log's head read now bounds what that answer showed; cache entries older than it are refused
        for this key from now on. If the head cannot be read, no cache entry may answer ``key`` until the
        database answered it again.
        """
        try:
            head = self.metastore.events.current_event_id()
        except Exception:  # the read's own outcome matters more; stay safe instead
            log.warning("metadata cache: cannot read the log position after a database read", exc_info=True)
            self.served.record_unknown(key)
            return
        self.served.record(key, head, from_database=True)

    def metrics(self) -> dict[str, Any]:
        """Hits, misses by reason, lag in events and memory use, as one JSON-ready dict."""
        return self.stats.snapshot(**self._gauges())

    def _gauges(self) -> dict[str, Any]:
        applied, latest = self.updater.position, self.updater.latest
        return {
            "applied_event_id": applied,
            "latest_event_id": latest,
            "lag_events": max(0, latest - applied),
            "ready": self.updater.ready.is_set(),
            "tables": len(self.store.tables()),
            "entries": self.store.entries,
            "approx_bytes": self.store.bytes,
            "evictions": self.store.evictions,
            "freshness": str(self.settings.freshness),
        }

    # -- lookups --------------------------------------------------------------------------------------------
    def table(
        self, db_name: str, table_name: str, write_ids: ValidWriteIdList | None, table_id: int | None
    ) -> Answer[CachedObject]:
        return self.read_table(db_name, table_name, write_ids, table_id, lambda state: state.table)

    def partitions(
        self,
        db_name: str,
        table_name: str,
        write_ids: ValidWriteIdList | None,
        table_id: int | None,
        select: Callable[[TableState], T],
    ) -> Answer[T]:
        """Run ``select`` on the table's cached partitions, if the entry may answer this reader."""

        def guarded(state: TableState) -> T:
            if state.partitions is None:
                raise _Miss(MissReason.PARTITIONS_NOT_CACHED)
            return select(state)

        return self.read_table(db_name, table_name, write_ids, table_id, guarded)

    def read_table(
        self,
        db_name: str,
        table_name: str,
        write_ids: ValidWriteIdList | None,
        table_id: int | None,
        select: Callable[[TableState], T],
    ) -> Answer[T]:
        """Check freshness and run ``select`` in one lock hold, so its answer is of one version."""
        key = (db_name.lower(), table_name.lower())
        _check_names(key, write_ids)
        for attempt in range(2):
            version, floor = -1, -1
            with self.store.lock:
                state = self.store.table(key, touch=True)
                reason = self._stale_reason(state, write_ids, table_id)
                if reason is None:
                    assert state is not None
                    version, floor = max(self.updater.position, state.base_event_id), self.served.floor(key)
                    held = state.oldest_held_event()
                    if version < floor or (held is not None and held <= self.served.database_floor(key)):
                        reason = MissReason.OLDER_THAN_SERVED  # the database showed a change still held
                if reason is None:
                    assert state is not None
                    try:
                        value = select(state)
                    except _Miss as miss:
                        reason = miss.reason
                    except UnsupportedFilter:
                        reason = MissReason.UNSUPPORTED_FILTER
                    except MetastoreError:  # answered from the cache: e.g. no such partition in this version
                        self.stats.hit()
                        self.served.record(key, version)
                        raise
                    if (
                        reason is None
                        and write_ids is not None
                        and compare(state.write_ids, write_ids) is Verdict.CACHE_NEWER
                        and not _all_committed(value, state, write_ids)
                    ):
                        reason = MissReason.WRITE_NOT_COMMITTED
            if reason is MissReason.OLDER_THAN_SERVED and attempt == 0 and self._wait_applied(floor, version):
                continue  # the updater caught up with what was answered: try the cache again
            break
        if reason is not None:
            self.stats.miss(reason)
            if reason is MissReason.NOT_CACHED:
                self.updater.request_load(key)
            return Answer(miss=reason)
        self.stats.hit()
        self.served.record(key, version)
        return Answer(value=value)

    def database(self, name: str) -> Answer[CachedObject]:
        key = database_key(name)
        with self.store.lock:
            found = self.store.database(name.lower())
            version = max(self.updater.position, found.base_event_id) if found is not None else -1
        if found is None:
            reason = MissReason.NOT_CACHED
        elif self._fenced():
            reason = MissReason.LOCAL_WRITE_PENDING
        elif version < self.served.floor(key):
            reason = MissReason.OLDER_THAN_SERVED
        else:
            self.stats.hit()
            self.served.record(key, version)
            return Answer(value=found.entry)
        self.stats.miss(reason)
        return Answer(miss=reason)

    def _stale_reason(
        self, state: TableState | None, write_ids: ValidWriteIdList | None, table_id: int | None
    ) -> MissReason | None:
        if state is None:
            return MissReason.NOT_CACHED
        if table_id is not None and table_id != state.table_id:
            return MissReason.TABLE_ID_MISMATCH
        transactional = state.table_model.is_transactional
        if write_ids is None:
            if transactional:
                return MissReason.NO_WRITE_ID_LIST
        else:
            if transactional and table_id is None:
                return MissReason.NO_TABLE_ID  # without it a recreated table could pass for the old one
            if state.unsettled:
                return MissReason.UNSETTLED
            verdict = compare(state.write_ids, write_ids)
            if not may_serve(verdict, self.settings.freshness):
                return _MISS_BY_VERDICT[verdict]
        if not transactional and self._fenced():
            return MissReason.LOCAL_WRITE_PENDING
        return None

    def _fenced(self) -> bool:
        return self.updater.position < self._fence

    def _wait_applied(self, floor: int, version: int) -> bool:
        """Wait briefly for the updater to reach ``floor`` (a position this instance answered already)."""
        wait = self.settings.monotonic_wait_seconds
        if wait <= 0 or floor >= UNKNOWN or version >= floor:  # behind no position: a txn must end first
            return False
        self.updater.wake()
        return self.updater.wait_applied(floor, wait)


def database_key(name: str) -> tuple[str, str]:
    """The key under which answers about a database are placed in the log (never a table's key: table
    names are never empty)."""
    return (name.lower(), "")


def _all_committed(value: Any, state: TableState, write_ids: ValidWriteIdList) -> bool:
    """Whether no object in a cache answer carries a write the entry has committed but the reader's list not
    (by its write id or by the stamp of the txn change it shows: see ``visibility``).

    Checked when the entry's committed ids contain the reader's and more (served under ``contains``):
    objects those later commits changed must come from elsewhere. (With equal sets there is nothing to
    check, so the common hit costs nothing here.) Answers of names are checked through the partitions they
    name.
    """
    cached = state.write_ids
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, CachedObject):
            model = item.model
            if isinstance(model, Table | Partition) and any(
                cached.is_write_id_valid(w) and not write_ids.is_write_id_valid(w)
                for w in state_write_ids(model)
            ):
                return False
        elif isinstance(item, str):
            entry = (state.partitions or {}).get(item)
            if entry is not None:
                stack.append(entry)
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return True


class _Miss(Exception):
    def __init__(self, reason: MissReason) -> None:
        self.reason = reason


def _check_names(key: TableKey, write_ids: ValidWriteIdList | None) -> None:
    """A list of another table would compare meaningless sets: reject it like a malformed one."""
    expected = f"{key[0]}.{key[1]}"
    if write_ids is not None and write_ids.table_name != expected:
        raise InvalidObjectError(
            f"the ValidWriteIdList '{write_ids.to_string()}' is for table '{write_ids.table_name}', "
            f"not '{expected}'; pass the list of the table read"
        )
