"""An append a client declares (its INSERT names the new files) costs what it added, and what nobody named is
still logged, later, by the listing reconciliation.

Hive's loadPartition (Spark's Hive client with ``hive.metastore.dml.events``) fires the INSERT naming the new
files, then alters the partition. The INSERT reads those files only; the alter that follows lists nothing.
A file dropped into the partition by hand is therefore not in either event: the reconciliation lists the
partition once, logs it in an ALTER_PARTITION of its own, and the changes replayed in order rebuild exactly
what is on disk. The client is hmsclient's generated Hive 2.x client on a real server process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.messages import DataChange
from hmsrepl.storage.local import local_path
from hmsrepl.thrift.server import MetastoreServer
from tests.helpers import create_db_and_table, disk_files, event_files, make_partition, make_table
from tests.servers import REPO, Hive2Client, RunningMetastore, metastore_server

DB = "sales"
TABLE = "orders"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[RunningMetastore, Hive2Client, Metastore]]:
    with metastore_server(tmp_path, f"sqlite:///{tmp_path / 'hms.db'}") as server:
        client = Hive2Client(server.port, timeout_ms=60_000, user="hive")
        store = Metastore(server.config)
        try:
            yield server, client, store
        finally:
            client.close()
            store.close()


def _hive() -> Any:
    from hmsclient.genthrift.hive_metastore import ttypes

    return ttypes


def _create_partition(client: Hive2Client, warehouse: str, files: int) -> Any:
    """Table sales.orders partitioned by d, partition d=1 holding ``files`` files written before it was added."""
    hive = _hive()
    client.create_database(hive.Database(name=DB, description="", locationUri=f"{warehouse}/{DB}.db"))
    sd = hive.StorageDescriptor(
        cols=[hive.FieldSchema("id", "bigint", None)],
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        compressed=False,
        numBuckets=-1,
        serdeInfo=hive.SerDeInfo(None, "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", {}),
        bucketCols=[],
        sortCols=[],
        parameters={},
    )
    client.create_table(
        hive.Table(
            tableName=TABLE,
            dbName=DB,
            owner="hive",
            sd=sd,
            partitionKeys=[hive.FieldSchema("d", "string", None)],
            parameters={},
            tableType="MANAGED_TABLE",
        )
    )
    location = f"{warehouse}/{DB}.db/{TABLE}/d=1"
    for i in range(files):
        _write(location, f"part-{i:05d}.txt")
    part_sd = hive.StorageDescriptor(**{**sd.__dict__, "location": location})
    client.add_partition(hive.Partition(values=["1"], dbName=DB, tableName=TABLE, sd=part_sd, parameters={}))
    return client.get_partition(DB, TABLE, ["1"])


def _create_table(client: Hive2Client, warehouse: str, name: str, files: list[str]) -> str:
    """An unpartitioned table shaped like sales.orders, holding ``files`` written before it was created;
    returns its location."""
    table = client.get_table(DB, TABLE)
    table.tableName, table.partitionKeys = name, []
    table.sd.location = f"{warehouse}/{DB}.db/{name}"
    for file in files:
        _write(table.sd.location, file)
    client.create_table(table)
    return table.sd.location


def _write(location: str, name: str) -> str:
    path = Path(local_path(location), name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(64) + name.encode())
    return f"{location}/{name}"


def _fire_insert(client: Hive2Client, values: list[str] | None, files: list[str], table: str = TABLE) -> None:
    hive = _hive()
    client.fire_listener_event(
        hive.FireEventRequest(
            successful=True,
            data=hive.FireEventRequestData(insertData=hive.InsertEventRequestData(filesAdded=files)),
            dbName=DB,
            tableName=table,
            partitionVals=values,
        )
    )


def _change(event: Any) -> DataChange:
    [obj] = parse_event(event).objects()
    return obj.change


def _replayed(store: Metastore, table: str = TABLE, partition: str | None = "d=1") -> dict[str, str]:
    """A partition's (or a table's own) listing rebuilt from every event's change, in log order."""
    held: dict[str, str] = {}
    for event in store.get_next_notification(0):
        for obj in parse_event(event).objects() if event.table_name == table else ():
            if obj.partition_name == partition:
                held = obj.change.apply(held)
                obj.change.check(held, f"event {event.event_id}")
    return event_files(list(held.values()))


def test_a_declared_append_logs_its_file_and_the_reconciliation_logs_what_nobody_named(served) -> None:
    server, client, store = served
    part = _create_partition(client, server.warehouse, files=20)
    location = part.sd.location
    foreign = _write(location, "dropped-by-hand.txt")  # no client names this one
    before = store.get_current_notification_event_id()

    new = _write(location, "part-new.txt")
    _fire_insert(client, ["1"], [new])  # Hive's order: the INSERT first, then the alter
    client.alter_partition(DB, TABLE, client.get_partition(DB, TABLE, ["1"]))

    insert, alter = store.get_next_notification(before)
    assert (insert.event_type, alter.event_type) == ("INSERT", "ALTER_PARTITION")
    assert event_files(list(_change(insert).added)) == {
        local_path(new): disk_files(location)[local_path(new)]
    }
    assert _change(alter).is_empty  # declared by the INSERT: the partition was not listed again
    assert local_path(foreign) not in _replayed(store)

    # The reconciliation lists the partition once and logs the file nobody named, metadata unchanged.
    assert store.reconcile_listings(settle_seconds=0) == 1
    [found] = store.get_next_notification(alter.event_id)
    assert found.event_type == "ALTER_PARTITION"
    assert found.body()["before"] == found.body()["after"]
    assert event_files(list(_change(found).added)) == {
        local_path(foreign): disk_files(location)[local_path(foreign)]
    }
    assert _replayed(store) == disk_files(location)
    assert store.reconcile_listings(settle_seconds=0) == 0  # nothing is due any more
    assert store.get_current_notification_event_id() == found.event_id


def test_an_alter_the_last_insert_did_not_declare_still_lists_the_partition(served) -> None:
    """Only the alter right after an INSERT of the same partition on the same connection skips its listing:
    a second alter, an alter after an INSERT into another partition and an alter that moves the partition
    all list it, and each logs the file dropped by hand before it."""
    server, client, store = served
    hive = _hive()
    part = _create_partition(client, server.warehouse, files=3)
    location = part.sd.location
    other_location = f"{server.warehouse}/{DB}.db/{TABLE}/d=2"
    other = hive.Partition(
        values=["2"],
        dbName=DB,
        tableName=TABLE,
        sd=hive.StorageDescriptor(**{**part.sd.__dict__}),
        parameters={},
    )
    other.sd.location = other_location
    client.add_partition(other)

    def alter_logs(dropped: str, partition: Any) -> bool:
        before = store.get_current_notification_event_id()
        client.alter_partition(DB, TABLE, partition)
        [event] = store.get_next_notification(before)
        return local_path(dropped) in event_files(list(_change(event).added))

    _fire_insert(client, ["1"], [_write(location, "declared.txt")])
    client.alter_partition(DB, TABLE, client.get_partition(DB, TABLE, ["1"]))  # declared: consumed here
    assert alter_logs(_write(location, "by-hand-1.txt"), client.get_partition(DB, TABLE, ["1"]))

    _fire_insert(client, ["2"], [_write(other_location, "declared.txt")])
    assert alter_logs(_write(location, "by-hand-2.txt"), client.get_partition(DB, TABLE, ["1"]))

    _fire_insert(client, ["1"], [_write(location, "declared-2.txt")])
    moved = client.get_partition(DB, TABLE, ["1"])
    moved.sd.location = f"{server.warehouse}/{DB}.db/{TABLE}/d=1-moved"
    kept = _write(moved.sd.location, "kept.txt")
    assert alter_logs(kept, moved)


def test_the_servers_housekeeping_reconciles_declared_appends(tmp_path: Path, served) -> None:
    """No operator step: the server's housekeeping thread lists what declared writes left unlisted."""
    server, client, store = served
    part = _create_partition(client, server.warehouse, files=2)
    foreign = _write(part.sd.location, "dropped-by-hand.txt")
    _fire_insert(client, ["1"], [_write(part.sd.location, "part-new.txt")])
    client.alter_partition(DB, TABLE, client.get_partition(DB, TABLE, ["1"]))
    last = store.get_current_notification_event_id()

    housekeeper = MetastoreServer(Metastore(server.config), port=0)
    thread = threading.Thread(target=housekeeper.housekeeping, args=(0.2,), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while store.get_current_notification_event_id() == last and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        housekeeper.stop()
        thread.join(10)
        housekeeper.store.close()
    [found] = store.get_next_notification(last)
    assert event_files(list(_change(found).added)) == {
        local_path(foreign): disk_files(part.sd.location)[local_path(foreign)]
    }
    assert _replayed(store) == disk_files(part.sd.location)


def test_a_table_append_from_a_client_that_declares_its_files_lists_nothing(served) -> None:
    """Hive's loadTable alters the table, then fires the INSERT naming the new file. Once the connection has
    named files in an INSERT, its alters of a table list nothing: the INSERT after records the file, and the
    reconciliation logs the file dropped by hand."""
    server, client, store = served
    _create_partition(client, server.warehouse, files=0)  # the database
    location = _create_table(client, server.warehouse, "notes", [f"part-{i}.txt" for i in range(5)])

    def append(name: str) -> tuple[Any, Any]:
        new = _write(location, name)
        before = store.get_current_notification_event_id()
        client.alter_table(DB, "notes", client.get_table(DB, "notes"))
        _fire_insert(client, None, [new], table="notes")
        alter, insert = store.get_next_notification(before)  # no alter follows for the counts
        assert (alter.event_type, insert.event_type) == ("ALTER_TABLE", "INSERT")
        # the table's numFiles/totalSize follow the files the INSERT recorded, in its own commit and in the
        # snapshot a replica's load puts (metastore.basic_stats)
        files = _replayed(store, "notes", None)  # the recorded files (not one dropped in by hand)
        counts = {"numFiles": str(len(files)), "totalSize": str(sum(os.path.getsize(f) for f in files))}
        params = client.get_table(DB, "notes").parameters
        assert {k: params[k] for k in counts} == counts
        assert {k: insert.body()["table"]["parameters"][k] for k in counts} == counts
        return alter, insert

    alter, insert = append("first.txt")  # the connection has named nothing yet: the alter lists
    assert list(event_files(list(_change(alter).added))) == [local_path(f"{location}/first.txt")]
    assert _change(insert).is_empty
    foreign = _write(location, "dropped-by-hand.txt")
    alter, insert = append("second.txt")
    assert _change(alter).is_empty
    assert list(event_files(list(_change(insert).added))) == [local_path(f"{location}/second.txt")]
    assert local_path(foreign) not in _replayed(store, "notes", None)

    assert store.reconcile_listings(settle_seconds=0) == 1
    [found] = store.get_next_notification(insert.event_id)
    assert found.event_type == "ALTER_TABLE" and found.body()["before"] == found.body()["after"]
    assert list(event_files(list(_change(found).added))) == [local_path(foreign)]
    assert _replayed(store, "notes", None) == disk_files(location)


def test_declared_writes_are_reconciled_on_every_database(metastore: Metastore) -> None:
    """The marks and the reconciliation on SQLite, PostgreSQL and MariaDB, in process: an empty table altered
    by a declaring client (no listing recorded yet, so the mark makes the row), files dropped in it and
    removed from a partition by hand; one pass logs each object's difference once, a second logs nothing."""
    table = create_db_and_table(metastore, partition_keys=("d",))
    [part] = metastore.catalog.add_partitions(DB, TABLE, [make_partition(table, "1")])
    kept, gone = _write(part.sd.location, "kept.txt"), _write(part.sd.location, "gone.txt")
    metastore.catalog.insert(DB, TABLE, ["1"], new_files=[kept, gone])
    Path(local_path(gone)).unlink()
    notes = metastore.catalog.create_table(make_table(DB, "notes"))
    metastore.catalog.alter_table(DB, "notes", notes, declared=True)
    dropped = _write(notes.sd.location, "dropped.txt")
    last = metastore.get_current_notification_event_id()

    assert metastore.reconcile_listings(settle_seconds=0) == 2
    events = {e.table_name: _change(e) for e in metastore.get_next_notification(last)}
    assert list(event_files(list(events["notes"].added))) == [local_path(dropped)]
    assert events[TABLE].removed == ("gone.txt",) and not events[TABLE].added
    assert _replayed(metastore) == disk_files(part.sd.location)
    assert _replayed(metastore, "notes", None) == disk_files(notes.sd.location)
    assert metastore.reconcile_listings(settle_seconds=0) == 0


def test_interleaved_pairs_of_a_dynamic_partition_load_are_each_declared(served) -> None:
    """Hive loads dynamic partitions in a thread pool over one connection: the INSERTs of two partitions can
    come before either alter. Each alter takes its own partition's declaration and lists nothing."""
    server, client, store = served
    hive = _hive()
    part = _create_partition(client, server.warehouse, files=2)
    second_location = f"{server.warehouse}/{DB}.db/{TABLE}/d=2"
    second = hive.Partition(
        values=["2"], dbName=DB, tableName=TABLE, sd=hive.StorageDescriptor(**part.sd.__dict__), parameters={}
    )
    second.sd.location = second_location
    _write(second_location, "part-0.txt")
    client.add_partition(second)
    dropped = [_write(part.sd.location, "by-hand.txt"), _write(second_location, "by-hand.txt")]
    before = store.get_current_notification_event_id()

    _fire_insert(client, ["1"], [_write(part.sd.location, "new.txt")])
    _fire_insert(client, ["2"], [_write(second_location, "new.txt")])
    client.alter_partition(DB, TABLE, client.get_partition(DB, TABLE, ["1"]))
    client.alter_partition(DB, TABLE, client.get_partition(DB, TABLE, ["2"]))

    events = store.get_next_notification(before)
    assert [e.event_type for e in events] == ["INSERT", "INSERT", "ALTER_PARTITION", "ALTER_PARTITION"]
    assert all(_change(e).is_empty for e in events[2:])
    logged = {path for e in events for path in event_files(list(_change(e).added))}
    assert not logged & {local_path(path) for path in dropped}
    assert store.reconcile_listings(settle_seconds=0) == 2


def test_the_reconcile_command_lists_what_a_metastore_used_in_process_left_marked(
    sqlite_metastore: Metastore,
) -> None:
    """Without a serving metastore's housekeeping, an operator (or a scheduled task) runs the same pass."""
    store = sqlite_metastore
    table = create_db_and_table(store, partition_keys=("d",))
    [part] = store.catalog.add_partitions(DB, TABLE, [make_partition(table, "1")])
    store.catalog.insert(DB, TABLE, ["1"], new_files=[_write(part.sd.location, "named.txt")])
    dropped = _write(part.sd.location, "by-hand.txt")
    last = store.get_current_notification_event_id()
    config = store.config
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "include"), str(REPO)]),
        "HMSREPL_DB_URL": config.db_url,
        "HMSREPL_WAREHOUSE": config.warehouse,
        "HMSREPL_CMROOT": config.cmroot,
    }
    command = [sys.executable, "-m", "hmsrepl.cli", "metastore", "reconcile", "--settle-seconds", "0"]
    ran = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    assert "listing reconciliation: 1 events logged" in ran.stdout
    [found] = store.get_next_notification(last)
    assert list(event_files(list(_change(found).added))) == [local_path(dropped)]
    again = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    assert "0 events logged" in again.stdout


def test_a_declaration_does_not_let_an_alter_move_a_partition_into_another_tables_files(served) -> None:
    """A hostile client declares a partition with an INSERT, then alters it onto another table's directory:
    the declaration only spares a partition that stays where it is a listing, so the location is checked as
    for any alter and refused; the other table's files and the log stay as they were."""
    server, client, store = served
    part = _create_partition(client, server.warehouse, files=2)
    victim = _create_table(client, server.warehouse, "victim", [f"secret-{i}.txt" for i in range(3)])
    untouched = disk_files(victim)
    _fire_insert(client, ["1"], [_write(part.sd.location, "declared.txt")])
    last = store.get_current_notification_event_id()

    moved = client.get_partition(DB, TABLE, ["1"])
    moved.sd.location = victim
    with pytest.raises(_hive().MetaException, match="victim"):
        client.alter_partition(DB, TABLE, moved)
    assert disk_files(victim) == untouched
    assert store.get_current_notification_event_id() == last
    assert store.catalog.get_partition(DB, TABLE, ["1"]).sd.location == part.sd.location
