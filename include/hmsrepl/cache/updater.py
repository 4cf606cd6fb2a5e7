"""The background thread of one metastore instance: prewarm, then follow the notification log in order.

It is the only writer of the cache. Between batches of events it loads tables that reads asked for (misses
on tables not cached) and, at start-up, prewarms everything batch by batch, applying the log between
batches so loaded tables do not fall behind. Loads run on this thread, so the log position never passes a
load's position while it runs; a load may be ahead of it, and its tables then skip the events they reflect.

A gap in the log (events cleaned up before they were applied: EventsCleanedUpError, or ids not contiguous)
means changes were missed that no later event will repeat: the cache is cleared and prewarmed again.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from hmsrepl.cache.apply import EventApplier
from hmsrepl.cache.entries import CachedObject, TableKey
from hmsrepl.cache.loader import SnapshotLoader
from hmsrepl.cache.metrics import CacheMetrics
from hmsrepl.cache.store import CacheStore, DatabaseEntry
from hmsrepl.exceptions import EventsCleanedUpError, NoSuchObjectError
from hmsrepl.metastore import Metastore

log = logging.getLogger(__name__)

PREWARM_BATCH_TABLES = 50
LOAD_ATTEMPTS = 3  # tries in a row; a table raced this often is retried in a later round of the loop
MAX_REQUESTS = 10_000
ERROR_BACKOFF_SECONDS = 1.0


class LogGapError(Exception):
    """The log skipped ids the cache had not applied."""


class CacheUpdater:
    def __init__(
        self,
        metastore: Metastore,
        store: CacheStore,
        metrics: CacheMetrics,
        *,
        prewarm: bool,
        refresh_interval: float,
        batch_size: int,
        metrics_log_interval: float,
        gauges: Callable[[], dict[str, Any]],
        loader: SnapshotLoader | None = None,
    ) -> None:
        self.metastore = metastore
        self.store = store
        self.metrics = metrics
        self.prewarm = prewarm
        self.refresh_interval = refresh_interval
        self.batch_size = batch_size
        self.metrics_log_interval = metrics_log_interval
        self.gauges = gauges
        self.loader = loader or SnapshotLoader(metastore)
        self.applier = EventApplier(store, on_stale=self.request_load)
        self.position = -1  # last applied event id; -1 until started
        self.latest = 0  # newest event id seen in the log, for the lag
        self.ready = threading.Event()  # set once the first prewarm has finished
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._applied = threading.Condition()
        self._requests: set[TableKey] = set()
        self._requests_lock = threading.Lock()
        self._reload_needed = True
        self._thread: threading.Thread | None = None
        self._last_log = time.monotonic()

    # -- control ------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="hmsrepl-cache-updater", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wake(self) -> None:
        """Look at the log now rather than at the next refresh (after a local write)."""
        self._wake.set()

    def request_load(self, key: TableKey) -> None:
        with self._requests_lock:
            if len(self._requests) < MAX_REQUESTS:
                self._requests.add(key)
        self._wake.set()

    def wait_applied(self, event_id: int, timeout: float) -> bool:
        """Wait until every event up to ``event_id`` is applied (True) or ``timeout`` passes (False)."""
        with self._applied:
            return self._applied.wait_for(lambda: self.position >= event_id, timeout)

    # -- the loop -------------------------------------------------------------------------------------------
    def run_once(self) -> bool:
        """One round of the loop, on the caller's thread (the loop itself; tests and benchmarks step it).

        Returns whether there was work. Raises EventsCleanedUpError/LogGapError after arranging a reload.
        """
        try:
            if self._reload_needed:
                self._reload()
            busy = self.catch_up() > 0
            busy = self._load_requested() or busy
            self.latest = max(self.position, self.metastore.events.current_event_id())
            return busy
        except (EventsCleanedUpError, LogGapError):
            self.metrics.full_reloads += 1
            self._reload_needed = True
            raise

    def _run(self) -> None:
        while not self._stop.is_set():
            busy = False
            try:
                busy = self.run_once()
            except (EventsCleanedUpError, LogGapError) as exc:
                log.warning("metadata cache missed events (%s); reloading it from the database", exc)
                continue
            except Exception:  # the cache must outlive a database hiccup; reads fall back meanwhile
                log.exception("metadata cache update failed; retrying in %s s", ERROR_BACKOFF_SECONDS)
                self._stop.wait(ERROR_BACKOFF_SECONDS)
                continue
            self._log_metrics()
            if not busy:
                self._wake.wait(self.refresh_interval)
                self._wake.clear()

    def catch_up(self, max_events: int | None = None) -> int:
        """Apply the events after the position, batch by batch; returns how many were applied."""
        applied = 0
        while not self._stop.is_set():
            events = self.metastore.events.next_events(self.position, self.batch_size)
            for event in events:
                if event.event_id != self.position + 1:
                    raise LogGapError(f"expected event {self.position + 1}, the log has {event.event_id}")
                self.applier.apply(event)
                self.position = event.event_id
            if events:
                applied += len(events)
                self.metrics.events_applied += len(events)
                with self._applied:
                    self._applied.notify_all()
            if len(events) < self.batch_size or (max_events is not None and applied >= max_events):
                break
        return applied

    # -- loading --------------------------------------------------------------------------------------------
    def _reload(self) -> None:
        """Start over from the database: clear, then prewarm (or fill lazily when prewarm is off)."""
        started = time.monotonic()
        position = self.metastore.events.current_event_id()
        with self.store.lock:
            self.store.clear()
            self.position = position
        with self._applied:
            self._applied.notify_all()
        self._reload_needed = False
        if self.prewarm:
            self._prewarm()
            # Move the (long-lived) cached objects out of the collector's way: otherwise every full
            # collection rescans them all, which slows down every allocation-heavy request of the process.
            gc.freeze()
        self.metrics.prewarm_seconds = round(time.monotonic() - started, 3)
        self.ready.set()
        log.info("metadata cache ready in %.2f s: %s", time.monotonic() - started, self._summary())

    def _prewarm(self) -> None:
        catalog = self.metastore.catalog
        names = catalog.get_databases()
        self._load_databases(names)
        for db_name in names:
            try:
                tables = catalog.get_tables(db_name)
            except NoSuchObjectError:
                continue
            for start in range(0, len(tables), PREWARM_BATCH_TABLES):
                if self._stop.is_set():
                    return
                self.load([(db_name, name) for name in tables[start : start + PREWARM_BATCH_TABLES]])
                self.catch_up(max_events=self.batch_size)  # keep up with the log between batches

    def _load_databases(self, names: Sequence[str]) -> None:
        found, event_id = self.loader.load_databases(names)
        with self.store.lock:
            for name, db in found.items():
                current = self.store.database(name)
                if current is None or current.base_event_id < event_id:
                    size = len(db.model_dump_json())
                    self.store.put_database(name, DatabaseEntry(CachedObject(db, size), event_id))

    def load(self, keys: Sequence[TableKey]) -> None:
        """Load tables, retrying those a concurrent write raced, and install them."""
        pending = list(dict.fromkeys(keys))
        for _ in range(LOAD_ATTEMPTS):
            if not pending:
                return
            result = self.loader.load_tables(pending)
            assert result.event_id >= self.position, "a load must never be older than the applied log"
            with self.store.lock:
                for state in result.states:
                    # Only fill gaps: a table the log has kept since (e.g. created by an event after the
                    # read that asked for it) is exact, while a load may have to be unsettled.
                    if self.store.table(state.key) is None:
                        self.store.install(state)
                for key in result.tainted:  # not retried: the next read that misses asks for it again
                    current = self.store.table(key)
                    if current is not None and current.base_event_id < result.event_id:
                        self.store.remove(key)
                for key in result.missing:
                    current = self.store.table(key)
                    if current is not None and current.base_event_id < result.event_id:
                        self.store.remove(key)
            self.metrics.loaded_tables += len(result.states)
            self.metrics.load_races += len(result.raced)
            pending = result.raced
        for key in pending:  # busy tables: after the log has moved on (reads go to the database meanwhile)
            self.request_load(key)

    def _load_requested(self) -> bool:
        with self._requests_lock:
            keys = list(self._requests)[:PREWARM_BATCH_TABLES]
            self._requests.difference_update(keys)
        if keys:
            self.load(keys)
        return bool(keys)

    # -- reporting ------------------------------------------------------------------------------------------
    def _summary(self) -> str:
        return json.dumps(self.metrics.snapshot(**self.gauges()), sort_keys=True)

    def _log_metrics(self) -> None:
        now = time.monotonic()
        if now - self._last_log >= self.metrics_log_interval:
            self._last_log = now
            log.info("metadata cache: %s", self._summary())
