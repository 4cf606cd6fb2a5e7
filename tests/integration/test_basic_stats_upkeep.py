"""A client write's numFiles and totalSize cost what the write changed, and stay those of the recorded files.

The counts come from the recorded listing's summary, which every diff updates (``listings.apply``): after any
sequence of appends declared by INSERTs, overwrites and removals they equal a count of the recorded files,
and an append never counts the object's files. An INSERT into a table carries the table's new counts in its
own event (no alter follows them). Calls go through the metastore's Thrift handler in-process, as Spark's
Hive client makes them (``loadPartition``: INSERT then alter_partition; ``loadTable``: alter_table then
INSERT).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, event, select, update

from hmsrepl.metastore import Metastore, listings
from hmsrepl.metastore.listings import ObjectKey
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.schema import data_listings, partitions
from hmsrepl.storage.local import local_path
from hmsrepl.thrift import convert
from hmsrepl.thrift.handler import MetastoreHandler
from hmsrepl.thrift.idl import hms
from tests.backends import metastore_on
from tests.helpers import make_partition, make_table, settle, write_file

COUNTS = ("numFiles", "totalSize")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Metastore]:
    """SQLite and PostgreSQL: the summary's arithmetic and the completion of an old summary run on both."""
    yield from metastore_on(request, tmp_path)


def fire_insert(handler: MetastoreHandler, table: str, values: list[str] | None, files: list[str]) -> None:
    data = hms.FireEventRequestData(insertData=hms.InsertEventRequestData(filesAdded=files))
    handler.fire_listener_event(
        hms.FireEventRequest(successful=True, data=data, dbName="s", tableName=table, partitionVals=values)
    )


def recounted(store: Metastore, key: ObjectKey) -> dict[str, str]:
    """numFiles and totalSize counted over the object's recorded files."""
    with store.events.reader() as conn:
        files, size = listings.recount(conn, key)
    return {"numFiles": str(files), "totalSize": str(size)}


def on_disk(location: str) -> dict[str, str]:
    paths = [p for p in Path(local_path(location)).iterdir() if not p.name.startswith(("_", "."))]
    return {"numFiles": str(len(paths)), "totalSize": str(sum(p.stat().st_size for p in paths))}


def counts(params: dict[str, str]) -> dict[str, str]:
    return {k: params[k] for k in COUNTS}


class FileCounts:
    """Statements that count or sum an object's recorded files (what an append must not send)."""

    def __init__(self, engine: Engine) -> None:
        self.seen: list[str] = []
        self.active = True  # off while the test counts for itself
        self.engine = engine
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: object, cursor: object, statement: str, *args: object) -> None:
        text = statement.lower()
        if self.active and "from data_files" in text and ("count(" in text or "sum(" in text):
            self.seen.append(statement)

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)


def test_partition_counts_follow_appends_an_overwrite_and_a_removal(store: Metastore) -> None:
    handler = MetastoreHandler(store)
    store.catalog.create_database(Database(name="s"))
    table = store.catalog.create_table(make_table("s", "p", partition_keys=("day",)))
    location = f"{table.sd.location}/day=1"
    for i in range(3):
        write_file(location, f"old-{i}.parquet", b"o" * (10 + i))
    settle()
    handler.add_partition(convert.partition_to_thrift(make_partition(table, "1")))
    part = store.catalog.get_partition("s", "p", ["1"])
    with store.events.reader() as conn:
        part_id = conn.execute(select(partitions.c.part_id).where(partitions.c.tbl_id == table.id)).scalar()
    key = ObjectKey(table.id or 0, part_id or 0)

    def check() -> None:
        params = store.catalog.get_partition("s", "p", ["1"]).parameters
        assert counts(params) == recounted(store, key) == on_disk(location)

    check()
    spy = FileCounts(store.engine)
    try:
        for i in range(3):  # Spark's loadPartition: the INSERT names the file, the alter is declared by it
            new = write_file(location, f"append-{i}.parquet", b"a" * (100 * (i + 1)))
            settle()
            fire_insert(handler, "p", ["1"], [new])
            handler.alter_partition("s", "p", convert.partition_to_thrift(part))
            spy.active = False
            check()
            spy.active = True
    finally:
        spy.close()
    assert spy.seen == [], "an append reads the summary, it does not count the partition's files"

    # An overwrite (the location's files replaced) and a removal, each listed by a plain alter.
    for path in Path(local_path(location)).iterdir():
        path.unlink()
    write_file(location, "overwrite-0.parquet", b"w" * 7)
    write_file(location, "overwrite-1.parquet", b"w" * 9)
    settle()
    handler.alter_partition("s", "p", convert.partition_to_thrift(part))
    check()
    Path(local_path(location), "overwrite-0.parquet").unlink()
    handler.alter_partition("s", "p", convert.partition_to_thrift(part))
    check()
    assert counts(store.catalog.get_partition("s", "p", ["1"]).parameters) == {
        "numFiles": "1",
        "totalSize": "9",
    }


def test_table_counts_follow_inserts_in_the_insert_event(store: Metastore) -> None:
    handler = MetastoreHandler(store)
    store.catalog.create_database(Database(name="s"))
    handler.create_table(convert.table_to_thrift(make_table("s", "t")))
    table = store.catalog.get_table("s", "t")
    location = table.sd.location or ""
    key = ObjectKey(table.id or 0)

    def append(name: str, size: int) -> dict[str, str]:
        """Spark's loadTable: alter_table, then the INSERT naming the file; returns the INSERT's counts."""
        new = write_file(location, name, b"t" * size)
        settle()
        before = store.get_current_notification_event_id()
        handler.alter_table("s", "t", convert.table_to_thrift(store.catalog.get_table("s", "t")))
        fire_insert(handler, "t", None, [new])
        kinds = [e.event_type for e in store.get_next_notification(before)]
        assert kinds == ["ALTER_TABLE", "INSERT"], "no alter follows for the counts"
        [insert] = store.get_next_notification(before)[1:]
        params = store.catalog.get_table("s", "t").parameters
        assert counts(params) == recounted(store, key) == on_disk(location)
        return counts(insert.body()["table"]["parameters"])

    append("first.parquet", 50)
    assert append("second.parquet", 70) == {"numFiles": "2", "totalSize": "120"}, "the event carries them"

    # INSERT OVERWRITE (Hive 3's replace): the other files leave the listing and the counts.
    new = write_file(location, "over.parquet", b"v" * 5)
    settle()
    store.catalog.insert("s", "t", new_files=[new], replace=True, gather_stats=True)
    params = store.catalog.get_table("s", "t").parameters
    assert counts(params) == recounted(store, key) == {"numFiles": "1", "totalSize": "5"}


def test_a_summary_kept_without_a_byte_total_is_summed_once(store: Metastore) -> None:
    """A listing recorded before byte totals were kept gets its total summed on the first write that needs
    it; later appends update it from their change."""
    handler = MetastoreHandler(store)
    store.catalog.create_database(Database(name="s"))
    table = store.catalog.create_table(make_table("s", "p", partition_keys=("day",)))
    location = f"{table.sd.location}/day=1"
    write_file(location, "old.parquet", b"o" * 40)
    settle()
    handler.add_partition(convert.partition_to_thrift(make_partition(table, "1")))
    part = store.catalog.get_partition("s", "p", ["1"])
    with store.engine.begin() as conn:
        conn.execute(update(data_listings).values(total_size=None))

    spy = FileCounts(store.engine)
    try:
        for i in range(2):
            new = write_file(location, f"append-{i}.parquet", b"a" * 10)
            settle()
            fire_insert(handler, "p", ["1"], [new])
            handler.alter_partition("s", "p", convert.partition_to_thrift(part))
    finally:
        spy.close()
    assert len(spy.seen) == 1, "summed once, then kept"
    params = store.catalog.get_partition("s", "p", ["1"]).parameters
    assert counts(params) == on_disk(location) == {"numFiles": "3", "totalSize": "60"}
