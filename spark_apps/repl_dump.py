"""REPL DUMP as a Spark application: the source side of one replication step.

    spark-submit spark_apps/repl_dump.py --command "REPL DUMP sales FROM 120 LIMIT 500" \
        --source-db-url URL --source-warehouse DIR --source-cmroot DIR --dump-root DIR

A bootstrap dump lists and checksums every data file of the database: tables with many partitions are
described on the executors (``hmsrepl.spark.SparkDumpEngine``), so Spark starts only if a table needs it.
An incremental dump is metadata work (events already carry their files and checksums): it runs in this
process and never starts Spark. Prints ``{"dump_dir": ..., "last_event_id": ..., ...}``.
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
    dump_options,
    open_source,
    parse_as,
    side_options,
)

# isort: split
from hmsrepl.hive_source.source import StockHiveSource
from hmsrepl.metastore import Metastore
from hmsrepl.replication.commands import DumpCommand
from hmsrepl.replication.dump import DumpEngine, DumpResult
from hmsrepl.replication.engine import recorded_dump
from hmsrepl.replication.metrics import MetricsLog, StageClock
from hmsrepl.spark.listing import DEFAULT_MIN_SPARK_LOCATIONS, SparkDumpEngine

log = logging.getLogger("hmsrepl.spark_apps.repl_dump")


@click.command()
@click.option("--command", "command_text", required=True, help='e.g. "REPL DUMP sales FROM 120 LIMIT 500"')
@side_options("source")
@dump_options
@app_options
@application
def main(
    command_text: str, dump_root: str, spark_min_locations: int, master: str | None, **sides: Any
) -> dict[str, Any]:
    """Run one REPL DUMP command against the source metastore and write its dump directory."""
    command = parse_as(command_text, DumpCommand, "REPL DUMP")
    source = open_source(sides)
    spark = LazySpark("hmsrepl-repl-dump", master)
    try:
        # A stock Hive Metastore source has no database of ours to record the dump in.
        metrics = MetricsLog(source.engine) if hasattr(source, "engine") else None
        summary = run_dump(command, source, dump_root, spark, spark_min_locations, metrics)
    finally:
        spark.stop()
        source.close()
    summary["spark_startup_seconds"] = spark.startup_seconds
    return summary


def run_dump(
    command: DumpCommand,
    source: Metastore | StockHiveSource,
    dump_root: str,
    spark: LazySpark,
    spark_min_locations: int = DEFAULT_MIN_SPARK_LOCATIONS,
    metrics: MetricsLog | None = None,
) -> dict[str, Any]:
    """Write one dump: a bootstrap lists big tables on Spark (started only then), an incremental never does.

    Recorded in ``metrics`` (a ``repl_metrics`` table; the CLI records dumps the same way) when given.
    Returns the summary (``dump_dir``, ``last_event_id``, counts); ``spark`` is left running for the caller.
    """
    engine: DumpEngine
    if command.is_bootstrap:
        engine = SparkDumpEngine(
            source,
            dump_root,
            spark,
            min_spark_locations=spark_min_locations,
            on_table_dumped=lambda table: log.info("dumped table %s", table),
        )
    else:
        engine = DumpEngine(source, dump_root)

    def work(clock: StageClock) -> DumpResult:
        engine.clock = clock  # the recorded row gets the engine's seconds per stage
        return engine.dump(command)

    result = recorded_dump(metrics, command, work) if metrics is not None else work(StageClock())
    log.info("dump %s written up to event %d", result.dump_dir, result.last_event_id)
    summary: dict[str, Any] = {
        "dump_dir": result.dump_dir,
        "last_event_id": result.last_event_id,
        "kind": "bootstrap" if command.is_bootstrap else "incremental",
        "events": result.events,
        "tables": result.tables,
        "partitions": result.partitions,
        "files": result.files,
    }
    if isinstance(engine, SparkDumpEngine):
        summary["locations_on_spark"] = engine.locations_on_spark
        summary["locations_on_driver"] = engine.locations_on_driver
    return summary


if __name__ == "__main__":
    main()
