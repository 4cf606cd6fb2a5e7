"""What the DAGs share: replications to run, connection ids, where the Spark applications are, defaults.

Everything comes from environment variables, so the same DAG files run unchanged on a laptop and in
docker-compose; reading them costs nothing at import time (no database, no network). The Spark applications
themselves read the metastore settings (``HMSREPL_SOURCE_*``, ``HMSREPL_TARGET_*``, ``HMSREPL_DUMP_ROOT``)
from the environment spark-submit inherits.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from hmsrepl.replication.replications import ReplicationConfigError, parse_replications
from hmsrepl_airflow.callbacks import (
    DEADLINE_CALLBACK_ENV,
    DEADLINE_CALLBACK_PATH,
    FAILURE_CALLBACK_ENV,
    on_task_failure,
)

SOURCE_CONN_ID = "hmsrepl_source_metastore"
TARGET_CONN_ID = "hmsrepl_target_metastore"
SPARK_CONN_ID = "spark_default"

#: JSON list of ``{"policy": ..., "target_db": ...}``: what the scheduled incremental DAG replicates.
REPLICATIONS_ENV = "HMSREPL_REPLICATIONS"
#: LIMIT of each incremental dump (events per batch).
LIMIT_ENV = "HMSREPL_REPL_LIMIT"
DEFAULT_LIMIT = 500
#: Where ``spark_apps/`` is (default: next to this checkout's ``dags/``).
SPARK_APPS_ENV = "HMSREPL_SPARK_APPS"
INCREMENTAL_SCHEDULE_ENV = "HMSREPL_INCREMENTAL_SCHEDULE"
CM_CLEANUP_SCHEDULE_ENV = "HMSREPL_CM_CLEANUP_SCHEDULE"
COMPACTION_SCHEDULE_ENV = "HMSREPL_COMPACTION_SCHEDULE"
#: How the compaction DAG rewrites rows: "spark" (spark-submit, few files) or "copy" (plain Python, no JVM).
COMPACTION_ENGINE_ENV = "HMSREPL_COMPACTION_ENGINE"
RETRIES_ENV = "HMSREPL_TASK_RETRIES"
#: First wait before a retry (seconds; doubled each time, at most 30 minutes).
RETRY_DELAY_ENV = "HMSREPL_TASK_RETRY_DELAY_SECONDS"
DEFAULT_RETRY_DELAY_SECONDS = 120
#: Longest a task may run (minutes) before Airflow fails it: a hung spark-submit must not block the DAG.
TASK_TIMEOUT_ENV = "HMSREPL_TASK_TIMEOUT_MINUTES"
DEFAULT_TASK_TIMEOUT_MINUTES = 180
#: Longest an incremental run may take (minutes) before it is failed and the next one may start.
DAGRUN_TIMEOUT_ENV = "HMSREPL_DAGRUN_TIMEOUT_MINUTES"
DEFAULT_DAGRUN_TIMEOUT_MINUTES = 240
#: Pending events (of one replication) from which its catch-up is submitted to Spark; below, it runs as a
#: plain Python process that starts no JVM unless a load's copy is big enough for Spark.
SPARK_MIN_EVENTS_ENV = "HMSREPL_SPARK_MIN_EVENTS"
DEFAULT_SPARK_MIN_EVENTS = 2000
#: Dump directories older than this (seconds) are removed by the cleanup DAG (default 7 days).
DUMP_RETENTION_ENV = "HMSREPL_DUMP_RETENTION_SECONDS"
DEFAULT_DUMP_RETENTION_SECONDS = 7 * 86400
#: Longest a replica may lack a source event (seconds; unset: no deadline). A replicate task finding its replica
#: staler, or an incremental run not done this long after it was queued (Airflow's deadline alert), raises an
#: alert (``callbacks``).
FRESHNESS_DEADLINE_ENV = "HMSREPL_FRESHNESS_DEADLINE_SECONDS"
DEFAULT_INCREMENTAL_SCHEDULE = "*/15 * * * *"
DEFAULT_CM_CLEANUP_SCHEDULE = "@daily"
DEFAULT_COMPACTION_SCHEDULE = "@hourly"

VARIABLE_PREFIX = "hmsrepl_repl_last_id__"
BOOTSTRAP_DAG_ID = "hmsrepl_bootstrap"
INCREMENTAL_DAG_ID = "hmsrepl_incremental"
CM_CLEANUP_DAG_ID = "hmsrepl_cm_cleanup"
COMPACTION_DAG_ID = "hmsrepl_compaction"
FAILOVER_DAG_ID = "hmsrepl_failover"
RESTORE_DAG_ID = "hmsrepl_restore"


def variable_key(policy: str) -> str:
    """The Airflow Variable mirroring a policy's ``repl.last.id``: the policy folded to a URL-safe name."""
    return VARIABLE_PREFIX + re.sub(r"[^A-Za-z0-9_]+", "_", policy.strip()).strip("_").lower()


def configured_replications() -> list[dict[str, str]] | str:
    """The incremental DAG's default ``replications`` parameter, from ``HMSREPL_REPLICATIONS``.

    A malformed value must not break DAG parsing (the UI would lose the DAG): it is passed on as it is, and
    the first task fails with the parse error.
    """
    raw = os.environ.get(REPLICATIONS_ENV, "")
    try:
        return [r.to_dict() for r in parse_replications(raw, REPLICATIONS_ENV)]
    except ReplicationConfigError:
        return raw


def batch_limit() -> int:
    return positive_int_setting(LIMIT_ENV, DEFAULT_LIMIT)[0]


def positive_int_setting(name: str, default: int) -> tuple[int, str | None]:
    """A whole-number setting >= 1 and, when it is malformed, the default plus a message saying so.

    DAG files must parse whatever the environment holds (a DAG that fails to import vanishes from the UI and
    stops being scheduled), so a bad value never raises here: the DAG's first task fails with the message.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default, None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        return default, f"{name}={raw!r} is not a whole number >= 1; fix it (default {default})"
    return value, None


def schedule_setting(name: str, default: str) -> tuple[str | None, str | None]:
    """A DAG schedule from ``name`` (cron expression, ``@daily``-style preset, or ``none``).

    A malformed value is replaced by ``default`` and reported (see ``positive_int_setting`` for why it
    does not raise); ``none`` turns the schedule off (runs are then triggered by hand or by the API).
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default, None
    if raw.lower() in ("none", "off"):
        return None, None
    from airflow.utils.dates import cron_presets
    from croniter import croniter  # type: ignore[import-untyped]  # no stubs

    if croniter.is_valid(cron_presets.get(raw, raw)):
        return raw, None
    return default, (
        f"{name}={raw!r} is not a cron expression or preset (e.g. '*/15 * * * *', '@hourly', 'none'); "
        f"the DAG runs on {default!r} until it is fixed"
    )


def compaction_engine() -> tuple[str, str | None]:
    """``HMSREPL_COMPACTION_ENGINE`` (spark or copy; default spark), and the problem with it if malformed."""
    raw = os.environ.get(COMPACTION_ENGINE_ENV, "").strip().lower()
    if raw in ("", "spark", "copy"):
        return raw or "spark", None
    return (
        "spark",
        f"{COMPACTION_ENGINE_ENV}={raw!r} is not 'spark' or 'copy'; the DAG uses 'spark' until it is fixed",
    )


def configuration_problems() -> list[str]:
    """Every malformed pipeline setting, each as one line naming the variable and the fix."""
    problems = [
        schedule_setting(INCREMENTAL_SCHEDULE_ENV, DEFAULT_INCREMENTAL_SCHEDULE)[1],
        schedule_setting(CM_CLEANUP_SCHEDULE_ENV, DEFAULT_CM_CLEANUP_SCHEDULE)[1],
        schedule_setting(COMPACTION_SCHEDULE_ENV, DEFAULT_COMPACTION_SCHEDULE)[1],
        compaction_engine()[1],
        positive_int_setting(LIMIT_ENV, DEFAULT_LIMIT)[1],
        positive_int_setting(TASK_TIMEOUT_ENV, DEFAULT_TASK_TIMEOUT_MINUTES)[1],
        positive_int_setting(DAGRUN_TIMEOUT_ENV, DEFAULT_DAGRUN_TIMEOUT_MINUTES)[1],
        positive_int_setting(SPARK_MIN_EVENTS_ENV, DEFAULT_SPARK_MIN_EVENTS)[1],
        positive_int_setting(RETRY_DELAY_ENV, DEFAULT_RETRY_DELAY_SECONDS)[1],
        positive_int_setting(DUMP_RETENTION_ENV, DEFAULT_DUMP_RETENTION_SECONDS)[1],
    ]
    problems.append(positive_int_setting(FRESHNESS_DEADLINE_ENV, 0)[1])
    if os.environ.get(RETRIES_ENV, "").strip() and not os.environ[RETRIES_ENV].strip().isdigit():
        problems.append(f"{RETRIES_ENV}={os.environ[RETRIES_ENV]!r} is not a whole number >= 0; fix it")
    for env in (FAILURE_CALLBACK_ENV, DEADLINE_CALLBACK_ENV):
        callback = os.environ.get(env, "").strip()
        if callback and ":" not in callback:
            problems.append(f"{env}={callback!r} must be 'package.module:function'")
    return [p for p in problems if p]


def dagrun_timeout() -> timedelta:
    return timedelta(minutes=positive_int_setting(DAGRUN_TIMEOUT_ENV, DEFAULT_DAGRUN_TIMEOUT_MINUTES)[0])


def freshness_deadline_seconds() -> int:
    """``HMSREPL_FRESHNESS_DEADLINE_SECONDS``; 0 when unset or malformed (no deadline)."""
    return positive_int_setting(FRESHNESS_DEADLINE_ENV, 0)[0]


def deadline_alerts() -> Any:
    """The incremental DAG's Airflow deadline alert: a run not done ``HMSREPL_FRESHNESS_DEADLINE_SECONDS``
    after it was queued calls ``callbacks.on_deadline_missed`` on an executor. None without a deadline, or
    on an Airflow without deadline alerts (before 3.1): the replicate tasks' own freshness check remains."""
    seconds = freshness_deadline_seconds()
    if not seconds:
        return None
    try:
        from airflow.sdk import (  # type: ignore[attr-defined]  # Airflow 3.1+
            DeadlineAlert,
            DeadlineReference,
            SyncCallback,
        )
    except ImportError:
        return None
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=timedelta(seconds=seconds),
        callback=SyncCallback(DEADLINE_CALLBACK_PATH, kwargs={"deadline_seconds": seconds}),
        name="hmsrepl_freshness",
    )


def dump_retention_seconds() -> int:
    return positive_int_setting(DUMP_RETENTION_ENV, DEFAULT_DUMP_RETENTION_SECONDS)[0]


def spark_min_events() -> int:
    return positive_int_setting(SPARK_MIN_EVENTS_ENV, DEFAULT_SPARK_MIN_EVENTS)[0]


def spark_app(name: str) -> str:
    """Path of a Spark application (``HMSREPL_SPARK_APPS``, else ``spark_apps/`` beside ``dags/``)."""
    root = os.environ.get(SPARK_APPS_ENV) or str(Path(__file__).resolve().parents[2] / "spark_apps")
    return str(Path(root) / name)


def default_args() -> dict[str, Any]:
    """Owner, retries and delays every task of the pipeline has (retries: ``HMSREPL_TASK_RETRIES``)."""
    try:
        retries = int(os.environ.get(RETRIES_ENV, "2"))
    except ValueError:
        retries = 2
    timeout = positive_int_setting(TASK_TIMEOUT_ENV, DEFAULT_TASK_TIMEOUT_MINUTES)[0]
    return {
        "owner": "hmsrepl",
        "retries": retries,
        "retry_delay": timedelta(
            seconds=positive_int_setting(RETRY_DELAY_ENV, DEFAULT_RETRY_DELAY_SECONDS)[0]
        ),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=30),
        "execution_timeout": timedelta(minutes=timeout),
        "on_failure_callback": on_task_failure,
    }


def replica_asset(target_db: str) -> Any:
    """The Asset of one replica database: updated whenever a run advances its ``repl.last.id``.

    Downstream DAGs schedule on it (``schedule=[replica_asset("sales_dr")]``) to run after fresh data.
    """
    from airflow.sdk import Asset

    return Asset(name=f"hmsrepl_replica__{target_db}", uri=f"hmsrepl://replica/{target_db}")


#: What the replication tasks declare as outlets; each run adds the replicas it advanced to it.
REPLICAS_ASSET_ALIAS = "hmsrepl_replicas"


#: Spark settings every submitted application gets (progress bars are noise in task logs).
SPARK_CONF = {"spark.ui.showConsoleProgress": "false", "spark.ui.enabled": "false"}
