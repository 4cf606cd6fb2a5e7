"""The S3 file system against a real S3-protocol server process (moto's server on loopback)."""

from __future__ import annotations

import base64
import io
import pickle
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import google_crc32c
import pytest

from hmsrepl.exceptions import StorageError
from hmsrepl.formats.file_uri import versioned_reference
from hmsrepl.storage import copy_file, copy_files, filesystem_for, move_file
from hmsrepl.storage.base import register_filesystem, unregister_filesystem
from hmsrepl.storage.checksum import s3_crc32c_from_token, token_from_s3_crc32c
from hmsrepl.storage.s3 import S3FileSystem, default_s3_filesystem

pytest.register_assert_rewrite("tests.s3server")  # it is a plugin (fixtures) as well as a helper module

from tests.s3server import S3Server, counting, create_bucket, new_bucket_name, throttling_proxy  # noqa: E402

MiB = 1024 * 1024


def crc_token(data: bytes) -> str:
    """The expected token, computed here independently of hmsrepl.storage.checksum."""
    return f"crc32c-{int.from_bytes(google_crc32c.Checksum(data).digest(), 'big'):08x}-{len(data)}"


@pytest.fixture
def fs(s3_env: S3Server) -> S3FileSystem:
    return default_s3_filesystem()


def put(client: Any, bucket: str, key: str, data: bytes, **extra: Any) -> dict[str, Any]:
    return client.put_object(Bucket=bucket, Key=key, Body=data, **extra)


def test_s3_checksum_value_maps_to_our_token() -> None:
    # S3's ChecksumCRC32C is base64 of the big-endian CRC: RFC 3720's check value for "123456789".
    assert token_from_s3_crc32c("4waSgw==", 9) == "crc32c-e3069283-9"
    assert s3_crc32c_from_token("crc32c-e3069283-9") == "4waSgw=="
    with pytest.raises(ValueError, match="not a base64"):
        token_from_s3_crc32c("4waSgw==-2", 9)  # a composite (multipart) value is not a file CRC


def test_s3_uris_choose_the_s3_filesystem(fs: S3FileSystem) -> None:
    assert filesystem_for("s3://b/k") is fs
    assert filesystem_for("s3a://b/k") is fs  # Hadoop's spelling of the same store
    assert filesystem_for(versioned_reference("s3://b/k", "v1")) is fs


def test_list_is_recursive_with_prefix_semantics(fs: S3FileSystem, s3_client: Any, s3_bucket: str) -> None:
    files = {
        "t/p=1/a.parquet": b"a",
        "t/p=1/sub/b.parquet": b"bb",
        "t/p=1/_SUCCESS": b"",
        "t/p=10/c.parquet": b"ccc",  # shares the prefix 't/p=1' but is another partition
        "t/p=1x": b"dddd",
    }
    for key, data in files.items():
        put(s3_client, s3_bucket, key, data)
    put(s3_client, s3_bucket, "t/p=1/emptydir/", b"")  # a console-style directory marker: not a file

    for root in (f"s3://{s3_bucket}/t/p=1", f"s3://{s3_bucket}/t/p=1/"):
        listed = {(s.uri, s.size) for s in fs.list_files(root)}
        assert listed == {
            (f"s3://{s3_bucket}/t/p=1/a.parquet", 1),
            (f"s3://{s3_bucket}/t/p=1/sub/b.parquet", 2),
            (f"s3://{s3_bucket}/t/p=1/_SUCCESS", 0),
        }
    # A URI naming one object lists that object; a missing prefix lists nothing.
    [single] = fs.list_files(f"s3://{s3_bucket}/t/p=10/c.parquet")
    assert (single.uri, single.size) == (f"s3://{s3_bucket}/t/p=10/c.parquet", 3)
    assert list(fs.list_files(f"s3://{s3_bucket}/t/p=2")) == []
    head = s3_client.head_object(Bucket=s3_bucket, Key="t/p=1/a.parquet")
    [status] = [s for s in fs.list_files(f"s3a://{s3_bucket}/t/p=1") if s.uri.endswith("a.parquet")]
    assert status.uri == f"s3a://{s3_bucket}/t/p=1/a.parquet"  # the listed root's spelling is kept
    assert status.mtime == head["LastModified"].timestamp()


def test_list_pages_past_1000_keys(fs: S3FileSystem, s3_client: Any, s3_bucket: str) -> None:
    keys = [f"big/f{i:05d}" for i in range(1050)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: put(s3_client, s3_bucket, key, b"x"), keys))
    listed = [s.uri for s in fs.list_files(f"s3://{s3_bucket}/big")]
    assert sorted(listed) == [f"s3://{s3_bucket}/{key}" for key in keys]


def test_exists_for_objects_prefixes_versions_and_buckets(
    fs: S3FileSystem, s3_client: Any, versioned_bucket: str
) -> None:
    first = put(s3_client, versioned_bucket, "d/f", b"v1")["VersionId"]
    s3_client.delete_object(Bucket=versioned_bucket, Key="d/f")  # a delete marker on top
    base = f"s3://{versioned_bucket}"
    assert not fs.exists(f"{base}/d/f")
    assert fs.exists(versioned_reference(f"{base}/d/f", first))  # the old version is still there
    assert not fs.exists(versioned_reference(f"{base}/d/f", "no-such-version"))
    put(s3_client, versioned_bucket, "d/g", b"x")
    assert fs.exists(f"{base}/d/g") and fs.exists(f"{base}/d") and fs.exists(f"{base}/d/")
    assert not fs.exists(f"{base}/d/g/h") and not fs.exists(f"{base}/e")
    assert fs.exists(base) and not fs.exists("s3://no-such-bucket-here")
    assert not fs.exists("s3://no-such-bucket-here/k")


def test_checksum_uses_the_stored_crc32c_without_download(
    fs: S3FileSystem, s3_client: Any, s3_bucket: str
) -> None:
    data = b"parquet bytes " * 1000
    put(s3_client, s3_bucket, "t/with-crc", data, ChecksumAlgorithm="CRC32C")
    with counting(fs.client) as calls:
        token = fs.checksum(f"s3://{s3_bucket}/t/with-crc")
    assert token == crc_token(data)
    # No GetObject: nothing was downloaded. An answer without a version id asks once per bucket whether
    # the bucket keeps versions (then every whole answer would carry one).
    assert calls == Counter({"HeadObject": 1, "GetBucketVersioning": 1})
    with counting(fs.client) as calls:
        assert fs.checksum(f"s3://{s3_bucket}/t/with-crc") == token
    assert calls == Counter({"HeadObject": 1})


def test_checksum_streams_objects_without_a_full_object_crc32c(
    fs: S3FileSystem, s3_client: Any, s3_bucket: str
) -> None:
    small = b"written by another client with its default CRC32"
    put(s3_client, s3_bucket, "t/crc32", small, ChecksumAlgorithm="CRC32")
    # A multipart object with a COMPOSITE CRC32C: a CRC of part CRCs, not the file's CRC.
    parts = [b"a" * (5 * MiB), b"tail"]
    upload = s3_client.create_multipart_upload(
        Bucket=s3_bucket, Key="t/composite", ChecksumAlgorithm="CRC32C", ChecksumType="COMPOSITE"
    )
    done = []
    for number, body in enumerate(parts, 1):
        part = s3_client.upload_part(
            Bucket=s3_bucket,
            Key="t/composite",
            UploadId=upload["UploadId"],
            PartNumber=number,
            Body=body,
            ChecksumAlgorithm="CRC32C",
        )
        done.append({"PartNumber": number, "ETag": part["ETag"], "ChecksumCRC32C": part["ChecksumCRC32C"]})
    s3_client.complete_multipart_upload(
        Bucket=s3_bucket,
        Key="t/composite",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": done},
        ChecksumType="COMPOSITE",
    )
    for key, data in (("t/crc32", small), ("t/composite", b"".join(parts))):
        with counting(fs.client) as calls:
            assert fs.checksum(f"s3://{s3_bucket}/{key}") == crc_token(data)
        # (and the bucket's versioning, asked once: this unversioned bucket's answers carry no version id)
        assert calls - Counter({"GetBucketVersioning": 1}) == Counter({"HeadObject": 1, "GetObject": 1})


def test_write_bytes_and_write_stream_store_a_full_object_crc32c(s3_env: S3Server, s3_client: Any) -> None:
    bucket = create_bucket(s3_client, new_bucket_name("w"), versioned=False)
    fs = S3FileSystem(upload_part_size=5 * MiB)
    small, large = b"tiny", bytes(range(256)) * (48 * 1024)  # 12 MiB: three parts
    fs.write_bytes(f"s3://{bucket}/small", small)
    with counting(fs.client) as calls:
        token = fs.write_stream(f"s3://{bucket}/large", io.BytesIO(large))
    assert token == crc_token(large)
    assert calls["UploadPart"] == 3 and calls["CompleteMultipartUpload"] == 1
    for key, data in (("small", small), ("large", large)):
        head = s3_client.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        expected_b64 = base64.b64encode(google_crc32c.Checksum(data).digest()).decode()
        assert head["ChecksumCRC32C"] == expected_b64
        assert head.get("ChecksumType", "FULL_OBJECT") == "FULL_OBJECT"
        assert s3_client.get_object(Bucket=bucket, Key=key)["Body"].read() == data
        with counting(fs.client) as calls:
            assert fs.checksum(f"s3://{bucket}/{key}") == crc_token(data)
        assert "GetObject" not in calls
    with pytest.raises(StorageError, match="names no object key"):
        fs.write_bytes(f"s3://{bucket}/dir/", b"x")


def test_move_is_a_server_side_copy_then_delete(fs: S3FileSystem, s3_client: Any, s3_bucket: str) -> None:
    data = b"move me" * 100
    put(s3_client, s3_bucket, "wh/t/f", data)  # no CRC32C: the copy gets one all the same
    src, dst = f"s3://{s3_bucket}/wh/t/f", f"s3://{s3_bucket}/cm/f_x"
    with counting(fs.client) as calls:
        fs.move(src, dst)
    assert calls["CopyObject"] == 1 and calls["DeleteObject"] == 1
    assert "GetObject" not in calls and "PutObject" not in calls  # no bytes through this process
    assert not fs.exists(src)
    assert s3_client.get_object(Bucket=s3_bucket, Key="cm/f_x")["Body"].read() == data
    head = s3_client.head_object(Bucket=s3_bucket, Key="cm/f_x", ChecksumMode="ENABLED")
    assert token_from_s3_crc32c(head["ChecksumCRC32C"], head["ContentLength"]) == crc_token(data)
    put(s3_client, s3_bucket, "wh/t/g", b"other")
    with pytest.raises(StorageError, match="target exists"):
        fs.move(f"s3://{s3_bucket}/wh/t/g", dst)
    assert s3_client.get_object(Bucket=s3_bucket, Key="cm/f_x")["Body"].read() == data


def test_copy_reads_an_exact_version_and_reports_the_copys_crc(
    fs: S3FileSystem, s3_client: Any, versioned_bucket: str
) -> None:
    old = put(s3_client, versioned_bucket, "t/f", b"old bytes")["VersionId"]
    put(s3_client, versioned_bucket, "t/f", b"new bytes, longer")
    reference = versioned_reference(f"s3://{versioned_bucket}/t/f", old)
    with fs.open_read(reference) as stream:
        assert stream.read() == b"old bytes"
    assert fs.checksum(reference) == crc_token(b"old bytes")
    with counting(fs.client) as calls:
        token = fs.copy(reference, f"s3://{versioned_bucket}/copy/f")
    assert token == crc_token(b"old bytes")
    assert "GetObject" not in calls
    assert s3_client.get_object(Bucket=versioned_bucket, Key="copy/f")["Body"].read() == b"old bytes"


def test_large_copies_are_multipart_server_side(s3_env: S3Server, s3_client: Any) -> None:
    bucket = create_bucket(s3_client, new_bucket_name("mp"), versioned=True)
    fs = S3FileSystem(copy_multipart_threshold=8 * MiB, copy_part_size=5 * MiB)
    data = bytes(range(251)) * (50 * 1024)  # ~12.3 MiB: parts of 5, 5 and 2.3 MiB
    put(s3_client, bucket, "src", data, ChecksumAlgorithm="CRC32C")
    with counting(fs.client) as calls:
        token = fs.copy(f"s3://{bucket}/src", f"s3://{bucket}/dst")
    assert calls["UploadPartCopy"] == 3 and calls["CopyObject"] == 0 and "GetObject" not in calls
    assert token == crc_token(data)
    assert s3_client.get_object(Bucket=bucket, Key="dst")["Body"].read() == data
    head = s3_client.head_object(Bucket=bucket, Key="dst", ChecksumMode="ENABLED")
    assert head["ChecksumType"] == "FULL_OBJECT"  # so later checksums of the copy are free too


def test_delete_keeps_versions_and_refuses_to_delete_one(
    fs: S3FileSystem, s3_client: Any, versioned_bucket: str
) -> None:
    version = put(s3_client, versioned_bucket, "t/f", b"keep me")["VersionId"]
    fs.delete(f"s3://{versioned_bucket}/t/f")
    fs.delete(f"s3://{versioned_bucket}/t/f")  # missing is not an error
    assert not fs.exists(f"s3://{versioned_bucket}/t/f")
    reference = versioned_reference(f"s3://{versioned_bucket}/t/f", version)
    with fs.open_read(reference) as stream:
        assert stream.read() == b"keep me"
    with pytest.raises(StorageError, match="refusing to delete version"):
        fs.delete(reference)
    with pytest.raises(StorageError, match="no such object"):
        fs.open_read(f"s3://{versioned_bucket}/t/f")


def test_touch_renews_last_modified_by_a_copy_in_place(
    fs: S3FileSystem, s3_client: Any, versioned_bucket: str
) -> None:
    data = b"recycled content"
    first = put(s3_client, versioned_bucket, "cm/f", data, ChecksumAlgorithm="CRC32C", Metadata={"a": "1"})
    started = time.time()
    fs.touch(f"s3://{versioned_bucket}/cm/f", started)
    head = s3_client.head_object(Bucket=versioned_bucket, Key="cm/f", ChecksumMode="ENABLED")
    # The object was rewritten (a new version, dated at or after the touch began; S3 dates to the
    # second), with content, checksum and metadata kept and the requested time recorded.
    assert head["VersionId"] != first["VersionId"]
    assert head["LastModified"].timestamp() >= int(started)
    assert head["Metadata"] == {"a": "1", "hmsrepl-touched-at": f"{started:.3f}"}
    assert head["ChecksumCRC32C"] == first["ChecksumCRC32C"]
    assert s3_client.get_object(Bucket=versioned_bucket, Key="cm/f")["Body"].read() == data
    [status] = fs.list_files(f"s3://{versioned_bucket}/cm")
    assert status.mtime == head["LastModified"].timestamp()  # what cmroot cleanup compares


def test_makedirs_is_a_no_op_and_delete_tree_removes_a_prefix(
    fs: S3FileSystem, s3_client: Any, s3_bucket: str
) -> None:
    fs.makedirs(f"s3://{s3_bucket}/db.db/t")
    assert s3_client.list_objects_v2(Bucket=s3_bucket)["KeyCount"] == 0
    assert not fs.exists(f"s3://{s3_bucket}/db.db/t")
    for key in ("db.db/t/p=1/a", "db.db/t/p=1/b/c", "db.db/t/p=1/", "db.db/t/p=10/keep", "db.db/t/p=1x"):
        put(s3_client, s3_bucket, key, b"x")
    fs.delete_tree(f"s3://{s3_bucket}/db.db/t/p=1")
    fs.delete_tree(f"s3://{s3_bucket}/db.db/t/p=1")  # missing is not an error
    left = [obj["Key"] for obj in s3_client.list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert sorted(left) == ["db.db/t/p=10/keep", "db.db/t/p=1x"]
    with pytest.raises(StorageError, match="refusing to delete"):
        fs.delete_tree(f"s3://{s3_bucket}")


def test_client_retries_throttling_with_botocores_adaptive_mode(
    s3_env: S3Server, s3_client: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = S3FileSystem()
    assert fs.client.meta.config.retries == {"mode": "adaptive", "total_max_attempts": 10}
    put(s3_client, s3_bucket, "f", b"payload", ChecksumAlgorithm="CRC32C")
    # Through a proxy that answers the first two requests with 503 SlowDown, as S3 does under load.
    with throttling_proxy(s3_env.endpoint_url, throttled_requests=2) as proxy:
        throttled = S3FileSystem(endpoint_url=proxy.endpoint_url)
        assert throttled.checksum(f"s3://{s3_bucket}/f") == crc_token(b"payload")
    assert proxy.throttled == 2 and proxy.forwarded == 2  # HeadObject, and GetBucketVersioning once
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")  # the user's AWS configuration wins
    assert S3FileSystem().client.meta.config.retries["mode"] == "standard"


def test_copy_file_across_stores_and_verification(
    fs: S3FileSystem, s3_client: Any, s3_bucket: str, s3_env: S3Server, tmp_path: Path
) -> None:
    data = b"cross-store bytes" * 999
    local = tmp_path / "src.bin"
    local.write_bytes(data)
    # local -> S3: streamed up, with a CRC32C S3 keeps.
    assert copy_file(str(local), f"s3://{s3_bucket}/up/f") == crc_token(data)
    assert fs.checksum(f"s3://{s3_bucket}/up/f") == crc_token(data)
    # S3 -> local: streamed down.
    assert copy_file(f"s3://{s3_bucket}/up/f", str(tmp_path / "down.bin")) == crc_token(data)
    assert (tmp_path / "down.bin").read_bytes() == data
    # S3 -> S3 in one store: server-side, verified by the CRC S3 computed over the copy.
    with counting(fs.client) as calls:
        token = copy_file(f"s3://{s3_bucket}/up/f", f"s3://{s3_bucket}/same/f", crc_token(data))
    assert token == crc_token(data)
    assert calls["CopyObject"] == 1 and "GetObject" not in calls and "HeadObject" not in calls
    # S3 -> another endpoint (a second store registered for one bucket): streamed through us.
    other = S3FileSystem(endpoint_url=s3_env.endpoint_url.replace("127.0.0.1", "localhost"))
    register_filesystem(f"s3://{s3_bucket}/other-store", other)
    try:
        with counting(fs.client) as src_calls, counting(other.client) as dst_calls:
            copy_file(f"s3://{s3_bucket}/up/f", f"s3://{s3_bucket}/other-store/f")
        assert src_calls["GetObject"] == 1 and "CopyObject" not in src_calls
        assert dst_calls["PutObject"] == 1
    finally:
        unregister_filesystem(f"s3://{s3_bucket}/other-store")
    # A copy that does not match the expected checksum is removed and reported.
    with pytest.raises(StorageError, match="expected crc32c-00000000"):
        copy_file(f"s3://{s3_bucket}/up/f", f"s3://{s3_bucket}/bad/f", f"crc32c-00000000-{len(data)}")
    assert not fs.exists(f"s3://{s3_bucket}/bad/f")
    # move_file across stores: the source goes only after the copy is complete.
    move_file(f"s3://{s3_bucket}/up/f", str(tmp_path / "moved.bin"))
    assert (tmp_path / "moved.bin").read_bytes() == data and not fs.exists(f"s3://{s3_bucket}/up/f")


def _copy_batch(tasks: list[tuple[str, str]]) -> list[str]:
    """What a Spark task runs: a plain function of its rows, in a fresh process."""
    return copy_files(tasks, threads=4)


def test_copy_files_runs_in_fresh_processes_like_spark_tasks(
    fs: S3FileSystem, s3_client: Any, s3_bucket: str
) -> None:
    payloads = {f"src/f{i}": f"file {i}".encode() * (i + 1) for i in range(8)}
    for key, data in payloads.items():
        put(s3_client, s3_bucket, key, data)
    tasks = [(f"s3://{s3_bucket}/{key}", f"s3://{s3_bucket}/dst/{key}") for key in payloads]
    assert pickle.loads(pickle.dumps(copy_files)) is copy_files  # shipped by reference
    assert pickle.loads(pickle.dumps(fs)).client is not None  # a store pickles without its client
    # 'spawn' gives processes that share nothing with this one, as Spark's Python workers.
    with ProcessPoolExecutor(max_workers=2, mp_context=get_context("spawn")) as pool:
        tokens = [t for batch in pool.map(_copy_batch, [tasks[:4], tasks[4:]]) for t in batch]
    assert tokens == [crc_token(data) for data in payloads.values()]
    for key, data in payloads.items():
        assert s3_client.get_object(Bucket=s3_bucket, Key=f"dst/{key}")["Body"].read() == data
