"""A transaction's events appended on MariaDB in one request, with the commit's protection check.

Elsewhere the append is three exchanges with the server (share-lock and read the rows of the databases the
events name, reserve ids on the sequence row, insert the events) and a fourth for the file intents of a client
write. On a busy machine each exchange costs far more than its statement (the server's thread must be
scheduled to answer it, then the client's), so a single ``create_table`` paid most of its time in them.
MariaDB has no data-modifying CTEs, but it runs an anonymous compound statement (``BEGIN NOT ATOMIC ... END``)
as one request: the steps run in it, in the same order as elsewhere, and its last ``SELECT`` answers what the
caller needs.

Several events travel as one JSON document expanded by the server (``JSON_TABLE``), so the statement keeps
its text for any number of them and the driver escapes one string, not every value in Python. Its text
columns are declared ``LONGTEXT`` whatever the column they fill: a value too long for ``JSON_TABLE``'s own
column would become NULL there (its ``ON ERROR`` default), while the insert into the real column refuses it as
any other insert does. A lone event (every single-object client write) is a row of bound values instead: one
text too, and the server then neither parses a document nor fills the temporary table ``JSON_TABLE`` reads
from, a fifth of the statement's time on the server.

Its shape follows the transaction, not its size: one ``SELECT ... INTO`` per database to check (a transaction
names one or two; a privileged one none) and one single-row insert per file intent, each followed by
``LAST_INSERT_ID()``, so the intents' ids are exact whatever the server's auto-increment settings. A cursor
loop over the rows would keep one text for any count, but costs the server ten times the statement (it
materialises the cursor), so a transaction with more than ``MAX_INTENTS`` intents inserts them itself.

The order matters for deadlocks, as in ``pg_append``: the database rows are locked with ``SKIP LOCKED`` and
the sequence row is touched only when all of them were (their ``doc`` is never NULL, so a NULL says a row
was held or gone); otherwise nothing is reserved or inserted, and the caller falls back to the check that
waits, then appends without it.

The append is a transaction's last request, and its COMMIT would be one more exchange: the statement ends
with it when it may. The commit's protection check judges the locked rows in Python, which the request
cannot wait for; so the caller judges the documents it already read in the transaction beforehand
(``judged``), and the statement commits only when every row it locked still holds, byte for byte, the
document judged. A row changed since (or a database with no document judged) leaves the transaction open,
and the caller judges the rows the statement read, then commits as before. A failing step stops the
statement before its COMMIT, so a failed append never commits the transaction's other changes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, TextClause, text

from hmsrepl.metastore.database import committed_in_request
from hmsrepl.metastore.json_rows import json_rows

#: The most file intents that ride in the append; a transaction with more inserts them in a statement of its own.
MAX_INTENTS = 8

_EVENTS = """
            INSERT INTO notification_log
                (event_id, event_time, event_type, cat_name, db_name, tbl_name, message, message_format)
            SELECT first_id + ev.i - 1, :event_time, ev.t, 'hive', ev.d, ev.n, ev.m, ev.f
            FROM JSON_TABLE(:events, '$[*]' COLUMNS (
                i FOR ORDINALITY,
                t LONGTEXT CHARACTER SET utf8mb4 PATH '$.t',
                d LONGTEXT CHARACTER SET utf8mb4 PATH '$.d',
                n LONGTEXT CHARACTER SET utf8mb4 PATH '$.n',
                m LONGTEXT CHARACTER SET utf8mb4 PATH '$.m',
                f LONGTEXT CHARACTER SET utf8mb4 PATH '$.f'
            )) AS ev;"""
_EVENT = """
            INSERT INTO notification_log
                (event_id, event_time, event_type, cat_name, db_name, tbl_name, message, message_format)
            VALUES (first_id, :event_time, :t, 'hive', :d, :n, :m, :f);"""


@functools.lru_cache(maxsize=256)
def _statement(databases: int, intents: int, commits: bool, lone: bool) -> TextClause:
    """The append for a transaction naming ``databases`` databases to check and carrying ``intents`` rows;
    ``commits``: ending with the COMMIT when each row holds its judged document (parameters ``judged<d>``);
    ``lone``: of one event, bound as values (parameters ``t``, ``d``, ``n``, ``m``, ``f``), not a document."""
    lines = [
        "BEGIN NOT ATOMIC",
        "    DECLARE first_id BIGINT DEFAULT NULL;",
        "    DECLARE committed INT DEFAULT 0;",
    ]
    lines += [f"    DECLARE doc{d} LONGTEXT CHARACTER SET utf8mb4 DEFAULT NULL;" for d in range(databases)]
    lines += [f"    DECLARE intent{i} BIGINT DEFAULT NULL;" for i in range(intents)]
    lines += [
        f"    SELECT doc INTO doc{d} FROM dbs WHERE name = :name{d} LOCK IN SHARE MODE SKIP LOCKED;"
        for d in range(databases)
    ]
    all_locked = " AND ".join(f"doc{d} IS NOT NULL" for d in range(databases)) or "TRUE"
    lines += [
        f"    IF {all_locked} THEN",
        "        UPDATE notification_sequence SET next_event_id = LAST_INSERT_ID(next_event_id + :count) WHERE id = 1;",
        "        IF ROW_COUNT() = 1 THEN",
        "            SET first_id = LAST_INSERT_ID() - :count;",
        _EVENT if lone else _EVENTS,
    ]
    for i in range(intents):
        lines += [
            "            INSERT INTO file_intents (kind, payload, created_at, claimed_at, attempts)",
            f"            VALUES (:kind{i}, :payload{i}, :created{i}, :claimed{i}, 0);",
            f"            SET intent{i} = LAST_INSERT_ID();",
        ]
    if commits:  # compared as bytes: a collation would take documents differing in case or padding as equal
        unchanged = " AND ".join(
            f"CAST(doc{d} AS BINARY) = CAST(CONVERT(:judged{d} USING utf8mb4) AS BINARY)"
            for d in range(databases)
        )
        lines += [
            f"            IF {unchanged or 'TRUE'} THEN",
            "                COMMIT;",
            "                SET committed = 1;",
        ]
        lines += ["            END IF;"]
    lines += ["        END IF;", "    END IF;"]
    answers = ["first_id", "committed"] + [f"doc{d}" for d in range(databases)]
    answers += [f"intent{i}" for i in range(intents)]
    lines += [f"    SELECT {', '.join(answers)};", "END"]
    return text("\n".join(lines))


def append_checked(
    conn: Connection,
    names: Sequence[str],
    rows: Sequence[dict[str, Any]],
    event_time: int,
    intents: Sequence[dict[str, Any]],
    judged: Sequence[str | None] | None = None,
) -> tuple[int | None, list[str], list[int]]:
    """Lock and read the rows of databases ``names``, reserve ids and insert ``rows`` (the log's columns but
    the id, time and catalog) and the file intent rows ``intents`` (their columns but the id, attempts and
    error; at most ``MAX_INTENTS``), in one request: ``pg_append.append_checked``'s contract, on MariaDB.

    ``judged``: the documents of ``names`` (in their order; None where there is none) the caller judged
    writable: the request then also commits the transaction when each locked row holds its judged document
    (see the module's docstring), and tells SQLAlchemy's commit to send nothing (``committed_in_request``).
    Given only by the transaction's last request; None: the transaction stays open.

    Returns (the first event id, the database rows read, the intents' new ids in their order); the id is
    None when a database row could not be locked at once, or the sequence row is missing: then nothing was
    reserved or inserted, nor committed.
    """
    if len(intents) > MAX_INTENTS:
        raise ValueError(f"{len(intents)} file intents cannot ride with an append (at most {MAX_INTENTS})")
    events = [
        {
            "t": row["event_type"],
            "d": row["db_name"],
            "n": row["tbl_name"],
            "m": row["message"],
            "f": row["message_format"],
        }
        for row in rows
    ]
    lone = len(events) == 1
    params: dict[str, Any] = {"count": len(rows), "event_time": event_time}
    if lone:
        params.update(events[0])
    else:
        params["events"] = json_rows(events)
    if judged is not None and len(judged) != len(names):
        raise ValueError(f"{len(judged)} judged documents for {len(names)} databases")
    for d, name in enumerate(names):
        params[f"name{d}"] = name
        if judged is not None:
            params[f"judged{d}"] = judged[d]
    for i, intent in enumerate(intents):
        params.update(
            {
                f"kind{i}": intent["kind"],
                f"payload{i}": intent["payload"],
                f"created{i}": intent["created_at"],
                f"claimed{i}": intent["claimed_at"],
            }
        )
    found = conn.execute(_statement(len(names), len(intents), judged is not None, lone), params).one()
    first, committed, docs, ids = found[0], found[1], found[2 : 2 + len(names)], found[2 + len(names) :]
    if committed:
        committed_in_request(conn)
    if first is None:
        return None, [], []
    return int(first), list(docs), [int(i) for i in ids]
