"""Replication runs' metrics as ``.prom`` files for node_exporter's textfile collector.

Replication runs are short-lived processes, so nothing is left to scrape once one ends. Each run therefore
writes, when ``HMSREPL_METRICS_TEXTFILE_DIR`` is set, two kinds of file there (atomically: written aside,
then renamed, so the collector never reads half a file):

- ``hmsrepl_repl_runs.prom``: totals over the ``repl_metrics`` table the run was recorded in (the engine
  already records every dump and load there; nothing is measured twice). Counters are sums over every
  recorded run, so they only grow, whichever process wrote the file last; one directory serves one
  metastore database's runs.
- ``hmsrepl_repl_lag_<target db>.prom``: the replica's lag behind its source, measured after a load when the
  run can read the source's notification log.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, write_to_textfile
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from sqlalchemy import Engine, Row, case, func, select

from hmsrepl.metastore.schema import repl_metrics
from hmsrepl.monitoring.settings import MetricsSettings

if TYPE_CHECKING:
    from hmsrepl.replication.failover import Lag

log = logging.getLogger(__name__)

RUNS_FILE = "hmsrepl_repl_runs.prom"
LAG_FILE_PREFIX = "hmsrepl_repl_lag_"
# Loads take seconds (a few events) to hours (a bootstrap of a large warehouse).
LOAD_DURATION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 4 * 3600.0)
#: Every value the ``cause`` label of ``hmsrepl_repl_failures_total`` can take.
FAILURE_CAUSES = (
    "abandoned",  # the process ended without recording an outcome (killed)
    "interrupted",
    "no_space",
    "database",
    "object_store",
    "lost_files",
    "filesystem",
    "refused",  # the product refused the command (bad input, protected replica, events cleaned up, ...)
    "other",
)
_DATABASE_ERRORS = ("OperationalError", "DatabaseError", "InterfaceError", "IntegrityError", "DBAPIError")


def failure_cause(status: str, error: str | None) -> str:
    """The bounded cause of a failed or abandoned run, from its recorded error (``Type: message``)."""
    if status == "abandoned":
        return "abandoned"
    text = error or ""
    name = text.split(":", 1)[0].strip()
    lowered = text.lower()
    if name == "KeyboardInterrupt" or lowered.endswith(": interrupted"):
        return "interrupted"
    if "no space left" in lowered:
        return "no_space"
    if "metastore database failed" in lowered or name in _DATABASE_ERRORS:
        return "database"
    if "object store failed" in lowered or name in ("ClientError", "EndpointConnectionError"):
        return "object_store"
    if name == "FileLostError":
        return "lost_files"
    if name in ("LoadFailedError", "OSError", "FileNotFoundError", "PermissionError", "IsADirectoryError"):
        return "filesystem"
    if name in _product_errors():
        return "refused"
    return "other"


def _product_errors() -> set[str]:
    """Names of the product's own error classes (those imported so far): a run they end was refused."""
    from hmsrepl.exceptions import HmsReplError

    names, todo = set(), [HmsReplError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


class RunsCollector(Collector):
    """Totals of one ``repl_metrics`` table, read when collected (a few grouped queries)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        t = repl_metrics
        seconds = (t.c.finished_at - t.c.started_at) / 1000.0
        with self.engine.connect() as conn:
            totals = conn.execute(
                select(
                    t.c.policy,
                    t.c.operation,
                    t.c.status,
                    func.count(),
                    func.coalesce(func.sum(t.c.events), 0),
                    func.coalesce(func.sum(t.c.bytes), 0),
                    func.max(t.c.finished_at),
                ).group_by(t.c.policy, t.c.operation, t.c.status)
            ).all()
            failed = conn.execute(
                select(t.c.policy, t.c.operation, t.c.status, t.c.error).where(
                    t.c.status.in_(("failed", "abandoned"))
                )
            ).all()
            latest_ids = (
                select(func.max(t.c.id))
                .where(t.c.finished_at.is_not(None), t.c.status != "abandoned")
                .group_by(t.c.policy, t.c.operation)
            )
            latest = conn.execute(
                select(t.c.policy, t.c.operation, t.c.status, seconds).where(t.c.id.in_(latest_ids))
            ).all()
            buckets = conn.execute(
                select(
                    t.c.policy,
                    func.count(),
                    func.coalesce(func.sum(seconds), 0),
                    *(func.sum(case((seconds <= bound, 1), else_=0)) for bound in LOAD_DURATION_BUCKETS),
                )
                .where(t.c.operation == "load", t.c.status == "succeeded", t.c.finished_at.is_not(None))
                .group_by(t.c.policy)
            ).all()
        yield from _totals(totals)
        yield _failures(failed)
        yield from _latest(latest)
        yield _durations(buckets)


def _totals(rows: Sequence[Row[Any]]) -> Iterator[Metric]:
    runs = CounterMetricFamily(
        "hmsrepl_repl_runs",
        "Recorded dumps and loads, by policy, operation and status.",
        labels=["policy", "operation", "status"],
    )
    applied = CounterMetricFamily(
        "hmsrepl_repl_events_applied", "Events applied by loads.", labels=["policy"]
    )
    dumped = CounterMetricFamily(
        "hmsrepl_repl_events_dumped", "Events written by incremental dumps.", labels=["policy"]
    )
    copied = CounterMetricFamily("hmsrepl_repl_bytes_copied", "Data bytes loads copied.", labels=["policy"])
    success = GaugeMetricFamily(
        "hmsrepl_repl_last_success_timestamp_seconds",
        "When the newest successful run of a policy and operation finished (Unix time).",
        labels=["policy", "operation"],
    )
    sums: dict[tuple[str, str], list[int]] = {}
    for policy, operation, status, count, events, size, finished in rows:
        runs.add_metric([policy, operation, status], count)
        entry = sums.setdefault((policy, operation), [0, 0])
        entry[0] += events
        entry[1] += size
        if status == "succeeded" and finished is not None:
            success.add_metric([policy, operation], finished / 1000)
    for (policy, operation), (events, size) in sorted(sums.items()):
        if operation == "load":
            applied.add_metric([policy], events)
            copied.add_metric([policy], size)
        else:
            dumped.add_metric([policy], events)
    yield from (runs, applied, dumped, copied, success)


def _failures(rows: Sequence[Row[Any]]) -> Metric:
    failures = CounterMetricFamily(
        "hmsrepl_repl_failures",
        f"Failed or abandoned runs, by cause ({', '.join(FAILURE_CAUSES)}).",
        labels=["policy", "operation", "cause"],
    )
    counts: dict[tuple[str, str, str], int] = {}
    for policy, operation, status, error in rows:
        key = (policy, operation, failure_cause(status, error))
        counts[key] = counts.get(key, 0) + 1
    for labels, count in sorted(counts.items()):
        failures.add_metric(list(labels), count)
    return failures


def _latest(rows: Sequence[Row[Any]]) -> Iterator[Metric]:
    duration = GaugeMetricFamily(
        "hmsrepl_repl_last_run_duration_seconds",
        "How long the newest finished run of a policy and operation took.",
        labels=["policy", "operation"],
    )
    ok = GaugeMetricFamily(
        "hmsrepl_repl_last_run_succeeded",
        "1 if the newest finished run of a policy and operation succeeded, else 0.",
        labels=["policy", "operation"],
    )
    for policy, operation, status, seconds in rows:
        duration.add_metric([policy, operation], float(seconds or 0))
        ok.add_metric([policy, operation], 1 if status == "succeeded" else 0)
    yield from (duration, ok)


def _durations(rows: Sequence[Row[Any]]) -> Metric:
    histogram = HistogramMetricFamily(
        "hmsrepl_repl_load_duration_seconds", "Durations of successful loads.", labels=["policy"]
    )
    for policy, count, total, *cumulative in rows:
        bounds = [(_bound(b), int(n or 0)) for b, n in zip(LOAD_DURATION_BUCKETS, cumulative, strict=True)]
        histogram.add_metric([policy], [*bounds, ("+Inf", count)], float(total))
    return histogram


def _bound(value: float) -> str:
    return f"{value:g}" if value < 1e6 else repr(value)


class LagCollector(Collector):
    """One replica's lag, as measured after its load."""

    def __init__(self, lag: Lag, measured_at: float) -> None:
        self.lag = lag
        self.measured_at = measured_at

    def collect(self) -> Iterator[Metric]:
        labels = ["source_db", "target_db"]
        values = [self.lag.source_db, self.lag.target_db]
        for name, text, value in (
            ("hmsrepl_repl_lag_events", "Source events the replica has not applied.", self.lag.events),
            (
                "hmsrepl_repl_lag_seconds",
                "Age of the oldest source event the replica lacks (0 when none).",
                self.lag.seconds,
            ),
            (
                "hmsrepl_repl_replica_event_id",
                "The source event id the replica has applied up to.",
                self.lag.replica_event_id,
            ),
            (
                "hmsrepl_repl_source_event_id",
                "The source's newest event id when the lag was measured.",
                self.lag.source_event_id,
            ),
            (
                "hmsrepl_repl_lag_measured_timestamp_seconds",
                "When this lag was measured (Unix time).",
                self.measured_at,
            ),
        ):
            gauge = GaugeMetricFamily(name, text, labels=labels)
            gauge.add_metric(values, float(value))
            yield gauge


def _write(directory: str, name: str, collector: Collector) -> Path:
    registry = CollectorRegistry()
    registry.register(collector)
    path = Path(directory) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    write_to_textfile(str(path), registry)
    return path


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _directory(settings: MetricsSettings | None) -> str:
    try:
        return (settings or MetricsSettings()).textfile_dir
    except ValueError as exc:  # a malformed HMSREPL_METRICS_* must not fail the replication run itself
        log.warning("replication metrics not written: invalid HMSREPL_METRICS_* setting: %s", exc)
        return ""


def export_runs(engine: Engine, settings: MetricsSettings | None = None) -> Path | None:
    """Write ``hmsrepl_repl_runs.prom`` from the ``repl_metrics`` table behind ``engine`` (when configured).

    Never raises: a run's outcome must not depend on its metrics being written (a failure is logged).
    """
    directory = _directory(settings)
    if not directory:
        return None
    try:
        return _write(directory, RUNS_FILE, RunsCollector(engine))
    except Exception as exc:
        log.warning("could not write replication metrics to %s: %s", directory, exc)
        return None


def export_lag(lag: Lag, settings: MetricsSettings | None = None) -> Path | None:
    """Write ``hmsrepl_repl_lag_<target db>.prom`` (when configured); never raises, like ``export_runs``."""
    directory = _directory(settings)
    if not directory:
        return None
    try:
        return _write(
            directory, f"{LAG_FILE_PREFIX}{_safe(lag.target_db)}.prom", LagCollector(lag, time.time())
        )
    except Exception as exc:
        log.warning("could not write replication lag metrics to %s: %s", directory, exc)
        return None
