"""The operator command line: it parses and prints; the work lives in the library.

Settings come from options or from the ``HMSREPL_*`` environment variables of ``MetastoreConfig``.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
from sqlalchemy.exc import SQLAlchemyError

from hmsrepl.cli_errors import OneLineErrors, describe, one_line
from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import HmsReplError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.database import (
    display_url,
    make_engine,
    missing_sqlite_file,
    schema_is_current,
    upgrade_schema,
)
from hmsrepl.metastore.service import RECONCILE_BATCH
from hmsrepl.restore.commands import restore_group

F = TypeVar("F", bound=Callable[..., Any])


def _friendly_errors(func: F) -> F:
    """Turn the product's own errors into one clear line and exit code 1, without a traceback (anything
    else is caught by the top-level group, ``cli_errors.OneLineErrors``)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (HmsReplError, SQLAlchemyError) as exc:
            raise click.ClickException(one_line(describe(exc))) from exc

    return wrapper  # type: ignore[return-value]


@click.group(cls=OneLineErrors)
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
    if missing_sqlite_file(config.db_url) or not schema_is_current(make_engine(config.db_url)):
        raise click.ClickException(
            f"the {label} schema at {display_url(config.db_url)} is missing or old; "
            "run 'hmsrepl schema upgrade' first"
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
    click.echo(f"metastore schema at {display_url(ctx.obj.db_url)} is at revision {revision}")


@main.group()
def metastore() -> None:
    """Run the metastore service."""


@metastore.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=9083, show_default=True)
@click.option("--housekeeping-interval", type=float, default=60.0, show_default=True, help="Seconds.")
@click.option(
    "--insecure",
    is_flag=True,
    help="Serve without authentication on a non-loopback address (trusted networks only; "
    "same as HMSREPL_THRIFT_INSECURE=true).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus metrics on http://METRICS_HOST:PORT/metrics (HMSREPL_METRICS_PORT; default 0: off).",
)
@click.option(
    "--metrics-host",
    default=None,
    help="Address of the metrics endpoint (HMSREPL_METRICS_HOST; default 127.0.0.1).",
)
@click.pass_context
@_friendly_errors
def metastore_serve(
    ctx: click.Context,
    host: str,
    port: int,
    housekeeping_interval: float,
    insecure: bool,
    metrics_port: int | None,
    metrics_host: str | None,
) -> None:
    """Serve the Hive Metastore Thrift protocol (Spark: spark.hadoop.hive.metastore.uris=thrift://HOST:PORT).

    Without HMSREPL_THRIFT_AUTH=kerberos the port is loopback-only unless --insecure says otherwise.
    """
    import logging

    from hmsrepl.monitoring.settings import metrics_settings
    from hmsrepl.thrift.auth import check_bind, is_loopback
    from hmsrepl.thrift.server import MetastoreServer, install_signal_handlers

    overrides = {"port": metrics_port, "host": metrics_host}
    metrics = metrics_settings(**{k: v for k, v in overrides.items() if v is not None})

    if insecure:
        ctx.obj.thrift_insecure = True
    check_bind(ctx.obj, host, port)  # before opening anything
    if ctx.obj.thrift_auth == "none" and not is_loopback(host):
        click.echo(f"warning: serving thrift://{host}:{port} WITHOUT authentication (--insecure)", err=True)
    if metrics.port and not is_loopback(metrics.host):
        click.echo(
            f"warning: metrics on http://{metrics.host}:{metrics.port}/metrics are readable from the network "
            "without authentication (HMSREPL_METRICS_HOST)",
            err=True,
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    store = Metastore.open(ctx.obj)
    server = MetastoreServer(store, host, port, metrics=metrics)
    install_signal_handlers(server)
    click.echo(
        f"metastore serving thrift://{host}:{port} ({server.security.describe()}; db {display_url(ctx.obj.db_url)})"
        + (f"; metrics on http://{metrics.host}:{metrics.port}/metrics" if metrics.port else ""),
        err=True,
    )
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
            stock = (
                " or thrift://HOST:PORT of a stock Hive Metastore"
                if (side, name) == ("source", "db-url")
                else ""
            )
            func = click.option(
                f"--{side}-{name}", envvar=env, help=f"{side} metastore {name}{stock} ({env})."
            )(func)
        return func

    return decorate


def source_external_roots_option(func: F) -> F:
    """--source-external-roots: comma-separated roots of external tables a load may read from."""
    return click.option(
        "--source-external-roots",
        envvar="HMSREPL_SOURCE_EXTERNAL_ROOTS",
        help="Comma-separated source roots of external tables a load may read (HMSREPL_SOURCE_EXTERNAL_ROOTS).",
    )(func)


def load_source_roots(values: dict[str, Any], external: str | None) -> Any:
    """The trusted source roots of a load from --source-warehouse/--source-cmroot (None when not given).

    None leaves the choice to the engine: the source metastore's own roots, else a clear refusal.
    """
    from hmsrepl.replication.source_roots import SourceRoots

    warehouse, cmroot = values.get("source_warehouse"), values.get("source_cmroot")
    if not warehouse or not cmroot:
        return None
    return SourceRoots.from_settings(warehouse, cmroot, external)


def required_load_source_roots(values: dict[str, Any], external: str | None) -> Any:
    """The source roots of a CLI load, required: never a default relative to the working directory, and
    never what a stock Hive Metastore source answers about itself (the operator's settings decide what a load
    may read; the refusal names the missing variables)."""
    from hmsrepl.replication.source_roots import SourceRoots

    warehouse, cmroot = values.get("source_warehouse"), values.get("source_cmroot")
    return SourceRoots.from_settings(warehouse, cmroot, external)


def _missing_roots(prefix: str, values: dict[str, Any]) -> list[str]:
    """The side's unset warehouse/cmroot settings, as 'HMSREPL_<SIDE>_X (--<side>-x)'."""
    return [
        f"HMSREPL_{prefix.upper()}_{name.upper()} (--{prefix}-{name})"
        for name in ("warehouse", "cmroot")
        if not values.get(f"{prefix}_{name}")
    ]


def _side_store(prefix: str, values: dict[str, Any], *, roots_for: str | None = None) -> Metastore | None:
    """The side's metastore (None without its database URL).

    ``roots_for`` names the work that writes files on that side (a load, a dump's file references, a
    cleanup): it then needs the side's warehouse and cmroot, and is refused when either is unset rather
    than given the embedded defaults under the working directory. Without it, the store is only read.
    """
    url = values.get(f"{prefix}_db_url")
    if not url:
        return None
    missing = _missing_roots(prefix, values)
    if roots_for and missing:
        raise click.ClickException(
            f"{roots_for} needs the {prefix} metastore's roots: set {' and '.join(missing)}"
        )
    config = MetastoreConfig(
        db_url=url,
        **{k: v for k in ("warehouse", "cmroot") if (v := values.get(f"{prefix}_{k}"))},
    )
    return _open_checked(config, f"{prefix} metastore")


def _repl_source(values: dict[str, Any], external: str | None = None, *, roots_for: str | None = None) -> Any:
    """The source of a dump or verify: an hmsrepl metastore (a database URL) or a stock Hive Metastore
    (``thrift://host:port``, read through its notification log; see ``hive_source``), which knows its own
    roots."""
    url = values.get("source_db_url") or ""
    if not url.startswith("thrift://"):
        return _side_store("source", values, roots_for=roots_for)
    from hmsrepl.hive_source.source import StockHiveSource

    return StockHiveSource(
        url,
        warehouse=values.get("source_warehouse"),
        cmroot=values.get("source_cmroot"),
        external_roots=external if external is not None else os.environ.get("HMSREPL_SOURCE_EXTERNAL_ROOTS"),
    )


def _retire_due(
    store: Metastore | None, db_name: str, values: dict[str, Any], prefix: str = "target"
) -> None:
    """Carry out the replica's due retirements when a command touches it, so replaced versions do not wait
    for the next load; only with the side's roots configured (retiring recycles into its cmroot)."""
    if store is None or _missing_roots(prefix, values):
        return
    from hmsrepl.replication.leftovers import retire_due

    retire_due(store, db_name)


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
@source_external_roots_option
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bar on stderr for dumps and loads [default: when stderr is a terminal].",
)
@_friendly_errors
def repl_run(
    command: str, dump_root: str, progress: bool | None, source_external_roots: str | None, **sides: Any
) -> None:
    """Run one REPL command, e.g. "REPL DUMP sales FROM 120 LIMIT 500" or "REPL LOAD dr FROM '<dir>'".

    DUMP prints '<dump dir>\t<last event id>'; LOAD prints the target database and its last event id;
    STATUS prints the last replicated event id (nothing if the database is not a replica). Each dump and
    load is recorded in the replication metrics ('hmsrepl repl metrics').
    """
    from hmsrepl.replication.commands import DumpCommand, LoadCommand, StatusCommand, parse_command
    from hmsrepl.replication.dump import DumpResult
    from hmsrepl.replication.engine import ReplicationEngine
    from hmsrepl.replication.load import LoadResult

    parsed = parse_command(command)
    if isinstance(parsed, LoadCommand):  # the source is only its roots: not opened
        engine = ReplicationEngine(
            dump_root,
            target=_side_store("target", sides, roots_for="REPL LOAD"),
            source_roots=required_load_source_roots(sides, source_external_roots),
        )
    else:
        dumping = isinstance(parsed, DumpCommand)
        engine = ReplicationEngine(
            dump_root,
            _repl_source(sides, source_external_roots, roots_for="REPL DUMP") if dumping else None,
            _side_store("target", sides),
        )
    if isinstance(parsed, StatusCommand):
        _retire_due(engine.target, parsed.db_name, sides)
    bar = TerminalProgress(command.split()[1].lower() if len(command.split()) > 1 else "repl")
    if progress is None:
        progress = sys.stderr.isatty()
    try:
        result = engine.execute(parsed, bar if progress else None)
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
        for line in result.stale:  # objects whose data the load could not bring up to date
            click.echo(f"stale: {line}", err=True)
    elif result is not None:
        click.echo(result)


@repl.command("prune-dumps")
@side_options("target")
@click.option("--dump-root", envvar="HMSREPL_DUMP_ROOT", default="var/repl", show_default=True)
@click.option(
    "--retention-seconds",
    envvar="HMSREPL_DUMP_RETENTION_SECONDS",
    type=click.IntRange(min=0),
    default=7 * 86400,
    show_default=True,
    help="Remove dumps whose newest file is older than this (HMSREPL_DUMP_RETENTION_SECONDS).",
)
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
@_friendly_errors
def repl_prune_dumps(dump_root: str, retention_seconds: int, dry_run: bool, **sides: Any) -> None:
    """Remove old dump directories; with --target-db-url, keep those a replica must still finish loading."""
    from hmsrepl.replication.retention import dumps_in_use, prune_dumps

    target = _side_store("target", sides)
    in_use = dumps_in_use(target) if target is not None else set()
    result = prune_dumps(dump_root, retention_seconds, in_use=in_use, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    click.echo(
        f"dump root {dump_root}: {verb} {len(result.removed)} dumps ({result.bytes_removed} bytes), kept "
        f"{len(result.kept_recent)} recent and {len(result.kept_in_use)} still being loaded"
    )


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
@click.option(
    "--policy",
    help="Compare only the tables of this policy (e.g. \"sales.'t1|t2'\") [default: the policy the replica's "
    "loads recorded, else every table].",
)
@click.option(
    "--metadata-only/--with-data",
    default=None,
    help="Compare metadata only, or data files too [default: metadata only when the replica was loaded from "
    "a metadata-only dump].",
)
@side_options("source")
@side_options("target")
@_friendly_errors
def repl_verify(
    source_db: str, target_db: str, policy: str | None, metadata_only: bool | None, **sides: Any
) -> None:
    """Compare SOURCE_DB with its replica TARGET_DB (metadata and file checksums); exit 1 on differences.

    Also reports leftovers: what the replica's loads left in its directories (its database's and its
    external tables') that no metadata names. Says on stderr what it compared.
    """
    from hmsrepl.replication.replica_scope import verify_scope
    from hmsrepl.replication.verify import verify

    source, target = _repl_source(sides), _side_store("target", sides)
    if source is None or target is None:
        raise click.ClickException("verify needs both --source-db-url and --target-db-url")
    params = target.catalog.get_database(target_db).parameters
    _retire_due(target, target_db, sides)
    scope = verify_scope(params, source_db, target_db, policy, metadata_only)
    click.echo(f"verifying {target_db} against {source_db}: {scope.describe()}", err=True)
    differences = verify(
        source, source_db, target, target_db, scope.policy, metadata_only=scope.metadata_only
    )
    for line in differences:
        click.echo(line)
    if differences:
        raise SystemExit(1)
    compared = (
        "metadata matches (data files not compared)"
        if scope.metadata_only
        else "metadata and file checksums match"
    )
    click.echo(f"{target_db} equals {source_db}: {compared}")


def _one_store(values: dict[str, Any], side: str = "target", *, roots_for: str | None = None) -> Metastore:
    store = _side_store(side, values, roots_for=roots_for)
    if store is None:
        raise click.ClickException(f"this command needs the {side} metastore (--{side}-db-url)")
    return store


@repl.command("unprotect")
@click.argument("db_name")
@click.option("--reason", required=True, help="Why the protection is lifted (recorded with who and when).")
@side_options("target")
@_friendly_errors
def repl_unprotect(db_name: str, reason: str, **sides: Any) -> None:
    """Make a protected replica (or a source frozen by an abandoned failover) writable; logged and recorded."""
    from hmsrepl.replication.failover import unprotect

    db = unprotect(_one_store(sides), db_name, reason)
    click.echo(f"{db.name}\tprotection lifted\t{db.parameters.get('hmsrepl.protection.lifted')}")


@repl.command("failover")
@click.argument("source_db")
@click.argument("target_db")
@click.option("--policy", help="The replication policy of TARGET_DB if it is not the whole SOURCE_DB.")
@side_options("source")
@side_options("target")
@click.option("--dump-root", envvar="HMSREPL_DUMP_ROOT", default="var/repl", show_default=True)
@_friendly_errors
def repl_failover(source_db: str, target_db: str, policy: str | None, dump_root: str, **sides: Any) -> None:
    """Planned failover: freeze SOURCE_DB, replicate its last events, verify, promote TARGET_DB (RPO 0).

    Prints the result as JSON (hand-over event ids on both sides).
    """
    from hmsrepl.replication.engine import ReplicationEngine
    from hmsrepl.replication.failover import planned_failover

    engine = ReplicationEngine(
        dump_root,
        _one_store(sides, "source", roots_for="failover"),
        _one_store(sides, "target", roots_for="failover"),
    )
    click.echo(json.dumps(planned_failover(engine, source_db, target_db, policy).to_json(), sort_keys=True))


@repl.command("promote")
@click.argument("target_db")
@click.option("--force", is_flag=True, help="Promote although the source is not reachable (unplanned).")
@click.option("--reason", default="", help="Recorded with who and when.")
@side_options("target")
@_friendly_errors
def repl_promote(target_db: str, force: bool, reason: str, **sides: Any) -> None:
    """Unplanned failover: make replica TARGET_DB writable; its last replicated event is the hand-over point."""
    from hmsrepl.replication.failover import promote

    click.echo(json.dumps(promote(_one_store(sides), target_db, force=force, reason=reason).to_json()))


@repl.command("failback")
@click.argument("new_db")
@click.argument("old_db")
@click.option(
    "--discard-divergent",
    is_flag=True,
    help="Replace OLD_DB's own changes made after the hand-over with NEW_DB's version.",
)
@side_options("source")
@side_options("target")
@click.option("--dump-root", envvar="HMSREPL_DUMP_ROOT", default="var/repl", show_default=True)
@_friendly_errors
def repl_failback(new_db: str, old_db: str, discard_divergent: bool, dump_root: str, **sides: Any) -> None:
    """Make OLD_DB (target side) a replica of the promoted NEW_DB (source side), copying only changed tables."""
    from hmsrepl.replication.engine import ReplicationEngine
    from hmsrepl.replication.failover import failback

    engine = ReplicationEngine(
        dump_root,
        _one_store(sides, "source", roots_for="failback"),
        _one_store(sides, "target", roots_for="failback"),
    )
    result = failback(engine, new_db, old_db, discard_divergent=discard_divergent)
    click.echo(json.dumps(result.to_json(), sort_keys=True))


@repl.command("lag")
@click.argument("policy")
@click.argument("target_db")
@side_options("source")
@side_options("target")
@_friendly_errors
def repl_lag(policy: str, target_db: str, **sides: Any) -> None:
    """Replication lag of TARGET_DB behind POLICY's database: events and seconds, as JSON.

    With HMSREPL_METRICS_TEXTFILE_DIR set, also written there for Prometheus (node_exporter's textfile
    collector), so running this periodically keeps the lag metrics current between loads.
    """
    from hmsrepl.monitoring.repl_textfile import export_lag
    from hmsrepl.replication.failover import replica_lag

    target = _one_store(sides)
    _retire_due(target, target_db, sides)
    lag = replica_lag(_one_store(sides, "source"), policy, target, target_db)
    export_lag(
        lag
    )  # with HMSREPL_METRICS_TEXTFILE_DIR: a periodic 'repl lag' keeps the lag current between loads
    click.echo(json.dumps(lag.to_json(), sort_keys=True))


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

    target = _side_store("target", sides, roots_for="cleanup")
    if target is None:
        raise click.ClickException("cleanup needs --target-db-url")
    click.echo(cleanup_database(target, target_db).describe(target_db))


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
def intents() -> None:
    """File work that committed changes still owe (recycling into cmroot, directories)."""


@intents.command("list")
@click.pass_context
@_friendly_errors
def intents_list(ctx: click.Context) -> None:
    """Print the pending file intents: id, kind, age, attempts, parked or not, last error."""
    import time

    pending = _store(ctx).catalog.intents.pending()
    now_ms = int(time.time() * 1000)
    for intent in pending:
        size = len(intent.payload.get("files", [])), len(intent.payload.get("dirs", []))
        click.echo(
            f"{intent.id}\t{intent.kind}\t{size[0]} files, {size[1]} dirs\tage {(now_ms - intent.created_at) / 1000:.0f} s"
            f"\tattempts {intent.attempts}"
            + ("\tparked (can never succeed as it is)" if intent.parked_at is not None else "")
            + (f"\t{intent.last_error}" if intent.last_error else "")
        )
    parked = sum(intent.parked_at is not None for intent in pending)
    click.echo(f"{len(pending)} pending file intents" + (f", {parked} parked" if parked else ""))


@intents.command("run")
@click.option(
    "--lease-seconds", type=float, default=0.0, show_default=True, help="Skip intents started this recently."
)
@click.option(
    "--include-parked",
    is_flag=True,
    help="Also try parked intents (work found impossible, e.g. a path too long) once their cause is fixed.",
)
@click.pass_context
@_friendly_errors
def intents_run(ctx: click.Context, lease_seconds: float, include_parked: bool) -> None:
    """Complete pending file intents (safe to run while metastores serve: each step is idempotent)."""
    result = _store(ctx).complete_file_intents(lease_seconds, include_parked=include_parked)
    click.echo(f"file intents: {result}")
    if result.failed or result.parked:
        raise SystemExit(1)


@metastore.command("reconcile")
@click.option(
    "--settle-seconds", type=float, default=1.0, show_default=True, help="Skip objects marked this recently."
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=RECONCILE_BATCH,
    show_default=True,
    help="Objects, oldest first.",
)
@click.pass_context
@_friendly_errors
def metastore_reconcile(ctx: click.Context, settle_seconds: float, limit: int) -> None:
    """List the tables and partitions declared appends left unlisted and log what no writer named (what a
    serving metastore's housekeeping does every pass; for a metastore used in process only)."""
    logged = _store(ctx).reconcile_listings(settle_seconds, limit)
    click.echo(f"listing reconciliation: {logged} events logged")


@metastore.command("check")
@click.pass_context
@_friendly_errors
def metastore_check(ctx: click.Context) -> None:
    """List stored databases, tables and partitions whose locations nest against the ownership rule (rows
    written before the catalog enforced it); exit 1 when there is any."""
    from hmsrepl.metastore.overlaps import find_overlaps

    found = 0
    for overlap in find_overlaps(_store(ctx)):
        click.echo(overlap.describe())
        found += 1
    if found:
        raise SystemExit(1)
    click.echo("no stored location is at, inside or around another object's (ownership rule holds)")


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


@main.command("compact")
@click.option("--table", "table", default=None, help="Only this insert-only table, as <database>.<table>.")
@click.option(
    "--engine",
    type=click.Choice(["spark", "copy"]),
    default="spark",
    show_default=True,
    help="spark: rewrite rows in the table's format into few files; copy: move the files into one base "
    "directory as they are (any format, no Spark).",
)
@click.option("--force", is_flag=True, help="Compact every location with a delta, whatever the threshold.")
@click.option(
    "--delta-threshold",
    type=click.IntRange(min=1),
    default=None,
    help="Override HMSREPL_COMPACTION_DELTA_THRESHOLD.",
)
@click.option(
    "--cleaner-delay-seconds",
    type=click.FloatRange(min=0),
    default=None,
    help="Override HMSREPL_COMPACTION_CLEANER_DELAY_SECONDS.",
)
@click.option("--show", is_flag=True, help="Only print the compaction queue (Hive's SHOW COMPACTIONS).")
@click.pass_context
@_friendly_errors
def compact(
    ctx: click.Context,
    table: str | None,
    engine: str,
    force: bool,
    delta_threshold: int | None,
    cleaner_delay_seconds: float | None,
    show: bool,
) -> None:
    """Compact insert-only tables once: queue locations with too many deltas, write their bases, clean what
    they made obsolete, and clean aborted writes (after the txn timeout)."""
    from hmsrepl.acid.compaction_cycle import parse_table_name, resolve_table, run_cycle
    from hmsrepl.acid.compaction_queue import CompactionQueue

    db_name, table_name = parse_table_name(table) if table else (None, None)
    store = _store(ctx)
    if table and not show:
        resolve_table(store, table)  # before Spark starts: a wrong name fails in a second
    if show:
        for row in CompactionQueue(store.events).records(db_name=db_name, table_name=table_name):
            click.echo(
                f"{row.id}\t{row.target}\t{row.type}\t{row.state}\t"
                f"{row.base_dir or '-'}\t{row.error or ''}".rstrip()
            )
        return
    rewriter = None
    session = None
    if engine == "spark":
        from hmsrepl.acid.spark import spark_rewriter
        from hmsrepl.spark_session import local_spark_session

        session = local_spark_session("hmsrepl-compact")
        rewriter = spark_rewriter(session)
    try:
        kwargs: dict[str, Any] = {} if rewriter is None else {"rewriter": rewriter}
        report = run_cycle(
            store,
            table=table,
            force=force,
            delta_threshold=delta_threshold,
            cleaner_delay_seconds=cleaner_delay_seconds,
            **kwargs,
        )
    finally:
        if session is not None:
            session.stop()
    for outcome in report.compacted:
        click.echo(f"{outcome.record.target}: {outcome.state} ({outcome.message})")
    for cleaned in report.cleaned:
        click.echo(f"{cleaned.record.target}: {'cleaned' if cleaned.cleaned else 'kept'} ({cleaned.message})")
    click.echo(
        f"queued {sum(1 for c in report.queued if c.compaction_id is not None)}, compacted "
        f"{sum(1 for o in report.compacted if o.base_dir)}, cleaned {sum(1 for c in report.cleaned if c.cleaned)}"
    )
    if report.aborted is not None and report.aborted.dirs_recycled + report.aborted.write_ids_purged:
        click.echo(
            f"aborted writes: {report.aborted.dirs_recycled} directories recycled, "
            f"{report.aborted.write_ids_purged} write ids and {report.aborted.txns_purged} txns purged"
        )
    if report.failed:
        first = report.failed[0]
        raise click.ClickException(
            f"{len(report.failed)} compaction(s) failed, e.g. {first.record.target}: {first.message}; "
            "see 'hmsrepl compact --show', fix the cause and run again"
        )


@main.group("import")
def import_group() -> None:
    """Adopt a stock Hive Metastore: import its catalog into this metastore, then compare the two."""


def _import_options(func: F) -> F:
    func = click.option(
        "--database", "databases", multiple=True, help="Import only this database (repeatable; default: all)."
    )(func)
    func = click.option(
        "--copy",
        is_flag=True,
        help="Copy managed tables' files into this metastore's warehouse (default: in place, same files).",
    )(func)
    for name, what in (
        ("warehouse", "warehouse: with --copy, its files are read only below it and the external roots"),
        ("cmroot", "change manager root (not read by an import)"),
    ):
        env = f"HMSREPL_SOURCE_{name.upper()}"
        func = click.option(f"--source-{name}", envvar=env, help=f"The stock metastore's {what} ({env}).")(
            func
        )
    func = source_external_roots_option(func)
    return click.argument("metastore_uri", metavar="thrift://HOST:PORT")(func)


def _import_roots(uri: str, copy: bool, values: dict[str, Any]) -> Any:
    """The operator's roots of the stock metastore at ``uri`` (``hive_source.roots.StockRoots``): required
    with --copy, which reads its files; None in place, which reads none."""
    if not copy:
        return None
    from hmsrepl.hive_source.roots import StockRoots

    return StockRoots.from_settings(
        uri,
        values.get("source_warehouse"),
        values.get("source_cmroot"),
        values.get("source_external_roots"),
        need_cmroot=False,
    )


@import_group.command("run")
@_import_options
@click.option(
    "--page", type=click.IntRange(1, 10_000), default=500, show_default=True, help="Partitions per call."
)
@click.option(
    "--verify/--no-verify", default=True, show_default=True, help="Compare both catalogs at the end."
)
@click.pass_context
@_friendly_errors
def import_run(
    ctx: click.Context,
    metastore_uri: str,
    databases: tuple[str, ...],
    copy: bool,
    page: int,
    verify: bool,
    **source_roots: str | None,
) -> None:
    """Import databases, tables, partitions and functions of the stock metastore at METASTORE_URI.

    Resumable: a rerun after a failure or a kill imports only what is missing.
    """
    from hmsrepl.hive_import.compare import compare_import
    from hmsrepl.hive_import.importer import HiveImporter, ImportOptions
    from hmsrepl.hive_import.reader import StockMetastoreReader

    roots = _import_roots(metastore_uri, copy, source_roots)
    store = _store(ctx)
    reader = StockMetastoreReader(metastore_uri)
    try:
        options = ImportOptions(databases=list(databases) or None, copy=copy, page=page, roots=roots)
        result = HiveImporter(reader, store, options, progress=lambda line: click.echo(line, err=True)).run()
        click.echo(
            f"imported {result.databases} databases, {result.tables} tables, {result.partitions} partitions, "
            f"{result.functions} functions; copied {result.files_copied} files ({result.bytes_copied} bytes); "
            f"{result.already_there} objects were already here"
        )
        if verify:
            _report_comparison(compare_import(reader, store, list(databases) or None, copy=copy, roots=roots))
    finally:
        reader.close()


@import_group.command("verify")
@_import_options
@click.pass_context
@_friendly_errors
def import_verify(
    ctx: click.Context,
    metastore_uri: str,
    databases: tuple[str, ...],
    copy: bool,
    **source_roots: str | None,
) -> None:
    """Compare this metastore with the stock metastore at METASTORE_URI; exit 1 on differences."""
    from hmsrepl.hive_import.compare import compare_import
    from hmsrepl.hive_import.reader import StockMetastoreReader

    roots = _import_roots(metastore_uri, copy, source_roots)
    reader = StockMetastoreReader(metastore_uri)
    try:
        wanted = list(databases) or None
        _report_comparison(compare_import(reader, _store(ctx), wanted, copy=copy, roots=roots))
    finally:
        reader.close()


def _report_comparison(differences: list[str]) -> None:
    for line in differences[:200]:
        click.echo(line, err=True)
    if differences:
        raise click.ClickException(
            f"{len(differences)} differences between the two metastores (listed above)"
        )
    click.echo("the imported catalog equals the stock metastore's")


@main.command("demo")
@click.option("--home", default="var/demo", show_default=True, help="Where the demo keeps its state.")
@_friendly_errors
def demo(home: str) -> None:
    """Run the main job end to end on embedded defaults and print what happened."""
    from pathlib import Path

    from hmsrepl.demo import run

    run(Path(home))


main.add_command(restore_group(_open_checked, _friendly_errors))

if __name__ == "__main__":
    sys.exit(main())
