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


def _open_checked(config: MetastoreConfig, label: str = "metastore") -> Metastore:
    """Open an existing metastore; a missing or old schema is an operator error, not a traceback."""
    if not schema_is_current(make_engine(config.db_url)):
        raise click.ClickException(
            f"the {label} schema at {config.db_url} is missing or old; run 'hmsrepl schema upgrade' first"
        )
    return Metastore(config)


def _store(ctx: click.Context) -> Metastore:
    return _open_checked(ctx.obj)


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


def side_options(side: str) -> Callable[[F], F]:
    """--<side>-db-url/--<side>-warehouse/--<side>-cmroot options, also read from HMSREPL_<SIDE>_* variables."""

    def decorate(func: F) -> F:
        for name in ("cmroot", "warehouse", "db-url"):
            env = f"HMSREPL_{side.upper()}_{name.replace('-', '_').upper()}"
            func = click.option(f"--{side}-{name}", envvar=env, help=f"{side} metastore {name} ({env}).")(
                func
            )
        return func

    return decorate


def _side_store(prefix: str, values: dict[str, Any]) -> Metastore | None:
    url = values.get(f"{prefix}_db_url")
    if not url:
        return None
    config = MetastoreConfig(
        db_url=url,
        **{k: v for k in ("warehouse", "cmroot") if (v := values.get(f"{prefix}_{k}"))},
    )
    return _open_checked(config, f"{prefix} metastore")


@main.group()
def repl() -> None:
    """Replication: REPL DUMP (source), REPL LOAD and REPL STATUS (target), verify."""


class TerminalProgress:
    """A tqdm bar on stderr, opened when the engine says what it counts (tables or events).

    It goes to stderr so that stdout keeps only the machine-readable result that scripts and DAGs parse.
    """

    def __init__(self, description: str) -> None:
        self.description = description
        self.bar: Any = None

    def begin(self, total: int | None, unit: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(
            total=total, unit=f" {unit}s", desc=self.description, file=sys.stderr, dynamic_ncols=True
        )

    def advance(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@repl.command("run")
@click.argument("command")
@side_options("source")
@side_options("target")
@click.option("--dump-root", envvar="HMSREPL_DUMP_ROOT", default="var/repl", show_default=True)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bar on stderr for dumps and loads [default: when stderr is a terminal].",
)
@_friendly_errors
def repl_run(command: str, dump_root: str, progress: bool | None, **sides: Any) -> None:
    """Run one REPL command, e.g. "REPL DUMP sales FROM 120 LIMIT 500" or "REPL LOAD dr FROM '<dir>'".

    DUMP prints '<dump dir>\t<last event id>'; LOAD prints the target database and its last event id;
    STATUS prints the last replicated event id (nothing if the database is not a replica). Each dump and
    load is recorded in the replication metrics ('hmsrepl repl metrics').
    """
    from hmsrepl.replication.dump import DumpResult
    from hmsrepl.replication.engine import ReplicationEngine
    from hmsrepl.replication.load import LoadResult

    engine = ReplicationEngine(dump_root, _side_store("source", sides), _side_store("target", sides))
    bar = TerminalProgress(command.split()[1].lower() if len(command.split()) > 1 else "repl")
    if progress is None:
        progress = sys.stderr.isatty()
    try:
        result = engine.execute(command, bar if progress else None)
    finally:
        bar.close()
    if isinstance(result, DumpResult):
        click.echo(f"{result.dump_dir}\t{result.last_event_id}")
    elif isinstance(result, LoadResult):
        stats = result.stats
        click.echo(f"{result.target_db}\t{result.last_event_id}")
        click.echo(
            f"applied {result.events_applied} events; {stats.tables} tables and {stats.partitions} partitions "
            f"created; {stats.files_copied} files ({stats.bytes_copied} bytes) copied, "
            f"{stats.files_from_cmroot} of them from cmroot; {stats.files_removed} files removed"
            + (f"; not replayed yet: {stats.skipped_events}" if stats.skipped_events else ""),
            err=True,
        )
    elif result is not None:
        click.echo(result)


@repl.command("metrics")
@side_options("source")
@side_options("target")
@click.option("--policy", help="Only this policy, or every policy of this database.")
@click.option("--operation", type=click.Choice(["dump", "load"]), help="Only dumps or only loads.")
@click.option(
    "--status",
    type=click.Choice(["running", "succeeded", "failed", "abandoned"]),
    help="Only runs in this state.",
)
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Newest rows first.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document per line.")
@_friendly_errors
def repl_metrics(
    policy: str | None, operation: str | None, status: str | None, limit: int, as_json: bool, **sides: Any
) -> None:
    """List recorded dumps and loads: range, counts, seconds per stage, status and error.

    Reads the target database (where loads, and dumps run with a target, are recorded); with only
    --source-db-url, the source's (dumps run without a target).
    """
    from hmsrepl.replication.metrics import MetricsLog

    store = _side_store("target", sides) or _side_store("source", sides)
    if store is None:
        raise click.ClickException("metrics need --target-db-url (or --source-db-url for source-only dumps)")
    rows = MetricsLog(store.engine).list(policy=policy, operation=operation, status=status, limit=limit)
    if as_json:
        for row in rows:
            click.echo(json.dumps(row.to_json(), sort_keys=True))
        return
    click.echo(
        f"{'id':>6}  {'started (UTC)':<19}  {'op':<4} {'kind':<11} {'policy':<20} {'range':>15}  "
        f"{'events':>6} {'tables':>6} {'parts':>6} {'files':>6} {'bytes':>9} {'seconds':>8}  status"
    )
    for row in rows:
        started = datetime.fromtimestamp(row.started_at / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
        span = "..".join(
            "" if value is None else str(value) for value in (row.from_event_id, row.last_event_id)
        )
        seconds = "-" if row.seconds is None else f"{row.seconds:.2f}"
        click.echo(
            f"{row.id:>6}  {started:<19}  {row.operation:<4} {row.kind:<11} {row.policy:<20} {span:>15}  "
            f"{row.events:>6} {row.tables:>6} {row.partitions:>6} {row.files:>6} {_human_bytes(row.bytes):>9} "
            f"{seconds:>8}  {row.status}"
        )
        details = [f"dump {row.dump_id}"] if row.dump_id else []
        details += [f"{name} {value:.3f}s" for name, value in row.stages.items()]
        click.echo(f"{'':>8}{', '.join(details)}")
        if row.error:
            click.echo(f"{'':>8}error: {row.error.splitlines()[0]}")


def _human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


@repl.command("verify")
@click.argument("source_db")
@click.argument("target_db")
@side_options("source")
@side_options("target")
@_friendly_errors
def repl_verify(source_db: str, target_db: str, **sides: Any) -> None:
    """Compare SOURCE_DB with its replica TARGET_DB (metadata and file checksums); exit 1 on differences."""
    from hmsrepl.replication.verify import verify

    source, target = _side_store("source", sides), _side_store("target", sides)
    if source is None or target is None:
        raise click.ClickException("verify needs both --source-db-url and --target-db-url")
    differences = verify(source, source_db, target, target_db)
    for line in differences:
        click.echo(line)
    if differences:
        raise SystemExit(1)
    click.echo(f"{target_db} equals {source_db}: metadata and file checksums match")


@repl.command("cleanup")
@click.argument("target_db")
@side_options("target")
@_friendly_errors
def repl_cleanup(target_db: str, **sides: Any) -> None:
    """Remove what interrupted loads left under a replica database's directory (nothing metadata names).

    Old version directories, staged copies and directories of dropped objects; loads do this themselves
    after an interrupted run, this is for a replica no load will touch again soon.
    """
    from hmsrepl.replication.leftovers import cleanup_database

    target = _side_store("target", sides)
    if target is None:
        raise click.ClickException("cleanup needs --target-db-url")
    removed = cleanup_database(target, target_db)
    click.echo(f"removed {removed} files no metadata of {target_db} names")


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
