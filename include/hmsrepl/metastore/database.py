"""Engines for the three backends and schema migration through Alembic.

SQLite runs in WAL mode and starts every transaction with ``BEGIN IMMEDIATE``: the notification sequence
row is locked for update inside each writing transaction, and SQLite has no row locks, so taking the write
lock up front is what keeps two processes from both reading the same next event id.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import QueuePool

from hmsrepl.metastore.mariadb_unawaited import owe_answers_on

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
WRITE_OPTION = "hmsrepl_write"
_SECRET_QUERY_KEYS = ("password", "passwd", "pwd", "secret", "token", "key")
#: A pooled connection used this recently is handed out without a liveness ping (HikariCP, Hive's metastore
#: pool, does the same with its 500 ms ``aliveBypassWindowMs``): a ping is a round trip, as costly as a
#: small query, and most checkouts follow the previous one by milliseconds.
PING_AFTER_IDLE_SECONDS = 0.5
_LAST_USED = "hmsrepl_last_used"
#: Liveness pings sent so far by this process (statement_counts reports them as round trips).
pings_sent = 0
#: ROLLBACKs the pool's reset sent on MariaDB so far (``_roll_back_only_when_open``; also round trips).
reset_rollbacks_sent = 0
#: COMMITs not sent on MariaDB so far because the server had committed inside a request
#: (``committed_in_request``): SQLAlchemy still reports them, so the statement counts take them back off.
commits_not_sent = 0
#: psycopg 3 prepares a statement server-side once it ran this many times on a connection (its default is
#: 5); the metastore's statements are few and repeated, so preparing them early saves the server parsing and
#: planning each one again. ``PG_PREPARED_MAX``: how many a connection keeps (psycopg's default, 100, is
#: fewer than the statements a replication load runs).
PG_CONNECT_ARGS = {"prepare_threshold": 1}
PG_PREPARED_MAX = 500
#: Set on each new PostgreSQL connection, for its whole session. The metastore's statements are short index
#: look-ups and small writes, but the planner costs them from the tables' sizes: in a transaction filling a
#: table (``plan_for_growth``) the 500-key location probe of a 100,000-partition load was costed above
#: ``jit_optimize_above_cost`` and compiled with LLVM at every run, 100-180 ms for a statement that reads
#: nothing in 2 ms (and 5-7 ms of compiling below that cost). No statement here runs long enough for
#: compiled expressions to pay back.
PG_SESSION_SETTINGS = ("SET jit = off",)


def display_url(db_url: str) -> str:
    """``db_url`` as it may be printed or logged: password (and secret-looking query values) shown as ***.

    The one place a database URL is made presentable; a URL that does not parse is not shown at all (it may
    hold a password where the parser did not expect one).
    """
    try:
        url = make_url(db_url)
    except (ArgumentError, ValueError):
        return "<database URL that does not parse>"
    hidden = {
        key: "***" if any(word in key.lower() for word in _SECRET_QUERY_KEYS) else value
        for key, value in url.query.items()
    }
    return url.set(query=hidden).render_as_string(hide_password=True)


def missing_sqlite_file(db_url: str) -> bool:
    """Whether the URL names a SQLite file that does not exist: opening it would create the file (and its
    directory), so commands that only use an existing metastore ask this first."""
    url = make_url(db_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return False
    return not Path(url.database).exists()


def make_engine(db_url: str, *, pool_size: int = 5) -> Engine:
    """Create an engine with per-backend settings the metastore relies on."""
    url = make_url(db_url)
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 60, "check_same_thread": False})
        _configure_sqlite(engine)
        return engine
    if url.get_backend_name() in ("mysql", "mariadb"):
        # READ COMMITTED as on PostgreSQL: readers see committed events, not a repeatable-read snapshot.
        engine = create_engine(
            url,
            pool_size=pool_size,
            isolation_level="READ COMMITTED",
            pool_recycle=3600,
            pool_reset_on_return=None,  # ``_roll_back_only_when_open`` resets instead
            connect_args=mysql_connect_args(url),
            # Parameters by name: a value a statement uses several times (the ancestors of a location a
            # check compares three columns with) is escaped once by the driver, not once per use.
            paramstyle="pyformat",
        )
        _roll_back_only_when_open(engine)
        _allow_statement_batches(engine)
    elif url.get_driver_name() == "psycopg":
        engine = create_engine(url, pool_size=pool_size, connect_args=dict(PG_CONNECT_ARGS))
        event.listen(engine, "connect", _configure_postgres)
    else:
        engine = create_engine(url, pool_size=pool_size)
    _ping_when_idle(engine)
    return engine


#: The transaction ``plan_for_growth`` last set its plan mode in, on a pooled connection (weakly: a new
#: transaction is a new object, so a later one is never mistaken for it).
_PLANNED_FOR_GROWTH = "hmsrepl_planned_for_growth"


def mysql_connect_args(url: URL) -> dict[str, str]:
    """What a MySQL/MariaDB connection is opened with, whichever driver the URL names (``mysql+mysqldb``,
    mysqlclient, the default; ``mysql+pymysql``): the utf8mb4 character set unless the URL chooses one.

    Snapshots and event messages are UTF-8 JSON that may hold any character; PyMySQL opens in utf8mb4, but
    mysqlclient takes the client library's default, which is another set on some builds (utf8mb3 or latin1
    would refuse or mangle characters outside theirs)."""
    return {} if "charset" in url.query else {"charset": "utf8mb4"}


def plan_for_growth(conn: Connection) -> None:
    """For the rest of ``conn``'s open transaction, plan every statement for its parameters and the tables'
    current size (PostgreSQL; other backends plan each statement anyway).

    Statements are prepared at their first run (``PG_CONNECT_ARGS``), and after five runs PostgreSQL may keep
    one generic plan. A transaction that fills a table (a bootstrap load writing 100,000 partitions of one
    table) has it chosen while the table is nearly empty: a sequential scan, which each later page of the same
    look-ups then pays in full, so the load grew quadratically. Planning each run keeps the index look-ups as
    the table grows; ``SET LOCAL`` ends with the transaction, so the pooled connection keeps its cached plans.

    Sent once per transaction: a bootstrap batch writes many small tables in one transaction and asks this for
    each, and every ``SET`` is a round trip of its own.
    """
    if conn.dialect.name != "postgresql":
        return
    transaction = conn.get_transaction()
    planned = conn.info.get(_PLANNED_FOR_GROWTH)
    if transaction is not None and planned is not None and planned() is transaction:
        return
    conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_custom_plan")
    if transaction is not None:
        conn.info[_PLANNED_FOR_GROWTH] = weakref.ref(transaction)


def _configure_postgres(dbapi_connection, _record) -> None:  # noqa: ANN001 - DB-API objects are untyped
    """A new PostgreSQL connection's settings: its prepared statements kept, ``PG_SESSION_SETTINGS`` applied
    outside any transaction (a ``SET`` in the pool's first transaction would end with its rollback)."""
    dbapi_connection.prepared_max = PG_PREPARED_MAX
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    try:
        for statement in PG_SESSION_SETTINGS:
            dbapi_connection.execute(statement)
    finally:
        dbapi_connection.autocommit = autocommit


def _ping_when_idle(engine: Engine) -> None:
    """Check a pooled connection is alive before handing it out, unless it was used in the last
    ``PING_AFTER_IDLE_SECONDS`` (SQLAlchemy's ``pool_pre_ping`` pings on every checkout). A dead connection
    is replaced by a new one, as with ``pool_pre_ping``."""

    @event.listens_for(engine.pool, "connect")
    def _on_connect(_dbapi_connection, record) -> None:  # noqa: ANN001 - DB-API objects are untyped
        record.info[_LAST_USED] = time.monotonic()

    @event.listens_for(engine.pool, "checkin")
    def _on_checkin(_dbapi_connection, record) -> None:  # noqa: ANN001
        if record is not None:
            record.info[_LAST_USED] = time.monotonic()

    @event.listens_for(engine.pool, "checkout")
    def _on_checkout(dbapi_connection, record, _proxy) -> None:  # noqa: ANN001
        if time.monotonic() - record.info.get(_LAST_USED, 0.0) <= PING_AFTER_IDLE_SECONDS:
            return
        global pings_sent
        pings_sent += 1
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as exc:
            raise DisconnectionError(f"pooled connection is no longer usable: {exc}") from exc
        record.info[_LAST_USED] = time.monotonic()


def _dispose_with(disposed: Engine, engine: Engine, companion: Engine) -> None:
    """Dispose ``companion`` with ``engine`` (the companion's own disposal is heard here too: ignored)."""
    if disposed is engine:
        companion.dispose()


def _allow_statement_batches(engine: Engine) -> None:
    """Open PyMySQL's connections with the multi-statement protocol, which mysqlclient enables by default:
    a ``StatementBatch`` is one request of several statements (a single create's insert and read), which the
    server refuses as a syntax error on a connection opened without it. The flag is added to those SQLAlchemy
    chose (``FOUND_ROWS``, which its row counts rely on), not set in their place."""
    if engine.driver != "pymysql":
        return

    def add_flag(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        from pymysql.constants import CLIENT  # the driver of this engine: present when it is used

        cparams["client_flag"] = cparams.get("client_flag", 0) | CLIENT.MULTI_STATEMENTS

    event.listen(engine, "do_connect", add_flag)


def _roll_back_only_when_open(engine: Engine) -> None:
    """Reset a MariaDB connection returned to the pool with a ROLLBACK only when a transaction may be open.

    SQLAlchemy's reset rolls back every connection checked in after its transaction ended, and the MariaDB
    drivers (mysqlclient, PyMySQL) send that ROLLBACK to the server even when there is nothing to end: a
    round trip after every committed write (psycopg sends nothing then). The rollback is skipped only when
    SQLAlchemy ended the connection's last transaction itself (a commit or a rollback since its last begin)
    and, where the driver shows it (PyMySQL's ``server_status``; mysqlclient keeps it in C), the server's
    last reply says no transaction is open; a connection checked out and returned without either (a raw
    connection's), or whose commit failed with a transaction still open, is rolled back as before.

    A commit the server already made inside the transaction's last request (``committed_in_request``) is not
    sent again: that COMMIT would cost a round trip to end nothing.
    """

    # Marked by the dialect's own begin, commit and rollback (a commit once it succeeded), not by connection
    # events: a listener on those would make SQLAlchemy dispatch events around every statement.
    dialect = engine.dialect
    begin, commit, rollback = dialect.do_begin, dialect.do_commit, dialect.do_rollback

    def do_begin(dbapi_connection: Any) -> None:
        _server_committed(dbapi_connection)  # a mark left by a transaction never ended must not end this one
        _mark(dbapi_connection, ended=False)
        begin(dbapi_connection)

    def do_commit(dbapi_connection: Any) -> None:
        if _server_committed(dbapi_connection):
            global commits_not_sent
            commits_not_sent += 1
        else:
            commit(dbapi_connection)
        _mark(dbapi_connection, ended=True)

    def do_rollback(dbapi_connection: Any) -> None:
        _server_committed(dbapi_connection)  # forgotten: the rollback then ends nothing, and says so
        rollback(dbapi_connection)
        _mark(dbapi_connection, ended=True)

    dialect.do_begin = do_begin  # type: ignore[method-assign]
    dialect.do_commit = do_commit  # type: ignore[method-assign]
    dialect.do_rollback = do_rollback  # type: ignore[method-assign]

    @event.listens_for(engine.pool, "checkout")
    def _on_checkout(_dbapi_connection, record, _proxy) -> None:  # noqa: ANN001 - DB-API objects are untyped
        record.info[_ENDED] = False  # unknown until SQLAlchemy ends a transaction on it

    @event.listens_for(engine.pool, "reset")
    def _on_reset(dbapi_connection, record, state) -> None:  # noqa: ANN001
        if state.terminate_only:
            return
        open_on_server = bool(getattr(dbapi_connection, "server_status", 0) & _SERVER_STATUS_IN_TRANS)
        if record is not None and record.info.get(_ENDED) and not open_on_server:
            return
        global reset_rollbacks_sent
        reset_rollbacks_sent += 1
        dbapi_connection.rollback()


_ENDED = "hmsrepl_transaction_ended"
_SERVER_STATUS_IN_TRANS = 1  # MySQL protocol: SERVER_STATUS_IN_TRANS, the server's "a transaction is open"


_COMMITTED_IN_REQUEST = "hmsrepl_committed_in_request"


def committed_in_request(conn: Connection) -> None:
    """Record that the server committed ``conn``'s open transaction inside the request it just answered (a
    MariaDB compound statement ending in ``COMMIT``, ``mariadb_append``): SQLAlchemy's commit that ends the
    transaction then sends nothing. Only the transaction's last request may commit so: SQLAlchemy must end
    the transaction next, since a statement run in between would start another, which that commit would skip.
    """
    conn.connection.info[_COMMITTED_IN_REQUEST] = True


def _server_committed(dbapi_connection: Any) -> bool:
    """Whether the server committed the connection's transaction already (``committed_in_request``); the
    mark is taken off, so it serves one commit at most."""
    try:
        info = dbapi_connection.info
    except (AttributeError, NotImplementedError):  # SQLAlchemy's first-connect proxy has no record
        return False
    return isinstance(info, dict) and bool(info.pop(_COMMITTED_IN_REQUEST, False))


def _mark(dbapi_connection: Any, *, ended: bool) -> None:
    """Record on a pooled connection whether SQLAlchemy ended its last transaction (``info`` is its pool
    record's; a bare DB-API connection has none and stays unmarked, so it is rolled back)."""
    try:
        info = dbapi_connection.info
    except (AttributeError, NotImplementedError):  # SQLAlchemy's first-connect proxy has no record
        return
    if isinstance(info, dict):
        info[_ENDED] = ended


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # noqa: ANN001 - DB-API objects are untyped
        dbapi_connection.isolation_level = None  # let SQLAlchemy's begin event below control transactions
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:  # noqa: ANN001
        # Writers take the write lock up front (the sequence rows are read then updated); readers start a
        # deferred transaction, which in WAL mode never waits for writers.
        if connection.get_execution_options().get(WRITE_OPTION):
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            connection.exec_driver_sql("BEGIN")


def writer(engine: Engine) -> Engine:
    """The engine to use for write transactions (on SQLite they begin IMMEDIATE)."""
    return engine.execution_options(**{WRITE_OPTION: True})


def reads(engine: Engine) -> Engine:
    """The engine for reads made outside a write transaction, and for lone write statements.

    On PostgreSQL and MariaDB they run in autocommit: the metastore reads at READ COMMITTED, where every
    statement takes its own snapshot inside a transaction too, so a read sees the same rows, without the
    ROLLBACK (and on PostgreSQL the BEGIN) that would cost a lone read one or two more round trips; a lone
    write statement is atomic on its own, without the COMMIT. psycopg switches autocommit on a pooled
    connection without a word to the server; the MariaDB drivers send a round trip each way, so there these
    run on connections of their own, opened in autocommit (``_autocommit_companion``). SQLite keeps its
    transaction (a deferred BEGIN costs no round trip and gives a multi-statement read one snapshot).
    """
    if engine.dialect.name == "postgresql":
        return engine.execution_options(isolation_level="AUTOCOMMIT")
    if engine.dialect.name in ("mysql", "mariadb"):
        return _autocommit_companion(engine)
    return engine


#: Each MariaDB engine's autocommit companion (``reads``), made once, disposed with it.
_COMPANIONS: weakref.WeakKeyDictionary[Engine, Engine] = weakref.WeakKeyDictionary()
_COMPANIONS_LOCK = threading.Lock()


def _autocommit_companion(engine: Engine) -> Engine:
    """An engine on ``engine``'s database whose pooled connections are opened in autocommit and stay so: a
    read costs its statement alone (no ROLLBACK at checkin: ``skip_autocommit_rollback``), and no round trip
    switches the mode. Its pool is as large as ``engine``'s and is disposed with it; listeners on ``engine``
    hear its work."""
    with _COMPANIONS_LOCK:
        found = _COMPANIONS.get(engine)
        if found is not None:
            return found
        pool_size = engine.pool.size() if isinstance(engine.pool, QueuePool) else 5
        companion = create_engine(
            engine.url,
            pool_size=pool_size,
            isolation_level="AUTOCOMMIT",
            skip_autocommit_rollback=True,
            pool_recycle=3600,
            # The connection used last first: the next read of the thread that sent a statement without
            # waiting (``mariadb_unawaited``) takes that connection, reads its answer, then sees its effect.
            pool_use_lifo=True,
            connect_args=mysql_connect_args(engine.url),
            paramstyle=engine.dialect.paramstyle,  # one statement text in both engines' compiled caches
        )
        owe_answers_on(companion)  # before the idle ping, which sends on the connection
        _ping_when_idle(companion)
        _allow_statement_batches(companion)
        # What listens on ``engine`` hears this engine's statements and transactions too (as SQLAlchemy's
        # option engines share their engine's): the statement counts, and any observer of the metastore's.
        companion.dispatch = companion.dispatch._join(engine.dispatch)
        # Marked as PostgreSQL's autocommit reads are, so ``in_transaction`` and the statement counts see it.
        marked = companion.execution_options(isolation_level="AUTOCOMMIT")
        event.listen(engine, "engine_disposed", lambda disposed: _dispose_with(disposed, engine, companion))
        _COMPANIONS[engine] = marked
        return marked


@contextmanager
def in_transaction(conn: Connection) -> Iterator[None]:
    """Around read work that only exists inside a transaction on PostgreSQL: a stream of rows (``yield_per``
    reads through a server-side cursor) or a setting made with ``SET LOCAL``. On a connection from ``reads``
    (autocommit) a transaction is opened for the block and ended after it (rolled back on an error, or when
    the caller stops reading a stream early); elsewhere the block runs as it is."""
    if (
        conn.dialect.name != "postgresql"
        or conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT"
    ):
        yield
        return
    with conn.connection.driver_connection.transaction():
        yield


#: The newest migration's revision (``migrations/versions``). A database recording it is opened without
#: Alembic, whose import alone cost every process opening a metastore some 0.2 s of CPU (a load, a dump, and
#: the server of their worker processes each). ``tests/unit/test_schema_head.py`` keeps it the scripts' head.
SCHEMA_HEAD = "0015_dbkeys"


def alembic_config(db_url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", db_url.replace("%", "%%"))
    return config


def upgrade_schema(db_url: str, revision: str = "head") -> None:
    """Create or upgrade the metastore schema to ``revision`` (idempotent). A database already at the head
    (``SCHEMA_HEAD``) is left as it is without loading Alembic; an empty one gets the head's schema in one
    step (``new_schema``)."""
    if revision == "head":
        recorded = recorded_revision(db_url)
        if recorded == SCHEMA_HEAD:
            return
        if recorded is None:
            from hmsrepl.metastore.new_schema import create_if_empty

            if create_if_empty(db_url):
                return
    from alembic import command

    command.upgrade(alembic_config(db_url), revision)


def recorded_revision(db_url: str) -> str | None:
    """The schema revision the database records (Alembic's ``alembic_version`` row), None when it records
    none (a new database, or one that cannot be read: the upgrade then says why)."""
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            found = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            return None if found is None else str(found)
    except SQLAlchemyError:
        return None
    finally:
        engine.dispose()


def schema_is_current(engine: Engine) -> bool:
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config(str(engine.url))).get_current_head()
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision() == head


#: What the server answers when it chose this transaction as a deadlock's victim (MySQL/MariaDB, PostgreSQL).
DEADLOCK_CODES = (1213, "40P01")


def is_deadlock(exc: BaseException) -> bool:
    """Whether ``exc`` is the database cancelling a transaction to break a deadlock: the transaction can be
    run again as it is (the server says so: "try restarting transaction")."""
    if not isinstance(exc, OperationalError):
        return False
    orig = exc.orig
    code = (
        getattr(orig, "pgcode", None)
        or getattr(orig, "sqlstate", None)
        or (getattr(orig, "args", None) or [None])[0]
    )
    return code in DEADLOCK_CODES
