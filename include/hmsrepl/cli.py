"""The operator command line: it parses and prints; the work lives in the library.

Settings come from options or from the ``HMSREPL_*`` environment variables of ``MetastoreConfig``.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import HmsReplError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.database import make_engine, schema_is_current, upgrade_schema

F = TypeVar("F", bound=Callable[..., Any])


def _friendly_errors(func: F) -> F:
    """Turn the product's own errors into one clear line and exit code 1, without a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except HmsReplError as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


@click.group()
@click.option("--db-url", envvar="HMSREPL_DB_URL", help="Metastore database URL (default: embedded SQLite).")
@click.option("--warehouse", envvar="HMSREPL_WAREHOUSE", help="Warehouse root.")
@click.option("--cmroot", envvar="HMSREPL_CMROOT", help="Change manager root.")
@click.pass_context
def main(ctx: click.Context, db_url: str | None, warehouse: str | None, cmroot: str | None) -> None:
    """Hive-style warehouse replication: metastore operations."""
    overrides = {k: v for k, v in {"db_url": db_url, "warehouse": warehouse, "cmroot": cmroot}.items() if v}
    ctx.obj = MetastoreConfig(**overrides)


def _store(ctx: click.Context) -> Metastore:
    config: MetastoreConfig = ctx.obj
    if not schema_is_current(make_engine(config.db_url)):
        raise click.ClickException(
            f"the metastore schema at {config.db_url} is missing or old; run 'hmsrepl schema upgrade' first"
        )
    return Metastore(config)


@main.group()
def schema() -> None:
    """Create and upgrade the metastore schema (Alembic migrations)."""


@schema.command("upgrade")
@click.option("--revision", default="head", show_default=True)
@click.pass_context
@_friendly_errors
def schema_upgrade(ctx: click.Context, revision: str) -> None:
    """Create the schema, or upgrade it to REVISION; safe to run again."""
    upgrade_schema(ctx.obj.db_url, revision)
    Metastore(ctx.obj).ensure_default_database()
    click.echo(f"metastore schema at {ctx.obj.db_url} is at revision {revision}")


@main.group()
def metastore() -> None:
    """Run the metastore service."""


@metastore.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=9083, show_default=True)
@click.option("--housekeeping-interval", type=float, default=60.0, show_default=True, help="Seconds.")
@click.pass_context
@_friendly_errors
def metastore_serve(ctx: click.Context, host: str, port: int, housekeeping_interval: float) -> None:
    """Serve the Hive Metastore Thrift protocol (Spark: spark.hadoop.hive.metastore.uris=thrift://HOST:PORT)."""
    import logging

    from hmsrepl.thrift.server import MetastoreServer, install_signal_handlers

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_signal_handlers()
    store = Metastore.open(ctx.obj)
    server = MetastoreServer(store, host, port)
    click.echo(f"metastore serving thrift://{host}:{port} (db {ctx.obj.db_url})", err=True)
    server.serve_forever(housekeeping_interval)


@main.group()
def events() -> None:
    """Read and maintain the notification log."""


@events.command("current-id")
@click.pass_context
@_friendly_errors
def events_current_id(ctx: click.Context) -> None:
    """Print the id of the newest event (0 when the log is empty)."""
    click.echo(_store(ctx).get_current_notification_event_id())


@events.command("show")
@click.option(
    "--after", "after_id", type=int, default=0, show_default=True, help="Show events after this id."
)
@click.option("--max", "max_events", type=int, default=100, show_default=True)
@click.option("--db", "db_name", help="Only events of this database.")
@click.option("--table", "table_name", help="Only events of this table.")
@click.option("--type", "event_types", multiple=True, help="Only these event types (repeatable).")
@click.option("--body/--no-body", default=False, help="Print each event's decoded message too.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document per line.")
@click.pass_context
@_friendly_errors
def events_show(
    ctx: click.Context,
    after_id: int,
    max_events: int,
    db_name: str | None,
    table_name: str | None,
    event_types: tuple[str, ...],
    body: bool,
    as_json: bool,
) -> None:
    """List events of the notification log in id order."""
    found = _store(ctx).get_next_notification(
        after_id,
        max_events,
        db_name=db_name,
        table_name=table_name,
        event_types=[t.upper() for t in event_types],
    )
    for event in found:
        if as_json:
            record: dict[str, Any] = {
                "event_id": event.event_id,
                "event_time": event.event_time,
                "event_type": event.event_type,
                "db": event.db_name,
                "table": event.table_name,
            }
            if body:
                record["message"] = event.body()
            click.echo(json.dumps(record, sort_keys=True))
            continue
        when = datetime.fromtimestamp(event.event_time, UTC).strftime("%Y-%m-%d %H:%M:%S")
        target = ".".join(part for part in (event.db_name, event.table_name) if part) or "-"
        click.echo(f"{event.event_id:>10}  {when}  {event.event_type:<16} {target}")
        if body:
            click.echo(json.dumps(event.body(), indent=2, sort_keys=True))


@events.command("count")
@click.option("--db", "db_name", required=True)
@click.option("--from", "from_id", type=int, default=0, show_default=True)
@click.option("--to", "to_id", type=int, default=None)
@click.pass_context
@_friendly_errors
def events_count(ctx: click.Context, db_name: str, from_id: int, to_id: int | None) -> None:
    """Count a database's events with FROM < id <= TO."""
    click.echo(_store(ctx).get_notification_events_count(from_id, db_name, to_id))


@events.command("cleanup")
@click.option("--ttl-seconds", type=int, default=None, help="Override HMSREPL_EVENT_TTL_SECONDS.")
@click.pass_context
@_friendly_errors
def events_cleanup(ctx: click.Context, ttl_seconds: int | None) -> None:
    """Delete events older than the retention; replicas behind them will need a bootstrap."""
    store = _store(ctx)
    ttl = ttl_seconds if ttl_seconds is not None else store.config.event_ttl_seconds
    click.echo(f"deleted {store.events.cleanup(ttl)} events older than {ttl} s")


@main.group()
def cm() -> None:
    """Change manager (cmroot) maintenance."""


@cm.command("cleanup")
@click.option("--retention-seconds", type=int, default=None, help="Override HMSREPL_CM_RETENTION_SECONDS.")
@click.pass_context
@_friendly_errors
def cm_cleanup(ctx: click.Context, retention_seconds: int | None) -> None:
    """Delete recycled files older than the retention (default 24 h)."""
    store = _store(ctx)
    retention = retention_seconds if retention_seconds is not None else store.config.cm_retention_seconds
    result = store.cm.cleanup(retention)
    click.echo(
        f"cmroot {store.cm.cmroot}: deleted {result.deleted} files ({result.bytes_deleted} bytes), kept {result.kept}"
    )


@main.group()
def txns() -> None:
    """Transaction housekeeping."""


@txns.command("abort-timed-out")
@click.pass_context
@_friendly_errors
def txns_abort_timed_out(ctx: click.Context) -> None:
    """Abort open transactions whose client stopped heartbeating."""
    aborted = _store(ctx).txns.abort_timed_out()
    click.echo(f"aborted {len(aborted)} transactions" + (f": {aborted}" if aborted else ""))


@txns.command("show")
@click.pass_context
@_friendly_errors
def txns_show(ctx: click.Context) -> None:
    """Print the global ValidTxnList snapshot."""
    click.echo(_store(ctx).txns.get_valid_txns().to_string())


@main.command("demo")
@click.option("--home", default="var/demo", show_default=True, help="Where the demo keeps its state.")
@_friendly_errors
def demo(home: str) -> None:
    """Run the main job end to end on embedded defaults and print what happened."""
    from pathlib import Path

    from hmsrepl.demo import run

    run(Path(home))


if __name__ == "__main__":
    sys.exit(main())
