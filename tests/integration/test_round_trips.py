"""Round trips to the metastore database: what a write, a bootstrap dump and a pooled connection cost.

On PostgreSQL and MariaDB a metastore call costs mostly round trips; these tests pin the counts a user's
throughput depends on (a bootstrap dump reads a database in a few statements, not several per table) and check
that what cut them keeps the results: the bulk reads return what table-by-table reads return, and a pooled
connection the server dropped is replaced without the caller seeing an error.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import event, text

from hmsrepl.exceptions import InvalidObjectError, NoSuchDatabaseError
from hmsrepl.metastore import Metastore, bulk_reads, database
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.mariadb_unawaited import sends_unawaited
from hmsrepl.metastore.messages import relative_path
from hmsrepl.metastore.model import Database, Table
from hmsrepl.metastore.statement_counts import StatementCounter
from hmsrepl.metastore.statistics import ColumnStat
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.verify import verify
from hmsrepl.storage.local import local_path
from tests.backends import temporary_database
from tests.conftest import make_config
from tests.helpers import count_dumps, make_partition, make_table, write_file

METADATA_ONLY = "WITH ('hive.repl.dump.metadata.only'='true')"
#: How a test holds a database row as a freeze does (an update of the row), per dialect.
HOLD_ROW = {"postgresql": "FOR NO KEY UPDATE", "mysql": "FOR UPDATE"}


def _fill(store: Metastore, db: str, tables: int, partitions: int) -> None:
    store.catalog.create_database(Database(name=db))
    for number in range(tables):
        table = store.catalog.create_table(make_table(db, f"t{number:02d}", partition_keys=("p",)))
        store.catalog.add_partitions(
            db, table.table_name, [make_partition(table, str(p)) for p in range(partitions)]
        )
    store.catalog.create_table(make_table(db, "plain"))


def test_bootstrap_dump_reads_a_database_in_statements_independent_of_its_tables(
    metastore: Metastore, tmp_path: Path
) -> None:
    """Ten times the tables must not cost ten times the statements: the dump reads tables and partitions in
    groups, and the statistics of the whole database at once."""
    _fill(metastore, "few", 2, 3)
    _fill(metastore, "many", 20, 3)
    target = Metastore.open(make_config(f"sqlite:///{tmp_path}/target.db", tmp_path / "target"))
    try:
        engine = ReplicationEngine(str(tmp_path / "dumps"), metastore, target)
        (few, many), _ = count_dumps(
            metastore, engine, f"REPL DUMP few {METADATA_ONLY}", f"REPL DUMP many {METADATA_ONLY}"
        )
    finally:
        target.close()
    assert many.statements - few.statements <= 2, (few, many)


def test_single_create_table_round_trips(metastore: Metastore) -> None:
    """One client create_table: a bounded number of round trips, on every backend (no ping per checkout)."""
    metastore.catalog.create_database(Database(name="d"))
    metastore.catalog.create_table(make_table("d", "warm"))
    counter = StatementCounter(metastore.engine)
    with counter.counting() as counts:
        metastore.catalog.create_table(make_table("d", "t"))
    counter.close()
    assert counts.pings == 0
    # PostgreSQL: the deletion of the directory intent after the commit is one autocommit statement, and
    # the commit's protection check, the event ids and the event are one statement; on every backend the
    # new row is inserted where its name is free, into the database as last read, by the statement that
    # reads the database row, whether file intents are pending to settle and what lies around the new
    # location (on SQLite the read follows the insert; 21 round trips before these; 7, 12 and 14 with the
    # location apart; 6, 5 and 13 with the read before the insert).
    # MariaDB: the deletion of the intent runs in autocommit (no ROLLBACK, no COMMIT), and the commit's
    # protection check, the event ids, the event and the directory intent are one compound statement (11
    # round trips before these, 8 with the check, ids, event and intent apart).
    limit = {"postgresql": 5, "mysql": 2, "sqlite": 11}[metastore.engine.dialect.name]
    assert counts.round_trips <= limit, counts


@pytest.mark.parametrize("backend", ["mysql"], indirect=True)
def test_mariadb_connection_returned_with_a_transaction_open_is_rolled_back(metastore: Metastore) -> None:
    """The reset that skips a needless ROLLBACK still ends what is open: a row written on a pooled
    connection and never committed is gone once the connection is back in the pool, and the next user of
    the connection starts clean."""
    metastore.catalog.create_database(Database(name="r"))
    raw = metastore.engine.raw_connection()
    cursor = raw.cursor()
    cursor.execute(
        "INSERT INTO file_intents (kind, payload, created_at, claimed_at, attempts) "
        "VALUES ('makedirs', '{\"dirs\": []}', 0, 0, 0)"
    )
    cursor.close()
    sent = database.reset_rollbacks_sent
    raw.close()  # back to the pool, uncommitted
    assert database.reset_rollbacks_sent == sent + 1
    assert metastore.catalog.intents.pending() == []
    with metastore.engine.begin() as conn:
        assert conn.execute(text("SELECT count(*) FROM file_intents")).scalar_one() == 0


def test_single_create_table_checks_its_location_where_its_database_now_is(metastore: Metastore) -> None:
    """The read a create makes of its database and of what lies around the table's location is one, made
    where the database's new tables went last time: after the database moved, a new table still goes below
    its new directory and is refused where another table already is, and a database that does not exist
    is named as such, also for a table given its own location."""
    catalog = metastore.catalog
    catalog.create_database(Database(name="m"))
    first = catalog.create_table(make_table("m", "t1"))
    moved = catalog.get_database("m").model_copy(
        update={"location_uri": f"{metastore.config.warehouse}/elsewhere/m.db"}
    )
    catalog.alter_database("m", moved)
    second = catalog.create_table(make_table("m", "t2"))
    assert second.sd.location == f"{moved.location_uri}/t2"
    assert first.sd.location != f"{moved.location_uri}/t1"
    catalog.create_table(_located(make_table("m", "x"), f"{moved.location_uri}/t3"))  # t3's default place
    with pytest.raises(InvalidObjectError, match=r"is the location of table 'm\.x'"):
        catalog.create_table(make_table("m", "t3"))
    assert catalog.find_table("m", "t3") is None
    with pytest.raises(NoSuchDatabaseError):
        catalog.create_table(_located(make_table("nowhere", "t"), f"{metastore.config.warehouse}/n/t"))


def _located(table: Table, location: str) -> Table:
    return table.model_copy(update={"sd": table.sd.model_copy(update={"location": location})})


def test_incremental_load_creates_tables_without_a_read_each(metastore: Metastore, tmp_path: Path) -> None:
    """A load creating many tables asks once per batch which of them exist, not once per table (a round
    trip apiece on a server database), and the replica still equals the source, with a name dropped and
    re-created, and one renamed into, within the same window."""
    source = Metastore.open(make_config(f"sqlite:///{tmp_path}/source.db", tmp_path / "source"))
    try:
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, metastore)
        catalog = source.catalog
        catalog.create_database(Database(name="c"))
        catalog.create_table(make_table("c", "kept"))
        dumped = engine.execute("REPL DUMP c")
        engine.execute(f"REPL LOAD c FROM '{dumped.dump_dir}'")
        counter = StatementCounter(metastore.engine)
        counts = []
        last = dumped.last_event_id
        for prefix, tables in (("few", 2), ("many", 22)):
            for number in range(tables):
                catalog.create_table(make_table("c", f"{prefix}{number:02d}", partition_keys=("p",)))
            dumped = engine.execute(f"REPL DUMP c FROM {last}")
            with counter.counting() as loaded:
                engine.execute(f"REPL LOAD c FROM '{dumped.dump_dir}'")
            counts.append(loaded)
            last = dumped.last_event_id
        counter.close()
        # The batch's new tables that take no data with them (partitioned ones here) are created in one
        # catalog call: one read of what lies around their locations and one insert for all, where each took
        # a read of its name, its location check and its insert (3 statements, 4 on SQLite). SQLite, without
        # round trips, inserts them one by one.
        more = counts[1].statements - counts[0].statements
        assert more <= (2 * 20 if metastore.engine.dialect.name == "sqlite" else 2), counts
        catalog.drop_table("c", "few00")
        catalog.create_table(make_table("c", "few00", extra="re-created"))
        catalog.alter_table("c", "few01", make_table("c", "moved"))
        catalog.create_table(make_table("c", "few01", extra="new at a freed name"))
        dumped = engine.execute(f"REPL DUMP c FROM {last}")
        engine.execute(f"REPL LOAD c FROM '{dumped.dump_dir}'")
        assert verify(source, "c", metastore, "c") == []
        assert metastore.catalog.get_table("c", "few00").parameters["extra"] == "re-created"
        assert metastore.catalog.get_table("c", "few01").parameters["extra"] == "new at a freed name"
        assert "moved" in metastore.catalog.get_tables("c")
    finally:
        source.close()


def test_bulk_reads_page_through_tables_and_partitions_as_single_reads_do(
    metastore: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk_reads, "PAGE_ROWS", 4)  # pages end inside a table and at a table's end
    monkeypatch.setattr(bulk_reads, "TABLES_PER_GROUP", 2)
    _fill(metastore, "b", 5, 3)
    catalog = metastore.catalog
    names = [*catalog.get_tables("b"), "gone"]
    read = list(bulk_reads.tables_with_partitions(metastore.events, "b", names))
    assert [name for name, _ in read] == names
    assert read[-1] == ("gone", None)
    for name, found in read[:-1]:
        assert found is not None
        table, parts = found
        assert table == catalog.get_table("b", name)
        assert parts == (catalog.get_partitions("b", name) if table.partition_keys else [])


def test_statistics_of_a_database_are_those_of_each_table(metastore: Metastore) -> None:
    _fill(metastore, "s", 2, 2)
    stat = ColumnStat("id", "int", "longStats", {"lowValue": 1, "highValue": 9, "numNulls": 0, "numDVs": 3})
    metastore.stats.update("s", "t00", [stat])
    metastore.stats.update("s", "t01", [stat], partition_name="p=1")
    dumped = metastore.stats.dump_database("s")
    assert set(dumped) == {"t00", "t01"}
    for name in ("t00", "t01", "plain"):
        assert dumped.get(name, []) == metastore.stats.dump_table("s", name)


@pytest.mark.parametrize("backend", ["postgres", "mysql"], indirect=True)
def test_pooled_connection_dropped_by_the_server_is_replaced(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection idle longer than the ping window is checked before use; one the server closed meanwhile
    (restart, idle timeout) is replaced, and the caller's read succeeds."""
    with temporary_database(backend, str(tmp_path)) as url:
        engine = database.make_engine(url, pool_size=1)
        try:
            pid_query = "SELECT pg_backend_pid()" if backend == "postgres" else "SELECT CONNECTION_ID()"
            kill = "SELECT pg_terminate_backend({})" if backend == "postgres" else "KILL {}"
            with engine.connect() as conn:
                first = conn.execute(text(pid_query)).scalar_one()
            killer = database.make_engine(url, pool_size=1)
            with killer.connect() as conn:
                conn.execute(text(kill.format(first)))
            killer.dispose()
            monkeypatch.setattr(database, "PING_AFTER_IDLE_SECONDS", 0.0)
            pinged = database.pings_sent
            with engine.connect() as conn:
                second = conn.execute(text(pid_query)).scalar_one()
            assert second != first
            assert database.pings_sent > pinged
        finally:
            engine.dispose()


def test_file_intents_of_one_transaction_are_written_together_and_completed(metastore: Metastore) -> None:
    """A batch creating many tables writes their directory intents in one insert at commit (not one per
    table); after the commit the directories exist and no intent is left. A failed batch leaves neither."""
    metastore.catalog.create_database(Database(name="i"))
    inserts: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "INSERT INTO file_intents" in statement:  # PostgreSQL: in the statement appending the events
            inserts.append(statement)

    event.listen(metastore.engine, "before_cursor_execute", seen)
    with metastore.events.transaction():
        made = [metastore.catalog.create_table(make_table("i", f"t{n}")) for n in range(6)]
    event.remove(metastore.engine, "before_cursor_execute", seen)
    assert all(Path(local_path(t.sd.location or "")).is_dir() for t in made)
    assert metastore.catalog.intents.pending() == []
    # SQLite numbers returned rows one insert at a time (in process, no round trips to save).
    assert len(inserts) == (6 if metastore.engine.dialect.name == "sqlite" else 1)
    with pytest.raises(RuntimeError), metastore.events.transaction():
        failed = metastore.catalog.create_table(make_table("i", "failed"))
        raise RuntimeError("the batch fails")
    assert not Path(local_path(failed.sd.location or "")).exists()
    assert metastore.catalog.intents.pending() == []
    assert metastore.catalog.find_table("i", "failed") is None


def test_single_create_table_writes_its_directory_intent_with_its_event(metastore: Metastore) -> None:
    """A client create_table records the directory it makes after the commit; on PostgreSQL and MariaDB that
    row goes in with the event (one statement), and the directory is made and the intent completed all the
    same, also when the append waits for a database row another transaction holds."""
    metastore.catalog.create_database(Database(name="w"))
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(statement)

    event.listen(metastore.engine, "before_cursor_execute", seen)
    made = metastore.catalog.create_table(make_table("w", "t"))
    event.remove(metastore.engine, "before_cursor_execute", seen)
    assert Path(local_path(made.sd.location or "")).is_dir()
    assert metastore.catalog.intents.pending() == []
    separate = [s for s in statements if s.lstrip().startswith("INSERT INTO file_intents")]
    dialect = metastore.engine.dialect.name
    assert len(separate) == (1 if dialect == "sqlite" else 0), statements
    if dialect == "sqlite":
        return
    # Another transaction holds the database's row (as a freeze does): the append waits for it, then
    # appends without the check, the intent with it.
    holder = metastore.engine.connect()
    holder.execute(text(f"SELECT doc FROM dbs WHERE name = 'w' {HOLD_ROW[dialect]}"))
    done: list[Table] = []
    creating = threading.Thread(
        target=lambda: done.append(metastore.catalog.create_table(make_table("w", "u")))
    )
    creating.start()
    creating.join(0.5)
    assert not done  # waiting for the held row
    holder.commit()
    holder.close()
    creating.join(30)
    assert done and Path(local_path(done[0].sd.location or "")).is_dir()
    assert metastore.catalog.intents.pending() == []


def test_altering_partitions_reads_nothing_recorded_for_those_without_records(metastore: Metastore) -> None:
    """Several partitions altered at once: one read finds those with nothing recorded (a metadata-only
    replica's, or never written), whose capture then reads no records; their events still carry exactly
    the files at their locations, and those with records are compared with them as before."""
    catalog = metastore.catalog
    catalog.create_database(Database(name="a"))
    table = catalog.create_table(make_table("a", "t", partition_keys=("p",)))
    kept = make_partition(table, "kept")
    catalog.add_partitions("a", "t", [kept])
    kept = catalog.get_partition("a", "t", ["kept"])
    write_file(kept.sd.location or "", "recorded.txt", b"recorded")
    catalog.alter_partitions("a", "t", [kept])  # recorded now
    empty = [make_partition(table, f"e{n}") for n in range(10)]
    catalog.add_partitions("a", "t", empty)
    late = catalog.get_partition("a", "t", ["e0"])
    write_file(late.sd.location or "", "late.txt", b"written after the add")
    parts = [kept, *catalog.get_partitions_by_names("a", "t", [f"p=e{n}" for n in range(10)])]
    changed = [p.model_copy(update={"parameters": {"n": "1"}}) for p in parts]
    before = metastore.events.current_event_id()
    counter = StatementCounter(metastore.engine)
    with counter.counting() as counts:
        catalog.alter_partitions("a", "t", changed)
    counter.close()
    changes = {
        obj.partition_name: obj.change
        for event in metastore.events.next_events(before)
        for obj in parse_event(event).objects()
    }
    assert [relative_path(uri) for uri in changes["p=e0"].added] == ["late.txt"]
    assert (changes["p=e0"].count, changes["p=e0"].complete) == (1, True)
    assert (changes["p=kept"].added, changes["p=kept"].count) == ((), 1)
    assert all((changes[f"p=e{n}"].added, changes[f"p=e{n}"].count) == ((), 0) for n in range(1, 10))
    # 17 to 25 statements by backend; 54 to 64 when each partition without records cost three more (reads
    # of its files and its listing, and the write clearing a mark it cannot have).
    assert counts.statements <= 30, counts
    again = metastore.events.current_event_id()
    catalog.alter_partitions("a", "t", changed)
    later = {
        obj.partition_name: obj.change
        for event in metastore.events.next_events(again)
        for obj in parse_event(event).objects()
    }
    assert (later["p=e0"].added, later["p=e0"].count) == ((), 1)  # recorded by the first alter


def test_lists_of_values_keep_one_statement_text_on_postgresql(metastore: Metastore) -> None:
    """Completed file intents are deleted, and a new location's ancestors looked up, with one statement
    text whatever the number of values: on PostgreSQL the list is one array parameter, so the statement
    stays prepared (an expanding IN is another text per length, neither cached nor prepared by psycopg past
    50 values). The rows are gone and the checks still refuse an overlap on every backend."""
    catalog = metastore.catalog
    catalog.create_database(Database(name="l"))
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(statement)

    event.listen(metastore.engine, "before_cursor_execute", seen)
    catalog.create_table(make_table("l", "one"))  # one intent; its location three levels down
    deep = f"{metastore.config.warehouse}/a/b/c/d/e/f/deep"
    catalog.create_table(_located(make_table("l", "deep"), deep))
    with metastore.events.transaction():  # six intents completed together
        for number in range(6):
            catalog.create_table(make_table("l", f"t{number}"))
    with pytest.raises(InvalidObjectError, match="deep"):
        catalog.create_table(_located(make_table("l", "inside"), f"{deep}/inside"))
    event.remove(metastore.engine, "before_cursor_execute", seen)
    assert metastore.catalog.intents.pending() == []
    deletes = {s for s in statements if s.lstrip().startswith("DELETE FROM file_intents")}
    around = {s for s in statements if "location_key" in s and s.lstrip().startswith("SELECT")}
    # mysqlclient sends them without waiting for the answer, from the raw connection (``mariadb_unawaited``)
    assert around and (len(deletes) >= 1 or sends_unawaited(metastore.events.read_engine))
    if metastore.engine.dialect.name == "postgresql":
        assert len(deletes) == 1, deletes  # for one id and for six
        assert all("id = ANY (" in s for s in deletes)
        # the reads around a location three and nine levels down: the ancestors' keys are one parameter
        assert all("location_key = ANY (" in s and "location_key IN (" not in s for s in around), around


def test_create_table_reads_each_unchanged_database_document_once(
    sqlite_metastore: Metastore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every create compares its location with every database's: the documents are parsed once per text,
    not at every create, and a database that moves is compared at its new place at once."""
    from hmsrepl.metastore import location_policy

    catalog, warehouse = sqlite_metastore.catalog, sqlite_metastore.config.warehouse
    for number in range(5):
        catalog.create_database(Database(name=f"d{number}"))
    catalog.create_table(make_table("d0", "first"))
    parsed: list[str] = []
    real_loads = location_policy.loads
    monkeypatch.setattr(location_policy, "loads", lambda text: parsed.append(text) or real_loads(text))
    catalog.create_table(make_table("d0", "second"))
    assert parsed == []
    moved = catalog.get_database("d1").model_copy(update={"location_uri": f"{warehouse}/moved/d1.db"})
    catalog.alter_database("d1", moved)
    with pytest.raises(InvalidObjectError, match="holds the location of database 'd1'"):
        catalog.create_table(_located(make_table("d0", "above"), f"{warehouse}/moved"))
    assert len(parsed) == 1  # the moved database's new document, once
    assert catalog.find_table("d0", "above") is None
