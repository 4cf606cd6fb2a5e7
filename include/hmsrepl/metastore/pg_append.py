"""A transaction's events appended on PostgreSQL in one statement, with the commit's protection check.

Elsewhere the append is three exchanges with the server: share-lock and read the rows of the databases the
events name (the protection check), reserve ids on the sequence row, insert the events. On PostgreSQL one
statement does all three, in that order, as data-modifying CTEs: the events travel as one JSON document
(one shape of statement for any number of events, so it stays prepared; ``json_rows`` says why not
arrays), and each takes the id ``first + its position``.

The order matters for deadlocks: a freeze holds a database row and then logs its own event (taking the
sequence row), so a writer must never hold the sequence row while it waits for a database row. The
statement therefore locks the database rows with ``SKIP LOCKED`` and touches the sequence only if it got
all of them; when one is held (or gone), it reserves nothing and inserts nothing, and the caller falls back
to the check that waits, then appends without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text

from hmsrepl.metastore.json_rows import json_rows

_APPEND = text(
    """
WITH guard AS MATERIALIZED (
    SELECT doc FROM dbs WHERE name = ANY(CAST(:names AS VARCHAR[])) FOR SHARE SKIP LOCKED
), seq AS (
    UPDATE notification_sequence SET next_event_id = next_event_id + :count
    WHERE id = 1 AND (SELECT count(*) FROM guard) = :name_count
    RETURNING next_event_id - :count AS first_id
), logged AS (
    INSERT INTO notification_log
        (event_id, event_time, event_type, cat_name, db_name, tbl_name, message, message_format)
    SELECT seq.first_id + row.i - 1, :event_time, row.t, 'hive', row.d, row.n, row.m, row.f
    FROM seq, json_to_recordset(CAST(:events AS JSON))
        AS row(i INTEGER, t VARCHAR, d VARCHAR, n VARCHAR, m TEXT, f VARCHAR)
), intents AS (
    INSERT INTO file_intents (kind, payload, created_at, claimed_at, attempts)
    SELECT intent.k, intent.p, intent.c, intent.l, 0
    FROM seq, json_to_recordset(CAST(:intents AS JSON))
        AS intent(i INTEGER, k VARCHAR, p TEXT, c BIGINT, l BIGINT)
    ORDER BY intent.i
    RETURNING id
)
SELECT (SELECT first_id FROM seq) AS first_id, ARRAY(SELECT doc FROM guard) AS docs,
    ARRAY(SELECT id FROM intents ORDER BY id) AS intent_ids
"""
)


def append_checked(
    conn: Connection,
    names: Sequence[str],
    rows: Sequence[dict[str, Any]],
    event_time: int,
    intents: Sequence[dict[str, Any]] = (),
    judged: Sequence[str | None] | None = None,
) -> tuple[int | None, list[str], list[int]]:
    """Lock and read the rows of databases ``names``, reserve ids and insert ``rows`` (the log's columns but
    the id, time and catalog), in one statement; with them the file intent rows ``intents`` (their columns
    but the id, attempts and error), which would otherwise cost a statement of their own.

    Returns (the first event id, the database rows read, the intents' new ids in their order); the id is
    None when a database row could not be locked at once (held by another transaction, or not there): then
    nothing was reserved or inserted, and the caller must check those databases the waiting way and append
    again with no names. The intents are numbered in their order: the insert takes them sorted by position,
    and a serial column numbers the rows in the order they are inserted.

    ``judged`` (the documents of ``names`` the caller judged already) is not used: a PostgreSQL statement
    cannot commit its own transaction, so the rows read are judged after it, before the caller's commit.
    """
    found = conn.execute(
        _APPEND,
        {
            "names": list(names),
            "name_count": len(names),
            "count": len(rows),
            "event_time": event_time,
            "events": json_rows(
                {
                    "i": position,
                    "t": row["event_type"],
                    "d": row["db_name"],
                    "n": row["tbl_name"],
                    "m": row["message"],
                    "f": row["message_format"],
                }
                for position, row in enumerate(rows, 1)
            ),
            "intents": json_rows(
                {
                    "i": position,
                    "k": intent["kind"],
                    "p": intent["payload"],
                    "c": intent["created_at"],
                    "l": intent["claimed_at"],
                }
                for position, intent in enumerate(intents)
            ),
        },
    ).one()
    first = None if found.first_id is None else int(found.first_id)
    return first, list(found.docs or ()), [int(i) for i in found.intent_ids or ()]
