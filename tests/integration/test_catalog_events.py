"""Catalog changes and their notification events, on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import os

import pytest

from hmsrepl.exceptions import (
    AlreadyExistsError,
    InvalidObjectError,
    InvalidOperationError,
    NoSuchDatabaseError,
    NoSuchPartitionError,
    NoSuchTableError,
)
from hmsrepl.formats import listing_digest
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.event_specs import parse_event
from hmsrepl.metastore.messages import DataChange, checksum_of, relative_path
from hmsrepl.metastore.model import Database, Function, TableType
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.local import local_path
from tests.conftest import make_config
from tests.helpers import create_db_and_table, events_of, make_partition, make_table, write_file


def test_every_change_is_one_event_with_a_snapshot(metastore: Metastore) -> None:
    start = metastore.get_current_notification_event_id()
    table = create_db_and_table(metastore, partition_keys=("p",))
    metastore.catalog.add_partitions(
        "sales", "orders", [make_partition(table, "a"), make_partition(table, "b")]
    )
    altered = table.model_copy(update={"parameters": {"comment": "v2"}})
    metastore.catalog.alter_table("sales", "orders", altered)
    metastore.catalog.drop_partitions("sales", "orders", [["a"]])
    metastore.catalog.drop_table("sales", "orders")

    assert events_of(metastore, start) == [
        ("CREATE_DATABASE", "sales", None),
        ("CREATE_TABLE", "sales", "orders"),
        ("ADD_PARTITION", "sales", "orders"),
        ("ALTER_TABLE", "sales", "orders"),
        ("DROP_PARTITION", "sales", "orders"),
        ("DROP_TABLE", "sales", "orders"),
    ]
    bodies = [e.body() for e in metastore.events.next_events(start)]
    assert bodies[1]["table"]["table_name"] == "orders"
    assert [p["values"] for p in bodies[2]["partitions"]] == [["a"], ["b"]]
    assert bodies[3]["before"]["parameters"] == {} and bodies[3]["after"]["parameters"] == {"comment": "v2"}
    assert [p["values"] for p in bodies[4]["partitions"]] == [["a"]]
    # The drop event keeps the table as it was dropped, including the alter before it.
    assert bodies[5]["table"]["parameters"] == {"comment": "v2"}
    ids = [e.event_id for e in metastore.events.next_events(start)]
    assert ids == list(range(start + 1, start + 7))
    assert metastore.get_current_notification_event_id() == start + 6


def test_snapshot_in_event_is_state_at_change_not_current(metastore: Metastore) -> None:
    table = create_db_and_table(metastore)
    first = metastore.get_current_notification_event_id()
    metastore.catalog.alter_table("sales", "orders", table.model_copy(update={"owner": "alice"}))
    metastore.catalog.alter_table("sales", "orders", table.model_copy(update={"owner": "bob"}))
    alters = metastore.events.next_events(first)
    assert [e.body()["after"]["owner"] for e in alters] == ["alice", "bob"]
    assert metastore.catalog.get_table("sales", "orders").owner == "bob"


def test_data_events_carry_files_with_checksums(metastore: Metastore) -> None:
    table = create_db_and_table(metastore, partition_keys=("p",))
    [part] = metastore.catalog.add_partitions("sales", "orders", [make_partition(table, "k:v")])
    # Hive escapes ':' into the directory name; the stored location keeps the escape literally.
    assert part.sd.location.endswith("/orders/p=k%3Av")
    data = b"row1\nrow2\n"
    uri = write_file(part.sd.location, "part-0000.parquet", data)
    write_file(part.sd.location, "_SUCCESS", b"")
    before = metastore.get_current_notification_event_id()
    metastore.catalog.insert("sales", "orders", ["k:v"])
    [event] = metastore.events.next_events(before)
    assert event.event_type == "INSERT"
    change = DataChange.from_json(event.body()["data"])
    assert event.body()["v"] == 2 and "files" not in event.body()
    [encoded] = change.added
    assert change.complete and change.count == 1  # the partition's first recorded listing
    assert event.body()["new_files"] == [encoded]
    decoded = EncodedFileUri.decode(encoded)
    assert decoded.file_uri == uri
    assert decoded.checksum == checksum_bytes(data)
    assert decoded.cmroot == metastore.config.cmroot
    assert os.path.exists(local_path(uri))  # the literal '%3A' directory, never URL-decoded
    assert event.body()["partition"]["values"] == ["k:v"]


def test_insert_event_carries_the_diff_and_the_new_files(metastore: Metastore) -> None:
    table = create_db_and_table(metastore)
    first = write_file(table.sd.location, "a.parquet", b"first")
    metastore.catalog.insert("sales", "orders", new_files=[first])
    second = write_file(table.sd.location, "b.parquet", b"second")
    before = metastore.get_current_notification_event_id()
    metastore.catalog.insert("sales", "orders", new_files=["file:" + second])  # another spelling, same file
    [event] = metastore.events.next_events(before)
    body = event.body()
    [obj] = parse_event(event).objects()
    change = obj.change
    assert [EncodedFileUri.decode(f).file_uri for f in change.added] == [second]
    assert (change.removed, change.complete, change.count) == ((), False, 2)
    both = [("a.parquet", checksum_bytes(b"first")), ("b.parquet", checksum_bytes(b"second"))]
    assert change.digest == listing_digest.of(both)
    assert [(relative_path(f), checksum_of(f)) for f in change.added] == both[1:]
    assert [EncodedFileUri.decode(f).file_uri for f in body["new_files"]] == [second]


def test_overwrite_recycles_replaced_files_into_cmroot(metastore: Metastore) -> None:
    table = create_db_and_table(metastore)
    old = write_file(table.sd.location, "old.parquet", b"old contents")
    metastore.catalog.insert("sales", "orders")
    new = write_file(table.sd.location, "new.parquet", b"new contents")
    before = metastore.get_current_notification_event_id()
    metastore.catalog.insert("sales", "orders", new_files=[new], replace=True)
    [event] = metastore.events.next_events(before)
    body = event.body()
    assert body["replace"] is True
    change = DataChange.from_json(body["data"])
    assert [EncodedFileUri.decode(f).file_uri for f in change.added] == [new]
    assert change.complete and change.count == 1  # no recorded file survived: the listing is the new file
    assert body["new_files"] == list(change.added)
    [recycled] = body["recycled"]
    assert not os.path.exists(local_path(old))
    cm_copy = metastore.cm.cm_uri(old, checksum_bytes(b"old contents"))
    with open(local_path(cm_copy), "rb") as handle:
        assert handle.read() == b"old contents"
    # The event's encoded URI alone leads back to the replaced content.
    assert metastore.cm.resolve(recycled) == cm_copy


def test_drop_table_recycles_files_and_event_lists_them(metastore: Metastore) -> None:
    table = create_db_and_table(metastore, partition_keys=("p",))
    [part] = metastore.catalog.add_partitions("sales", "orders", [make_partition(table, "x")])
    write_file(part.sd.location, "a.parquet", b"aaa")
    write_file(part.sd.location, "sub/b.parquet", b"bbbb")
    before = metastore.get_current_notification_event_id()
    metastore.catalog.drop_table("sales", "orders")
    [event] = metastore.events.next_events(before)
    recycled = sorted((EncodedFileUri.decode(f) for f in event.body()["recycled"]), key=lambda e: e.file_uri)
    assert [(r.file_name, r.subdir) for r in recycled] == [("a.parquet", "p=x"), ("b.parquet", "p=x/sub")]
    assert not os.path.exists(local_path(table.sd.location))
    for entry in recycled:
        assert os.path.exists(local_path(metastore.cm.cm_uri(entry.file_uri, entry.checksum)))
    with pytest.raises(NoSuchTableError):
        metastore.catalog.get_table("sales", "orders")


def test_external_table_drop_keeps_files(db_url: str, tmp_path) -> None:
    location = str(tmp_path / "external_data")
    metastore = Metastore.open(make_config(db_url, tmp_path, external_roots=[location]))
    metastore.catalog.create_database(Database(name="ext"))
    data = write_file(location, "f.csv", b"1,a\n")
    table = make_table("ext", "t", EXTERNAL="TRUE").model_copy(
        update={"table_type": TableType.EXTERNAL_TABLE}
    )
    table = table.model_copy(update={"sd": table.sd.model_copy(update={"location": location})})
    created = metastore.catalog.create_table(table)
    assert not created.is_managed
    create_event = metastore.events.next_events(metastore.get_current_notification_event_id() - 1)[0]
    change = DataChange.from_json(create_event.body()["data"])
    assert [EncodedFileUri.decode(f).file_uri for f in change.added] == [data] and change.complete
    metastore.catalog.drop_table("ext", "t")
    assert os.path.exists(local_path(data))
    metastore.close()


def test_rename_and_truncate_are_visible_in_alter_events(metastore: Metastore) -> None:
    table = create_db_and_table(metastore)
    write_file(table.sd.location, "f.parquet", b"data")
    metastore.catalog.insert("sales", "orders")
    before = metastore.get_current_notification_event_id()
    metastore.catalog.alter_table("sales", "orders", table.model_copy(update={"table_name": "orders_v2"}))
    renamed = metastore.catalog.get_table("sales", "orders_v2")
    assert renamed.id == table.id
    assert renamed.sd.location.endswith("/sales.db/orders_v2")
    assert os.path.exists(os.path.join(local_path(renamed.sd.location), "f.parquet"))
    metastore.catalog.truncate_table("sales", "orders_v2")
    rename_event, truncate_event = metastore.events.next_events(before)
    assert rename_event.event_type == truncate_event.event_type == "ALTER_TABLE"
    assert (rename_event.body()["before"]["table_name"], rename_event.body()["after"]["table_name"]) == (
        "orders",
        "orders_v2",
    )
    renamed_change = DataChange.from_json(rename_event.body()["data"])
    assert renamed_change.is_empty and renamed_change.count == 1  # the files moved; none changed
    truncated = DataChange.from_json(truncate_event.body()["data"])
    assert (truncated.complete, truncated.added, truncated.count) == (True, (), 0)
    assert len(truncate_event.body()["recycled"]) == 1
    assert os.listdir(local_path(renamed.sd.location)) == []
    with pytest.raises(NoSuchTableError):
        metastore.catalog.get_table("sales", "orders")


def test_partitions_batched_and_queried(metastore: Metastore) -> None:
    table = create_db_and_table(metastore, partition_keys=("year", "month"))
    parts = [make_partition(table, str(y), f"{m:02d}") for y in (2023, 2024) for m in range(1, 13)]
    added = metastore.catalog.add_partitions("sales", "orders", parts)
    assert len(added) == 24
    names = metastore.catalog.get_partition_names("sales", "orders")
    assert names == sorted(f"year={y}/month={m:02d}" for y in (2023, 2024) for m in range(1, 13))
    in_2024 = metastore.catalog.get_partitions_ps("sales", "orders", ["2024", ""])
    assert [p.values for p in in_2024] == [["2024", f"{m:02d}"] for m in range(1, 13)]
    march = metastore.catalog.get_partitions_ps("sales", "orders", ["", "03"])
    assert [p.values for p in march] == [["2023", "03"], ["2024", "03"]]
    assert len(metastore.catalog.get_partitions("sales", "orders", max_parts=5)) == 5
    # Adding again fails whole, or skips existing ones when asked.
    with pytest.raises(AlreadyExistsError, match="year=2023/month=01"):
        metastore.catalog.add_partitions("sales", "orders", [parts[0], make_partition(table, "2025", "01")])
    assert len(metastore.catalog.get_partition_names("sales", "orders")) == 24
    more = metastore.catalog.add_partitions(
        "sales", "orders", [parts[0], make_partition(table, "2025", "01")], if_not_exists=True
    )
    assert [p.values for p in more] == [["2025", "01"]]


def test_alter_partitions_one_event_each(metastore: Metastore) -> None:
    table = create_db_and_table(metastore, partition_keys=("p",))
    added = metastore.catalog.add_partitions("sales", "orders", [make_partition(table, v) for v in "abc"])
    before = metastore.get_current_notification_event_id()
    changed = [p.model_copy(update={"parameters": {"touched": "yes"}}) for p in added[:2]]
    metastore.catalog.alter_partitions("sales", "orders", changed)
    events = metastore.events.next_events(before)
    assert [e.event_type for e in events] == ["ALTER_PARTITION", "ALTER_PARTITION"]
    assert [e.body()["after"]["parameters"] for e in events] == [{"touched": "yes"}] * 2
    assert metastore.catalog.get_partition("sales", "orders", ["c"]).parameters == {}
    with pytest.raises(NoSuchPartitionError):
        metastore.catalog.alter_partitions("sales", "orders", [make_partition(table, "zz")])


def test_functions_and_database_cascade(metastore: Metastore) -> None:
    create_db_and_table(metastore)
    metastore.catalog.create_function(
        Function(function_name="MyUpper", db_name="sales", class_name="com.x.Upper")
    )
    assert metastore.catalog.get_functions("sales") == ["myupper"]
    with pytest.raises(InvalidOperationError, match="not empty"):
        metastore.catalog.drop_database("sales")
    before = metastore.get_current_notification_event_id()
    metastore.catalog.drop_database("sales", cascade=True)
    assert events_of(metastore, before) == [
        ("DROP_TABLE", "sales", "orders"),
        ("DROP_FUNCTION", "sales", None),
        ("DROP_DATABASE", "sales", None),
    ]
    assert metastore.catalog.get_databases() == ["default"]


def test_bad_input_is_rejected_and_nothing_half_written(metastore: Metastore) -> None:
    table = create_db_and_table(metastore, partition_keys=("p",))
    before = metastore.get_current_notification_event_id()
    with pytest.raises(AlreadyExistsError, match=r"sales\.orders"):
        metastore.catalog.create_table(make_table("sales", "orders"))
    with pytest.raises(AlreadyExistsError, match="sales"):
        metastore.catalog.create_database(Database(name="SALES"))
    with pytest.raises(NoSuchDatabaseError, match="nosuch"):
        metastore.catalog.create_table(make_table("nosuch", "t"))
    with pytest.raises(NoSuchTableError, match=r"sales\.nosuch"):
        metastore.catalog.get_table("sales", "nosuch")
    with pytest.raises(InvalidObjectError, match="2 values but the table has 1 keys"):
        metastore.catalog.add_partitions("sales", "orders", [make_partition(table, "a", "b")])
    with pytest.raises(InvalidObjectError, match="invalid"):
        metastore.catalog.create_table(make_table("sales", "bad-name"))
    # A batch with one bad partition adds none of them.
    with pytest.raises(InvalidObjectError):
        metastore.catalog.add_partitions(
            "sales", "orders", [make_partition(table, "ok"), make_partition(table)]
        )
    assert metastore.catalog.get_partition_names("sales", "orders") == []
    assert metastore.get_current_notification_event_id() == before


def test_names_are_case_insensitive(metastore: Metastore) -> None:
    create_db_and_table(metastore, db="Sales", table="Orders")
    assert metastore.catalog.get_table("SALES", "ORDERS").table_name == "orders"
    assert metastore.catalog.get_tables("sales", "ord*|x") == ["orders"]
    assert metastore.catalog.get_databases("s*") == ["sales"]
