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
RETRIES_ENV = "HMSREPL_TASK_RETRIES"

VARIABLE_PREFIX = "hmsrepl_repl_last_id__"
BOOTSTRAP_DAG_ID = "hmsrepl_bootstrap"
INCREMENTAL_DAG_ID = "hmsrepl_incremental"
CM_CLEANUP_DAG_ID = "hmsrepl_cm_cleanup"


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
    try:
        return max(1, int(os.environ.get(LIMIT_ENV, DEFAULT_LIMIT)))
    except ValueError:
        return DEFAULT_LIMIT


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
    return {
        "owner": "hmsrepl",
        "retries": retries,
        "retry_delay": timedelta(minutes=2),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=30),
    }


#: Spark settings every submitted application gets (progress bars are noise in task logs).
SPARK_CONF = {"spark.ui.showConsoleProgress": "false", "spark.ui.enabled": "false"}
