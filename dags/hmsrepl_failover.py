"""Planned failover of one replica (manual trigger only): RPO 0, the old source becomes the new replica.

Trigger with ``{"source_db": "sales", "target_db": "sales_dr"}`` (and ``"policy"`` when the replica holds
only some tables). The task freezes the source database (writes refused with a clear error), replicates its
last events, verifies the replica equals the source at the hand-over event, then promotes the replica and
makes the old source a protected replica of it (``hmsrepl.failover.handover.id`` on both sides). Afterwards,
point ``HMSREPL_REPLICATIONS`` (and the source/target settings) the other way round for reverse replication.

A failed run leaves the source frozen and the task log says why: trigger again (it continues) or lift the
freeze with ``hmsrepl repl unprotect <db> --reason ...``. See the README's "Disaster recovery" runbook.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG, Param
from hmsrepl_airflow.operators import FailoverOperator
from hmsrepl_airflow.settings import FAILOVER_DAG_ID, dagrun_timeout, default_args

with DAG(
    dag_id=FAILOVER_DAG_ID,
    description="Planned failover: freeze the source, last events, verify, promote the replica",
    doc_md=__doc__,
    schedule=None,  # manual trigger only
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=dagrun_timeout(),
    default_args=default_args(),
    tags=["hmsrepl", "replication", "failover"],
    params={
        "source_db": Param("", type="string", description="The source database to fail over from"),
        "target_db": Param("", type="string", description="Its replica, promoted to the new source"),
        "policy": Param("", type="string", description="The replica's policy if not the whole database"),
    },
) as dag:
    FailoverOperator(
        task_id="failover",
        source_db="{{ params.source_db }}",
        target_db="{{ params.target_db }}",
        policy="{{ params.policy }}",
        retries=0,
        doc_md="Logs the lag, freezes the source, replicates the last events, verifies, promotes.",
    )
