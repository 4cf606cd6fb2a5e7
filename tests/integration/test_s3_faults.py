"""S3 reads through a network that cuts bodies and resets connections at random (a TCP proxy the test
starts in front of the real S3 server): streamed reads resume with ranged GETs of the same object, so reads,
checksums, copies and replication loads succeed, and every byte is checked against what was written.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import StorageError
from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.filecopy import logical_location
from hmsrepl.replication.verify import verify
from hmsrepl.storage import filesystem_for
from hmsrepl.storage.base import copy_file, register_filesystem, unregister_filesystem
from hmsrepl.storage.checksum import checksum_bytes
from hmsrepl.storage.local import local_path
from hmsrepl.storage.s3 import ResumingBody, S3FileSystem, _head_doubt
from tests.helpers import make_partition, make_table
from tests.s3server import FaultyProxy, counting, create_bucket, faulty_proxy, new_bucket_name

SIZES = (0, 1, 1000, 64 * 1024, 300_000, 1 << 20, 3 * (1 << 20) + 17)


@pytest.fixture
def faulty(s3_env: Any) -> Iterator[FaultyProxy]:
    seed = random.randrange(1 << 30)
    with faulty_proxy(s3_env.endpoint_url, seed=seed) as proxy:
        print(f"faulty proxy seed {seed}")
        yield proxy


@pytest.fixture
def bucket_through(faulty: FaultyProxy, s3_client: Any) -> Iterator[str]:
    """A versioned bucket whose every request goes through the faulty proxy."""
    name = create_bucket(s3_client, new_bucket_name("faulty"), versioned=True)
    register_filesystem(f"s3://{name}", S3FileSystem(endpoint_url=faulty.endpoint_url))
    yield name
    unregister_filesystem(f"s3://{name}")


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def test_streamed_reads_resume_after_cuts_and_resets(
    bucket_through: str, faulty: FaultyProxy, s3_client: Any, tmp_path: Path
) -> None:
    objects: dict[str, bytes] = {}
    for i, size in enumerate(SIZES * 3):
        key = f"data/obj-{i}"
        objects[key] = payload(size, i)
        # Written by another client without a CRC32C, so checksums here must stream the object.
        s3_client.put_object(Bucket=bucket_through, Key=key, Body=objects[key])
    retried = 0
    # Faults are drawn at random: a pass that happened to draw few (or whose cuts all fell in headers, which
    # botocore asks again whole, not by range) is followed by another, at most 8.
    for _ in range(8):
        for key, data in objects.items():
            uri = f"s3://{bucket_through}/{key}"
            fs = filesystem_for(uri)
            with fs.open_read(uri) as stream:
                assert stream.read() == data, key
                retried += stream.retries if isinstance(stream, ResumingBody) else 0
            with fs.open_read(uri) as stream:  # small reads, as copies and hashing do
                chunks = []
                while chunk := stream.read(50_000):
                    chunks.append(chunk)
                assert b"".join(chunks) == data, key
                retried += stream.retries if isinstance(stream, ResumingBody) else 0
            assert fs.checksum(uri) == checksum_bytes(data), key
            local = tmp_path / "copies" / key
            assert copy_file(uri, str(local), checksum_bytes(data)) == checksum_bytes(data)
            assert hashlib.sha256(local.read_bytes()).digest() == hashlib.sha256(data).digest()
        if faulty.cuts >= 10 and faulty.resets >= 1 and retried >= 1:
            break
    print(f"proxy: {faulty}, ranged re-requests {retried}")
    assert faulty.cuts >= 10 and faulty.resets >= 1, f"too few faults injected to test anything: {faulty}"
    assert retried >= 1


def test_an_answer_cut_in_its_headers_is_asked_again_not_read_as_empty(s3_env: Any, s3_client: Any) -> None:
    """``http.client`` ends an answer's headers where the connection ends: an answer cut before its
    Content-Length reads as an empty body. Reads ask again instead of returning nothing."""
    name = create_bucket(s3_client, new_bucket_name("cut"), versioned=True)
    objects = {f"obj-{i}": payload(100_000, 100 + i) for i in range(12)}
    for key, data in objects.items():
        s3_client.put_object(Bucket=name, Key=key, Body=data)
    seed = random.randrange(1 << 30)
    print(f"faulty proxy seed {seed}")
    # Cuts within the first 300 bytes of an answer: nearly always inside its headers.
    with faulty_proxy(s3_env.endpoint_url, seed=seed, reset_rate=0.0, cut_rate=0.25, max_cut=300) as proxy:
        register_filesystem(f"s3://{name}", S3FileSystem(endpoint_url=proxy.endpoint_url))
        try:
            for _ in range(2):
                for key, data in objects.items():
                    with filesystem_for(f"s3://{name}/{key}").open_read(f"s3://{name}/{key}") as stream:
                        assert stream.read() == data, key
        finally:
            unregister_filesystem(f"s3://{name}")
    assert proxy.cuts >= 1, f"no answer was cut: {proxy}"


@pytest.mark.parametrize("versioning", ["readable", "denied"])
def test_head_answers_cut_in_their_headers_never_give_a_wrong_identity(
    s3_env: Any, s3_client: Any, versioning: str
) -> None:
    """A HEAD answer cut in its headers lacks the headers after the cut and has its last one shortened:
    without care it records a file with no version (or a shortened one), or a checksum of a shortened size.
    Identities read through a network that cuts HEAD answers equal those read directly, also with
    credentials that may not ask whether the bucket is versioned."""
    name = create_bucket(s3_client, new_bucket_name("cuthead"), versioned=True)
    direct = S3FileSystem(endpoint_url=s3_env.endpoint_url)
    uris = []
    for i in range(8):
        uri = f"s3://{name}/obj-{i}"
        data = payload(1000 + 37 * i, 200 + i)
        if i % 2:
            direct.write_bytes(uri, data)  # with a stored full-object CRC32C: the checksum comes from HEAD
        else:
            s3_client.put_object(Bucket=name, Key=f"obj-{i}", Body=data)  # without: read and hashed
        uris.append(uri)
    expected = {uri: direct.identify(uri) for uri in uris}
    assert all(identity.version_id for identity in expected.values())
    seed = random.randrange(1 << 30)
    print(f"faulty proxy seed {seed}")
    # Cuts within the first 600 bytes of HEAD and GET answers: a HEAD answer is about 500 bytes long.
    with faulty_proxy(
        s3_env.endpoint_url,
        seed=seed,
        reset_rate=0.0,
        cut_rate=0.3,
        max_cut=600,
        cut_heads=True,
        deny_versioning=versioning == "denied",
    ) as proxy:
        through = S3FileSystem(endpoint_url=proxy.endpoint_url)
        for _ in range(12):  # rounds until enough answers were cut (about 8 a round at this rate)
            for uri in uris:
                assert through.identify(uri) == expected[uri], uri
                assert through.exists(uri)
            if proxy.cuts >= 20:
                break
    assert proxy.cuts >= 20, f"too few answers were cut to test anything: {proxy}"


def test_without_leave_to_ask_about_versioning_an_answer_cut_before_its_version_id_is_doubted(
    s3_env: Any, s3_client: Any
) -> None:
    """AWS orders a HEAD answer's headers ... ETag, x-amz-server-side-encryption, x-amz-version-id ...: cut
    between the two, the answer ends in a whole header this code does not read and only the bucket's
    versioning tells that an id is missing. Credentials that may not ask (403 AccessDenied, answered by the
    proxy as S3 would) must not make it count as unversioned; an unversioned bucket then costs a second
    HEAD per object (two answers alike), and identities stay right."""
    versioned = create_bucket(s3_client, new_bucket_name("denied"), versioned=True)
    plain = create_bucket(s3_client, new_bucket_name("denied"), versioned=False)
    cut = {
        "ContentLength": 10,
        "LastModified": "2026-11-26T00:00:00Z",
        "ETag": '"0123"',
        "ResponseMetadata": {
            "HTTPHeaders": {"last-modified": "x", "etag": '"0123"', "x-amz-server-side-encryption": "AES256"}
        },
    }
    with faulty_proxy(
        s3_env.endpoint_url, seed=0, reset_rate=0.0, cut_rate=0.0, deny_versioning=True
    ) as proxy:
        through = S3FileSystem(endpoint_url=proxy.endpoint_url)
        assert _head_doubt(cut, lambda: through._versioned(versioned)) == "its version id is missing"
        s3_client.put_object(Bucket=plain, Key="k", Body=b"plain rows")
        with counting(through.client) as calls:
            identity = through.identify(f"s3://{plain}/k")
        assert identity == S3FileSystem(endpoint_url=s3_env.endpoint_url).identify(f"s3://{plain}/k")
        assert identity.version_id is None and calls["HeadObject"] == 2


def test_an_object_replaced_while_being_read_fails_instead_of_mixing_versions(
    s3_env: Any, s3_client: Any
) -> None:
    """The re-request is pinned to the object first read: ETag in an unversioned bucket."""
    name = create_bucket(s3_client, new_bucket_name("plain"), versioned=False)
    uri = f"s3://{name}/k"
    s3_client.put_object(Bucket=name, Key="k", Body=b"a" * 100_000)
    fs = S3FileSystem(endpoint_url=s3_env.endpoint_url)
    stream = fs.open_read(uri)
    assert isinstance(stream, ResumingBody)
    first = stream.read(10)
    s3_client.put_object(Bucket=name, Key="k", Body=b"b" * 100_000)
    stream._discard()  # as a reset connection would
    with pytest.raises(StorageError, match="changed or vanished while being read"):
        stream.read()
    assert first == b"a" * 10


def test_replication_load_from_s3_through_faulty_network(
    bucket_through: str, faulty: FaultyProxy, s3_client: Any, tmp_path: Path
) -> None:
    """Source warehouse and cmroot on S3 behind the faulty network, replica on local disk: the load streams
    every file across stores, and the replica equals the source byte for byte."""
    source = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/src.db",
            warehouse=f"s3://{bucket_through}/wh",
            cmroot=f"s3://{bucket_through}/cm",
            trash_root="",
        )
    )
    target = Metastore.open(
        MetastoreConfig(
            db_url=f"sqlite:///{tmp_path}/dst.db",
            warehouse=str(tmp_path / "dst_wh"),
            cmroot=str(tmp_path / "dst_cm"),
        )
    )
    try:
        catalog = source.catalog
        catalog.create_database(Database(name="sales"))
        orders = catalog.create_table(make_table("sales", "orders", partition_keys=("day",)))
        written: dict[str, bytes] = {}
        for day in range(4):
            [part] = catalog.add_partitions("sales", "orders", [make_partition(orders, f"d{day}")])
            for n in range(3):
                uri = f"{part.sd.location}/part-{n}.parquet"
                written[f"day=d{day}/part-{n}.parquet"] = data = payload(200_000 + 150_000 * n, day * 10 + n)
                filesystem_for(uri).write_bytes(uri, data)
            catalog.insert("sales", "orders", [f"d{day}"])
        engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
        dumped = engine.execute("REPL DUMP sales")
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
        # An overwrite, replayed incrementally (the replaced file comes from its S3 version).
        d0 = catalog.get_partition("sales", "orders", ["d0"])
        new = f"{d0.sd.location}/part-9.parquet"
        written = {k: v for k, v in written.items() if not k.startswith("day=d0/")}
        written["day=d0/part-9.parquet"] = data = payload(900_000, 99)
        filesystem_for(new).write_bytes(new, data)
        catalog.insert("sales", "orders", ["d0"], new_files=[new], replace=True)
        dumped = engine.execute("REPL DUMP sales FROM " + str(engine.execute("REPL STATUS sales_dr")))
        engine.execute(f"REPL LOAD sales_dr FROM '{dumped.dump_dir}'")
        assert verify(source, "sales", target, "sales_dr") == []
        # What readers of the replica see: each partition's files under the location its metadata names
        # (a version directory of the partition after a location flip).
        copied = {}
        for part in target.catalog.get_partitions("sales_dr", "orders"):
            part_dir = Path(local_path(part.sd.location or ""))
            name = Path(logical_location(part.sd.location or "")).name
            for path in part_dir.rglob("*"):
                if path.is_file():
                    copied[f"{name}/{path.relative_to(part_dir)}"] = path.read_bytes()
        assert copied.keys() == written.keys()
        for name, data in written.items():
            assert copied[name] == data, name
        print(f"proxy: {faulty}")
        assert faulty.cuts >= 1, f"no body was cut: {faulty}"
    finally:
        source.close()
        target.close()
