"""Bootstrap one replica: full REPL DUMP of a policy on the source, REPL LOAD into the target database.

Trigger by hand with ``{"policy": "sales", "target_db": "sales_dr"}``. Tasks: check that both metastores
answer (over their Airflow connections), run ``spark_apps/repl_sync.py --bootstrap`` (listing and copy on
Spark, then the incremental catch-up to the source's current event), mirror the replica's ``repl.last.id``
into the Variable ``hmsrepl_repl_last_id__<policy>``. The scheduled ``hmsrepl_incremental`` DAG takes over
from there. Re-running it re-bootstraps a replica; a non-empty database that is not a replica is refused.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Param
from hmsrepl_airflow.operators import MirrorReplLastIdOperator, ReplicationCheckOperator
from hmsrepl_airflow.settings import BOOTSTRAP_DAG_ID, SPARK_CONF, SPARK_CONN_ID, default_args, spark_app

# The run's one replication, as the JSON list every task and application takes.
REPLICATION = '{{ [{"policy": params.policy, "target_db": params.target_db}] | tojson }}'

with DAG(
    dag_id=BOOTSTRAP_DAG_ID,
    description="Bootstrap a replica: REPL DUMP <policy> + REPL LOAD <target_db> (manual trigger)",
    doc_md=__doc__,
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args=default_args(),
    tags=["hmsrepl", "replication", "bootstrap"],
    params={
        "policy": Param(
            type="string",
            minLength=1,
            description="Replication policy, e.g. sales or sales.['orders', 't[0-9]+'].['tmp_.*']",
        ),
        "target_db": Param(type="string", minLength=1, description="Database on the target metastore"),
    },
) as dag:
    check = ReplicationCheckOperator(
        task_id="check_metastores",
        replications=REPLICATION,
        require_bootstrap=False,
        skip_when_caught_up=False,
    )
    bootstrap = SparkSubmitOperator(
        task_id="bootstrap",
        application=spark_app("repl_sync.py"),
        application_args=["--bootstrap", "--replications", REPLICATION],
        conn_id=SPARK_CONN_ID,
        conf=SPARK_CONF,
        name="hmsrepl-bootstrap",
    )
    mirror = MirrorReplLastIdOperator(task_id="mirror_repl_last_id", replications=REPLICATION)
    check >> bootstrap >> mirror
