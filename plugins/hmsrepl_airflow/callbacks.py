"""The pipeline's alert hook points: task failures and missed freshness deadlines.

Each logs one line, then calls the operator's own function, if one is configured:

- ``HMSREPL_ON_FAILURE_CALLBACK=package.module:function`` receives the failed task's context;
- ``HMSREPL_ON_DEADLINE_CALLBACK=package.module:function`` receives one ``dict`` per missed deadline (``kind``
  ``replica``: a replica found staler than ``HMSREPL_FRESHNESS_DEADLINE_SECONDS`` by its replicate task;
  ``dagrun``: Airflow's deadline alert, an incremental run not finished within that time), with ``message``.

They are imported when they are needed, not when the DAG is parsed, so a typo can never make the DAGs vanish
(``settings.configuration_problems`` reports it); a callback that fails is logged and never hides the task's
own error.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

log = logging.getLogger("hmsrepl_airflow.callbacks")

FAILURE_CALLBACK_ENV = "HMSREPL_ON_FAILURE_CALLBACK"
DEADLINE_CALLBACK_ENV = "HMSREPL_ON_DEADLINE_CALLBACK"
#: What Airflow's deadline alert calls (by import path: it runs on an executor, not in the DAG file).
DEADLINE_CALLBACK_PATH = "hmsrepl_airflow.callbacks.on_deadline_missed"


def _call_configured(env: str, argument: Any) -> None:
    """Call the ``package.module:function`` named by ``env`` with ``argument``; log its failure, never raise."""
    target = os.environ.get(env, "").strip()
    if not target:
        return
    module_name, _, function_name = target.partition(":")
    try:
        callback = getattr(importlib.import_module(module_name), function_name)
        callback(argument)
    except Exception:  # a broken notifier must not replace what it reports
        log.exception("%s=%r failed", env, target)


def on_task_failure(context: dict[str, Any]) -> None:
    """Log what failed in one line, then call the configured callback."""
    ti = context.get("task_instance") or context.get("ti")
    error = context.get("exception")
    where = f"{getattr(ti, 'dag_id', '?')}.{getattr(ti, 'task_id', '?')}"
    map_index = getattr(ti, "map_index", -1)
    if map_index not in (-1, None):
        where += f"[{map_index}]"
    log.error("hmsrepl task %s failed: %s", where, " ".join(str(error).split()) if error else "unknown error")
    _call_configured(FAILURE_CALLBACK_ENV, context)


def freshness_alert(
    *,
    target_db: str,
    policy: str,
    lag_seconds: int,
    deadline_seconds: int,
    since_event_id: int,
    run_id: str,
    logger: Any = log,
) -> dict[str, Any]:
    """A replica is staler than the deadline: its oldest missing source event is ``lag_seconds`` old.

    ``logger``: the task's own, so the line is in the task log the alert points to."""
    alert = {
        "kind": "replica",
        "target_db": target_db,
        "policy": policy,
        "lag_seconds": lag_seconds,
        "deadline_seconds": deadline_seconds,
        "oldest_missing_event_id": since_event_id,
        "run_id": run_id,
        "message": (
            f"freshness deadline missed: replica {target_db} lacks events of {policy} from {lag_seconds} s ago "
            f"(event {since_event_id} on), deadline {deadline_seconds} s"
        ),
    }
    _raise(alert, logger)
    return alert


def on_deadline_missed(context: dict[str, Any] | None = None, deadline_seconds: int = 0) -> None:
    """Airflow's deadline alert of the incremental DAG: a run not finished ``deadline_seconds`` after it was
    queued leaves every replica it serves staler than the deadline."""
    run = (context or {}).get("dag_run") or {}
    deadline = (context or {}).get("deadline") or {}
    _raise(
        {
            "kind": "dagrun",
            "dag_id": run.get("dag_id"),
            "run_id": run.get("dag_run_id") or run.get("run_id"),
            "deadline_time": str(deadline.get("deadline_time")),
            "deadline_seconds": deadline_seconds,
            "message": (
                f"freshness deadline missed: run {run.get('dag_run_id') or run.get('run_id')} of "
                f"{run.get('dag_id')} was not done {deadline_seconds} s after it was queued "
                f"(deadline {deadline.get('deadline_time')})"
            ),
        }
    )


def _raise(alert: dict[str, Any], logger: Any = log) -> None:
    logger.error("hmsrepl %s", alert["message"])
    _call_configured(DEADLINE_CALLBACK_ENV, alert)
