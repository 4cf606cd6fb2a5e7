"""MariaDB's one-statement append (``mariadb_append``) keeps the contract of the steps it replaces: a database
row it cannot lock (gone, or held) reserves and inserts nothing, the intents get their own ids in order, and
a transaction with more intents than the statement carries is refused before anything is sent."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.mariadb_append import MAX_INTENTS, append_checked
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.schema import file_intents, notification_log

pytestmark = pytest.mark.parametrize("backend", ["mysql"], indirect=True)

EVENT = {
    "event_type": "CREATE_TABLE",
    "db_name": "a",
    "tbl_name": "t",
    "message": '{"q": "it\'s \\"quoted\\"\\\\"}',
    "message_format": "json-1",
}


def _intent(number: int) -> dict[str, object]:
    return {
        "kind": "makedirs",
        "payload": f'{{"dirs": ["/w/{number}"]}}',
        "created_at": number,
        "claimed_at": 0,
    }


def test_a_database_row_it_cannot_lock_reserves_and_inserts_nothing(metastore: Metastore) -> None:
    metastore.catalog.create_database(Database(name="a"))
    before = metastore.events.current_event_id()
    with metastore.engine.begin() as conn:
        assert append_checked(conn, ["a", "gone"], [EVENT], 7, [_intent(1)]) == (None, [], [])
        assert conn.execute(select(func.count()).select_from(file_intents)).scalar_one() == 0
    assert metastore.events.current_event_id() == before


def test_events_and_intents_take_consecutive_ids_in_order(metastore: Metastore) -> None:
    metastore.catalog.create_database(Database(name="a"))
    before = metastore.events.current_event_id()
    with metastore.engine.begin() as conn:
        first, docs, ids = append_checked(conn, ["a"], [EVENT, EVENT], 7, [_intent(n) for n in range(3)])
        stored = conn.execute(
            select(file_intents.c.id, file_intents.c.created_at).order_by(file_intents.c.id)
        )
        assert [tuple(row) for row in stored] == list(zip(ids, range(3), strict=True))
        messages = conn.execute(
            select(notification_log.c.message).where(notification_log.c.event_id > before)
        )
        assert [row.message for row in messages] == [EVENT["message"]] * 2
    assert first == before + 1 and len(docs) == 1 and '"a"' in docs[0]
    assert metastore.events.current_event_id() == before + 2


def test_more_intents_than_it_carries_are_refused_before_anything_is_sent(metastore: Metastore) -> None:
    metastore.catalog.create_database(Database(name="a"))
    with metastore.engine.begin() as conn, pytest.raises(ValueError, match="at most"):
        append_checked(conn, [], [EVENT], 7, [_intent(n) for n in range(MAX_INTENTS + 1)])
