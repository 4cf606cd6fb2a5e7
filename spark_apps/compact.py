"""Compaction of one side's insert-only tables as a Spark application (what ``hmsrepl compact`` does).

    spark-submit spark_apps/compact.py --side target --engine spark

One pass: the cleaner, the initiator (``HMSREPL_COMPACTION_DELTA_THRESHOLD``, major or minor), the worker,
the cleaner again, then aborted writes. With ``--engine spark`` the worker rewrites rows in the table's format
into few files; Spark starts only when a compaction actually runs. ``--engine copy`` needs no Spark. A replica
compacts on its own schedule (its compactions are not replicated), so the DAG runs this for each side. Prints
``{"side": ..., "queued": ..., "compacted": ..., "failed": ..., "cleaned": ...}``; exits 1 after the summary
if a compaction failed (the others ran).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

if __package__ in (None, ""):  # run as a script: make the spark_apps package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_apps.common import (  # first: it puts hmsrepl on the path (here and for Spark's workers)
    ConfigurationError,
    LazySpark,
    app_options,
    application,
    open_metastore,
    side_options,
)

# isort: split
from hmsrepl.acid.compaction_cycle import run_cycle
from hmsrepl.acid.compactor import Rewriter, copy_rewriter
from hmsrepl.exceptions import HmsReplError
from hmsrepl.metastore.model import Table
from hmsrepl.storage.rooted import RootedFileSystem

log = logging.getLogger("hmsrepl.spark_apps.compact")


def lazy_spark_rewriter(spark: LazySpark) -> Rewriter:
    """The Spark rewriter, its session started by the first compaction that runs (none: no JVM)."""

    def rewrite(table: Table, inputs: Sequence[str], target: str, fs: RootedFileSystem) -> None:
        from hmsrepl.acid.spark import spark_rewriter

        spark_rewriter(spark())(table, inputs, target, fs)

    return rewrite


@click.command()
@click.option("--side", type=click.Choice(["source", "target"]), required=True, help="Which metastore.")
@click.option(
    "--engine",
    type=click.Choice(["spark", "copy"]),
    default="spark",
    show_default=True,
    help="spark: rows rewritten into few files; copy: files moved into one directory as they are.",
)
@click.option("--table", default=None, help="Only this insert-only table, as <database>.<table>.")
@side_options("source")
@side_options("target")
@app_options
@application
def main(side: str, engine: str, table: str | None, master: str | None, **sides: Any) -> dict[str, Any]:
    """Queue, compact and clean the insert-only tables of one metastore."""
    if str(sides.get(f"{side}_db_url") or "").startswith("thrift://"):
        raise ConfigurationError(
            f"the {side} metastore is a stock Hive Metastore, which compacts its own tables (Hive's compactor); "
            f"point --{side}-db-url at a database of this product's metastore"
        )
    store = open_metastore(side, sides)
    spark = LazySpark(f"hmsrepl-compact-{side}", master)
    try:
        rewriter = lazy_spark_rewriter(spark) if engine == "spark" else copy_rewriter
        report = run_cycle(store, table=table, rewriter=rewriter)
    finally:
        spark.stop()
        store.close()
    summary = {
        "side": side,
        "engine": engine,
        "queued": sum(1 for c in report.queued if c.compaction_id is not None),
        "compacted": sum(1 for o in report.compacted if o.base_dir),
        "failed": len(report.failed),
        "cleaned": sum(1 for c in report.cleaned if c.cleaned),
        "spark_startup_seconds": spark.startup_seconds,
    }
    if report.failed:
        click.echo(json.dumps(summary, sort_keys=True))  # the orchestrator still gets the counts
        first = report.failed[0]
        raise HmsReplError(
            f"{len(report.failed)} compaction(s) failed, e.g. {first.record.target}: {first.message}; "
            "see 'hmsrepl compact --show', fix the cause and run again"
        )
    log.info("%s: %s", side, summary)
    return summary


if __name__ == "__main__":
    main()
