"""A lone statement sent to MariaDB without waiting for its answer (``mariadb_unawaited``), as a create deletes
the file intent it completed: the statement takes effect, the same thread's next read sees it, a failure is
logged while the connection serves on, a process that ends right after sending still has it done, and inside a
transaction, or through a driver that must wait for answers, nothing is sent that way."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, insert, select, text

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.database import make_engine
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.schema import file_intents
from hmsrepl.metastore.statement_counts import StatementCounter
from tests.conftest import make_config, metastore_on
from tests.helpers import make_table

pytestmark = pytest.mark.parametrize("backend", ["mysql"], indirect=True)


def _intent_row(store: Metastore) -> int:
    """A pending intent's row, committed; returns its id."""
    with store.engine.begin() as conn:
        row = {"kind": "makedirs", "payload": '{"dirs": []}', "created_at": 0, "claimed_at": 0, "attempts": 0}
        return int(conn.execute(insert(file_intents).values(**row)).inserted_primary_key[0])


def _rows(url: str) -> int:
    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(file_intents)).scalar_one())
    finally:
        engine.dispose()


def test_a_create_deletes_its_intent_without_waiting_and_the_next_read_sees_it(metastore: Metastore) -> None:
    """The deletion of the create's completed intent is sent without its answer (a statement, no round trip),
    and the thread's next read, on the connection that owes the answer, finds no intent left."""
    metastore.catalog.create_database(Database(name="u"))
    metastore.catalog.create_table(make_table("u", "warm"))
    counter = StatementCounter(metastore.engine)
    with counter.counting() as counts:
        made = metastore.catalog.create_table(make_table("u", "t"))
    counter.close()
    assert counts.unawaited == 1, counts
    assert metastore.catalog.intents.pending() == []
    assert Path(made.sd.location or "").is_dir()


def test_a_failed_statement_is_logged_and_its_connection_serves_on(
    metastore: Metastore, caplog: pytest.LogCaptureFixture
) -> None:
    """The answer owed is read before the connection's next statement: an error in it is logged (the work it
    would have finished stays for housekeeping) and the read that follows succeeds on that connection."""
    with caplog.at_level(logging.WARNING, logger="hmsrepl.metastore.mariadb_unawaited"):
        assert metastore.events.send_alone_unawaited("DELETE FROM no_such_table WHERE id IN (1)")
        with metastore.events.read_engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    assert "no_such_table" in caplog.text
    intent_id = _intent_row(metastore)
    assert metastore.events.send_alone_unawaited(f"DELETE FROM file_intents WHERE id IN ({intent_id})")
    assert metastore.catalog.intents.pending() == []


def test_a_process_that_ends_right_after_sending_still_has_the_statement_done(
    db_url: str, tmp_path: Path
) -> None:
    """Closing every connection at once after the send (as a process exiting does) loses nothing: the server
    runs what it received before the connection's end."""
    store = Metastore.open(make_config(db_url, tmp_path))
    intent_id = _intent_row(store)
    assert store.events.send_alone_unawaited(f"DELETE FROM file_intents WHERE id IN ({intent_id})")
    store.close()
    deadline = time.monotonic() + 10
    while _rows(db_url) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _rows(db_url) == 0


def test_nothing_is_sent_unawaited_in_a_transaction(metastore: Metastore) -> None:
    """Inside an open transaction the statement belongs to it (its rollback brings the row back): the caller
    runs it there."""
    intent_id = _intent_row(metastore)
    with metastore.events.transaction():
        assert not metastore.events.send_alone_unawaited(
            f"DELETE FROM file_intents WHERE id IN ({intent_id})"
        )
    assert [intent.id for intent in metastore.catalog.intents.pending()] == [intent_id]


@pytest.fixture
def through_pymysql(backend: str, tmp_path: Path) -> Iterator[Metastore]:
    with metastore_on(backend, tmp_path, driver="pymysql") as store:
        yield store


def test_pymysql_waits_for_the_answer(through_pymysql: Metastore) -> None:
    """PyMySQL has no public call that sends without reading: the deletion runs as any lone statement."""
    through_pymysql.catalog.create_database(Database(name="p"))
    assert not through_pymysql.events.send_alone_unawaited("DELETE FROM file_intents WHERE id IN (1)")
    through_pymysql.catalog.create_table(make_table("p", "t"))
    assert through_pymysql.catalog.intents.pending() == []


def test_a_connection_killed_by_the_server_loses_no_work(metastore: Metastore) -> None:
    """The server killed the pooled connection the deletion goes to (a restart, an idle timeout): whether the
    send fails (the connection is dropped and the deletion runs on another) or its answer cannot be read (the
    connection is replaced, the row stays for housekeeping), the create stands, its directory is made, and
    the next housekeeping pass leaves no intent."""
    metastore.catalog.create_database(Database(name="k"))
    metastore.catalog.create_table(make_table("k", "warm"))
    with metastore.events.read_engine.connect() as conn:
        victim = conn.execute(text("SELECT CONNECTION_ID()")).scalar_one()
    with metastore.engine.connect() as conn:
        conn.execute(text(f"KILL {int(victim)}"))
    made = metastore.catalog.create_table(make_table("k", "t"))  # on the guess: its first read is the send
    assert Path(made.sd.location or "").is_dir()
    metastore.catalog.intents.run_pending()
    assert metastore.catalog.intents.pending() == []
    assert metastore.catalog.get_table("k", "t").id == made.id
