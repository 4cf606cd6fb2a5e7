"""Count the statements and round trips a piece of metastore work sends to its database.

On a networked database (PostgreSQL, MariaDB) a metastore call costs mostly round trips, not the server's
work: counting them per event type and per bootstrap object shows where a replay or a bootstrap spends its
time, and lets tests pin the counts so a change that adds a read per object is noticed.

A round trip here is one statement sent by the driver (a multi-row insert batch counts once), plus the
transaction's own exchanges: COMMIT or ROLLBACK, BEGIN where the driver sends it separately (psycopg does;
the MariaDB drivers send none, and SQLite's explicit BEGIN is a statement already), the pool's liveness
ping on checkout, and on MariaDB the ROLLBACK the pool sends when a connection comes back with a transaction open. A
connection in autocommit (reads on PostgreSQL) sends no BEGIN, COMMIT or ROLLBACK, so none is counted, nor is
a COMMIT the server made inside the transaction's last request (``database.committed_in_request``). A
statement sent without waiting for its answer (``mariadb_unawaited``) is a statement but no round trip; a
bulk write of rows (``bulk_rows``: a PostgreSQL COPY, a SQLite executemany) is one statement and one round
trip, whatever it carries.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, event

from hmsrepl.metastore import bulk_rows, database, mariadb_unawaited


@dataclass
class Counts:
    """What one counted piece of work sent: statements, transactions and round trips in all."""

    statements: int = 0
    transactions: int = 0  # commits and rollbacks
    begins: int = 0  # BEGINs the driver sends as an exchange of their own
    pings: int = 0  # pool pre-ping liveness checks
    unawaited: int = 0  # statements among ``statements`` sent without waiting for their answer

    @property
    def round_trips(self) -> int:
        return self.statements - self.unawaited + self.transactions + self.begins + self.pings

    def per(self, objects: int) -> tuple[float, float]:
        """(statements, round trips) per object: the figure compared across backends and versions."""
        return (self.statements / objects, self.round_trips / objects) if objects else (0.0, 0.0)


class StatementCounter:
    """Listens on engines and adds what they send to ``counts`` while ``counting()`` is active.

    Listeners stay attached until ``close``; outside ``counting()`` they only return, so attaching one to a
    benchmark's engines costs nothing measurable.
    """

    def __init__(self, *engines: Engine) -> None:
        self.counts = Counts()
        self._active = False
        self._engines: list[Engine] = []
        for engine in engines:
            self.attach(engine)

    def attach(self, engine: Engine) -> None:
        separate_begin = engine.dialect.name == "postgresql"
        pinged = bool(getattr(engine.pool, "_pre_ping", False))
        event.listen(engine, "before_cursor_execute", self._on_statement)
        event.listen(engine, "commit", self._on_transaction_end)
        event.listen(engine, "rollback", self._on_transaction_end)
        if separate_begin:
            event.listen(engine, "begin", self._on_begin)
        if pinged:
            event.listen(engine.pool, "checkout", self._on_checkout)
        self._engines.append(engine)

    def close(self) -> None:
        for engine in self._engines:
            for name, fn in (
                ("before_cursor_execute", self._on_statement),
                ("commit", self._on_transaction_end),
                ("rollback", self._on_transaction_end),
                ("begin", self._on_begin),
            ):
                if event.contains(engine, name, fn):
                    event.remove(engine, name, fn)
            if event.contains(engine.pool, "checkout", self._on_checkout):
                event.remove(engine.pool, "checkout", self._on_checkout)
        self._engines.clear()

    @contextmanager
    def counting(self) -> Iterator[Counts]:
        """Count what is sent inside the block into a fresh ``Counts`` (yielded, filled when the block ends)."""
        outer, self.counts, self._active = (self.counts, self._active), Counts(), True
        counts = self.counts
        pinged = getattr(database, "pings_sent", 0)  # idle-connection pings (make_engine's, not pre-ping's)
        reset = database.reset_rollbacks_sent  # rollbacks sent by the pool, which no connection event reports
        unsent = database.commits_not_sent  # commits SQLAlchemy reports but the server made in a request
        unawaited = mariadb_unawaited.unawaited_sent  # sent from the raw connection: no statement event
        bulk = bulk_rows.driver_statements_sent  # rows sent in bulk from the driver's connection: none either
        try:
            yield counts
        finally:
            counts.pings += getattr(database, "pings_sent", 0) - pinged
            counts.transactions += database.reset_rollbacks_sent - reset
            counts.transactions -= database.commits_not_sent - unsent
            counts.unawaited += mariadb_unawaited.unawaited_sent - unawaited
            counts.statements += mariadb_unawaited.unawaited_sent - unawaited
            counts.statements += bulk_rows.driver_statements_sent - bulk
            self.counts, self._active = outer

    def _on_statement(self, *_args: object) -> None:
        if self._active:
            self.counts.statements += 1

    def _on_transaction_end(self, conn: Connection, *_args: object) -> None:
        if self._active and not _autocommit(conn):
            self.counts.transactions += 1

    def _on_begin(self, conn: Connection, *_args: object) -> None:
        if self._active and not _autocommit(conn):
            self.counts.begins += 1

    def _on_checkout(self, *_args: object) -> None:
        if self._active:
            self.counts.pings += 1


def _autocommit(conn: Connection) -> bool:
    """Whether ``conn`` runs without a transaction: SQLAlchemy still reports a begin and a rollback around its
    work, but the driver sends neither (``database.reads`` on PostgreSQL)."""
    return conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
