"""The metastore with warehouse and cmroot on S3 (a real S3-protocol server process), and mixed with local.

Data files are written the way other writers (Spark through S3A, users) write them: with a plain boto3
client, usually without a CRC32C, so the metastore's capture has to cope with both kinds of objects.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import google_crc32c
import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import FileLostError
from hmsrepl.formats.file_uri import EncodedFileUri, split_versioned_reference
from hmsrepl.metastore import Metastore
from hmsrepl.storage import copy_file, filesystem_for
from tests.helpers import create_db_and_table, make_partition, write_file
from tests.s3server import counting, create_bucket, new_bucket_name


def crc_token(data: bytes) -> str:
    """The expected token, computed here independently of hmsrepl.storage.checksum."""
    return f"crc32c-{int.from_bytes(google_crc32c.Checksum(data).digest(), 'big'):08x}-{len(data)}"


def read(uri: str) -> bytes:
    with filesystem_for(uri).open_read(uri) as stream:
        return stream.read()


def keys_under(client: Any, bucket: str, prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))


def s3_key(uri: str) -> str:
    return uri.split("://", 1)[1].split("/", 1)[1]


@pytest.fixture
def open_store(tmp_path: Path, s3_env: object) -> Iterator[Any]:
    """Open metastores with the given warehouse and cmroot (SQLite: the database is not the subject)."""
    stores: list[Metastore] = []

    def opener(warehouse: str, cmroot: str) -> Metastore:
        store = Metastore.open(
            MetastoreConfig(
                db_url=f"sqlite:///{tmp_path}/metastore-{len(stores)}.db", warehouse=warehouse, cmroot=cmroot
            )
        )
        stores.append(store)
        return store

    yield opener
    for store in stores:
        store.close()


def test_metastore_on_versioned_s3_records_versions_and_recycles_into_s3_cmroot(
    open_store: Any, s3_client: Any, versioned_bucket: str
) -> None:
    bucket = versioned_bucket
    store = open_store(f"s3://{bucket}/warehouse", f"s3://{bucket}/cmroot")
    table = create_db_and_table(store, partition_keys=("p",))
    assert table.sd.location == f"s3://{bucket}/warehouse/sales.db/orders"
    part, sibling = store.catalog.add_partitions(
        "sales", "orders", [make_partition(table, "k:v"), make_partition(table, "k:v0")]
    )
    assert part.sd.location.endswith("/orders/p=k%3Av")  # Hive's escape, kept literally in the key

    prefix = s3_key(part.sd.location)
    files = {"part-0.parquet": b"rows of part zero", "sub/part-1.parquet": b"rows of part one, longer"}
    versions = {
        name: s3_client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=data)["VersionId"]
        for name, data in files.items()
    }
    s3_client.put_object(Bucket=bucket, Key=f"{prefix}/_SUCCESS", Body=b"")  # hidden: not data
    s3_client.put_object(Bucket=bucket, Key=f"{s3_key(sibling.sd.location)}/other.parquet", Body=b"x")

    before = store.get_current_notification_event_id()
    store.catalog.insert("sales", "orders", ["k:v"])
    [event] = store.events.next_events(before)
    entries = {
        EncodedFileUri.decode(text).file_name: EncodedFileUri.decode(text)
        for text in event.body()["data"]["added"]
    }
    assert set(entries) == {"part-0.parquet", "part-1.parquet"}  # not p=k%3Av0's file, not _SUCCESS
    for name, data in files.items():
        entry = entries[name.rsplit("/", 1)[-1]]
        assert entry.file_uri == f"{part.sd.location}/{name}"
        assert entry.checksum == crc_token(data)
        assert entry.version_id == versions[name]
        assert entry.cmroot == f"s3://{bucket}/cmroot"
    assert entries["part-1.parquet"].subdir == "sub"

    before = store.get_current_notification_event_id()
    store.catalog.drop_partitions("sales", "orders", [["k:v"]])
    [drop] = store.events.next_events(before)
    [recycled] = drop.body()["recycled"]
    assert keys_under(s3_client, bucket, prefix + "/") == []  # the partition's files are gone...
    assert keys_under(s3_client, bucket, "cmroot/") == sorted(  # ...into cmroot, content-addressed
        f"cmroot/{name.rsplit('/', 1)[-1]}_{crc_token(data)}" for name, data in files.items()
    )
    for text in recycled:
        entry = EncodedFileUri.decode(text)
        data = files["sub/part-1.parquet" if entry.file_name == "part-1.parquet" else entry.file_name]
        # With versioning the exact version is the first place to read from...
        resolved = store.cm.resolve(text)
        assert split_versioned_reference(resolved) == (entry.file_uri, entry.version_id)
        assert read(resolved) == data
        # ...and the cmroot copy serves events that carry no version.
        unversioned = EncodedFileUri(entry.file_uri, entry.checksum, entry.cmroot, entry.subdir).encode()
        assert store.cm.resolve(unversioned) == f"s3://{bucket}/cmroot/{entry.file_name}_{entry.checksum}"
        assert read(store.cm.resolve(unversioned)) == data
    # cmroot retention counts from the objects' LastModified, which the recycling copy set.
    assert store.cm.cleanup(retention_seconds=3600, now=time.time()).deleted == 0
    result = store.cm.cleanup(retention_seconds=3600, now=time.time() + 2 * 3600)
    assert (result.deleted, result.bytes_deleted) == (2, sum(len(d) for d in files.values()))
    assert keys_under(s3_client, bucket, "cmroot/") == []


@pytest.mark.parametrize("layout", ["local warehouse, s3 cmroot", "s3 warehouse, local cmroot"])
def test_mixed_stores_recycle_across(
    layout: str, open_store: Any, s3_client: Any, s3_bucket: str, tmp_path: Path
) -> None:
    s3_warehouse = layout.startswith("s3")
    warehouse = f"s3://{s3_bucket}/warehouse" if s3_warehouse else str(tmp_path / "warehouse")
    cmroot = str(tmp_path / "cmroot") if s3_warehouse else f"s3://{s3_bucket}/cmroot"
    store = open_store(warehouse, cmroot)
    table = create_db_and_table(store, partition_keys=("p",))
    [part] = store.catalog.add_partitions("sales", "orders", [make_partition(table, "1")])
    data = f"data of {layout}".encode()
    if s3_warehouse:
        s3_client.put_object(Bucket=s3_bucket, Key=f"{s3_key(part.sd.location)}/f.parquet", Body=data)
        uri = f"{part.sd.location}/f.parquet"
    else:
        uri = write_file(part.sd.location, "f.parquet", data)
    [encoded] = store.catalog.insert("sales", "orders", ["1"])
    assert EncodedFileUri.decode(encoded).version_id == ""  # no versioning here
    store.catalog.drop_partitions("sales", "orders", [["1"]])

    assert not filesystem_for(uri).exists(uri)
    cm_copy = store.cm.cm_uri(uri, crc_token(data))
    assert cm_copy.startswith("/" if s3_warehouse else "s3://")
    assert read(cm_copy) == data
    assert store.cm.resolve(encoded) == cm_copy
    assert filesystem_for(cm_copy).checksum(cm_copy) == crc_token(data)
    if not s3_warehouse:  # the upload into S3 carried a CRC32C, so S3 keeps the checksum
        head = s3_client.head_object(Bucket=s3_bucket, Key=s3_key(cm_copy), ChecksumMode="ENABLED")
        assert head["ChecksumCRC32C"]


def test_overwritten_and_deleted_file_replays_from_its_version_without_cmroot(
    open_store: Any, s3_client: Any, versioned_bucket: str, tmp_path: Path
) -> None:
    bucket = versioned_bucket
    store = open_store(f"s3://{bucket}/warehouse", f"s3://{bucket}/cmroot")
    table = create_db_and_table(store)
    key = f"{s3_key(table.sd.location)}/f.parquet"
    s3_client.put_object(Bucket=bucket, Key=key, Body=b"version one")
    [first] = store.catalog.insert("sales", "orders")

    # A writer that bypasses the metastore overwrites the file in place: nothing reaches cmroot.
    s3_client.put_object(Bucket=bucket, Key=key, Body=b"version two, longer")
    [second] = store.catalog.insert("sales", "orders")
    assert EncodedFileUri.decode(first).version_id != EncodedFileUri.decode(second).version_id
    resolved = store.cm.resolve(first)
    assert resolved != f"s3://{bucket}/{key}" and read(resolved) == b"version one"
    assert store.cm.resolve(second) == f"s3://{bucket}/{key}"  # the current object is that version

    s3_client.delete_object(Bucket=bucket, Key=key)  # and then deletes it
    for encoded, data in ((first, b"version one"), (second, b"version two, longer")):
        resolved = store.cm.resolve(encoded)
        assert split_versioned_reference(resolved)[1] == EncodedFileUri.decode(encoded).version_id
        assert read(resolved) == data
        # A loader copies straight from that version, server-side, and gets the event's checksum.
        target = f"s3://{bucket}/replica/{EncodedFileUri.decode(encoded).version_id}"
        assert copy_file(resolved, target, EncodedFileUri.decode(encoded).checksum) == crc_token(data)
        local_target = tmp_path / f"replica-{len(data)}"
        assert copy_file(resolved, str(local_target)) == crc_token(data)
        assert local_target.read_bytes() == data
    assert keys_under(s3_client, bucket, "cmroot/") == []  # no cmroot copy was involved


def test_without_versioning_the_overwritten_file_replays_from_cmroot(
    open_store: Any, s3_client: Any, s3_env: object
) -> None:
    bucket = create_bucket(s3_client, new_bucket_name("unversioned"), versioned=False)
    store = open_store(f"s3://{bucket}/warehouse", f"s3://{bucket}/cmroot")
    table = create_db_and_table(store)
    key = f"{s3_key(table.sd.location)}/f.parquet"
    s3_client.put_object(Bucket=bucket, Key=key, Body=b"version one")
    [first] = store.catalog.insert("sales", "orders")
    assert EncodedFileUri.decode(first).version_id == ""

    # INSERT OVERWRITE through the metastore: the old file is recycled into cmroot...
    s3_client.put_object(Bucket=bucket, Key=f"{s3_key(table.sd.location)}/g.parquet", Body=b"replacement")
    store.catalog.insert("sales", "orders", new_files=[f"{table.sd.location}/g.parquet"], replace=True)
    # ...then a file of the same name is written again, and later deleted.
    s3_client.put_object(Bucket=bucket, Key=key, Body=b"version two, longer")
    cm_copy = f"s3://{bucket}/cmroot/f.parquet_{crc_token(b'version one')}"
    assert store.cm.resolve(first) == cm_copy and read(cm_copy) == b"version one"
    s3_client.delete_object(Bucket=bucket, Key=key)
    assert store.cm.resolve(first) == cm_copy
    assert copy_file(cm_copy, f"s3://{bucket}/replica/f", EncodedFileUri.decode(first).checksum) == crc_token(
        b"version one"
    )

    store.cm.cleanup(retention_seconds=60, now=time.time() + 3600)  # retention passed
    with pytest.raises(FileLostError, match=r"f\.parquet.*bootstrap"):
        store.cm.resolve(first)


def test_a_same_size_overwrite_within_the_same_second_is_captured(
    open_store: Any, s3_client: Any, versioned_bucket: str
) -> None:
    """S3 reports modification times in whole seconds: an object overwritten by as many bytes within the
    second the metastore recorded it has the recorded size and time. Its ETag differs, and so does what the
    next write records and logs."""
    bucket = versioned_bucket
    store = open_store(f"s3://{bucket}/warehouse", f"s3://{bucket}/cmroot")
    table = create_db_and_table(store, partition_keys=("p",))
    [part] = store.catalog.add_partitions("sales", "orders", [make_partition(table, "1")])
    key = f"{s3_key(part.sd.location)}/part-0.parquet"
    first, second = b"rows of the first write", b"ROWS OF THE NEXT WRITE!"
    assert len(first) == len(second)
    for _ in range(20):  # both writes and the first capture within one second of S3's clock
        s3_client.put_object(Bucket=bucket, Key=key, Body=first)
        store.catalog.insert("sales", "orders", ["1"])
        s3_client.put_object(Bucket=bucket, Key=key, Body=second)
        versions = s3_client.list_object_versions(Bucket=bucket, Prefix=key)["Versions"][:2]
        if versions[0]["LastModified"] == versions[1]["LastModified"]:
            break
    else:
        pytest.skip("S3's clock turned its second between the two writes every time")
    before = store.get_current_notification_event_id()
    store.catalog.insert("sales", "orders", ["1"])
    [event] = store.events.next_events(before)
    [added] = [EncodedFileUri.decode(text) for text in event.body()["data"]["added"]]
    assert added.checksum == crc_token(second)
    assert added.version_id == versions[0]["VersionId"]
    assert read(store.cm.resolve(event.body()["data"]["added"][0])) == second


def test_the_insert_after_an_alter_heads_the_named_file_instead_of_listing_the_partition(
    open_store: Any, s3_client: Any, versioned_bucket: str
) -> None:
    """An append whose alter comes first and lists (as Spark's Hive client alters a table before its INSERT),
    then fire_listener_event naming the new file: the second call asks S3 about that one file, whatever the
    partition holds."""
    bucket = versioned_bucket
    store = open_store(f"s3://{bucket}/warehouse", f"s3://{bucket}/cmroot")
    table = create_db_and_table(store, partition_keys=("p",))
    [part] = store.catalog.add_partitions("sales", "orders", [make_partition(table, "1")])
    prefix = s3_key(part.sd.location)
    with ThreadPoolExecutor(16) as pool:  # more than one listing page (one by one, 11 s of the test)
        list(
            pool.map(
                lambda i: s3_client.put_object(
                    Bucket=bucket, Key=f"{prefix}/part-{i:05d}.parquet", Body=b"%d" % i
                ),
                range(1_001),
            )
        )
    store.catalog.insert("sales", "orders", ["1"])
    s3_client.put_object(Bucket=bucket, Key=f"{prefix}/part-new.parquet", Body=b"new rows")
    store.catalog.alter_partitions("sales", "orders", [part])
    before = store.get_current_notification_event_id()
    with counting(filesystem_for(part.sd.location).client) as calls:
        store.catalog.insert("sales", "orders", ["1"], new_files=[f"{part.sd.location}/part-new.parquet"])
    [event] = store.events.next_events(before)
    assert event.body()["data"]["added"] == []  # recorded by the alter: nothing new
    assert "ListObjectsV2" not in calls and calls["HeadObject"] == 1, calls
