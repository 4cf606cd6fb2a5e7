"""REPL LOAD as a Spark application: copy the dump's files on the executors, then apply it to the target.

    spark-submit spark_apps/repl_load.py --command "REPL LOAD sales_dr FROM '<dump dir>'" \
        --target-db-url URL --target-warehouse DIR --target-cmroot DIR \
        --source-warehouse DIR --source-cmroot DIR     # where the dump's files may be read (never the dump's word)

1. plan: every file the load needs, at its final target path (``hmsrepl.spark.load_copy_plan``; nothing
   when the load would be refused, so nothing is staged for it);
2. copy: executors stage checksum-verified copies under hidden names (``hmsrepl.spark.spark_copy``); with
   fewer than ``--spark-min-files`` files Spark is not started and the load copies them itself;
3. load: ``LoadEngine.load`` finds the staged copies, publishes them and applies the metadata, advancing
   ``repl.last.id`` only with the work it records. A failed copy stops before step 3: the target is unchanged;
4. tidy: staged copies the load did not need (files it found in place) are removed.

Prints ``{"target_db": ..., "last_event_id": ..., "events_applied": ..., "files": ..., "bytes": ...,
"prefetched": ..., ...}``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

if __package__ in (None, ""):  # run as a script: make the spark_apps package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_apps.common import (  # first: it puts hmsrepl on the path (here and for Spark's workers)
    LazySpark,
    app_options,
    application,
    open_metastore,
    parse_as,
    side_options,
    spark_min_files_option,
)

# isort: split
from hmsrepl.cli import load_source_roots, source_external_roots_option
from hmsrepl.metastore import Metastore
from hmsrepl.replication.commands import LoadCommand
from hmsrepl.replication.engine import recorded_load
from hmsrepl.replication.filecopy import CopyTask
from hmsrepl.replication.load import LoadEngine, LoadResult, repl_status
from hmsrepl.replication.metrics import MetricsLog, StageClock
from hmsrepl.spark.copy import SparkCopyError, discard_unpublished, load_copy_plan, spark_copy

log = logging.getLogger("hmsrepl.spark_apps.repl_load")


@click.command()
@click.option("--command", "command_text", required=True, help="e.g. \"REPL LOAD sales_dr FROM '<dir>'\"")
@side_options("target")
@click.option(
    "--source-warehouse", envvar="HMSREPL_SOURCE_WAREHOUSE", help="Source warehouse a dump may name."
)
@click.option("--source-cmroot", envvar="HMSREPL_SOURCE_CMROOT", help="Source cmroot a dump may name.")
@source_external_roots_option
@spark_min_files_option(
    64, "Copy on Spark only when the load needs at least this many files (else the load copies them)."
)
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=None,
    help="Copy tasks (default: one per core; more for very many files).",
)
@app_options
@application
def main(
    command_text: str,
    spark_min_files: int,
    partitions: int | None,
    master: str | None,
    source_external_roots: str | None,
    **sides: Any,
) -> dict[str, Any]:
    """Run one REPL LOAD command: distributed copy first, then the load itself."""
    command = parse_as(command_text, LoadCommand, "REPL LOAD")
    roots = load_source_roots(sides, source_external_roots)  # None: HMSREPL_SOURCE_* or a clear refusal
    target = open_metastore("target", sides)
    spark = LazySpark("hmsrepl-repl-load", master)
    try:
        summary = run_load(command, target, spark, spark_min_files, partitions, source_roots=roots)
    finally:
        spark.stop()
        target.close()
    summary["spark_startup_seconds"] = spark.startup_seconds
    return summary


def run_load(
    command: LoadCommand,
    target: Metastore,
    spark: LazySpark,
    spark_min_files: int = 64,
    partitions: int | None = None,
    *,
    keep_spark: bool = False,
    source_roots: Any = None,
) -> dict[str, Any]:
    """Copy the load's files on Spark when there are enough of them, then apply the load; returns the summary.

    Recorded in the target's ``repl_metrics`` like a CLI load, with the copy plan and the copy as their own
    stages (a load refused while planning is recorded too). Spark is stopped after the copy (the load is
    metadata work) unless ``keep_spark``: a caller running many loads in a row keeps one session rather than
    paying for a new JVM each time.
    """
    tasks: list[CopyTask] = []
    staged = staged_bytes = 0

    def work(clock: StageClock, _meta: object) -> LoadResult:
        nonlocal tasks, staged, staged_bytes
        with clock.stage("plan"):
            tasks = load_copy_plan(target, command, source_roots)
        if len(tasks) >= spark_min_files:
            log.info("copying %d files on Spark", len(tasks))
            try:
                with clock.stage("copy"):
                    results = spark_copy(spark(), tasks, partitions=partitions)
            except SparkCopyError as exc:
                db = command.target_db or "the target database"
                raise SparkCopyError(
                    exc.failures,
                    exc.total,
                    f"nothing was applied: {db} is unchanged (copies verified so far are kept for a re-run)",
                ) from exc
            if not keep_spark:
                spark.stop()  # the load is metadata work: free the executors while it runs
            staged = sum(1 for r in results if r.bytes_copied > 0)
            staged_bytes = sum(r.bytes_copied for r in results)
            log.info("staged %d verified copies (%d bytes); loading", staged, staged_bytes)
        else:
            log.info("%d files to copy: below --spark-min-files, the load copies them", len(tasks))
        engine = LoadEngine(target, clock=clock, source_roots=source_roots)
        engine.copies_staged = len(tasks) >= spark_min_files  # verified on Spark: no copy ahead again
        return engine.load(command, progress=lambda n: log.info("applied a batch of %d events", n))

    result = recorded_load(MetricsLog(target.engine), command, work)
    discarded = discard_unpublished(tasks) if staged else 0
    if discarded:
        log.info("removed %d staged copies the load found in place already", discarded)
    status = repl_status(target, result.target_db)
    stats = result.stats
    log.info("%s is at event %s", result.target_db, status)
    return {
        "target_db": result.target_db,
        "last_event_id": result.last_event_id,
        "events_applied": result.events_applied,
        "tables": stats.tables,
        "partitions": stats.partitions,
        "files": stats.files_copied,
        "bytes": stats.bytes_copied,
        "prefetched": stats.files_prefetched,
        "from_cmroot": stats.files_from_cmroot,
        "files_removed": stats.files_removed,
        "planned_files": len(tasks),
        "staged_on_spark": staged,
        "staged_bytes": staged_bytes,
        "staged_unused": discarded,
        "skipped_events": stats.skipped_events,
    }


if __name__ == "__main__":
    main()
