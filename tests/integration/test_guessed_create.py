"""A single create_table inserts its row first, into its database as this metastore last read it, and checks
its location on what the insert's own statement read; a wrong guess rolls back and the create runs again from
a read. These tests hold it, on every backend, to what a create that reads first does: the same place for the
table, the same refusals in the same words, and nothing left behind by a refused create (no row, no event,
no directory, no intent), also when another metastore on the same database changed the database meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, insert, update
from sqlalchemy.exc import IntegrityError

from hmsrepl.exceptions import AlreadyExistsError, InvalidObjectError, NoSuchDatabaseError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, Table
from hmsrepl.metastore.protection import READ_ONLY, REPLICA_OF, ReplicaProtectedError, privileged
from hmsrepl.metastore.schema import dbs, notification_log
from hmsrepl.metastore.statement_counts import StatementCounter
from tests.conftest import make_config
from tests.helpers import make_table


@pytest.fixture
def other(metastore: Metastore, tmp_path: Path) -> Iterator[Metastore]:
    """A second metastore on the same database and warehouse (another server of the same service)."""
    store = Metastore.open(make_config(metastore.config.db_url, Path(metastore.config.warehouse).parent))
    try:
        yield store
    finally:
        store.close()


def _warm(store: Metastore, db: str) -> None:
    """Create the database and a first table: the second create of the database is made on the guess."""
    store.catalog.create_database(Database(name=db))
    store.catalog.create_table(make_table(db, "warm"))


def _located(table: Table, location: str) -> Table:
    return table.model_copy(update={"sd": table.sd.model_copy(update={"location": location})})


def _refused_without_a_trace(store: Metastore, table: Table, error: type[Exception], match: str) -> None:
    """The create is refused with ``error`` matching ``match``, and leaves no row, event, intent or directory."""
    location = (
        table.sd.location or f"{store.catalog.get_database(table.db_name).location_uri}/{table.table_name}"
    )
    existed, last_event = Path(location).exists(), store.events.current_event_id()
    with pytest.raises(error, match=match) as info:
        store.catalog.create_table(table)
    assert "\n" not in str(info.value)
    assert store.catalog.find_table(table.db_name, table.table_name) is None
    assert store.events.current_event_id() == last_event
    assert store.catalog.intents.pending() == []
    assert Path(location).exists() == existed


def test_a_create_on_the_guess_reads_nothing_before_its_insert(metastore: Metastore) -> None:
    """The second table of a database is inserted with the read around its location in one statement (on
    SQLite the read follows in the same transaction): no read of its own before the write. PostgreSQL: the
    insert, the append and the deletion of the directory intent after the commit, with BEGIN and COMMIT
    (6 round trips when reading first); MariaDB the same without BEGIN, and without COMMIT, which ends the
    append's request (5 when reading first, 4 with the COMMIT apart)."""
    _warm(metastore, "g")
    counter = StatementCounter(metastore.engine)
    with counter.counting() as counts:
        made = metastore.catalog.create_table(make_table("g", "second"))
    counter.close()
    expected = {"postgresql": (3, 5), "mysql": (3, 2), "sqlite": (9, 11)}[metastore.engine.dialect.name]
    assert (counts.statements, counts.round_trips) == expected, counts
    assert metastore.catalog.get_table("g", "second") == made
    assert Path(made.sd.location or "").is_dir()


def test_a_create_on_the_guess_binds_each_value_once_and_no_constant(metastore: Metastore) -> None:
    """The driver escapes every bound value in Python (mysqlclient): the constants of the create's statements
    are in their text, and on MariaDB a value used several times (the ancestors of the new location, which
    three columns are compared with) is bound by name, so it is escaped once."""
    _warm(metastore, "sales")
    bound: list[Any] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        bound.append(parameters)

    event.listen(metastore.engine, "before_cursor_execute", record)
    try:
        metastore.catalog.create_table(make_table("sales", "orders"))
    finally:
        event.remove(metastore.engine, "before_cursor_execute", record)
    values = [
        value for params in bound for value in (params.values() if isinstance(params, dict) else params)
    ]
    assert not {"database", "table", "flag", "recycle", "publish"} & {v for v in values if isinstance(v, str)}
    if metastore.engine.dialect.name == "mysql":
        assert all(isinstance(params, dict) for params in bound)
        assert len(values) <= 34, values  # a lone event binds its five columns (``mariadb_append``)


def test_a_refusal_on_the_guess_is_the_read_first_refusal_and_rolls_back(metastore: Metastore) -> None:
    """Refused after the insert (the location is another table's, or holds one; the columns repeat): the
    insert is rolled back, with the words of the create that reads first."""
    _warm(metastore, "r")
    catalog = metastore.catalog
    warm = catalog.get_table("r", "warm")
    _refused_without_a_trace(
        metastore,
        _located(make_table("r", "same"), warm.sd.location or ""),
        InvalidObjectError,
        r"managed location '.*/warm' is the location of table 'r\.warm'",
    )
    nest = str(Path(warm.sd.location or "").parent / "nest")
    catalog.create_table(_located(make_table("r", "inner"), f"{nest}/inner"))
    _refused_without_a_trace(
        metastore,
        _located(make_table("r", "above"), nest),
        InvalidObjectError,
        r"managed location '.*/nest' holds the location of table 'r\.inner'",
    )
    twice = make_table("r", "twice")
    twice = twice.model_copy(
        update={"sd": twice.sd.model_copy(update={"cols": [*twice.sd.cols, *twice.sd.cols]})}
    )
    _refused_without_a_trace(metastore, twice, InvalidObjectError, "has column 'id' twice")
    with pytest.raises(AlreadyExistsError, match=r"table 'r\.warm' already exists"):
        catalog.create_table(make_table("r", "warm"))
    assert catalog.create_table(make_table("r", "after")).sd.location == f"{warm.sd.location[:-4]}after"


def test_a_database_moved_by_another_metastore_places_the_table_where_it_now_is(
    metastore: Metastore, other: Metastore
) -> None:
    _warm(metastore, "m")
    moved = other.catalog.get_database("m").model_copy(
        update={"location_uri": f"{metastore.config.warehouse}/elsewhere/m.db"}
    )
    other.catalog.alter_database("m", moved)
    made = metastore.catalog.create_table(make_table("m", "t"))
    assert made.sd.location == f"{moved.location_uri}/t"
    assert metastore.catalog.get_table("m", "t").sd.location == made.sd.location
    assert Path(made.sd.location).is_dir()


def test_a_database_frozen_or_dropped_by_another_metastore_refuses_the_create(
    metastore: Metastore, other: Metastore
) -> None:
    _warm(metastore, "f")
    frozen = other.catalog.get_database("f")
    frozen = frozen.model_copy(update={"parameters": {**frozen.parameters, READ_ONLY: "f_dr"}})
    with privileged("the test's freeze"):
        other.catalog.alter_database("f", frozen)
    _refused_without_a_trace(
        metastore, make_table("f", "t"), ReplicaProtectedError, "database 'f' is read-only"
    )
    _warm(metastore, "gone")
    other.catalog.drop_database("gone", cascade=True)
    with pytest.raises(NoSuchDatabaseError):
        metastore.catalog.create_table(make_table("gone", "t"))


def test_an_append_failing_in_the_server_commits_nothing_of_the_create(metastore: Metastore) -> None:
    """The append is the create's last request, and on MariaDB it commits the transaction itself: when one of
    its steps fails in the server (here the event's id is taken already), neither the table's row, nor its
    event, nor its directory intent is committed, no id is reserved and no directory made; once the cause is
    gone the same create succeeds."""
    _warm(metastore, "f")
    before = metastore.events.current_event_id()
    taken = {
        "event_id": before + 1,
        "event_time": 0,
        "event_type": "PLANTED",
        "cat_name": "hive",
        "message": "{}",
        "message_format": "json-0.2",
    }
    with metastore.engine.begin() as conn:
        conn.execute(insert(notification_log).values(**taken))
    table = make_table("f", "t")
    location = Path(f"{metastore.catalog.get_database('f').location_uri}/t")
    with pytest.raises(IntegrityError):  # the event's id is taken
        metastore.catalog.create_table(table)
    assert metastore.catalog.find_table("f", "t") is None
    assert [e.event_type for e in metastore.events.next_events(before)] == ["PLANTED"]
    assert metastore.events.current_event_id() == before
    assert metastore.catalog.intents.pending() == []
    assert not location.exists()
    with metastore.engine.begin() as conn:
        conn.execute(notification_log.delete().where(notification_log.c.event_id == before + 1))
    made = metastore.catalog.create_table(table)
    assert [(e.event_type, e.table_name) for e in metastore.events.next_events(before)] == [
        ("CREATE_TABLE", "t")
    ]
    assert Path(made.sd.location or "").is_dir()


def test_the_commit_check_judges_the_row_it_locks_not_the_document_read_before(metastore: Metastore) -> None:
    """A writer hands the commit the database document it read (on MariaDB the append then commits in its own
    request when the locked row still holds it): a row that holds another document by the time of the append
    (here the transaction's own change makes 'r' a protected replica) is judged as it is then, and refuses
    the whole transaction, on every backend."""
    _warm(metastore, "r")
    read = metastore.catalog.core.guessed_db("r")
    assert read is not None
    before = metastore.events.current_event_id()
    replica = Database(name="r", parameters={REPLICA_OF: "src"}).model_dump_json()
    with (
        pytest.raises(ReplicaProtectedError, match="protected replica"),
        metastore.events.transaction() as tx,
    ):
        metastore.catalog.create_table(make_table("r", "t"))
        tx.database_docs["r"] = read[1]
        tx.conn.execute(update(dbs).where(dbs.c.name == "r").values(doc=replica))
    assert metastore.catalog.find_table("r", "t") is None
    assert metastore.events.current_event_id() == before
    assert metastore.catalog.get_database("r").parameters.get(REPLICA_OF) is None
    assert metastore.catalog.intents.pending() == []
