"""The pipeline's failure hook point: one line in the task log, then the operator's own callback, if any.

``HMSREPL_ON_FAILURE_CALLBACK=package.module:function`` names a function that receives the task context
(page someone, post to a chat). It is imported when a task fails, not when the DAG is parsed, so a typo in
it can never make the DAGs vanish; a callback that fails is logged and never hides the task's own error.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

log = logging.getLogger("hmsrepl_airflow.callbacks")

FAILURE_CALLBACK_ENV = "HMSREPL_ON_FAILURE_CALLBACK"


def on_task_failure(context: dict[str, Any]) -> None:
    """Log what failed in one line, then call the configured callback."""
    ti = context.get("task_instance") or context.get("ti")
    error = context.get("exception")
    where = f"{getattr(ti, 'dag_id', '?')}.{getattr(ti, 'task_id', '?')}"
    if getattr(ti, "map_index", -1) not in (-1, None):
        where += f"[{ti.map_index}]"
    log.error("hmsrepl task %s failed: %s", where, " ".join(str(error).split()) if error else "unknown error")
    target = os.environ.get(FAILURE_CALLBACK_ENV, "").strip()
    if not target:
        return
    module_name, _, function_name = target.partition(":")
    try:
        callback = getattr(importlib.import_module(module_name), function_name)
        callback(context)
    except Exception:  # a broken notifier must not replace the task's own failure
        log.exception("%s=%r failed", FAILURE_CALLBACK_ENV, target)
