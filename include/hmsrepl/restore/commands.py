"""``hmsrepl restore ...``: the command line of ``restore.service`` (parsing and printing only)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.restore.service import RestoreRequest, plan_json, preview_text, run_restore, summary

Opener = Callable[[MetastoreConfig], Metastore]


def restore_group(open_store: Opener, friendly: Callable[[Any], Any]) -> click.Group:
    """The ``restore`` group, opening the metastore with ``open_store`` and turning the product's errors into
    one line with ``friendly`` (both from ``hmsrepl.cli``)."""

    @click.group("restore")
    def restore() -> None:
        """Undrop tables, partitions and databases; revert tables to an event (from the log and cmroot)."""

    def common(func: Any) -> Any:
        func = click.option(
            "--limit",
            type=click.IntRange(0),
            default=50,
            show_default=True,
            help="Files listed by --preview (text).",
        )(func)
        func = click.option("--json", "as_json_output", is_flag=True, help="Print the plan as JSON.")(func)
        func = click.option("--preview", is_flag=True, help="Show what would change; change nothing.")(func)
        return func

    def execute(ctx: click.Context, request: RestoreRequest, as_json_output: bool, limit: int) -> None:
        plan, result = run_restore(open_store(ctx.obj), request)
        if as_json_output:
            doc = plan_json(plan)
            if result is not None:
                doc["result"] = {
                    "files": result.files,
                    "bytes": result.bytes,
                    "linked": result.linked,
                    "seconds": result.seconds,
                    "events": [result.first_event, result.last_event],
                }
            click.echo(json.dumps(doc, sort_keys=True))
        elif result is None:
            click.echo(preview_text(plan, limit))
        else:
            click.echo(summary(plan, result))

    @restore.command("table")
    @click.argument("name")
    @click.option("--into", help="Restore under this name (NAME or DB.NAME) instead of the table's own.")
    @common
    @click.pass_context
    @friendly
    def restore_table(
        ctx: click.Context, name: str, into: str | None, preview: bool, as_json_output: bool, limit: int
    ) -> None:
        """Undrop table NAME (DB.TABLE) as it was just before its last drop."""
        execute(ctx, RestoreRequest("table", name, into=into, preview=preview), as_json_output, limit)

    @restore.command("partitions")
    @click.argument("name")
    @click.option(
        "--partition",
        "partitions",
        multiple=True,
        help="KEY=VALUE[/KEY=VALUE] (repeatable; default: those of the last partition drop).",
    )
    @common
    @click.pass_context
    @friendly
    def restore_partitions(
        ctx: click.Context,
        name: str,
        partitions: tuple[str, ...],
        preview: bool,
        as_json_output: bool,
        limit: int,
    ) -> None:
        """Undrop partitions of table NAME (DB.TABLE), each as it was just before its drop."""
        request = RestoreRequest("partitions", name, partitions=partitions, preview=preview)
        execute(ctx, request, as_json_output, limit)

    @restore.command("database")
    @click.argument("name")
    @click.option("--into", help="Restore under this database name instead of its own.")
    @common
    @click.pass_context
    @friendly
    def restore_database(
        ctx: click.Context, name: str, into: str | None, preview: bool, as_json_output: bool, limit: int
    ) -> None:
        """Undrop database NAME with the tables and functions its drop removed."""
        execute(ctx, RestoreRequest("database", name, into=into, preview=preview), as_json_output, limit)

    @restore.command("revert")
    @click.argument("name")
    @click.option("--event", type=click.IntRange(1), help="Revert to the state as of this event id.")
    @click.option(
        "--time", "at_time", help="Revert to the state as of this time (ISO 8601, or epoch seconds)."
    )
    @click.option(
        "--partition",
        "partitions",
        multiple=True,
        help="Only these partitions, KEY=VALUE[/KEY=VALUE] (repeatable).",
    )
    @click.option(
        "--write-id",
        type=click.IntRange(0),
        help="Insert-only transactional tables: revert to what readers saw as of this write id.",
    )
    @click.option("--into", help="Put the old state into this new table (NAME or DB.NAME); leave NAME alone.")
    @common
    @click.pass_context
    @friendly
    def restore_revert(
        ctx: click.Context,
        name: str,
        event: int | None,
        at_time: str | None,
        partitions: tuple[str, ...],
        write_id: int | None,
        into: str | None,
        preview: bool,
        as_json_output: bool,
        limit: int,
    ) -> None:
        """Revert table NAME (DB.TABLE), or some of its partitions, to an event id, a time or a write id."""
        request = RestoreRequest(
            "revert",
            name,
            into=into,
            event=event,
            time=at_time,
            partitions=partitions,
            write_id=write_id,
            preview=preview,
        )
        execute(ctx, request, as_json_output, limit)

    return restore
