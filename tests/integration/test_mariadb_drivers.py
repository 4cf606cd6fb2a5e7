"""The metastore on MariaDB through either driver a URL may name: mysqlclient (``mysql+mysqldb://``, the
default, a C driver) and PyMySQL (``mysql+pymysql://``, pure Python).

What depends on the driver is checked on both: the characters a snapshot or a message may hold, the event
ids the server returns with the statement's reply, rows streamed through a server-side cursor, a committed
write whose last request commits it (no COMMIT of its own, no ROLLBACK), and a connection the server kills
inside a transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from tests.backends import temporary_database
from tests.conftest import make_config
from tests.helpers import make_partition, make_table

#: Outside latin1 and outside the Basic Multilingual Plane (4 bytes in UTF-8: utf8mb3 refuses them).
TEXT = "naïve ✓ 中文 😀"


@pytest.fixture(params=["mysqldb", "pymysql"])
def maria(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Metastore]:
    """A metastore on a throwaway MariaDB database, opened through the driver of the parameter."""
    request.applymarker(pytest.mark.mysql)
    with temporary_database("mysql", str(tmp_path), driver=request.param) as url:
        store = Metastore.open(make_config(url, tmp_path))
        try:
            assert store.engine.dialect.driver == request.param
            yield store
        finally:
            store.close()


def test_catalog_and_events_keep_every_character(maria: Metastore) -> None:
    """A table's parameters, its partitions (streamed from the server) and the events written with them
    come back as they were written, and the events are numbered one after the other."""
    catalog = maria.catalog
    before = maria.events.current_event_id()
    catalog.create_database(Database(name="chars", description=TEXT))
    table = catalog.create_table(make_table("chars", "t", partition_keys=("p",), comment=TEXT))
    catalog.add_partitions("chars", "t", [make_partition(table, f"{TEXT} {n}") for n in range(3)])
    assert catalog.get_database("chars").description == TEXT
    assert catalog.get_table("chars", "t").parameters["comment"] == TEXT
    assert sorted(p.values[0] for p in catalog.get_partitions("chars", "t")) == [
        f"{TEXT} {n}" for n in range(3)
    ]
    streamed = catalog.get_partition_docs("chars", "t")  # through a server-side cursor
    assert [json.loads(doc)["values"] for _, doc, _ in streamed] == [[f"{TEXT} {n}"] for n in range(3)]
    events = maria.events.next_events(before)
    assert [e.event_type for e in events] == ["CREATE_DATABASE", "CREATE_TABLE", "ADD_PARTITION"]
    assert [e.event_id for e in events] == list(range(before + 1, before + 4))
    assert maria.events.current_event_id() == before + 3
    assert all(TEXT in json.dumps(e.body(), ensure_ascii=False) for e in events)


def test_create_table_commits_in_its_last_request_and_sends_no_rollback(
    maria: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the driver sends, counted where a statement counter cannot see it (the pool's reset): a
    committed write is not followed by a ROLLBACK, a read and a lone statement run in autocommit, and a
    create_table's append commits its one transaction in the same request, so no COMMIT follows it; the
    event commits with its table, and the connection's next transaction still commits with a COMMIT."""
    maria.catalog.create_database(Database(name="m"))
    maria.catalog.create_table(make_table("m", "warm"))
    raw = maria.engine.raw_connection()
    connection_class = type(raw.dbapi_connection)
    raw.close()
    sent: list[str] = []
    for name in ("commit", "rollback"):
        original = getattr(connection_class, name)

        def counted(conn: object, *, _original: object = original, _name: str = name) -> None:
            sent.append(_name)
            _original(conn)  # type: ignore[operator]

        monkeypatch.setattr(connection_class, name, counted)
    before = maria.events.current_event_id()
    maria.catalog.create_table(make_table("m", "t"))
    assert sent == []
    (created,) = maria.events.next_events(before)
    assert (created.event_type, created.table_name) == ("CREATE_TABLE", "t")
    assert maria.catalog.get_table("m", "t").id is not None
    maria.catalog.alter_database("m", Database(name="m", description="changed"))  # its append cannot commit
    assert sent == ["commit"]
    assert maria.catalog.get_database("m").description == "changed"


def test_connection_killed_inside_a_transaction_commits_nothing(maria: Metastore) -> None:
    """The server kills a metastore connection while its write transaction is open (a restart, an
    administrator's KILL): the write fails with a database error, neither its table nor its event is
    committed, and the next write runs on a new connection."""
    catalog = maria.catalog
    catalog.create_database(Database(name="k"))
    before = maria.events.current_event_id()
    admin = create_engine(make_url(str(maria.engine.url)), isolation_level="AUTOCOMMIT")
    try:
        with pytest.raises(DBAPIError), maria.events.transaction() as tx:
            catalog.create_table(make_table("k", "lost"))
            victim = tx.conn.execute(text("SELECT CONNECTION_ID()")).scalar_one()
            with admin.connect() as conn:
                conn.execute(text(f"KILL {int(victim)}"))
    finally:
        admin.dispose()
    assert catalog.find_table("k", "lost") is None
    assert maria.events.next_events(before) == []
    catalog.create_table(make_table("k", "kept"))
    assert [e.table_name for e in maria.events.next_events(before)] == ["kept"]
