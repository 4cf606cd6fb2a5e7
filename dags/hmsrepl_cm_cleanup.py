"""Retention: cmroot files older than ``HMSREPL_CM_RETENTION_SECONDS`` on both sides, and old dumps.

The source's cmroot keeps dropped and overwritten files so that events not replicated yet stay replayable;
keep its retention well above the longest replication lag you accept. Each side runs
``spark_apps/cm_cleanup.py --side source|target`` (cmroot from the side's metastore connection, extra
``cmroot``, else ``HMSREPL_SOURCE_CMROOT`` / ``HMSREPL_TARGET_CMROOT``) as a plain Python process: no JVM
unless enough files expired that the deletes run on Spark (the Spark connection's master). ``prune_dumps`` removes dump
directories under ``HMSREPL_DUMP_ROOT`` older than ``HMSREPL_DUMP_RETENTION_SECONDS`` (7 days), except one
a replica's bootstrap load must still finish (no JVM: it only lists and deletes metadata files).
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG
from hmsrepl_airflow.operators import CmrootCleanupOperator, PruneDumpsOperator
from hmsrepl_airflow.settings import (
    CM_CLEANUP_DAG_ID,
    CM_CLEANUP_SCHEDULE_ENV,
    DEFAULT_CM_CLEANUP_SCHEDULE,
    SOURCE_CONN_ID,
    SPARK_CONN_ID,
    TARGET_CONN_ID,
    default_args,
    dump_retention_seconds,
    schedule_setting,
)

with DAG(
    dag_id=CM_CLEANUP_DAG_ID,
    description="Delete cmroot files older than the retention, source and target",
    doc_md=__doc__,
    schedule=schedule_setting(CM_CLEANUP_SCHEDULE_ENV, DEFAULT_CM_CLEANUP_SCHEDULE)[0],
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args=default_args(),
    tags=["hmsrepl", "cmroot", "maintenance"],
) as dag:
    for side, metastore_conn_id in (("source", SOURCE_CONN_ID), ("target", TARGET_CONN_ID)):
        CmrootCleanupOperator(
            task_id=f"cleanup_{side}_cmroot",
            side=side,
            metastore_conn_id=metastore_conn_id,
            conn_id=SPARK_CONN_ID,
            name=f"hmsrepl-cm-cleanup-{side}",
            doc_md=f"Deletes {side} cmroot files older than HMSREPL_CM_RETENTION_SECONDS.",
        )
    PruneDumpsOperator(
        task_id="prune_dumps",
        retention_seconds=dump_retention_seconds(),
        doc_md="Removes dump directories older than HMSREPL_DUMP_RETENTION_SECONDS (not one still being loaded).",
    )
