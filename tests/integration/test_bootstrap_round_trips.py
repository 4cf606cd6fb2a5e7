"""Round trips of a bootstrap load per table, on the target's backend.

A bootstrap of many small tables costs on PostgreSQL and MariaDB mostly the statements it sends per table
(each one a round trip, and on PostgreSQL the client's own work per statement): these tests pin that count
and check that the replica is still the source's, files and all, and that a second bootstrap over a replica
that has the tables already (a load run again after a kill) still compares them with what it loads.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import event

from hmsrepl.exceptions import AlreadyExistsError, InvalidObjectError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.statement_counts import StatementCounter
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.verify import verify
from tests.conftest import make_config
from tests.helpers import count_dumps, make_partition, make_table, write_file

#: Statements per added table of 3 to 5 partitions, one with a file, by one loader thread (a batch of more
#: file intents than MariaDB's one-statement append carries adds one; 14.2, 15.4 and 16,
#: with four threads on the server backends, before the new
#: tables of a batch were created in one catalog call, a load's partitions stopped reading their database's
#: row and a new table's first partitions stopped being compared with its stored ones, which it has none of;
#: 20, 19.4 and 20 before a page of partitions and its key values became one statement on PostgreSQL, the
#: plan mode was set once per batch, and a new table's name, its partitions (in the writer and in the
#: catalog) and its new partitions' ids stopped being read back).
PER_TABLE = {"postgresql": 9, "mysql": 10.1, "sqlite": 13}
#: A look-up of stored partitions by location key (MariaDB's names the key's index to use).
LOOKUP = re.compile(r"FROM partitions (FORCE INDEX \(\w+\) )?WHERE partitions\.location_key")


def _fill(store: Metastore, db: str, tables: int, partitions: int) -> None:
    store.catalog.create_database(Database(name=db))
    for number in range(tables):
        table = store.catalog.create_table(make_table(db, f"t{number:02d}", partition_keys=("p",)))
        parts = store.catalog.add_partitions(
            db, table.table_name, [make_partition(table, str(p)) for p in range(partitions + number % 3)]
        )
        write_file(parts[0].sd.location or "", "data.txt", f"{db}.{number}".encode())


def test_bootstrap_load_sends_a_bounded_number_of_statements_per_table(
    metastore: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten more tables cost at most PER_TABLE statements each; the replicas equal their sources (files
    included), and on PostgreSQL every page of new partitions is one statement of one text, whatever its
    number of partitions, with no executemany of key values beside it. One loader thread: with several, the
    tables share out into batches differently from run to run, and so does the count."""
    monkeypatch.setenv("HMSREPL_LOAD_PARALLELISM", "1")
    source = Metastore.open(make_config(f"sqlite:///{tmp_path}/source.db", tmp_path / "source"))
    try:
        _fill(source, "few", 2, 3)
        _fill(source, "many", 12, 3)
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, metastore)
        dumps = {db: engine.execute(f"REPL DUMP {db}").dump_dir for db in ("few", "many")}
        inserts: list[tuple[str, bool]] = []

        def seen(
            _conn: object, _cursor: object, statement: str, _params: object, _ctx: object, many: bool
        ) -> None:
            if "INSERT INTO partition" in statement:
                inserts.append((statement, many))

        counter = StatementCounter(metastore.engine)
        event.listen(metastore.engine, "before_cursor_execute", seen)
        counted = {}
        for db, dump_dir in dumps.items():
            with counter.counting() as counts:
                engine.execute(f"REPL LOAD {db} FROM '{dump_dir}'")
            counted[db] = counts
        event.remove(metastore.engine, "before_cursor_execute", seen)
        counter.close()
        for db in dumps:
            assert verify(source, db, metastore, db) == [], db
            loaded = metastore.catalog.get_partitions(db, "t01")
            assert len(loaded) == 4 and all(p.sd.location for p in loaded)
        per_table = (counted["many"].statements - counted["few"].statements) / 10
        assert per_table <= PER_TABLE[metastore.engine.dialect.name], counted
        if metastore.engine.dialect.name == "postgresql":
            assert len({statement for statement, _ in inserts}) == 1, inserts
            assert not any(many for _, many in inserts)
        # A second bootstrap over the replica (its tables there, as a killed load leaves them): they are
        # read and compared, not taken for new, and the replica equals its source again.
        t01 = source.catalog.get_table("many", "t01")
        source.catalog.add_partitions("many", "t01", [make_partition(t01, "later")])
        source.catalog.create_table(make_table("many", "new", partition_keys=("p",)))
        again = engine.execute("REPL DUMP many").dump_dir
        engine.execute(f"REPL LOAD many FROM '{again}'")
        assert verify(source, "many", metastore, "many") == []
        assert len(metastore.catalog.get_partitions("many", "t01")) == 5
    finally:
        source.close()


def test_bootstrap_dump_reads_each_table_s_recorded_files_in_one_statement(
    metastore: Metastore, tmp_path: Path
) -> None:
    """A dump with data lists each partitioned table from what the metastore recorded, found by the
    partitions' names in the statement that reads the records (one statement per table, not two), beside one
    read of the listings' summaries (which partitions record so many files that their listings are walked a
    page at a time), and the dumped listing is still each partition's files."""
    _fill(metastore, "few", 2, 3)
    _fill(metastore, "many", 12, 3)
    target = Metastore.open(make_config(f"sqlite:///{tmp_path}/target.db", tmp_path / "target"))
    try:
        engine = ReplicationEngine(str(tmp_path / "dumps"), metastore, target)
        (few, many), dumped = count_dumps(metastore, engine, "REPL DUMP few", "REPL DUMP many")
        engine.execute(f"REPL LOAD many FROM '{dumped.dump_dir}'")
        assert verify(metastore, "many", target, "many") == []
    finally:
        target.close()
    # The records and the summaries: 2 a table on PostgreSQL and MariaDB, 4 on SQLite (which reads each
    # table's partitions apart, and counts its readers' own statements); one more before the records were read
    # in one statement.
    limit = 4 if metastore.engine.dialect.name == "sqlite" else 2
    assert (many.statements - few.statements) / 10 <= limit, (few, many)


def test_a_table_created_in_the_transaction_is_not_searched_for_partitions_only_at_its_first_add(
    metastore: Metastore,
) -> None:
    """The first partitions added to a table the same transaction created are not looked for first (it has
    none, and no other writer can add one before the commit); every later add still is: a partition added
    twice is refused, or skipped with ``if_not_exists``, and the table has each partition once."""
    catalog = metastore.catalog
    catalog.create_database(Database(name="n"))
    lookups: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        # The look-up by names: a list parameter, or on PostgreSQL a probe a name (``partitions_named``).
        if statement.startswith(
            ("SELECT partitions.part_name, partitions.part_id", "SELECT p.part_name, p.part_id")
        ):
            lookups.append(statement)

    event.listen(metastore.engine, "before_cursor_execute", seen)
    try:
        with metastore.events.transaction():
            table = catalog.create_table(make_table("n", "t", partition_keys=("p",)))
            catalog.add_partitions("n", "t", [make_partition(table, v) for v in ("1", "2")])
            assert lookups == []
            with pytest.raises(AlreadyExistsError, match="p=2"):
                catalog.add_partitions("n", "t", [make_partition(table, "2")])
            assert len(lookups) == 1
        with metastore.events.transaction():
            table = catalog.create_table(make_table("n", "u", partition_keys=("p",)))
            catalog.add_partitions("n", "u", [make_partition(table, "1")])
            added = catalog.add_partitions(
                "n", "u", [make_partition(table, v) for v in ("1", "2")], if_not_exists=True
            )
            assert [p.values for p in added] == [["2"]]
    finally:
        event.remove(metastore.engine, "before_cursor_execute", seen)
    assert catalog.get_partition_names("n", "t") == ["p=1", "p=2"]
    assert catalog.get_partition_names("n", "u") == ["p=1", "p=2"]


def test_the_first_partitions_of_a_table_created_in_the_transaction_are_not_compared_with_stored_ones(
    metastore: Metastore, tmp_path: Path
) -> None:
    """A table the same transaction created has no stored partition: its first page's managed locations are
    compared among themselves only, without a read (two at one location are still refused); a later page is
    compared with the stored ones again, and one taking a stored sibling's directory is refused."""
    catalog = metastore.catalog
    catalog.create_database(Database(name="n"))
    lookups: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        flat = " ".join(statement.split())
        if flat.startswith("SELECT") and LOOKUP.search(flat):
            lookups.append(flat)

    event.listen(metastore.engine, "before_cursor_execute", seen)
    try:
        with metastore.events.transaction():
            table = catalog.create_table(make_table("n", "t", partition_keys=("p",)))
            shared = f"{table.sd.location}/shared"
            twins = [make_partition(table, v) for v in ("1", "2")]
            twins = [p.model_copy(update={"sd": p.sd.model_copy(update={"location": shared})}) for p in twins]
            with pytest.raises(InvalidObjectError, match="p=2"):
                catalog.add_partitions("n", "t", twins)
            catalog.add_partitions("n", "t", [make_partition(table, "1")])
            assert lookups == []
            taken = make_partition(table, "2")
            taken = taken.model_copy(
                update={"sd": taken.sd.model_copy(update={"location": f"{table.sd.location}/p=1"})}
            )
            with pytest.raises(InvalidObjectError, match="p=1"):
                catalog.add_partitions("n", "t", [taken])
            assert len(lookups) == 1
    finally:
        event.remove(metastore.engine, "before_cursor_execute", seen)
    assert catalog.get_partition_names("n", "t") == ["p=1"]


def test_a_big_table_s_later_pages_are_not_searched_for_partitions_either(
    metastore: Metastore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bootstrap fills a table it created page by page in one transaction, and the dump names each
    partition once (the pre-flight refuses one named twice): no page reads partitions back to find existing
    ones, in the writer or in the catalog (a round trip each per page of a 100,000-partition table), and the
    replica has each partition once. A partition added twice to such a table fails on its unique name."""
    monkeypatch.setattr("hmsrepl.replication.load.PARTITION_PAGE", 3)
    source = Metastore.open(make_config(f"sqlite:///{tmp_path}/source.db", tmp_path / "source"))
    lookups: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        flat = " ".join(statement.split())
        if flat.startswith(("SELECT partitions.doc", "SELECT partitions.part_name, partitions.part_id")):
            lookups.append(flat)

    try:
        _fill(source, "big", 1, 10)
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, metastore)
        dump = engine.execute("REPL DUMP big").dump_dir
        event.listen(metastore.engine, "before_cursor_execute", seen)
        try:
            engine.execute(f"REPL LOAD big FROM '{dump}'")
        finally:
            event.remove(metastore.engine, "before_cursor_execute", seen)
        assert lookups == [], lookups
        assert verify(source, "big", metastore, "big") == []
        assert len(metastore.catalog.get_partition_names("big", "t00")) == 10
    finally:
        source.close()
    catalog = metastore.catalog
    catalog.create_database(Database(name="n"))
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"), metastore.events.transaction():
        table = catalog.create_table(make_table("n", "t", partition_keys=("p",)))
        catalog.add_partitions("n", "t", [make_partition(table, "1")])
        catalog.add_partitions("n", "t", [make_partition(table, "1")], if_not_exists=True, absent=True)
    assert "t" not in catalog.get_tables("n"), "the failed transaction left nothing"
