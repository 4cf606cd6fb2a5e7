"""What cut the round trips of a metastore write and a replication load keeps: the results and the guarantees.

Reads outside a write run without a transaction on PostgreSQL (no BEGIN, no ROLLBACK) yet still stream large
listings; the commit's protection check takes the database row's share lock in one statement when the row is
free, and still waits for a freeze holding it and then refuses; a load batch that locked its database reads
the row once, and sees its own changes to it.
"""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import event, select, update

from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.protection import READ_ONLY, ReplicaProtectedError
from hmsrepl.metastore.schema import dbs
from tests.helpers import make_partition, make_table, write_file


def test_reads_outside_a_write_open_no_transaction_on_postgres(metastore: Metastore) -> None:
    """On PostgreSQL a read leaves the server connection idle (nothing to BEGIN or roll back); inside a write
    transaction the reader is that transaction. Large listings still stream on such a connection."""
    catalog = metastore.catalog
    catalog.create_database(Database(name="r"))
    plain = catalog.create_table(make_table("r", "plain"))
    for number in range(3):
        write_file(plain.sd.location, f"f{number}", b"x" * (number + 1))
    catalog.insert("r", "plain")
    parted = catalog.create_table(make_table("r", "parted", partition_keys=("p",)))
    catalog.add_partitions("r", "parted", [make_partition(parted, str(p)) for p in range(3)])

    postgres = metastore.engine.dialect.name == "postgresql"
    with metastore.events.reader() as conn:
        assert catalog.get_database("r").name == "r"
        if postgres:
            status = conn.connection.driver_connection.info.transaction_status
            assert status.name == "IDLE"
    with metastore.events.transaction() as tx, metastore.events.reader() as conn:
        assert conn is tx.conn
    # Streamed reads (a server-side cursor on PostgreSQL) work from a connection without a transaction.
    assert [name for name, _doc, _write_id in catalog.get_partition_docs("r", "parted")] == [
        "p=0",
        "p=1",
        "p=2",
    ]
    described = catalog.describe_data(catalog.get_table("r", "plain"))
    assert sorted(EncodedFileUri.decode(text).file_uri.rsplit("/", 1)[-1] for text in described) == [
        "f0",
        "f1",
        "f2",
    ]


def test_a_write_committing_while_a_freeze_holds_the_database_waits_and_is_refused(
    metastore: Metastore,
) -> None:
    """A client write that reaches its commit while another transaction holds the database row (a freeze for a
    failover) waits for it, then sees the freeze and is refused, leaving nothing behind."""
    catalog = metastore.catalog
    catalog.create_database(Database(name="f"))
    outcome: list[BaseException | None] = []
    frozen = Database(
        name="f", location_uri=catalog.get_database("f").location_uri, parameters={READ_ONLY: "f_dr"}
    )
    started = threading.Event()

    def client_write() -> None:
        started.set()
        try:
            catalog.create_table(make_table("f", "late"))
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)
        else:
            outcome.append(None)

    with metastore.events.write_engine.begin() as freeze:
        freeze.execute(select(dbs.c.doc).where(dbs.c.name == "f").with_for_update()).first()
        writer = threading.Thread(target=client_write)
        writer.start()
        started.wait(5)
        time.sleep(1.0)  # the write is now blocked on the row (or, on SQLite, on the database's write lock)
        assert writer.is_alive()
        freeze.execute(update(dbs).where(dbs.c.name == "f").values(doc=frozen.model_dump_json()))
    writer.join(60)
    assert not writer.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], ReplicaProtectedError), outcome
    assert "read-only" in str(outcome[0])
    assert catalog.find_table("f", "late") is None


def test_a_batch_that_locked_its_database_reads_the_row_once_and_sees_its_own_changes(
    metastore: Metastore,
) -> None:
    catalog = metastore.catalog
    catalog.create_database(Database(name="b"))
    reads: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "FROM dbs" in statement and "tbls" not in statement:
            reads.append(statement)

    event.listen(metastore.engine, "before_cursor_execute", seen)
    try:
        with metastore.events.transaction():
            locked = catalog.lock_database("b")
            locked.parameters["changed.by.caller"] = "x"  # a caller's copy: not what later reads return
            for number in range(5):
                catalog.create_table(make_table("b", f"t{number}"))
            after_lock = len(reads)
            changed = catalog.get_database("b").model_copy(update={"parameters": {"k": "v"}})
            catalog.alter_database("b", changed)
            assert catalog.get_database("b").parameters == {"k": "v"}
            assert catalog.lock_database("b").parameters == {"k": "v"}
    finally:
        event.remove(metastore.engine, "before_cursor_execute", seen)
    assert after_lock <= 3, reads  # the lock itself (id, then the row): not one read per created table
    assert catalog.get_database("b").parameters == {"k": "v"}
    assert len(catalog.get_tables("b")) == 5
    with pytest.raises(RuntimeError), metastore.events.transaction():
        catalog.lock_database("b")
        catalog.alter_database("b", changed.model_copy(update={"parameters": {"k": "rolled back"}}))
        raise RuntimeError("the batch fails")
    assert catalog.get_database("b").parameters == {"k": "v"}


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_a_write_waiting_for_a_held_database_row_holds_no_event_ids_meanwhile(metastore: Metastore) -> None:
    """A commit that finds its database row held (a load, a freeze) waits for it without holding the event
    sequence: writes to other databases keep committing meanwhile, and once the row is released the waiting
    batch commits its events with consecutive ids, in the order it made its changes. (On MariaDB the
    waiting batch's table insert already blocks other creations, before any commit check.)"""
    catalog = metastore.catalog
    catalog.create_database(Database(name="held"))
    catalog.create_database(Database(name="free"))
    outcome: list[BaseException | None] = []
    started = threading.Event()

    def batch() -> None:
        started.set()
        try:
            with metastore.events.transaction():
                for number in range(3):
                    catalog.create_table(make_table("held", f"t{number}"))
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)
        else:
            outcome.append(None)

    before = metastore.events.current_event_id()
    with metastore.events.write_engine.begin() as holder:
        holder.execute(select(dbs.c.doc).where(dbs.c.name == "held").with_for_update()).first()
        writer = threading.Thread(target=batch)
        writer.start()
        started.wait(5)
        time.sleep(1.0)  # the batch is now waiting for the row
        assert writer.is_alive()
        catalog.create_table(make_table("free", "meanwhile"))  # would block if the batch held the sequence
    writer.join(60)
    assert not writer.is_alive()
    assert outcome == [None]
    events = metastore.events.next_events(before)
    assert [(e.db_name, e.table_name) for e in events] == [
        ("free", "meanwhile"),
        ("held", "t0"),
        ("held", "t1"),
        ("held", "t2"),
    ]
    assert [e.event_id for e in events] == list(range(before + 1, before + 5))
