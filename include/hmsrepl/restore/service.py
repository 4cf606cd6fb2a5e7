"""One entry point for every caller of a restore (the CLI, the Airflow DAG's task): a request in, a plan and
its result out. Callers parse and print; validation lives here, so both refuse bad input with the same line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hmsrepl.metastore import Metastore
from hmsrepl.restore.acid import AcidRevertPlan, plan_insert_only, run_insert_only
from hmsrepl.restore.errors import RestoreError
from hmsrepl.restore.executor import RestoreExecutor, RestoreResult
from hmsrepl.restore.plan import RestorePlan
from hmsrepl.restore.planner import RestorePlanner, split_name
from hmsrepl.restore.preview import as_json, as_text

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
    write_id: int | None = None  # revert of an insert-only transactional table: as of this write id
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


Plan = RestorePlan | AcidRevertPlan


def plan_restore(store: Metastore, request: RestoreRequest) -> Plan:
    """The plan of ``request`` on ``store``; raises RestoreError (one line) for input it must refuse."""
    if request.kind not in KINDS:
        raise RestoreError(f"unknown restore kind '{request.kind}'; use one of {', '.join(KINDS)}")
    if request.write_id is not None and request.kind != "revert":
        raise RestoreError("--write-id goes with 'revert' of an insert-only transactional table")
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
    if sum(x is not None for x in (request.event, request.time, request.write_id)) != 1:
        raise RestoreError(
            f"revert of '{request.name}' needs exactly one of --event ID, --time TIME or --write-id ID"
        )
    if request.write_id is not None:
        if request.into:
            raise RestoreError("a revert to a write id overwrites the table itself; it takes no --into")
        return plan_insert_only(store, db, table, request.write_id, request.partitions)
    as_of = (
        request.event if request.event is not None else planner.event_for_time(parse_time(request.time or ""))
    )
    if as_of < 1:
        raise RestoreError(f"event id {as_of} is not an event; event ids start at 1")
    return planner.revert_table(db, table, as_of, partitions=list(request.partitions), into=request.into)


def run_restore(store: Metastore, request: RestoreRequest) -> tuple[Plan, RestoreResult | None]:
    """Plan ``request`` and, unless it is a preview, run it; a preview returns no result."""
    plan = plan_restore(store, request)
    if request.preview:
        return plan, None
    if isinstance(plan, AcidRevertPlan):
        started, before = time.monotonic(), store.events.current_event_id()
        files = run_insert_only(store, plan)
        after = store.events.current_event_id()
        return plan, RestoreResult(before + 1, after, files, 0, 0, time.monotonic() - started)
    return plan, RestoreExecutor(store).run(plan)


def preview_text(plan: Plan, limit: int = 50) -> str:
    return plan.text() if isinstance(plan, AcidRevertPlan) else as_text(plan, limit)


def plan_json(plan: Plan) -> dict[str, Any]:
    return plan.to_json() if isinstance(plan, AcidRevertPlan) else as_json(plan)


def summary(plan: Plan, result: RestoreResult) -> str:
    """One line saying what a run did, for logs and the CLI."""
    if isinstance(plan, AcidRevertPlan):
        return (
            f"reverted table '{plan.table}' to write id {plan.write_id}: {result.files} files in new base "
            f"directories in {result.seconds:.2f} s; events {result.first_event}..{result.last_event} logged, "
            "replicas follow with their next incremental load"
        )
    events = f"events {result.first_event}..{result.last_event}" if result.first_event else "no events"
    return (
        f"restored {plan.target} as of event {plan.as_of}: {result.files} files ({result.bytes} bytes, "
        f"{result.linked} hard-linked) in {result.seconds:.2f} s; {events} logged, replicas follow with their "
        "next incremental load"
    )
