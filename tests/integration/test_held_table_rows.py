"""A write transaction reads a table's row once: a bootstrap load pays one read per table, not four.

The rows a transaction locked or inserted are answered from its own copy (``catalog.held``); what the same
transaction changes must show in later calls, and a read outside it must still see only what is committed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import event

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from tests.conftest import make_config
from tests.helpers import make_partition, make_table

_TABLE_READ = re.compile(r"^\s*SELECT tbls\.tbl_id, tbls\.doc\b")  # the catalog's look-up of a table's row


@contextmanager
def table_reads(store: Metastore) -> Iterator[list[str]]:
    """The statements reading a table's row sent while the block runs."""
    seen: list[str] = []

    def listen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if _TABLE_READ.match(statement):
            seen.append(statement)

    event.listen(store.engine, "before_cursor_execute", listen)
    try:
        yield seen
    finally:
        event.remove(store.engine, "before_cursor_execute", listen)


def test_a_transaction_answers_its_own_table_rows_and_sees_its_own_changes(metastore: Metastore) -> None:
    c = metastore.catalog
    c.create_database(Database(name="h"))
    with table_reads(metastore) as reads, metastore.events.transaction():
        table = c.create_table(make_table("h", "t", partition_keys=("p",)))
        c.add_partitions("h", "t", [make_partition(table, "a")])
        c.add_partitions("h", "t", [make_partition(table, "b")])
        assert c.get_table("h", "t") == table
        assert reads == []  # created here: never read back
        changed = c.get_table("h", "t").model_copy(update={"parameters": {"k": "v"}})
        c.alter_table("h", "t", changed)
        assert c.get_table("h", "t").parameters == {"k": "v"}
        c.add_partitions("h", "t", [make_partition(table, "c")])
        c.alter_table("h", "t", c.get_table("h", "t").model_copy(update={"table_name": "u"}))
        assert c.find_table("h", "t") is None
        assert c.get_table("h", "u").parameters == {"k": "v"}
        c.drop_table("h", "u")
        assert c.find_table("h", "u") is None
    added = [e.body() for e in metastore.events.next_events(0) if e.event_type == EventType.ADD_PARTITION]
    assert added[-1]["table"]["parameters"] == {"k": "v"}  # the event names the altered table
    assert c.get_tables("h") == []


def test_a_rolled_back_transaction_leaves_no_copy_behind(metastore: Metastore) -> None:
    c = metastore.catalog
    c.create_database(Database(name="h"))
    try:
        with metastore.events.transaction():
            c.create_table(make_table("h", "gone", partition_keys=("p",)))
            raise RuntimeError("the batch fails")
    except RuntimeError:
        pass
    assert c.find_table("h", "gone") is None
    table = c.create_table(make_table("h", "gone", partition_keys=("p",)))
    assert c.add_partitions("h", "gone", [make_partition(table, "a")])[0].values == ["a"]


def test_bootstrap_load_reads_each_table_row_once(metastore: Metastore, tmp_path: Path) -> None:
    """The load creates each table and adds its partitions in one batch: one read of the row per table
    (whether it exists), plus a few for the database as a whole."""
    tables = 6
    source = Metastore.open(make_config(f"sqlite:///{tmp_path}/source.db", tmp_path / "source"))
    try:
        source.catalog.create_database(Database(name="b"))
        for number in range(tables):
            table = source.catalog.create_table(make_table("b", f"t{number}", partition_keys=("p",)))
            source.catalog.add_partitions(
                "b", table.table_name, [make_partition(table, str(p)) for p in range(3)]
            )
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, metastore)
        dumped = engine.execute("REPL DUMP b WITH ('hive.repl.dump.metadata.only'='true')")
        with table_reads(metastore) as reads:
            engine.execute(f"REPL LOAD b FROM '{dumped.dump_dir}'")
    finally:
        source.close()
    assert len(metastore.catalog.get_partitions("b", "t5")) == 3
    assert len(reads) <= tables + 3, len(reads)  # four per table before
