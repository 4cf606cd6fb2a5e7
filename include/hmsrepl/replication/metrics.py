"""Replication metrics: one ``repl_metrics`` row per REPL DUMP or REPL LOAD, and the clock that times stages.

Why a table and not only logs: "how far behind, how long, how much, did it fail and why" is asked by the
CLI, the DAGs and operators long after the process that did the work has gone, and a database is the one
place every run (CLI, Python, Airflow task) can reach. Loads record into the target database. Dumps record
into the target database when the engine has a target metastore, else into the source's own
``repl_metrics`` (every metastore has the same schema), so a dump-only process still leaves a trace.

A row is inserted as ``running`` before any work, then updated once at the end: ``succeeded`` with the
counts and per-stage seconds, or ``failed`` with the error when an exception escapes (the exception still
propagates: recording never changes the outcome). While running, the row's error column names the process
(``running in process <pid> on <host>``); the next run of the same policy and operation marks a ``running``
row ``abandoned`` when that process is gone (same host: it no longer exists; another host: always, since
one scheduler runs a policy at a time), so a killed run does not stay ``running`` forever.

Counts mean, for a dump: events written (incremental), tables and partitions dumped (bootstrap), and the
data files and bytes the dump references (what a load may have to copy); for a load: events applied, tables
and partitions created, files and bytes copied.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from sqlalchemy import Engine, insert, or_, select, update

from hmsrepl.metastore.database import writer
from hmsrepl.metastore.schema import repl_metrics

log = logging.getLogger(__name__)

RUNNING, SUCCEEDED, FAILED, ABANDONED = "running", "succeeded", "failed", "abandoned"
STATUSES = (RUNNING, SUCCEEDED, FAILED, ABANDONED)
_OWNER_PREFIX = "running in process "
OPERATIONS = ("dump", "load")
UNKNOWN_KIND = "unknown"  # a load whose dump cannot be read: the row still records the failure
MAX_ERROR_CHARS = 10_000


class Progress(Protocol):
    """What the engine reports progress to (the CLI's terminal bar; anything else that wants it)."""

    def begin(self, total: int | None, unit: str) -> None:
        """Called once, before the work: how many ``unit`` s are expected (None: not known in advance)."""

    def advance(self, n: int) -> None:
        """``n`` more units are done."""


class StageClock:
    """Wall-clock seconds per named stage: the time at least one thread was in it, each time it was entered.

    Engines wrap their main stages in ``with clock.stage("name"):`` so a slow run shows where its time went
    (listing, consolidation, pre-flight checks, applying) without a profiler. A bootstrap load on a database
    server applies several tables at once, each thread inside its own ``apply``: a stage is timed while any
    thread is in it, not once per thread, so no stage reads longer than the run (four threads summed to 120 s
    of ``apply`` in a load of 34 s).
    """

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}
        self._open: dict[str, tuple[int, float]] = {}  # a stage in progress: how many are in it, since when
        self._lock = threading.Lock()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self._enter(name)
        try:
            yield
        finally:
            self._leave(name)

    def _enter(self, name: str) -> None:
        with self._lock:
            inside, since = self._open.get(name, (0, 0.0))
            self._open[name] = (inside + 1, since if inside else time.perf_counter())

    def _leave(self, name: str) -> None:
        with self._lock:
            inside, since = self._open.pop(name)
            if inside > 1:
                self._open[name] = (inside - 1, since)
            else:
                self._seconds[name] = self._seconds.get(name, 0.0) + time.perf_counter() - since

    @property
    def seconds(self) -> dict[str, float]:
        with self._lock:
            return dict(self._seconds)


@dataclass
class Counts:
    events: int = 0
    tables: int = 0
    partitions: int = 0
    files: int = 0
    bytes: int = 0


@dataclass
class Run:
    """A run being recorded: the caller fills in what it learns; the recorder writes it at the end."""

    id: int
    clock: StageClock = field(default_factory=StageClock)
    dump_id: str | None = None  # a dump's directory is named by the dump itself, so it is known only after
    from_event_id: int | None = None
    to_event_id: int | None = None
    last_event_id: int | None = None
    counts: Counts = field(default_factory=Counts)


@dataclass(frozen=True)
class MetricsRow:
    id: int
    policy: str
    dump_id: str
    operation: str
    kind: str
    from_event_id: int | None
    to_event_id: int | None
    last_event_id: int | None
    events: int
    tables: int
    partitions: int
    files: int
    bytes: int
    stages: dict[str, float]
    status: str
    error: str | None
    started_at: int  # epoch milliseconds
    finished_at: int | None

    @property
    def seconds(self) -> float | None:
        return None if self.finished_at is None else (self.finished_at - self.started_at) / 1000

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": self.seconds}


def dump_id_of(dump_dir: str) -> str:
    """A dump's id is its directory's name (unique: database, time and a random suffix)."""
    return dump_dir.rstrip("/").rsplit("/", 1)[-1]


def _now_ms() -> int:
    return int(time.time() * 1000)


def describe_error(exc: BaseException) -> str:
    text = str(exc) or "(no message)"
    if isinstance(exc, KeyboardInterrupt):
        text = "interrupted"
    return f"{type(exc).__name__}: {text}"[:MAX_ERROR_CHARS]


class MetricsLog:
    """The ``repl_metrics`` table of one metastore database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def record(
        self,
        *,
        policy: str,
        operation: str,
        kind: str,
        dump_id: str = "",
        from_event_id: int | None = None,
        to_event_id: int | None = None,
    ) -> Iterator[Run]:
        """Record one dump or load around the ``with`` body; see the module docstring for the row's life."""
        if operation not in OPERATIONS:
            raise ValueError(f"operation must be one of {OPERATIONS}, got {operation!r}")
        self.abandon_stale(policy, operation)
        with writer(self.engine).begin() as conn:
            inserted = conn.execute(
                insert(repl_metrics).values(
                    policy=policy,
                    dump_id=dump_id,
                    operation=operation,
                    kind=kind,
                    from_event_id=from_event_id,
                    to_event_id=to_event_id,
                    stages="{}",
                    status=RUNNING,
                    error=f"{_OWNER_PREFIX}{os.getpid()} on {socket.gethostname()}",
                    started_at=_now_ms(),
                )
            ).inserted_primary_key
            assert inserted is not None  # an INSERT of one row always reports its key
            run_id = inserted[0]
        run = Run(int(run_id), dump_id=dump_id, from_event_id=from_event_id, to_event_id=to_event_id)
        try:
            yield run
        except BaseException as exc:  # KeyboardInterrupt too: the row must not stay 'running'
            self._finish(run, FAILED, describe_error(exc))
            raise
        self._finish(run, SUCCEEDED, None)

    def abandon_stale(self, policy: str, operation: str) -> int:
        """Mark ``running`` rows of this policy and operation whose process is gone ``abandoned``."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(repl_metrics.c.id, repl_metrics.c.error).where(
                    repl_metrics.c.policy == policy,
                    repl_metrics.c.operation == operation,
                    repl_metrics.c.status == RUNNING,
                )
            ).all()
        stale = [row.id for row in rows if not _owner_alive(row.error)]
        if stale:
            with writer(self.engine).begin() as conn:
                conn.execute(
                    update(repl_metrics)
                    .where(repl_metrics.c.id.in_(stale), repl_metrics.c.status == RUNNING)
                    .values(
                        status=ABANDONED,
                        error="abandoned: the process running it ended without recording an outcome (killed?); "
                        "a later run of the same policy took over",
                        finished_at=_now_ms(),
                    )
                )
            log.warning("marked %d replication run(s) of %s abandoned: %s", len(stale), policy, stale)
        return len(stale)

    def _finish(self, run: Run, status: str, error: str | None) -> None:
        values: dict[str, Any] = {
            **asdict(run.counts),
            "from_event_id": run.from_event_id,
            "to_event_id": run.to_event_id,
            "last_event_id": run.last_event_id,
            "stages": json.dumps({k: round(v, 6) for k, v in run.clock.seconds.items()}, sort_keys=True),
            "status": status,
            "error": error,
            "finished_at": _now_ms(),
        }
        if run.dump_id:
            values["dump_id"] = run.dump_id
        try:
            with writer(self.engine).begin() as conn:
                conn.execute(update(repl_metrics).where(repl_metrics.c.id == run.id).values(**values))
        except Exception:  # the replication outcome stands; a lost metrics update must not change it
            log.warning("could not record the end of replication run %s (%s)", run.id, status, exc_info=True)

    def list(
        self,
        *,
        policy: str | None = None,
        operation: str | None = None,
        status: str | None = None,
        limit: int | None = 50,
    ) -> list[MetricsRow]:
        """Rows, newest first. ``policy`` matches a policy's text or its database name (all its policies)."""
        query = select(repl_metrics).order_by(repl_metrics.c.id.desc())
        if policy:
            query = query.where(
                or_(
                    repl_metrics.c.policy == policy,
                    repl_metrics.c.policy.startswith(f"{policy}.", autoescape=True),
                )
            )
        if operation:
            query = query.where(repl_metrics.c.operation == operation)
        if status:
            query = query.where(repl_metrics.c.status == status)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [_row(dict(r._mapping)) for r in conn.execute(query)]

    def get(self, run_id: int) -> MetricsRow | None:
        with self.engine.connect() as conn:
            found = conn.execute(select(repl_metrics).where(repl_metrics.c.id == run_id)).first()
        return _row(dict(found._mapping)) if found is not None else None


def _owner_alive(error: str | None) -> bool:
    """Is the process named by a running row's owner note still there (only knowable on this host)?"""
    if not error or not error.startswith(_OWNER_PREFIX):
        return False
    pid_text, _, host = error[len(_OWNER_PREFIX) :].partition(" on ")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    if int(pid_text) == os.getpid():
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _row(values: dict[str, Any]) -> MetricsRow:
    values["stages"] = json.loads(values.get("stages") or "{}")
    return MetricsRow(**values)
