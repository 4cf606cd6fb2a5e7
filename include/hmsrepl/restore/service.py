"""One entry point for every caller of a restore (the CLI, the Airflow DAG's task): a request in, a plan and
its result out. Callers parse and print; validation lives here, so both refuse bad input with the same line.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from hmsrepl.metastore import Metastore
from hmsrepl.restore.executor import RestoreExecutor, RestoreResult
from hmsrepl.restore.history import RestoreError
from hmsrepl.restore.plan import RestorePlan
from hmsrepl.restore.planner import RestorePlanner, split_name

KINDS = ("table", "partitions", "database", "revert")


@dataclass(frozen=True)
class RestoreRequest:
    """What to restore: ``kind`` one of ``KINDS``; ``name`` ``DB.TABLE`` (``DB`` for a database)."""

    kind: str
    name: str
    into: str | None = None
    event: int | None = None  # revert: as of this event id
    time: str | None = None  # revert: as of this time (ISO 8601, UTC unless it says; or epoch seconds)
    partitions: tuple[str, ...] = ()
    preview: bool = False
    verify: bool = True  # read every needed file to check its checksum before changing anything


def parse_time(text: str) -> int:
    """Epoch seconds from ``2026-11-28T07:00:00Z``, ``2026-11-28 07:00:00`` (UTC) or ``1795849200``."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise RestoreError(
            f"'{text}' is not a time; write it as ISO 8601 (2026-11-28T07:00:00Z) or epoch seconds"
        ) from None
    return int((parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp())


def plan_restore(store: Metastore, request: RestoreRequest) -> RestorePlan:
    """The plan of ``request`` on ``store``; raises RestoreError (one line) for input it must refuse."""
    if request.kind not in KINDS:
        raise RestoreError(f"unknown restore kind '{request.kind}'; use one of {', '.join(KINDS)}")
    planner = RestorePlanner(store, verify=request.verify)
    if request.kind == "database":
        if "." in request.name or not request.name.strip():
            raise RestoreError(f"'{request.name}' is not a database name")
        if request.partitions or request.event is not None or request.time:
            raise RestoreError(
                "a database is undropped as of just before its drop; it takes no event, time or partitions"
            )
        return planner.undrop_database(request.name.strip(), into=request.into)
    db, table = split_name(request.name)
    if request.kind == "table":
        if request.partitions or request.event is not None or request.time:
            raise RestoreError(
                "a table is undropped as of just before its drop; to go back to an event use 'revert'"
            )
        return planner.undrop_table(db, table, into=request.into)
    if request.kind == "partitions":
        if request.into or request.event is not None or request.time:
            raise RestoreError(
                "partitions are undropped into their table as of just before their drop; to copy them elsewhere "
                "use 'revert --into NEW'"
            )
        return planner.undrop_partitions(db, table, list(request.partitions))
    if (request.event is None) == (request.time is None):
        raise RestoreError(f"revert of '{request.name}' needs exactly one of --event ID or --time TIME")
    as_of = (
        request.event if request.event is not None else planner.event_for_time(parse_time(request.time or ""))
    )
    if as_of < 1:
        raise RestoreError(f"event id {as_of} is not an event; event ids start at 1")
    return planner.revert_table(db, table, as_of, partitions=list(request.partitions), into=request.into)


def run_restore(store: Metastore, request: RestoreRequest) -> tuple[RestorePlan, RestoreResult | None]:
    """Plan ``request`` and, unless it is a preview, run it; a preview returns no result."""
    plan = plan_restore(store, request)
    if request.preview:
        return plan, None
    return plan, RestoreExecutor(store).run(plan)


def summary(plan: RestorePlan, result: RestoreResult) -> str:
    """One line saying what a run did, for logs and the CLI."""
    events = f"events {result.first_event}..{result.last_event}" if result.first_event else "no events"
    return (
        f"restored {plan.target} as of event {plan.as_of}: {result.files} files ({result.bytes} bytes, "
        f"{result.linked} hard-linked) in {result.seconds:.2f} s; {events} logged, replicas follow with their "
        "next incremental load"
    )
