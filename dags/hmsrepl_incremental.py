"""Keep replicas up to date: incremental REPL DUMP in LIMIT-sized batches and REPL LOAD until caught up.

Replicates every ``{"policy", "target_db"}`` of the ``replications`` parameter (default: the JSON list in
``HMSREPL_REPLICATIONS``). Tasks: read each replica's ``repl.last.id`` from the target and the source's
current event id (a replica never bootstrapped fails the run, saying to trigger ``hmsrepl_bootstrap``; a run
with nothing new is skipped without starting Spark), run ``spark_apps/repl_sync.py`` (dump FROM
repl.last.id LIMIT n and load, batch after batch, up to the source's event id at its start), mirror
``repl.last.id`` into the Variables ``hmsrepl_repl_last_id__<policy>``. One run at a time.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Param
from hmsrepl_airflow.operators import MirrorReplLastIdOperator, ReplicationCheckOperator
from hmsrepl_airflow.settings import (
    INCREMENTAL_DAG_ID,
    INCREMENTAL_SCHEDULE_ENV,
    SPARK_CONF,
    SPARK_CONN_ID,
    batch_limit,
    configured_replications,
    default_args,
    spark_app,
)

REPLICATIONS = "{{ params.replications | tojson }}"

with DAG(
    dag_id=INCREMENTAL_DAG_ID,
    description="Incremental replication in LIMIT batches until caught up (scheduled)",
    doc_md=__doc__,
    schedule=os.environ.get(INCREMENTAL_SCHEDULE_ENV) or timedelta(minutes=15),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,  # never two runs at once: batches of one replica must load in order
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
    check = ReplicationCheckOperator(task_id="check_replicas", replications=REPLICATIONS)
    catch_up = SparkSubmitOperator(
        task_id="catch_up",
        application=spark_app("repl_sync.py"),
        application_args=["--replications", REPLICATIONS, "--limit", "{{ params.limit }}"],
        conn_id=SPARK_CONN_ID,
        conf=SPARK_CONF,
        name="hmsrepl-incremental",
    )
    mirror = MirrorReplLastIdOperator(task_id="mirror_repl_last_id", replications=REPLICATIONS)
    check >> catch_up >> mirror
