"""Point-in-time restore on the source metastore (manual trigger only): undrop or revert, previewed first.

Trigger with the form: ``kind`` (``table``, ``partitions``, ``database`` or ``revert``), ``name``
(``DB.TABLE``, or ``DB`` for a database), and for a revert an ``event`` id or a ``time``; ``into`` puts the
restored state under a new name; ``partitions`` limits it to some partitions. ``preview`` (on by default)
only logs what would change, which files from cmroot and how many bytes: trigger again with it off to
restore; an insert-only transactional table reverts to a ``write_id``. The restore is logged as ordinary events, so replicas follow it with their next incremental run.
A refusal (a taken name, files gone from cmroot, a protected replica) fails the task with one line and
changes nothing. Same as ``hmsrepl restore ...`` on the command line.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG, Param
from hmsrepl_airflow.operators import RestoreOperator
from hmsrepl_airflow.settings import RESTORE_DAG_ID, default_args

with DAG(
    dag_id=RESTORE_DAG_ID,
    description="Undrop tables, partitions, databases or revert a table, from the log and cmroot",
    doc_md=__doc__,
    schedule=None,  # manual trigger only
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args=default_args(),
    tags=["hmsrepl", "restore"],
    params={
        "kind": Param("table", enum=["table", "partitions", "database", "revert"], description="What to do"),
        "name": Param("", type="string", description="DB.TABLE (or DB for a database)"),
        "into": Param("", type="string", description="Restore under this new name (empty: its own)"),
        "event": Param("", type="string", description="revert: as of this event id"),
        "time": Param("", type="string", description="revert: as of this time (ISO 8601, UTC)"),
        "write_id": Param(
            "", type="string", description="revert of an insert-only table: as of this write id"
        ),
        "partitions": Param([], type="array", description="Only these partitions (KEY=VALUE[/KEY=VALUE])"),
        "preview": Param(True, type="boolean", description="Only show what would change"),
    },
) as dag:
    RestoreOperator(
        task_id="restore",
        kind="{{ params.kind }}",
        name="{{ params.name }}",
        into="{{ params.into }}",
        event="{{ params.event }}",
        at_time="{{ params.time }}",
        write_id="{{ params.write_id }}",
        partitions="{{ params.partitions | tojson }}",
        preview="{{ params.preview }}",
        retries=0,
        doc_md="Plans the restore, logs the preview or runs it through the catalog's write path.",
    )
