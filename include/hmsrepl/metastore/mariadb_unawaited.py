"""A lone statement sent to MariaDB without waiting for its answer, which the connection's next user reads.

After a create commits, it makes its directory and deletes the row of the file intent that owed it: the call
needs nothing from that statement (a row left behind is done again by housekeeping, every intent's work being
idempotent), yet waiting for its answer cost a round trip, a quarter of a single ``create_table`` on a busy
machine. mysqlclient sends a query and reads its answer in two calls (``send_query``, ``read_query_result``):
the statement goes out on a pooled autocommit connection, which returns to the pool with its answer unread,
and whoever checks that connection out next reads the answer before sending anything (``owe_answers_on``).

The server runs the statement as soon as it arrives, in its own transaction, whatever the client does next:
a process that exits at once has still sent it (the server runs what it received before the connection's
end). The pool hands out the connection used last first, so the same thread's next read through it sees the
statement's effect. A failure in the answer is logged and the row stays, for housekeeping to complete.
PyMySQL has no public call that sends without reading the answer: there the statement runs as usual.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

log = logging.getLogger(__name__)

_OWED = "hmsrepl_answer_owed"
#: Statements sent so far without waiting for their answer (``statement_counts`` counts them as statements,
#: not as round trips).
unawaited_sent = 0


def sends_unawaited(engine: Engine) -> bool:
    """Whether ``engine`` can send a statement without waiting for its answer: mysqlclient's connections."""
    return engine.dialect.name in ("mysql", "mariadb") and engine.driver == "mysqldb"


def send_unawaited(engine: Engine, sql: str) -> bool:
    """Send ``sql`` on a pooled connection of ``engine``, which must be in autocommit (``database.reads``),
    and return without its answer (see the module's docstring). The text is sent as it is: only values of the
    program's own (ids it read) may be written into it, never a client's.

    False when the connection refused the send (the server went away): the connection is replaced, and the
    caller runs the statement the usual way, on another."""
    global unawaited_sent
    raw = engine.raw_connection()
    try:
        try:
            raw.dbapi_connection.send_query(sql.encode())  # type: ignore[union-attr]
        except engine.dialect.loaded_dbapi.Error:
            raw.invalidate()
            return False
        raw.info[_OWED] = True
        unawaited_sent += 1
        return True
    finally:
        raw.close()


def owe_answers_on(engine: Engine) -> None:
    """Have ``engine``'s pool read a connection's owed answer when it is checked out, before any other
    listener (the idle ping) sends on it. A connection whose answer cannot be read (the server went away)
    is replaced, as a failed ping's is."""

    @event.listens_for(engine.pool, "checkout", insert=True)
    def _read_owed(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if not record.info.pop(_OWED, False):
            return
        try:
            dbapi_connection.read_query_result()
        except engine.dialect.loaded_dbapi.OperationalError as exc:
            log.warning("a statement sent without waiting failed, housekeeping completes its work: %s", exc)
            raise DisconnectionError(f"pooled connection is no longer usable: {exc}") from exc
        except engine.dialect.loaded_dbapi.Error as exc:
            log.warning("a statement sent without waiting failed, housekeeping completes its work: %s", exc)
