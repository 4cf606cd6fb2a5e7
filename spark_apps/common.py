"""What the Spark applications share: options, the core on the path, metastores, a lazy SparkSession, errors.

Every application is a thin shell over ``hmsrepl``: parse options, open what it needs, call the library,
log progress on stderr, print one JSON summary line on stdout for the orchestrator (the application's last
stdout line; spark-submit merges a Python app's stderr into its stdout, so read the last line that is a JSON
object) and exit 0; on failure print one line, ``Error: <what went wrong and what to do>``, on stderr and
exit 1 (2 for bad options), without a traceback for the product's own errors.

Run them with ``python spark_apps/<app>.py`` (Spark ``local[2]``, or ``--master``/``HMSREPL_SPARK_MASTER``)
or ``spark-submit spark_apps/<app>.py`` (spark-submit's ``--master`` and ``--conf`` then stand; ship the
core to a cluster with ``--py-files``). Options fall back to the same ``HMSREPL_*`` variables as the CLI.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The checkout's include directory when this module had to put it on the path (hmsrepl not installed).
ADDED_INCLUDE: str | None = None


def ensure_core_importable() -> None:
    """Make ``hmsrepl`` importable from a checkout, here and in the Python workers Spark starts.

    Workers do not see the driver's ``sys.path``: a JVM this process starts passes ``PYTHONPATH`` on to
    them; under spark-submit the JVM is already running, so ``spark_session`` sets the executors' one.
    """
    global ADDED_INCLUDE
    if importlib.util.find_spec("hmsrepl") is not None:
        return
    ADDED_INCLUDE = str(ROOT / "include")
    sys.path.insert(0, ADDED_INCLUDE)
    current = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = ADDED_INCLUDE + (os.pathsep + current if current else "")


ensure_core_importable()

import functools  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import TYPE_CHECKING, Any, TypeVar  # noqa: E402

import click  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402
from sqlalchemy.exc import ArgumentError, SQLAlchemyError  # noqa: E402

from hmsrepl.cli import side_options as cli_side_options  # noqa: E402
from hmsrepl.config import MetastoreConfig  # noqa: E402
from hmsrepl.exceptions import HmsReplError, is_retryable  # noqa: E402
from hmsrepl.identity import IdentityFormatError, MetastoreIdentity, identity_mismatch  # noqa: E402
from hmsrepl.metastore import Metastore  # noqa: E402
from hmsrepl.metastore.database import make_engine, schema_is_current  # noqa: E402
from hmsrepl.replication.commands import Command, CommandError, parse_command  # noqa: E402
from hmsrepl.spark.listing import DEFAULT_MIN_SPARK_LOCATIONS  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from hmsrepl.hive_source.source import StockHiveSource

log = logging.getLogger("hmsrepl.spark_apps")

#: Exit codes of the applications (see the module docstring); 2 is click's own for bad options.
EXIT_RETRYABLE = 1
EXIT_USAGE = 2
EXIT_PERMANENT = 3

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C")


def app_options(func: F) -> F:
    """Options every application has: the Spark master and the log level."""
    func = click.option(
        "--master",
        default=None,
        help="Spark master (default: spark-submit's, else HMSREPL_SPARK_MASTER, else local[2]).",
    )(func)
    return click.option(
        "--log-level",
        default="INFO",
        show_default=True,
        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    )(func)


def side_options(side: str) -> Callable[[F], F]:
    """The CLI's ``--<side>-db-url/-warehouse/-cmroot`` and ``--<side>-identity``: the metastore the
    orchestrator reached for this side (``HMSREPL_<SIDE>_IDENTITY``), which the database must be."""
    env = f"HMSREPL_{side.upper()}_IDENTITY"

    def decorate(func: F) -> F:
        func = click.option(
            f"--{side}-identity",
            envvar=env,
            help=f"JSON of the {side} metastore as the orchestrator's connection sees it ({env}); the database "
            "must be that metastore's.",
        )(func)
        return cli_side_options(side)(func)

    return decorate


def dump_options(func: F) -> F:
    """Options of the applications that write dumps: where, and which bootstrap tables are listed on Spark."""
    func = click.option(
        "--spark-min-locations",
        type=click.IntRange(min=1),
        default=DEFAULT_MIN_SPARK_LOCATIONS,
        show_default=True,
        help="Bootstrap: tables with at least this many locations (partitions) are described on Spark.",
    )(func)
    return click.option("--dump-root", envvar="HMSREPL_DUMP_ROOT", default="var/repl", show_default=True)(
        func
    )


def spark_min_files_option(default: int, help: str) -> Callable[[F], F]:
    """``--spark-min-files``: how many files an application's work needs before it is done on Spark."""
    return click.option(
        "--spark-min-files", type=click.IntRange(min=1), default=default, show_default=True, help=help
    )


def application(func: Callable[..., dict[str, Any]]) -> Callable[..., None]:
    """Run an application body: logging set up, its summary printed as JSON, its errors as one line.

    The body returns the summary. The product's errors, and the outages it expects (database, storage,
    network), become ``Error: <message>`` with the exit code of ``exit_code_for``; anything else is a bug
    and keeps its traceback.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, log_level: str = "INFO", **kwargs: Any) -> None:
        logging.basicConfig(
            level=log_level.upper(),
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        for noisy in (
            "alembic",
            "py4j",
        ):  # schema checks and gateway shutdown: not the application's progress
            logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
        started = time.perf_counter()
        try:
            summary = func(*args, **kwargs)
        except EXPECTED_ERRORS as exc:
            error = click.ClickException(one_line(exc))
            error.exit_code = exit_code_for(exc)  # type: ignore[misc]  # per error, as click's own subclasses do
            raise error from exc
        summary["seconds"] = round(time.perf_counter() - started, 3)
        click.echo(json.dumps(summary, sort_keys=True))

    return wrapper


def _expected_errors() -> tuple[type[BaseException], ...]:
    """The product's errors and the outages of what it talks to (database, files, S3)."""
    errors: list[type[BaseException]] = [HmsReplError, SQLAlchemyError, OSError]
    try:
        from botocore.exceptions import BotoCoreError, ClientError

        errors += [BotoCoreError, ClientError]
    except ImportError:  # pragma: no cover - botocore is a requirement; S3 simply unused without it
        pass
    return tuple(errors)


EXPECTED_ERRORS = _expected_errors()


def one_line(exc: BaseException) -> str:
    """The error as one line: a database error by its driver's message, never its SQL or parameters."""
    if isinstance(exc, SQLAlchemyError):
        reason = str(getattr(exc, "orig", None) or type(exc).__name__)
        return (
            f"the metastore database failed: {' '.join(reason.split())}; check that it is running and retry"
        )
    return " ".join(str(exc).split()) or type(exc).__name__


def exit_code_for(exc: BaseException) -> int:
    """``EXIT_RETRYABLE`` for an outage, ``EXIT_PERMANENT`` for what only a change of input or settings fixes."""
    return EXIT_RETRYABLE if is_retryable(exc) else EXIT_PERMANENT


class ConfigurationError(click.ClickException):
    """A setting names something that is not there or not usable: retrying cannot fix it."""

    exit_code = EXIT_PERMANENT


def parse_as(text: str, kind: type[C], name: str) -> C:
    """Parse a REPL command and insist on the kind this application runs (before anything is opened)."""
    command: Command = parse_command(text)
    if not isinstance(command, kind):
        raise CommandError(f"this application runs {name} commands, not {text.strip()!r}")
    return command


def _stock_source(url: str, values: dict[str, Any]) -> StockHiveSource:
    """A stock Hive Metastore as the replication source (``thrift://host:port``)."""
    from hmsrepl.hive_source.source import StockHiveSource

    return StockHiveSource(
        url,
        warehouse=values.get("source_warehouse"),
        cmroot=values.get("source_cmroot"),
        external_roots=values.get("source_external_roots") or os.environ.get("HMSREPL_SOURCE_EXTERNAL_ROOTS"),
    )


def open_source(values: dict[str, Any]) -> Metastore | StockHiveSource:
    """The source: a stock Hive Metastore at ``thrift://host:port``, else this product's metastore
    (``open_metastore``)."""
    url = values.get("source_db_url")
    if url and url.startswith("thrift://"):
        return _stock_source(url, values)
    return open_metastore("source", values)


def open_metastore(side: str, values: dict[str, Any]) -> Metastore:
    """The ``side`` metastore from its options, checked to exist, be reachable and have a current schema.

    Nothing is created: a missing SQLite file is an error here (the CLI would create an empty one), so a
    mistyped path fails clearly instead of dumping from, or loading into, an empty metastore.
    """
    url = values.get(f"{side}_db_url")
    env = f"HMSREPL_{side.upper()}_DB_URL"
    if not url:
        raise click.UsageError(f"--{side}-db-url (or {env}) is required")
    if url.startswith("thrift://"):
        raise ConfigurationError(
            f"--{side}-db-url {url} is a Thrift address; a stock Hive Metastore can only be read as a "
            f"replication source (dump, sync): give the {side} an hmsrepl metastore's database URL"
        )
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigurationError(f"--{side}-db-url is not a database URL: {exc}") from exc
    shown = parsed.render_as_string(hide_password=True)
    sqlite_file = parsed.database if parsed.get_backend_name() == "sqlite" else None
    if sqlite_file and sqlite_file != ":memory:" and not Path(sqlite_file).is_file():
        raise ConfigurationError(
            f"the {side} metastore database {shown} does not exist; check --{side}-db-url ({env}), "
            "or create it with 'hmsrepl --db-url URL schema upgrade'"
        )
    config = MetastoreConfig(
        db_url=url, **{k: v for k in ("warehouse", "cmroot") if (v := values.get(f"{side}_{k}"))}
    )
    engine = make_engine(url)
    try:
        current = schema_is_current(engine)
    except SQLAlchemyError as exc:
        engine.dispose()
        reason = " ".join(str(getattr(exc, "orig", None) or exc).split())
        raise click.ClickException(
            f"cannot reach the {side} metastore database at {shown}: {reason}; check --{side}-db-url ({env}) "
            "and that the database server is running"
        ) from exc
    if not current:
        engine.dispose()
        raise ConfigurationError(
            f"the {side} metastore schema at {shown} is missing or old; run 'hmsrepl --db-url URL schema upgrade'"
        )
    store = Metastore(config, engine=engine)
    try:
        check_identity(side, values.get(f"{side}_identity"), store, shown)
    except BaseException:
        store.close()
        raise
    return store


def check_identity(side: str, text: str | None, store: Metastore, shown: str) -> None:
    """Refuse a database that is not the metastore the orchestrator's connection reached (``hmsrepl.identity``).

    Without an identity (the application run by hand, settings from ``HMSREPL_<SIDE>_*`` only) nothing is
    compared.
    """
    if not text:
        return
    try:
        expected = MetastoreIdentity.from_json(text)
    except IdentityFormatError as exc:
        raise click.UsageError(f"--{side}-identity: {exc}") from exc
    why = identity_mismatch(expected, store)
    if why:
        env = f"HMSREPL_{side.upper()}_DB_URL"
        raise ConfigurationError(
            f"the {side} database {shown} is not the metastore of {expected.describe()}: {why}; point the "
            f"connection's 'db_url' (or {env}) at the database of the metastore server it names, or the "
            "connection at the server of that database"
        )
    log.info("%s database %s is the metastore of %s", side, shown, expected.describe())


class LazySpark:
    """The application's SparkSession, started on first use (a JVM costs 7-13 s) and stopped at the end."""

    def __init__(self, app_name: str, master: str | None) -> None:
        self.app_name, self.master = app_name, master
        self.session: SparkSession | None = None
        self.startup_seconds: float | None = None

    def __call__(self) -> SparkSession:
        if self.session is None:
            started = time.perf_counter()
            self.session = spark_session(self.app_name, self.master)
            self.startup_seconds = round(time.perf_counter() - started, 3)
            log.info(
                "SparkSession on %s started in %.1f s", self.session.sparkContext.master, self.startup_seconds
            )
        return self.session

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()
            self.session = None


def spark_session(app_name: str, master: str | None = None) -> SparkSession:
    """A SparkSession for an application: spark-submit's settings when submitted, else a local one.

    ``local_spark_session`` always sets the master, which would override spark-submit's ``--master``; under
    spark-submit (it starts the JVM and passes its gateway) only an explicit ``--master`` is applied.
    """
    from pyspark.sql import SparkSession

    if master is None and "PYSPARK_GATEWAY_PORT" in os.environ:
        builder = SparkSession.builder.appName(app_name).config("spark.ui.showConsoleProgress", "false")
        if ADDED_INCLUDE:  # a checkout, not an installed package: the workers need its path too
            builder = builder.config("spark.executorEnv.PYTHONPATH", ADDED_INCLUDE)
        session = builder.getOrCreate()
    else:
        from hmsrepl.spark_session import local_spark_session

        session = local_spark_session(app_name, master=master)
    session.sparkContext.setLogLevel("WARN")
    return session
