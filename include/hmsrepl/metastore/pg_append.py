"""A transaction's events appended on PostgreSQL in one statement, with the commit's protection check.

Elsewhere the append is three exchanges with the server: share-lock and read the rows of the databases the
events name (the protection check), reserve ids on the sequence row, insert the events. On PostgreSQL one
statement does all three, in that order, as data-modifying CTEs: the events travel as arrays (one shape of
statement for any number of events, so it stays prepared), and each takes the id ``first + its position``.

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
    SELECT seq.first_id + row.position - 1, :event_time, row.event_type, 'hive', row.db_name, row.tbl_name,
        row.message, row.message_format
    FROM seq, unnest(
        CAST(:event_types AS VARCHAR[]), CAST(:db_names AS VARCHAR[]), CAST(:tbl_names AS VARCHAR[]),
        CAST(:messages AS TEXT[]), CAST(:formats AS VARCHAR[])
    ) WITH ORDINALITY AS row(event_type, db_name, tbl_name, message, message_format, position)
), intents AS (
    INSERT INTO file_intents (kind, payload, created_at, claimed_at, attempts)
    SELECT intent.kind, intent.payload, intent.created_at, intent.claimed_at, 0
    FROM seq, unnest(
        CAST(:intent_kinds AS VARCHAR[]), CAST(:intent_payloads AS TEXT[]),
        CAST(:intent_created AS BIGINT[]), CAST(:intent_claimed AS BIGINT[])
    ) WITH ORDINALITY AS intent(kind, payload, created_at, claimed_at, position)
    ORDER BY intent.position
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
) -> tuple[int | None, list[str], list[int]]:
    """Lock and read the rows of databases ``names``, reserve ids and insert ``rows`` (the log's columns but
    the id, time and catalog), in one statement; with them the file intent rows ``intents`` (their columns
    but the id, attempts and error), which would otherwise cost a statement of their own.

    Returns (the first event id, the database rows read, the intents' new ids in their order); the id is
    None when a database row could not be locked at once (held by another transaction, or not there): then
    nothing was reserved or inserted, and the caller must check those databases the waiting way and append
    again with no names. The intents are numbered in their order: the insert takes them sorted by position,
    and a serial column numbers the rows in the order they are inserted.
    """
    found = conn.execute(
        _APPEND,
        {
            "names": list(names),
            "name_count": len(names),
            "count": len(rows),
            "event_time": event_time,
            "event_types": [row["event_type"] for row in rows],
            "db_names": [row["db_name"] for row in rows],
            "tbl_names": [row["tbl_name"] for row in rows],
            "messages": [row["message"] for row in rows],
            "formats": [row["message_format"] for row in rows],
            "intent_kinds": [intent["kind"] for intent in intents],
            "intent_payloads": [intent["payload"] for intent in intents],
            "intent_created": [intent["created_at"] for intent in intents],
            "intent_claimed": [intent["claimed_at"] for intent in intents],
        },
    ).one()
    first = None if found.first_id is None else int(found.first_id)
    return first, list(found.docs or ()), [int(i) for i in found.intent_ids or ()]
