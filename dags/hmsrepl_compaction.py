"""Compaction of insert-only tables on both sides: Hive's initiator, worker and cleaner, plus aborted writes.

Each side runs ``spark_apps/compact.py --side source|target`` (``CompactionOperator``): it queues a major or
minor compaction of each table or partition with more than ``HMSREPL_COMPACTION_DELTA_THRESHOLD`` deltas,
rewrites them (``HMSREPL_COMPACTION_ENGINE``: ``spark`` submits the application, rows rewritten into few
files; ``copy`` runs it as a plain Python process), and cleans what earlier compactions made obsolete once
no reader needs it. A source compaction is not replicated (the replica copies nothing for it), so the
replica is compacted by its own task. Queued compactions (``ALTER TABLE ... COMPACT`` from a Hive client)
are run by the same pass.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG
from hmsrepl_airflow.operators import CompactionOperator
from hmsrepl_airflow.settings import (
    COMPACTION_DAG_ID,
    COMPACTION_SCHEDULE_ENV,
    DEFAULT_COMPACTION_SCHEDULE,
    SOURCE_CONN_ID,
    SPARK_CONN_ID,
    TARGET_CONN_ID,
    compaction_engine,
    default_args,
    schedule_setting,
)

with DAG(
    dag_id=COMPACTION_DAG_ID,
    description="Compact insert-only tables and clean obsolete and aborted files, source and target",
    doc_md=__doc__,
    schedule=schedule_setting(COMPACTION_SCHEDULE_ENV, DEFAULT_COMPACTION_SCHEDULE)[0],
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args=default_args(),
    tags=["hmsrepl", "acid", "maintenance"],
) as dag:
    for side, metastore_conn_id in (("source", SOURCE_CONN_ID), ("target", TARGET_CONN_ID)):
        CompactionOperator(
            task_id=f"compact_{side}",
            side=side,
            metastore_conn_id=metastore_conn_id,
            engine=compaction_engine()[0],
            conn_id=SPARK_CONN_ID,
            name=f"hmsrepl-compact-{side}",
            doc_md=f"Queues, runs and cleans compactions of the {side}'s insert-only tables.",
        )
