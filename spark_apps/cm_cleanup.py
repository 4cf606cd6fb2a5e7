"""cmroot retention as a Spark application: delete recycled files older than the retention.

    spark-submit spark_apps/cm_cleanup.py --cmroot s3://warehouse/cmroot --retention-seconds 86400

The driver lists cmroot; with at least ``--spark-min-files`` expired files the deletes run on the executors
(one LIST and one DELETE per file on an object store), else on driver threads and Spark is not started.
Each file's age is checked again just before its delete: content recycled again since the listing has had
its retention restarted and is kept. Prints ``{"cmroot": ..., "deleted": ..., "kept": ..., ...}``; exits 1
after the summary if some files could not be deleted (the rest are deleted regardless).
"""

from __future__ import annotations

import json
import logging
import os
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
    spark_min_files_option,
)

# isort: split
from hmsrepl.exceptions import StorageError
from hmsrepl.spark.listing import DEFAULT_MIN_SPARK_DELETES, cleanup_cmroot

log = logging.getLogger("hmsrepl.spark_apps.cm_cleanup")


@click.command()
@click.option("--cmroot", envvar="HMSREPL_CMROOT", help="Change manager root (HMSREPL_CMROOT).")
@click.option(
    "--side",
    type=click.Choice(["source", "target"]),
    default=None,
    help="Without --cmroot: clean this side's cmroot (HMSREPL_SOURCE_CMROOT / HMSREPL_TARGET_CMROOT).",
)
@click.option(
    "--retention-seconds",
    envvar="HMSREPL_CM_RETENTION_SECONDS",
    type=click.IntRange(min=0),
    default=24 * 3600,
    show_default=True,
    help="Keep recycled files this long (HMSREPL_CM_RETENTION_SECONDS).",
)
@spark_min_files_option(
    DEFAULT_MIN_SPARK_DELETES, "Delete on Spark only with at least this many expired files."
)
@app_options
@application
def main(
    cmroot: str | None, side: str | None, retention_seconds: int, spark_min_files: int, master: str | None
) -> dict[str, Any]:
    """Delete cmroot files older than the retention (counted from when they were recycled)."""
    cmroot = cmroot_of(cmroot, side)
    spark = LazySpark("hmsrepl-cm-cleanup", master)
    try:
        result, failures = cleanup_cmroot(
            cmroot, retention_seconds, spark=spark, min_spark_files=spark_min_files
        )
    finally:
        spark.stop()
    log.info(
        "cmroot %s: deleted %d files (%d bytes), kept %d",
        cmroot,
        result.deleted,
        result.bytes_deleted,
        result.kept,
    )
    summary = {
        "cmroot": cmroot,
        "retention_seconds": retention_seconds,
        "deleted": result.deleted,
        "bytes_deleted": result.bytes_deleted,
        "kept": result.kept,
        "failed": len(failures),
        "spark_startup_seconds": spark.startup_seconds,
    }
    if failures:
        click.echo(json.dumps(summary, sort_keys=True))  # the orchestrator still gets the counts
        raise StorageError(
            f"{len(failures)} expired cmroot file(s) could not be deleted (the others were), e.g. "
            f"'{failures[0].uri}': {failures[0].reason}; the next cleanup retries them"
        )
    return summary


def cmroot_of(cmroot: str | None, side: str | None) -> str:
    """The cmroot to clean: --cmroot, else the side's HMSREPL_<SIDE>_CMROOT (how the DAGs name it)."""
    if cmroot:
        return cmroot
    env = f"HMSREPL_{side.upper()}_CMROOT" if side else "HMSREPL_CMROOT"
    value = os.environ.get(env) if side else None
    if not value:
        raise click.UsageError(f"no cmroot to clean: pass --cmroot or set {env}")
    return value


if __name__ == "__main__":
    main()
