"""MariaDB's one-statement append (``mariadb_append``) keeps the contract of the steps it replaces: a database
row it cannot lock (gone, or held) reserves and inserts nothing, the intents get their own ids in order, and
a transaction with more intents than the statement carries is refused before anything is sent. It commits
the transaction in its own request only when asked to and each locked row holds, byte for byte, the document
the caller judged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.mariadb_append import MAX_INTENTS, append_checked
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import REPLICA_OF
from hmsrepl.metastore.schema import dbs, file_intents, notification_log
from tests.conftest import metastore_on

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


@pytest.mark.parametrize("count", [1, 2])
def test_each_event_is_stored_as_given_whether_alone_or_with_others(metastore: Metastore, count: int) -> None:
    """A lone event is bound as values, several as one document: either way each row holds the event's own
    columns, text outside the Basic Multilingual Plane and a table-less event's NULL included."""
    metastore.catalog.create_database(Database(name="a"))
    before = metastore.events.current_event_id()
    events = [
        {**EVENT, "tbl_name": None if number else "t\U0001f600", "message": f"{EVENT['message']}{number}"}
        for number in range(count)
    ]
    with metastore.engine.begin() as conn:
        first, _, _ = append_checked(conn, ["a"], events, 7, [])
        stored = conn.execute(
            select(
                notification_log.c.event_id,
                notification_log.c.event_time,
                notification_log.c.event_type,
                notification_log.c.cat_name,
                notification_log.c.db_name,
                notification_log.c.tbl_name,
                notification_log.c.message,
                notification_log.c.message_format,
            )
            .where(notification_log.c.event_id > before)
            .order_by(notification_log.c.event_id)
        ).all()
    expected = [
        (
            before + 1 + number,
            7,
            event["event_type"],
            "hive",
            "a",
            event["tbl_name"],
            event["message"],
            "json-1",
        )
        for number, event in enumerate(events)
    ]
    assert first == before + 1 and [tuple(row) for row in stored] == expected


def test_more_intents_than_it_carries_are_refused_before_anything_is_sent(metastore: Metastore) -> None:
    metastore.catalog.create_database(Database(name="a"))
    with metastore.engine.begin() as conn, pytest.raises(ValueError, match="at most"):
        append_checked(conn, [], [EVENT], 7, [_intent(n) for n in range(MAX_INTENTS + 1)])


@pytest.fixture
def folding(backend: str, tmp_path: Path) -> Iterator[Metastore]:
    """A metastore on a MariaDB database whose text compares without case (a collation a site may choose)."""
    with metastore_on(backend, tmp_path, mysql_collation="utf8mb4_general_ci") as store:
        yield store


def _stored_doc(store: Metastore, name: str) -> str:
    with store.engine.connect() as conn:
        return str(conn.execute(select(dbs.c.doc).where(dbs.c.name == name)).scalar_one())


def test_it_commits_in_its_request_only_when_each_row_holds_its_judged_document(folding: Metastore) -> None:
    """Judged documents equal to the rows: committed by the request (seen from another connection before the
    caller's commit). Not asked to, or a document that differs from the row only in case (equal under the
    database's collation, not to the protection check, which reads parameter names as they are): the
    transaction stays open, and rolling it back leaves nothing."""
    folding.catalog.create_database(Database(name="a", parameters={REPLICA_OF.upper(): "src"}))
    doc = _stored_doc(folding, "a")
    folded = doc.replace(REPLICA_OF.upper(), REPLICA_OF)
    assert folded != doc and folded.lower() == doc.lower()
    before = folding.events.current_event_id()
    for judged in (None, [folded]):
        with folding.engine.connect() as conn:
            transaction = conn.begin()
            first, docs, _ = append_checked(conn, ["a"], [EVENT], 7, [], judged)
            assert (first, docs) == (before + 1, [doc])
            assert folding.events.current_event_id() == before  # not committed: another connection's view
            transaction.rollback()
        assert folding.events.current_event_id() == before
    with folding.engine.connect() as conn:
        transaction = conn.begin()
        first, docs, ids = append_checked(conn, ["a"], [EVENT], 7, [_intent(1)], [doc])
        assert folding.events.current_event_id() == before + 1  # committed by the request itself
        transaction.commit()  # sends nothing: the transaction is over
    assert folding.events.current_event_id() == before + 1
    assert [intent.id for intent in folding.catalog.intents.pending()] == ids
