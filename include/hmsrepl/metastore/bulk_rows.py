"""Many new rows into one table the backend's cheapest way: PostgreSQL's COPY, SQLite's driver executemany.

SQLAlchemy's executemany on PostgreSQL sends multi-row INSERTs (``insertmanyvalues``): the client formats every
row's values as bound parameters of a statement a thousand rows long, and the server parses and plans each
one. A bootstrap load records a file row per replica file, 1,000,000 for one big partition: COPY streams those
rows in the server's own row format instead, with nothing to parse or plan. It runs in the caller's
transaction (the driver's connection under the SQLAlchemy one), so the rows commit or roll back with the rest
of the write.

On SQLite, which parses its one ``INSERT`` once for all the rows either way, the rows go to the driver's
``executemany`` as tuples: SQLAlchemy's executemany makes a dictionary of parameters per row first and
processes each value, which was half of the insert's CPU (200,000 file rows: 3.7-4.3 s against 1.6-2.4 s).
MariaDB's rows take SQLAlchemy's multi-row INSERTs, and a batch under ``COPY_MIN_ROWS`` is one statement
everywhere, as statement listeners (tests, counts) see it.

The driver's connection is used only inside a transaction the caller began: on SQLite, whose transactions
SQLAlchemy's begin event opens, a statement sent before it would commit on its own. Its errors are raised as
SQLAlchemy raises the same errors of its own statements (``IntegrityError`` for a row already there, ...), so
callers catch one family whichever path the rows took.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table, insert
from sqlalchemy.exc import DBAPIError

#: Below this many rows SQLAlchemy's one multi-row INSERT costs no more, and statement listeners see it.
COPY_MIN_ROWS = 500
#: (dialect, driver) pairs whose driver's bulk call is used: psycopg 3's ``copy``, sqlite3's ``executemany``.
BULK_DRIVERS = (("postgresql", "psycopg"), ("sqlite", "pysqlite"))
#: Statements sent so far through the driver's connection, a COPY or an executemany each (no statement event
#: reports them: ``statement_counts`` adds them).
driver_statements_sent = 0


def insert_rows(
    conn: Connection, table: Table, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Insert ``rows`` (values in ``columns``' order) into ``table`` in ``conn``'s transaction (SQLAlchemy's
    insert outside one: it begins it)."""
    global driver_statements_sent
    if not rows:
        return
    backend = (conn.dialect.name, conn.dialect.driver)
    if len(rows) < COPY_MIN_ROWS or not conn.in_transaction() or backend not in BULK_DRIVERS:
        conn.execute(insert(table), [dict(zip(columns, row, strict=True)) for row in rows])
        return
    quote = conn.dialect.identifier_preparer
    target = f"{quote.format_table(table)} ({', '.join(quote.quote(column) for column in columns)})"
    driver: Any = conn.connection.driver_connection  # the driver's, in the transaction SQLAlchemy began
    dbapi_error = conn.dialect.loaded_dbapi.Error
    sqlite = backend[0] == "sqlite"
    if sqlite:
        statement = f"INSERT INTO {target} VALUES ({', '.join('?' * len(columns))})"
    else:
        statement = f"COPY {target} FROM STDIN"
    try:
        if sqlite:
            driver.executemany(statement, rows)
        else:
            with driver.cursor() as cursor, cursor.copy(statement) as copy:
                for row in rows:
                    copy.write_row(row)
    except dbapi_error as error:  # as SQLAlchemy's own call raises it: IntegrityError, OperationalError, ...
        raise DBAPIError.instance(statement, None, error, dbapi_error) from error
    finally:
        driver_statements_sent += 1
