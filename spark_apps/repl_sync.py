"""Bring replicas up to date in one spark-submit: optional bootstrap, then LIMIT-sized incremental batches.

    spark-submit spark_apps/repl_sync.py --replications '[{"policy": "sales", "target_db": "sales_dr"}]' \
        [--bootstrap] [--limit 500]          # metastores and dump root from HMSREPL_SOURCE_*/TARGET_*/DUMP_ROOT

What the Airflow DAGs submit. For each replication (in order):

1. with ``--bootstrap``: ``REPL DUMP <policy>`` (big tables listed on Spark) and ``REPL LOAD`` (files copied
   and verified on Spark when there are many), as ``repl_dump.py`` and ``repl_load.py`` do;
2. then, from the target's ``repl.last.id``, ``REPL DUMP <policy> FROM <last> TO <goal> LIMIT <limit>`` and
   its load, batch after batch, until the replica reaches ``goal``: the source's current event id when the
   application started. Events logged meanwhile wait for the next run, so a run always ends.

One JVM for all of it (a spark-submit costs ~10 s); Spark itself starts only when a dump or a copy is big
enough. Every batch's load advances ``repl.last.id`` with the work it records, so a failed run keeps what it
finished and the next run resumes there. A replica never bootstrapped is refused (nothing is dumped).
Prints ``{"source_event_id": ..., "replications": [{"target_db": ..., "repl_last_id": ..., ...}]}``.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
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
    open_metastore,
    open_source,
    side_options,
    spark_min_files_option,
)

# isort: split
from hmsrepl.exceptions import HmsReplError
from hmsrepl.hive_source.source import StockHiveSource
from hmsrepl.metastore import Metastore
from hmsrepl.replication.commands import LoadCommand
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.metrics import MetricsLog
from hmsrepl.replication.replications import Replication, parse_replications
from hmsrepl.replication.source_roots import SourceRoots
from spark_apps.repl_dump import run_dump
from spark_apps.repl_load import run_load

log = logging.getLogger("hmsrepl.spark_apps.repl_sync")


class NotBootstrappedError(HmsReplError):
    """An incremental run was asked for a target database that holds no replica yet."""


@dataclasses.dataclass
class Sync:
    """What the run needs besides the replication itself."""

    source: Metastore | StockHiveSource
    target: Metastore
    dump_root: str
    spark: LazySpark
    limit: int
    goal: int
    spark_min_locations: int
    spark_min_files: int

    @property
    def metrics(self) -> MetricsLog:
        """Dumps and loads are recorded on the target, as the CLI records them when it has a target."""
        return MetricsLog(self.target.engine)


@click.command()
@click.option(
    "--replications",
    "replications_text",
    envvar="HMSREPL_REPLICATIONS",
    required=True,
    help='JSON list, e.g. \'[{"policy": "sales", "target_db": "sales_dr"}]\' (HMSREPL_REPLICATIONS).',
)
@click.option("--bootstrap", is_flag=True, help="Bootstrap each replica first (REPL DUMP <policy> + LOAD).")
@click.option(
    "--limit",
    envvar="HMSREPL_REPL_LIMIT",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="Events per incremental dump (HMSREPL_REPL_LIMIT).",
)
@side_options("source")
@side_options("target")
@dump_options
@spark_min_files_option(64, "Copy on Spark only when a load needs at least this many files.")
@app_options
@application
def main(
    replications_text: str,
    bootstrap: bool,
    limit: int,
    dump_root: str,
    spark_min_locations: int,
    spark_min_files: int,
    master: str | None,
    **sides: Any,
) -> dict[str, Any]:
    """Bootstrap (optionally) and catch up every replication with the source's current event id."""
    replications = parse_replications(replications_text, "--replications")
    if not replications:
        raise click.UsageError("--replications is empty: name at least one policy and target_db")
    source = open_source(sides)
    target = open_metastore("target", sides)
    spark = LazySpark("hmsrepl-repl-sync", master)
    try:
        goal = source.get_current_notification_event_id()
        log.info("source metastore is at event %d: replicating up to there", goal)
        run = Sync(source, target, dump_root, spark, limit, goal, spark_min_locations, spark_min_files)
        results = [sync(run, replication, bootstrap) for replication in replications]
    finally:
        spark.stop()
        source.close()
        target.close()
    return {"source_event_id": goal, "replications": results, "spark_startup_seconds": spark.startup_seconds}


def sync(run: Sync, replication: Replication, bootstrap: bool) -> dict[str, Any]:
    """One replication: bootstrap if asked, then incremental batches until ``run.goal``."""
    started = time.perf_counter()
    policy_command = replication.command
    summary: dict[str, Any] = {**replication.to_dict(), "batches": 0, "events": 0, "files": 0, "bytes": 0}
    if bootstrap:
        dumped = run_dump(
            policy_command, run.source, run.dump_root, run.spark, run.spark_min_locations, run.metrics
        )
        loaded = _load(run, dumped["dump_dir"], replication.target_db)
        summary["bootstrap"] = {k: dumped[k] for k in ("dump_dir", "last_event_id", "tables", "partitions")}
        summary["files"], summary["bytes"] = loaded["files"], loaded["bytes"]
        log.info(
            "bootstrapped %s from %s at event %d: %d tables, %d partitions, %d files copied",
            replication.target_db,
            replication.policy,
            dumped["last_event_id"],
            dumped["tables"],
            dumped["partitions"],
            loaded["files"],
        )
    last = repl_status(run.target, replication.target_db)
    if last is None:
        raise NotBootstrappedError(
            f"target database '{replication.target_db}' is not a replica of '{replication.policy}' (it has no "
            "repl.last.id): bootstrap it first (the hmsrepl_bootstrap DAG, or this application with --bootstrap)"
        )
    while last < run.goal:
        command = dataclasses.replace(
            policy_command, from_event_id=last, to_event_id=run.goal, limit=run.limit
        )
        dumped = run_dump(command, run.source, run.dump_root, run.spark, run.spark_min_locations, run.metrics)
        loaded = _load(run, dumped["dump_dir"], replication.target_db)
        reached = repl_status(run.target, replication.target_db) or 0
        if reached <= last:
            raise HmsReplError(
                f"the load of {dumped['dump_dir']} left '{replication.target_db}' at event {reached}; "
                "nothing advanced, stopping so the run does not loop: check the load's log"
            )
        summary["batches"] += 1
        summary["events"] += loaded["events_applied"]
        summary["files"] += loaded["files"]
        summary["bytes"] += loaded["bytes"]
        log.info(
            "%s: batch %d applied %d events (%d files); at event %d of %d",
            replication.target_db,
            summary["batches"],
            loaded["events_applied"],
            loaded["files"],
            reached,
            run.goal,
        )
        last = reached
    summary["repl_last_id"] = last
    summary["seconds"] = round(time.perf_counter() - started, 3)
    log.info("%s is caught up at event %d", replication.target_db, last)
    return summary


def _load(run: Sync, dump_dir: str, target_db: str) -> dict[str, Any]:
    return run_load(
        LoadCommand(dump_dir=dump_dir, target_db=target_db),
        run.target,
        run.spark,
        run.spark_min_files,
        keep_spark=True,
        source_roots=SourceRoots.of_source(run.source.config.warehouse, run.source.config.cmroot),
    )


if __name__ == "__main__":
    main()
