"""Bootstrap one replica: full REPL DUMP of a policy on the source, REPL LOAD into the target database.

Trigger by hand with ``{"policy": "sales", "target_db": "sales_dr"}`` (unpause the DAG first: a run of a
paused DAG stays queued). Tasks: check that both metastores answer (over their Airflow connections), then
``bootstrap``: ``spark_apps/repl_sync.py --bootstrap`` on spark-submit (listing and copy on Spark, then the
incremental catch-up to the source's current event), the replica's ``repl.last.id`` mirrored into the
Variable ``hmsrepl_repl_last_id__<policy>`` and its Asset ``hmsrepl://replica/<target_db>`` updated. The
scheduled ``hmsrepl_incremental`` DAG takes over from there. Re-running it re-bootstraps a replica; a
non-empty database that is not a replica is refused (without retries, as every configuration error).
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG, AssetAlias, Param
from hmsrepl_airflow.operators import ReplicateOperator, ReplicationCheckOperator
from hmsrepl_airflow.settings import BOOTSTRAP_DAG_ID, REPLICAS_ASSET_ALIAS, default_args

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
        doc_md="Both metastores answer over their Airflow connections; the policy parses.",
    )
    bootstrap = ReplicateOperator(
        task_id="bootstrap",
        replication=REPLICATION,
        bootstrap=True,
        outlets=[AssetAlias(REPLICAS_ASSET_ALIAS)],
        doc_md="REPL DUMP + LOAD on spark-submit, then catch-up; Variable and Asset of the replica updated.",
    )
    check >> bootstrap
