"""The metastore server's Prometheus metrics: requests, latency, connections, pending file work, cache, log head.

Requests are counted where the Thrift processor calls the handler (``InstrumentedDispatcher`` wraps the
dispatcher), so handler methods stay free of metrics code and every method is measured the same way. The
other values are read when Prometheus scrapes (``ServerStateCollector``): the open connections from the
server, pending file intents and the notification log head from the database, hits and misses from the
metadata cache. A scrape therefore costs two small queries, and a value is never older than the scrape.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from thriftpy2.thrift import TApplicationException, TException

from hmsrepl.metastore.schema import file_intents

log = logging.getLogger(__name__)

OK = "ok"
INTERNAL_ERROR = "internal_error"  # TApplicationException: the server failed, not the request
UNKNOWN, UNKNOWN_METHOD = "unknown", "unknown_method"  # a method this metastore does not have
ERROR = "error"  # anything else that escaped (should not happen: the dispatcher maps errors)
# Metastore calls range from sub-millisecond cache hits to multi-second partition listings and commits.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def outcome_of(exc: BaseException) -> str:
    """A bounded label for how a call ended: the IDL's declared exception name (NoSuchObjectException, ...),
    ``internal_error`` or ``error``. Messages never become labels (they hold client-supplied names)."""
    if isinstance(exc, TApplicationException):
        return INTERNAL_ERROR
    if isinstance(exc, TException):
        return type(exc).__name__
    return ERROR


class ServerMetrics:
    """The metrics of one metastore server, in a registry of their own (not the process-wide default)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = Counter(
            "hmsrepl_thrift_requests",
            "Thrift calls answered, by method and outcome (ok, a declared exception's name, internal_error; "
            "method 'unknown' with outcome 'unknown_method' for methods this metastore does not have).",
            ["method", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "hmsrepl_thrift_request_duration_seconds",
            "Time the metastore spent on a Thrift call (decoding and sending excluded), by method.",
            ["method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def instrument(self, dispatcher: Any, methods: Any) -> InstrumentedDispatcher:
        """``dispatcher`` (what the processor calls) with every method in ``methods`` counted and timed."""
        return InstrumentedDispatcher(dispatcher, methods, self)

    def unknown_method(self) -> None:
        """A call of a method the metastore does not have: its client-chosen name is not a label value."""
        self.requests.labels(UNKNOWN, UNKNOWN_METHOD).inc()


class InstrumentedDispatcher:
    """Counts and times each call of the wrapped dispatcher; the call's result and exceptions pass unchanged."""

    def __init__(self, inner: Any, methods: Any, metrics: ServerMetrics) -> None:
        self._metrics = metrics
        self._methods = {
            name: self._timed(name, getattr(inner, name)) for name in methods if hasattr(inner, name)
        }

    def _timed(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        # Label children are resolved at a method's first call and kept: ``labels()`` costs ~2 us a lookup
        # (most of a cache hit's own time), and resolving them up front would expose ~20 zero series for
        # each of the IDL's hundreds of methods, called or not.
        metrics, perf_counter = self._metrics, time.perf_counter
        children: list[Any] = []  # [ok counter, latency histogram] of this method

        def timed(*args: Any) -> Any:
            started = perf_counter()
            try:
                result = call(*args)
            except BaseException as exc:
                metrics.latency.labels(name).observe(perf_counter() - started)
                metrics.requests.labels(name, outcome_of(exc)).inc()
                raise
            elapsed = perf_counter() - started
            if not children:
                children.extend((metrics.requests.labels(name, OK), metrics.latency.labels(name)))
            children[1].observe(elapsed)
            children[0].inc()
            return result

        timed.__name__ = name
        return timed

    def __getattr__(self, name: str) -> Callable[..., Any]:
        try:
            return self._methods[name]
        except KeyError:
            raise AttributeError(name) from None


class ServerStateCollector(Collector):
    """Values read at scrape time: connections, pending file intents, the log head, the cache's counters."""

    def __init__(
        self,
        store: Any,
        *,
        open_connections: Callable[[], int],
        busy_connections: Callable[[], int],
        max_connections: int,
        cache: Any | None = None,
    ) -> None:
        self.store = store
        self.open_connections = open_connections
        self.busy_connections = busy_connections
        self.max_connections = max_connections
        self.cache = cache

    def collect(self) -> Iterator[Metric]:
        yield _gauge(
            "hmsrepl_thrift_connections_open", "Client connections open now.", self.open_connections()
        )
        yield _gauge(
            "hmsrepl_thrift_connections_busy",
            "Connections in the middle of a call now.",
            self.busy_connections(),
        )
        yield _gauge(
            "hmsrepl_thrift_connections_max",
            "Connections served at once at most (HMSREPL_THRIFT_MAX_WORKERS).",
            self.max_connections,
        )
        yield from self._database()
        if self.cache is not None:
            yield from self._cache()

    def _database(self) -> Iterator[Metric]:
        try:
            head = self.store.events.current_event_id()
            with self.store.engine.connect() as conn:
                pending, oldest = conn.execute(
                    select(func.count(), func.min(file_intents.c.created_at))
                ).one()
        except Exception as exc:  # a scrape must answer (database_up 0) while the database is away
            log.warning("metrics: cannot read the metastore database: %s", type(exc).__name__)
            yield _gauge("hmsrepl_metastore_database_up", "1 if the last scrape could read the database.", 0)
            return
        yield _gauge("hmsrepl_metastore_database_up", "1 if the last scrape could read the database.", 1)
        yield _gauge(
            "hmsrepl_notification_log_head_event_id", "Newest event id of the notification log.", head
        )
        yield _gauge(
            "hmsrepl_file_intents_pending",
            "File work committed changes still owe (recycling, directories): pending file intents.",
            pending,
        )
        age = max(0.0, time.time() - oldest / 1000) if oldest is not None else 0.0
        yield _gauge(
            "hmsrepl_file_intents_oldest_age_seconds",
            "Age of the oldest pending file intent (0 when none): work that stays pending is stuck.",
            age,
        )

    def _cache(self) -> Iterator[Metric]:
        assert self.cache is not None  # collected only for a server with the cache on
        stats = self.cache.metrics()
        hits = CounterMetricFamily("hmsrepl_cache_hits", "Reads the metadata cache answered.")
        hits.add_metric([], stats["hits"])
        yield hits
        misses = CounterMetricFamily(
            "hmsrepl_cache_misses",
            "Reads the database answered instead of the cache, by reason.",
            labels=["reason"],
        )
        for reason, count in sorted(stats["misses"].items()):
            misses.add_metric([reason], count)
        yield misses
        yield _gauge("hmsrepl_cache_lag_events", "Events the cache has not applied yet.", stats["lag_events"])
        yield _gauge("hmsrepl_cache_entries", "Tables plus partitions cached.", stats["entries"])
        yield _gauge(
            "hmsrepl_cache_ready", "1 once the cache has caught up with the log.", int(stats["ready"])
        )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
