"""Keep replicas up to date: incremental REPL DUMP in LIMIT-sized batches and REPL LOAD until caught up.

Replicates every ``{"policy", "target_db"}`` of the ``replications`` parameter (default: the JSON list in
``HMSREPL_REPLICATIONS``), one mapped ``replicate`` task per replication, each with its own retries and log:

- ``plan_replications`` checks the pipeline's settings and the list (a typo fails here, once, with its fix);
- ``replicate`` reads the replica's ``repl.last.id`` and how many events of the policy's database are
  pending. Nothing pending: skipped, nothing started. A few: ``spark_apps/repl_sync.py`` as a plain Python
  process (no JVM). Many (``HMSREPL_SPARK_MIN_EVENTS``): spark-submit. It dumps FROM repl.last.id LIMIT n
  and loads, batch after batch, up to the source's event id at its start, mirrors ``repl.last.id`` into
  the Variable ``hmsrepl_repl_last_id__<policy>`` and updates the replica's Asset
  ``hmsrepl://replica/<target_db>`` (schedule downstream DAGs on it). A replica never bootstrapped, bad
  configuration or a refused dump fail without retries; an unreachable metastore or storage retries.

Freshness deadline (``HMSREPL_FRESHNESS_DEADLINE_SECONDS``): a ``replicate`` task that finds its replica lacking
a source event older than that raises an alert, and so does Airflow's deadline alert when a run is not done
that long after it was queued (a line in the log, then ``HMSREPL_ON_DEADLINE_CALLBACK``).

Unpause the DAG to start the schedule (``airflow dags unpause hmsrepl_incremental``); one run at a time.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG, AssetAlias, Param
from hmsrepl_airflow.operators import ReplicateOperator, ReplicationPlanOperator
from hmsrepl_airflow.settings import (
    DEFAULT_INCREMENTAL_SCHEDULE,
    INCREMENTAL_DAG_ID,
    INCREMENTAL_SCHEDULE_ENV,
    REPLICAS_ASSET_ALIAS,
    batch_limit,
    configured_replications,
    dagrun_timeout,
    deadline_alerts,
    default_args,
    schedule_setting,
)

with DAG(
    dag_id=INCREMENTAL_DAG_ID,
    description="Incremental replication in LIMIT batches until caught up (scheduled)",
    doc_md=__doc__,
    schedule=schedule_setting(INCREMENTAL_SCHEDULE_ENV, DEFAULT_INCREMENTAL_SCHEDULE)[0],
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,  # never two runs at once: batches of one replica must load in order
    dagrun_timeout=dagrun_timeout(),
    deadline=deadline_alerts(),  # HMSREPL_FRESHNESS_DEADLINE_SECONDS: a run still going then raises an alert
    default_args=default_args(),
    tags=["hmsrepl", "replication", "incremental"],
    params={
        "replications": Param(
            configured_replications(),
            type=["array", "string"],
            description='[{"policy": "sales", "target_db": "sales_dr"}, ...] (default: HMSREPL_REPLICATIONS)',
        ),
        "limit": Param(batch_limit(), type="integer", minimum=1, description="Events per incremental dump"),
    },
) as dag:
    plan = ReplicationPlanOperator(
        task_id="plan_replications",
        retries=0,
        doc_md="Checks the pipeline's settings and the replications list; one mapped task per replication.",
    )
    ReplicateOperator.partial(
        task_id="replicate",
        limit="{{ params.limit }}",
        outlets=[AssetAlias(REPLICAS_ASSET_ALIAS)],
        map_index_template="{{ target_db }}",
        doc_md="One replication: pending events checked, catch-up (Python or spark-submit), Variable, Asset.",
    ).expand(replication=plan.output)
