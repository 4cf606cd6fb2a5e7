"""Write protection of replica and frozen databases, enforced where every write commits.

A replica (``hmsrepl.replica.of``) must change only through replication loads, or it silently diverges from
its source; a source frozen for a planned failover (``hmsrepl.failover.read.only``) must not take writes the
hand-over would lose. The check runs in the event log at commit of every write transaction (every catalog,
statistics and ACID write logs an event naming its database), so Thrift, Spark, the CLI and in-process
callers all get it. It reads the database row with a shared lock: a freeze (which updates that row) waits
for writes already committing, and writes after it see it, so no acknowledged write escapes a hand-over.

The only way past it is ``privileged()``, a context variable set in-process by the replication load and the
failover commands: no client request can set it (it is not a parameter, a header or a setting).
"""

from __future__ import annotations

import functools
import getpass
import json
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from sqlalchemy import Connection, bindparam, select

from hmsrepl.exceptions import InvalidOperationError
from hmsrepl.metastore.events import EventType, PendingEvent
from hmsrepl.metastore.mariadb_version import JSON_TABLE_SINCE, mariadb_at_least
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.payloads import named_databases as payload_databases
from hmsrepl.metastore.payloads import prior_database
from hmsrepl.metastore.schema import dbs

REPLICA_OF = "hmsrepl.replica.of"  # also replication.target.REPLICA_OF (set by bootstrap loads)
READ_ONLY = "hmsrepl.failover.read.only"  # the failover target's name, while a hand-over is under way
HANDOVER_ID = "hmsrepl.failover.handover.id"  # the event id both sides were equal at
HANDOVER_PEER = "hmsrepl.failover.peer"  # the database on the other side of the last hand-over
PROTECTION_LIFTED = "hmsrepl.protection.lifted"  # JSON: who, why, when (``hmsrepl repl unprotect``)
PROMOTED = "hmsrepl.failover.promoted"  # JSON: who, why, when (``hmsrepl repl promote --force``)
FAILBACK_FROM = "hmsrepl.failback.protected.at"  # see replication.failover
# Parameters that describe this side only: never replicated, never compared by verify.
LOCAL_PARAMS = (READ_ONLY, HANDOVER_ID, HANDOVER_PEER, PROTECTION_LIFTED, PROMOTED, FAILBACK_FROM)

F = TypeVar("F", bound=Callable[..., Any])
_privileged: ContextVar[str | None] = ContextVar("hmsrepl_privileged_write", default=None)


class ReplicaProtectedError(InvalidOperationError):
    """A client write into a protected replica, or into a source frozen for a failover."""


@contextmanager
def privileged(purpose: str) -> Iterator[None]:
    """Writes made inside (in this thread or task) bypass the protection: replication loads, failover."""
    token = _privileged.set(purpose)
    try:
        yield
    finally:
        _privileged.reset(token)


def privileged_call(purpose: str) -> Callable[[F], F]:
    """Decorator form of ``privileged`` for the entry points of the replication load."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with privileged(purpose):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def is_privileged() -> bool:
    return _privileged.get() is not None


def refusal(db_name: str, params: dict[str, str]) -> str | None:
    """Why ``db_name`` (with these parameters) refuses client writes, as one line; None if it does not."""
    frozen_for = params.get(READ_ONLY)
    if frozen_for is not None:
        return (
            f"database '{db_name}' is read-only: it is being failed over to '{frozen_for}'; write to "
            f"'{frozen_for}' once the failover has finished (or, if it was abandoned, run "
            f"'hmsrepl repl unprotect {db_name} --reason ...')"
        )
    source = params.get(REPLICA_OF)
    if source is not None and PROTECTION_LIFTED not in params:
        return (
            f"database '{db_name}' is a protected replica of '{source}' and only replication loads may change "
            f"it; write to '{source}', or make '{db_name}' writable by failing over "
            f"('hmsrepl repl failover {source} {db_name}' or 'hmsrepl repl promote {db_name} --force')"
        )
    return None


def check_params(db: Database) -> None:
    """Raise the refusal for ``db`` unless the caller is privileged (an entry check before any file work)."""
    if is_privileged():
        return
    reason = refusal(db.name, db.parameters)
    if reason:
        raise ReplicaProtectedError(reason)


def check_writable(conn: Connection, events: Sequence[PendingEvent]) -> None:
    """At commit: refuse the transaction if one of its databases is protected (row read with a shared lock).

    The row already holds the transaction's own changes, so a database change is also judged by the state it
    started from (an ALTER_DATABASE removing ``hmsrepl.replica.of``, a DROP_DATABASE whose row is gone).
    """
    for name in databases_to_check(events):
        if _check_unheld_row(conn, name):
            continue
        check_held_row(conn, name)


def databases_to_check(events: Sequence[PendingEvent]) -> list[str]:
    """The first half of the commit check, made without the database: refuses a change judged by the state
    it started from (see ``check_writable``), and returns the databases whose rows must still be read and
    share-locked, sorted (the order every writer locks them in); none for a privileged writer."""
    if is_privileged():
        return []
    for event in events:
        prior = prior_database(event.body) if event.event_type in PRIOR_DATABASE else None
        if prior is not None:
            _refuse(prior.name, prior.parameters)
    names: set[str] = set()
    for event in events:
        names |= named_databases(event)
    return sorted(names)


def judge_locked_rows(docs: Iterable[str]) -> None:
    """Refuse if one of these database rows, read under the commit's shared lock, is protected."""
    for doc in docs:
        _refuse_database(doc)


def check_held_row(conn: Connection, name: str) -> None:
    """The commit check of database ``name`` when its row may be held by another transaction (a load or a
    freeze), or may be gone: judged without waiting first, then share-locked, waiting for the holder."""
    # A plain read refuses writes into replicas without waiting for (or deadlocking with) a load that
    # holds the row; the shared lock is then taken only for writable databases, against a freeze.
    for locking in (False, True):
        if not _check_row(conn, name, locking=locking):
            break


def check_crossing(conn: Connection, event: PendingEvent) -> None:
    """When an event is emitted: refuse it if its after-state names a protected database it is not logged
    under (a table renamed into a replica), before the transaction's file work (the rename's directory
    move) can touch that database's files. The database it is logged under was checked on entry."""
    if is_privileged():
        return
    own = (event.db_name or "").lower()
    for name in sorted(named_databases(event) - {own}):
        _check_row(conn, name, locking=False)


def check_write_locks(conn: Connection, db_names: Iterable[str]) -> None:
    """Refuse a write lock (anything but a shared read) on a protected database: Hive takes it as the
    first step of a write, and a lock logs no event for the commit check to judge. Reads keep locking."""
    if is_privileged():
        return
    for name in sorted({name.lower() for name in db_names}):
        _check_row(conn, name, locking=False)


def check_queued_request(conn: Connection, db_name: str) -> None:
    """Refuse a client's request that queues work on a database (a compaction request): it logs no event,
    so it is judged when made. The database's own housekeeping queues work without this check."""
    if is_privileged():
        return
    _check_row(conn, db_name.lower(), locking=False)


def named_databases(event: PendingEvent) -> set[str]:
    """Every database a write names: the one its event is logged under and the one of each object snapshot
    in its message, before and after (a rename across databases names both)."""
    names = {event.db_name.lower()} if event.db_name else set()
    return names | payload_databases(event.body)


_UNHELD_DOC = (
    select(dbs.c.doc).where(dbs.c.name == bindparam("name")).with_for_update(read=True, skip_locked=True)
)


def _check_unheld_row(conn: Connection, name: str) -> bool:
    """The commit check in one statement where it can be: True if database ``name`` was judged (refused, or
    its row now share-locked), False if the two-step check must run.

    Most commits find the row unheld: ``FOR SHARE SKIP LOCKED`` (PostgreSQL, MariaDB 10.6+) then locks and
    reads it at once, and returns nothing, without waiting, when a load or a freeze holds it (or it does not
    exist). On SQLite the writer already holds the database's write lock, so the plain read is the locked one.
    """
    dialect = conn.dialect
    if dialect.name == "sqlite":
        _check_row(conn, name, locking=False)
        return True
    if not (dialect.name == "postgresql" or skips_locked_rows(dialect)):
        return False
    row = conn.execute(_UNHELD_DOC, {"name": name}).first()
    if row is None:
        return False
    _refuse_database(row.doc)
    return True


def skips_locked_rows(dialect: Any) -> bool:
    """MariaDB reads ``LOCK IN SHARE MODE SKIP LOCKED`` from 10.6 on (as it reads ``JSON_TABLE``, which
    ``mariadb_append`` also needs); MySQL does not with that syntax."""
    return mariadb_at_least(dialect, JSON_TABLE_SINCE)


def _refuse_database(doc: str) -> None:
    db = Database.model_validate_json(doc)
    _refuse(db.name, db.parameters)


def _check_row(conn: Connection, name: str, *, locking: bool) -> bool:
    """Refuse if database ``name`` is protected now; False if it does not exist."""
    query = select(dbs.c.doc).where(dbs.c.name == name)
    row = conn.execute(query.with_for_update(read=True) if locking else query).first()
    if row is None:
        return False
    _refuse_database(row.doc)
    return True


PRIOR_DATABASE = frozenset({EventType.ALTER_DATABASE, EventType.DROP_DATABASE})
"""The database events whose message keeps the database as it was before the change (the state a protected
replica is judged by); the other database-scoped type, CREATE_DATABASE, has no state before it."""


def _refuse(name: str, parameters: dict[str, str]) -> None:
    reason = refusal(name, parameters)
    if reason:
        raise ReplicaProtectedError(reason)


def lifted_record(reason: str, *, action: str = "unprotect") -> str:
    """Who lifted a protection, why and when, as stored in the database parameters."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = "unknown"
    return json.dumps(
        {
            "action": action,
            "user": user,
            "host": socket.gethostname(),
            "reason": reason,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        sort_keys=True,
    )
