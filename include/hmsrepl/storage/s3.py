"""S3 and S3-compatible stores through boto3: ``s3://bucket/key`` (``s3a://`` and ``s3n://`` too).

Configuration is the standard AWS one and nothing else: credentials, region and endpoint come from the
environment or a profile (``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3`` are honoured by boto3 itself), so
the same code talks to AWS, MinIO, Ceph or a test server. A second store (a replica on another endpoint) is
an ``S3FileSystem(profile_name=...)`` registered for its bucket with ``storage.base.register_filesystem``.

How S3 differs from a file system, and what this module does about it:

- *Directories* do not exist. A URI names a key prefix: ``list_files('s3://b/t/p=1')`` lists keys under
  ``t/p=1/`` (never ``t/p=10/...``), or the object ``t/p=1`` itself when nothing is below it; zero-byte
  ``dir/`` marker objects are not files. ``makedirs`` does nothing; ``exists`` is true for an object or for
  a prefix with objects below it; ``delete_tree`` deletes every key below the prefix.
- *Checksums* come from the store when it keeps a full-object CRC32C (one HEAD, no download); every upload
  and copy made here asks S3 to keep one (``ChecksumAlgorithm='CRC32C'``, ``ChecksumType='FULL_OBJECT'``
  for multipart). Objects written by others without one are streamed and hashed (see ``storage.checksum``).
- *Copies* within one store are server-side (CopyObject, or UploadPartCopy in parallel parts above
  ``copy_multipart_threshold``); no bytes pass through this process and S3 reports the copy's CRC, which
  verifies it end to end. Across stores ``storage.base.copy_file`` streams.
- *Moves* are copy + delete (S3 has no rename). A move is not atomic: a crash between the two leaves both,
  which the change manager tolerates (recycling skips files already in cmroot).
- *Versions*: in a bucket with versioning on, ``identify`` returns the version id read together with the
  checksum, and read methods accept a versioned reference ``s3://<versionid>@bucket/key``
  (``formats.file_uri``) to read that exact version after the key was overwritten or deleted. ``delete``
  of a plain key only adds a delete marker there, so versions that events name stay readable until the
  bucket's lifecycle rules expire noncurrent versions; deleting a *version* is refused.
- *Modification times* cannot be set: ``LastModified`` is the server's clock at the last write. cmroot
  retention counts from it; ``touch`` restarts it by copying the object onto itself with
  ``MetadataDirective='REPLACE'`` (recording the requested time as ``x-amz-meta-hmsrepl-touched-at``), the
  only way S3 offers to renew ``LastModified``. Since listings return ``LastModified``, the cleaner needs no
  request per file, and an S3 lifecycle expiration rule on the cmroot prefix honours the same clock. In a
  versioned cmroot bucket each touch or delete leaves a noncurrent version: add a
  ``NoncurrentVersionExpiration`` rule for the cmroot prefix so that space is freed.
- *Throttling* (503 SlowDown) and transient errors are retried by botocore's ``adaptive`` retry mode (up to
  10 attempts with exponential backoff and client-side rate limiting) unless the AWS configuration sets
  ``retry_mode``/``AWS_RETRY_MODE`` itself.
- *Streamed bodies* are outside botocore's retries: once GetObject has answered, a connection reset or a
  body cut short surfaces in the middle of the caller's reads (``ResponseStreamingError``, ``ProtocolError``,
  ``IncompleteReadError``). Every body this module streams is a ``ResumingBody``: on such an error it issues
  a ranged GET from the offset already read, pinned to the same object (its VersionId, or its ETag with
  ``If-Match`` in unversioned buckets, so a key overwritten meanwhile fails instead of mixing two objects),
  with bounded attempts and exponential backoff per read (``STREAM_ATTEMPTS``).
- *Answers cut in their headers* arrive without complaint (``http.client`` ends the headers where the
  connection ends): a GetObject answer without its size is asked again (``_get_sized``), and a HeadObject
  answer is asked again while it may be cut (a header S3 always sends is missing, no version id in a
  versioned bucket, or its last header is one read here) until two doubted answers agree (``_head_doubt``),
  so a recorded identity never carries a shortened size, ETag or version id.
- *Processes*: boto3 clients are thread-safe but must not cross a fork. Each process (a Spark executor's
  Python worker included) creates its own client on first use; instances pickle without their client.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import io
import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO, cast

import boto3
import botocore.session
import google_crc32c
import urllib3.exceptions
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential, wait_random

from hmsrepl.exceptions import StorageError
from hmsrepl.formats.file_uri import split_versioned_reference
from hmsrepl.storage.base import S3_SCHEMES, FileIdentity, FileStatus, FileSystem
from hmsrepl.storage.checksum import (
    checksum_bytes,
    checksum_stream,
    checksum_token,
    s3_crc32c_from_token,
    token_from_s3_crc32c,
)

MiB = 1024 * 1024
DEFAULT_COPY_MULTIPART_THRESHOLD = 256 * MiB  # below it one CopyObject request copies the whole object
DEFAULT_COPY_PART_SIZE = 128 * MiB
DEFAULT_UPLOAD_PART_SIZE = (
    16 * MiB
)  # streamed uploads: parts of this size, at most UPLOAD_PARTS_IN_FLIGHT held
UPLOAD_PARTS_IN_FLIGHT = 4
COPY_PARTS_IN_FLIGHT = 8
MAX_SINGLE_COPY = 5 * 1024 * MiB  # S3's limit for CopyObject
DELETE_BATCH = 1000  # S3's limit for DeleteObjects
RETRY_MODE = "adaptive"
RETRY_MAX_ATTEMPTS = 10
TOUCH_METADATA_KEY = "hmsrepl-touched-at"
STREAM_ATTEMPTS = 8  # per read: the first try and up to 7 ranged re-requests, with backoff between them
STREAM_BACKOFF_SECONDS = (0.05, 2.0)  # first wait, longest wait
STREAM_ERRORS: tuple[type[BaseException], ...] = (
    ResponseStreamingError,
    IncompleteReadError,
    ReadTimeoutError,
    ConnectionClosedError,
    urllib3.exceptions.ProtocolError,
    urllib3.exceptions.ReadTimeoutError,
    http.client.IncompleteRead,
    ConnectionError,  # ConnectionResetError and friends, raised by the socket itself
    TimeoutError,
)
"""Errors of a response body that a new request for the rest of the object may cure."""
log = logging.getLogger(__name__)
NOT_FOUND_CODES = {"404", "NoSuchKey", "NotFound", "NoSuchVersion", "405", "MethodNotAllowed"}


def parse_s3_uri(uri: str) -> tuple[str, str, str | None]:
    """(bucket, key, version id or None) of ``s3://[version@]bucket/key``; the key is never URL-decoded."""
    plain, version = split_versioned_reference(uri)
    scheme, sep, rest = plain.partition("://")
    if not sep or scheme.lower() not in S3_SCHEMES:
        raise StorageError(f"'{uri}' is not an S3 URI; expected s3://bucket/key")
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise StorageError(f"'{uri}' names no bucket; expected s3://bucket/key")
    return bucket, key, version


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _is_not_found(exc: ClientError) -> bool:
    status = str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return _code(exc) in NOT_FOUND_CODES or status in ("404", "405")


def _real_version(version_id: str | None) -> str | None:
    """S3 reports ``null`` for objects written while versioning was off or suspended: no pinnable version."""
    return version_id if version_id and version_id != "null" else None


def _is_multipart_etag(etag: str) -> bool:
    return "-" in etag.strip('"')


def stored_token(head: dict[str, Any]) -> str | None:
    """Our checksum token from a HEAD response when S3 keeps a full-object CRC32C; None when it does not.

    A composite checksum (``ChecksumType: COMPOSITE``, or a multipart object whose store does not report the
    type) is a CRC of part CRCs, not the file's CRC, so it is not used.
    """
    value = head.get("ChecksumCRC32C")
    if not value:
        return None
    checksum_type = head.get("ChecksumType")
    if checksum_type == "COMPOSITE" or (checksum_type is None and _is_multipart_etag(head.get("ETag", ""))):
        return None
    try:
        return token_from_s3_crc32c(value, int(head["ContentLength"]))
    except ValueError:
        return None


#: The HEAD answer's headers this module reads: none of them may be the answer's last header unconfirmed.
USED_HEAD_HEADERS = frozenset(
    {
        "content-length",
        "etag",
        "last-modified",
        "x-amz-version-id",
        "x-amz-checksum-crc32c",
        "x-amz-checksum-type",
    }
)


def _head_facts(head: dict[str, Any]) -> tuple[Any, ...]:
    """What this module reads from a HEAD answer: two answers alike in these describe the same object."""
    return tuple(
        head.get(name)
        for name in ("ContentLength", "ETag", "LastModified", "VersionId", "ChecksumCRC32C", "ChecksumType")
    )


def _head_doubt(head: dict[str, Any], versioned: Callable[[], bool]) -> str | None:
    """Why a HEAD answer may have been cut in its headers, or None when nothing suggests it.

    ``http.client`` ends an answer's headers where the connection ends, without complaint: an answer cut in
    its headers arrives with the headers after the cut missing and the last one silently shortened. So an
    answer is doubted when a header S3 always sends is missing, when its version id is missing in a
    versioned bucket, or when its last header is one that is read here (it may be shortened). A shortened
    date does not parse at all (botocore raises ValueError) and a shortened CRC32C does not decode.
    """
    if head.get("ContentLength") is None or head.get("LastModified") is None or not head.get("ETag"):
        return "its size, time or ETag is missing"
    if not head.get("VersionId") and versioned():
        return "its version id is missing"
    last = next(reversed(head.get("ResponseMetadata", {}).get("HTTPHeaders") or {"": ""}))
    if last in USED_HEAD_HEADERS:
        return f"it ends with {last}, which may be shortened"
    return None


def _user_sets_retries(session: botocore.session.Session) -> bool:
    if os.environ.get("AWS_RETRY_MODE") or os.environ.get("AWS_MAX_ATTEMPTS"):
        return True
    try:
        scoped = session.get_scoped_config()
    except BotoCoreError:
        return False
    return "retry_mode" in scoped or "max_attempts" in scoped


class S3FileSystem(FileSystem):
    """One S3 store (endpoint + credentials), by default the one the standard AWS configuration names."""

    io_parallelism = 16
    move_keeps_mtime = False

    def __init__(
        self,
        *,
        profile_name: str | None = None,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        copy_multipart_threshold: int = DEFAULT_COPY_MULTIPART_THRESHOLD,
        copy_part_size: int = DEFAULT_COPY_PART_SIZE,
        upload_part_size: int = DEFAULT_UPLOAD_PART_SIZE,
        max_pool_connections: int = 64,
    ) -> None:
        if copy_part_size < 5 * MiB or upload_part_size < 5 * MiB:
            raise ValueError("S3 multipart parts must be at least 5 MiB")
        self.profile_name = profile_name
        self.endpoint_url = endpoint_url
        self.region_name = region_name
        self.copy_multipart_threshold = min(copy_multipart_threshold, MAX_SINGLE_COPY)
        self.copy_part_size = copy_part_size
        self.upload_part_size = upload_part_size
        self.max_pool_connections = max_pool_connections
        self._client: tuple[int, Any] | None = None
        self._lock = threading.Lock()
        self._versioning: dict[str, bool] = {}  # bucket -> whether HEAD answers there carry a version id

    # -- client per process ----------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        """This process's boto3 S3 client (created on first use; a forked child makes its own)."""
        current = self._client
        pid = os.getpid()
        if current is not None and current[0] == pid:
            return current[1]
        with self._lock:
            if self._client is None or self._client[0] != pid:
                self._client = (pid, self._make_client())
            return self._client[1]

    def _make_client(self) -> Any:
        core = botocore.session.Session(profile=self.profile_name)
        session = boto3.session.Session(botocore_session=core, region_name=self.region_name)
        options: dict[str, Any] = {"max_pool_connections": self.max_pool_connections, "tcp_keepalive": True}
        if not _user_sets_retries(core):
            options["retries"] = {"mode": RETRY_MODE, "total_max_attempts": RETRY_MAX_ATTEMPTS}
        return session.client("s3", endpoint_url=self.endpoint_url, config=Config(**options))

    def same_store(self, other: FileSystem) -> bool:
        return (
            isinstance(other, S3FileSystem)
            and self.client.meta.endpoint_url == other.client.meta.endpoint_url
            and self.profile_name == other.profile_name
        )

    def _call(self, operation: str, uri: str, **kwargs: Any) -> Any:
        """One S3 request; failures become StorageError naming the URI (NotFound is left to callers)."""
        try:
            return getattr(self.client, operation)(**kwargs)
        except ClientError as exc:
            if _is_not_found(exc):
                raise
            raise StorageError(f"S3 {operation} on '{uri}' failed: {_code(exc)}: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"S3 {operation} on '{uri}' failed: {exc}") from exc

    def _head(self, uri: str) -> dict[str, Any] | None:
        """HeadObject, asked again while its answer may be cut in its headers (``_head_doubt``) until two
        doubted answers agree."""
        bucket, key, version = parse_s3_uri(uri)
        if not key:
            return None
        args: dict[str, Any] = {"Bucket": bucket, "Key": key, "ChecksumMode": "ENABLED"}
        if version:
            args["VersionId"] = version
        confirmed: tuple[Any, ...] | None = None  # the previous doubted answer's facts
        for _ in range(STREAM_ATTEMPTS):
            try:
                head: dict[str, Any] = self.client.head_object(**args)
            except ClientError as exc:
                if _is_not_found(exc):
                    return None
                if version and _code(exc) in ("400", "InvalidArgument", "BadRequest"):
                    return None  # S3 answers a malformed version id with 400: no such version either
                raise StorageError(f"S3 head_object on '{uri}' failed: {_code(exc)}: {exc}") from exc
            except ValueError:  # a header cut inside its value (a date, a number) does not parse
                log.info("S3 HEAD answer for '%s' was cut in its headers; asking again", uri)
                continue
            except BotoCoreError as exc:
                raise StorageError(f"S3 head_object on '{uri}' failed: {exc}") from exc
            doubt = _head_doubt(head, lambda: self._versioned(bucket))
            if doubt is None:
                return head
            facts = _head_facts(head)
            if facts == confirmed and None not in facts[:3]:
                return head  # two answers alike: the store answers this way (e.g. no id for a null version)
            confirmed = facts
            log.info(
                "S3 HEAD answer for '%s' may have been cut in its headers (%s); asking again", uri, doubt
            )
        raise StorageError(
            f"S3 head_object on '{uri}' failed: {STREAM_ATTEMPTS} answers came cut in their headers; the "
            "store or the network keeps cutting the connection: retry later"
        )

    def _versioned(self, bucket: str) -> bool:
        """Whether ``bucket`` has (or had) versioning on, so that every HEAD answer names a version.

        Asked once per bucket and process, and only when an answer came without a version id. Without the
        permission to ask (``s3:GetBucketVersioning``) the bucket may be versioned: every answer without a
        version id is then asked again until two agree (one more HEAD per object in an unversioned bucket),
        rather than trusting an answer cut before its version id. An answer lost on the way counts the same
        and is not remembered.
        """
        known = self._versioning.get(bucket)
        if known is not None:
            return known
        try:
            status = self.client.get_bucket_versioning(Bucket=bucket).get("Status")
        except ClientError as exc:
            log.info(
                "cannot tell whether bucket '%s' is versioned (%s): HEAD answers are confirmed",
                bucket,
                _code(exc),
            )
            known = True
        except (BotoCoreError, ValueError):
            return True
        else:
            known = status in ("Enabled", "Suspended")
        self._versioning[bucket] = known
        return known

    def _require_head(self, uri: str) -> dict[str, Any]:
        head = self._head(uri)
        if head is None:
            raise StorageError(f"cannot read '{uri}': no such object (or version)")
        return head

    # -- listing and lookups ---------------------------------------------------------------------------
    def list_files(self, uri: str) -> Iterator[FileStatus]:
        bucket, key, version = parse_s3_uri(uri)
        if version:
            raise StorageError(f"cannot list '{uri}': a versioned reference names one object, not a prefix")
        root = uri.rstrip("/")
        prefix = key.rstrip("/") + "/" if key.strip("/") else ""
        found = False
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
                for obj in page.get("Contents", []):
                    name = obj["Key"]
                    if name.endswith("/"):  # a "directory" marker, not a file
                        continue
                    found = True
                    yield FileStatus(
                        f"{root}/{name[len(prefix) :]}",
                        int(obj["Size"]),
                        obj["LastModified"].timestamp(),
                        obj.get("ETag"),
                    )
        except ClientError as exc:
            raise StorageError(f"cannot list '{uri}': {_code(exc)}: {exc}") from exc
        if not found and key.strip("/"):
            single = self.status(f"s3://{bucket}/{key.rstrip('/')}")
            if single is not None:
                yield dataclasses.replace(single, uri=root)

    def status(self, uri: str) -> FileStatus | None:
        """One HEAD (a listing would first ask for keys below ``uri/``)."""
        head = self._head(uri)
        if head is None:
            return None
        return FileStatus(uri, int(head["ContentLength"]), head["LastModified"].timestamp(), head.get("ETag"))

    def exists(self, uri: str) -> bool:
        bucket, key, version = parse_s3_uri(uri)
        if not key.strip("/"):
            try:
                self.client.head_bucket(Bucket=bucket)
                return True
            except ClientError as exc:
                if _is_not_found(exc) or _code(exc) == "NoSuchBucket":
                    return False
                raise StorageError(f"cannot check bucket '{bucket}': {_code(exc)}: {exc}") from exc
        if self._head(uri) is not None:
            return True
        if version:
            return False
        try:  # a "directory": some object below the prefix
            listing = self._call(
                "list_objects_v2", uri, Bucket=bucket, Prefix=key.rstrip("/") + "/", MaxKeys=1
            )
        except ClientError:  # NoSuchBucket
            return False
        return int(listing.get("KeyCount", 0)) > 0

    def checksum(self, uri: str) -> str:
        return self.identify(uri).checksum

    def identify(self, uri: str) -> FileIdentity:
        """One HEAD gives the version and, for objects with a stored full-object CRC32C, the checksum.

        Otherwise the object is streamed and hashed, pinned to the HEAD's version (or ETag in unversioned
        buckets) so the checksum and the version id always describe the same bytes.
        """
        bucket, key, version = parse_s3_uri(uri)
        head = self._require_head(uri)
        version = version or _real_version(head.get("VersionId"))
        token = stored_token(head)
        if token is None:
            args: dict[str, Any] = {"Bucket": bucket, "Key": key}
            if version:
                args["VersionId"] = version
            else:
                args["IfMatch"] = head["ETag"]
            response = self._get_sized(
                uri, args, f"'{uri}' changed or vanished while being checksummed; retry"
            )
            with ResumingBody(self, uri, args, response) as body:
                token = checksum_stream(body)
        return FileIdentity(token, version)

    def open_read(self, uri: str) -> BinaryIO:
        bucket, key, version = parse_s3_uri(uri)
        args: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if version:
            args["VersionId"] = version
        response = self._get_sized(uri, args, f"cannot read '{uri}': no such object (or version)")
        return cast(BinaryIO, ResumingBody(self, uri, args, response))

    def _get_sized(self, uri: str, args: dict[str, Any], missing: str) -> dict[str, Any]:
        """GetObject for a streamed read, asked again while the answer comes without its Content-Length.

        S3 always sends it; an answer without it had its headers cut (``http.client`` ends the headers at
        the connection's end without complaint), and its body could not be told from an empty object's.
        ``missing``: the error when the object (or version) is not there.
        """
        for _ in range(STREAM_ATTEMPTS):
            try:
                response: dict[str, Any] = self._call("get_object", uri, **args)
            except ClientError as exc:
                raise StorageError(missing) from exc
            except ValueError:  # a header cut inside its value (a date, a number) does not parse
                log.info("S3 answer for '%s' was cut in its headers; asking again", uri)
                continue
            if response.get("ContentLength") is not None:
                return response
            log.info("S3 answer for '%s' came without its size (cut in its headers); asking again", uri)
            with contextlib.suppress(Exception):
                response["Body"].close()
        raise StorageError(
            f"reading '{uri}' failed: {STREAM_ATTEMPTS} answers came cut in their headers; the store or the "
            "network keeps cutting the connection: retry later"
        )

    # -- writes ----------------------------------------------------------------------------------------
    def _plain_target(self, uri: str) -> tuple[str, str]:
        bucket, key, version = parse_s3_uri(uri)
        if version:
            raise StorageError(f"cannot write '{uri}': a versioned reference names an existing version")
        if not key or key.endswith("/"):
            raise StorageError(f"cannot write '{uri}': it names no object key")
        return bucket, key

    def write_bytes(self, uri: str, data: bytes) -> None:
        """One PutObject (atomic on S3), carrying our CRC32C so S3 verifies the upload and keeps the value."""
        bucket, key = self._plain_target(uri)
        self._call(
            "put_object",
            uri,
            Bucket=bucket,
            Key=key,
            Body=data,
            ChecksumAlgorithm="CRC32C",
            ChecksumCRC32C=s3_crc32c_from_token(checksum_bytes(data)),
        )

    def write_stream(self, uri: str, stream: BinaryIO) -> str:
        """Upload from a stream: one PutObject when small, else a FULL_OBJECT-CRC32C multipart upload.

        The CRC is computed while reading and sent with the completion, so S3 rejects a damaged upload; at
        most ``UPLOAD_PARTS_IN_FLIGHT`` parts are held in memory.
        """
        bucket, key = self._plain_target(uri)
        first = _read_full(stream, self.upload_part_size)
        if len(first) < self.upload_part_size:
            self.write_bytes(uri, first)
            return checksum_bytes(first)
        upload_id = self._call(
            "create_multipart_upload",
            uri,
            Bucket=bucket,
            Key=key,
            ChecksumAlgorithm="CRC32C",
            ChecksumType="FULL_OBJECT",
        )["UploadId"]
        try:
            crc = google_crc32c.Checksum()
            size = 0
            pending: list[Future[dict[str, Any]]] = []
            with ThreadPoolExecutor(max_workers=UPLOAD_PARTS_IN_FLIGHT) as pool:
                chunk, number = first, 1
                while chunk:
                    crc.update(chunk)
                    size += len(chunk)
                    pending.append(pool.submit(self._upload_part, uri, bucket, key, upload_id, number, chunk))
                    in_flight = [f for f in pending if not f.done()]
                    if len(in_flight) >= UPLOAD_PARTS_IN_FLIGHT:
                        in_flight[0].result()
                    chunk, number = _read_full(stream, self.upload_part_size), number + 1
                parts = [f.result() for f in pending]
            token = checksum_token(int.from_bytes(crc.digest(), "big"), size)
            self._call(
                "complete_multipart_upload",
                uri,
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                ChecksumType="FULL_OBJECT",
                ChecksumCRC32C=s3_crc32c_from_token(token),
                MpuObjectSize=size,
            )
            return token
        except BaseException:
            self._abort(bucket, key, upload_id)
            raise

    def _upload_part(
        self, uri: str, bucket: str, key: str, upload_id: str, number: int, data: bytes
    ) -> dict[str, Any]:
        value = s3_crc32c_from_token(checksum_bytes(data))
        response = self._call(
            "upload_part",
            uri,
            Bucket=bucket,
            Key=key,
            UploadId=upload_id,
            PartNumber=number,
            Body=data,
            ChecksumAlgorithm="CRC32C",
            ChecksumCRC32C=value,
        )
        return {"PartNumber": number, "ETag": response["ETag"], "ChecksumCRC32C": value}

    def _abort(self, bucket: str, key: str, upload_id: str) -> None:
        """Abandoned multipart uploads are billed until aborted: always abort on failure."""
        # The original error matters more than a failed abort; a lifecycle rule reaps what is left.
        with contextlib.suppress(ClientError, BotoCoreError):
            self.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)

    # -- copies and moves ------------------------------------------------------------------------------
    def copy(self, src: str, dst: str, size: int | None = None) -> str:
        """Server-side copy (``src`` may be a versioned reference); returns the copy's checksum token.

        Objects up to ``copy_multipart_threshold`` take one CopyObject (no HEAD first when the caller
        passes ``size``, e.g. from a checksum token); larger ones are copied in parallel UploadPartCopy
        parts pinned to one source version or ETag. The token comes from the CRC32C S3 computed over the
        copy, so comparing it with the source's verifies the copy without reading it.
        """
        dst_bucket, dst_key = self._plain_target(dst)
        head: dict[str, Any] | None = None
        if size is None:
            head = self._require_head(src)
            size = int(head["ContentLength"])
        if size > self.copy_multipart_threshold:
            return self._multipart_copy(src, dst, dst_bucket, dst_key, head or self._require_head(src))
        return self._single_copy(src, dst, dst_bucket, dst_key, size)

    def _copy_source(self, src: str) -> dict[str, str]:
        bucket, key, version = parse_s3_uri(src)
        source = {"Bucket": bucket, "Key": key}
        if version:
            source["VersionId"] = version
        return source

    def _single_copy(
        self, src: str, dst: str, bucket: str, key: str, size: int, extra: dict[str, Any] | None = None
    ) -> str:
        try:
            response = self._call(
                "copy_object",
                src,
                Bucket=bucket,
                Key=key,
                CopySource=self._copy_source(src),
                ChecksumAlgorithm="CRC32C",
                **(extra or {}),
            )
        except ClientError as exc:
            raise StorageError(f"cannot copy '{src}' to '{dst}': no such source object (or version)") from exc
        value = response.get("CopyObjectResult", {}).get("ChecksumCRC32C")
        if value and "-" not in value:
            # CopyObject makes a single-part object, so S3's CRC32C is the copy's full-object CRC.
            return token_from_s3_crc32c(value, size)
        return self.identify(dst).checksum  # a store that does not report it: HEAD (or hash) the copy

    def _multipart_copy(self, src: str, dst: str, bucket: str, key: str, head: dict[str, Any]) -> str:
        size = int(head["ContentLength"])
        source = self._copy_source(src)
        pin: dict[str, Any] = {}
        if "VersionId" not in source:
            version = _real_version(head.get("VersionId"))
            if version:
                source["VersionId"] = version
            else:
                pin["CopySourceIfMatch"] = head["ETag"]
        create: dict[str, Any] = {"ChecksumAlgorithm": "CRC32C", "ChecksumType": "FULL_OBJECT"}
        if head.get("ContentType"):
            create["ContentType"] = head["ContentType"]
        if head.get("Metadata"):
            create["Metadata"] = head["Metadata"]
        upload_id = self._call("create_multipart_upload", dst, Bucket=bucket, Key=key, **create)["UploadId"]

        def copy_part(number: int, start: int) -> dict[str, Any]:
            end = min(size, start + self.copy_part_size) - 1
            result = self._call(
                "upload_part_copy",
                src,
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                PartNumber=number,
                CopySource=source,
                CopySourceRange=f"bytes={start}-{end}",
                **pin,
            )["CopyPartResult"]
            part = {"PartNumber": number, "ETag": result["ETag"]}
            if result.get("ChecksumCRC32C"):
                part["ChecksumCRC32C"] = result["ChecksumCRC32C"]
            return part

        try:
            starts = list(range(0, size, self.copy_part_size))
            with ThreadPoolExecutor(max_workers=min(COPY_PARTS_IN_FLIGHT, len(starts))) as pool:
                parts = list(pool.map(copy_part, range(1, len(starts) + 1), starts))
            complete: dict[str, Any] = {"ChecksumType": "FULL_OBJECT", "MpuObjectSize": size}
            expected = stored_token(head)
            if expected is not None:  # let S3 check the assembled copy against the source's CRC
                complete["ChecksumCRC32C"] = s3_crc32c_from_token(expected)
            self._call(
                "complete_multipart_upload",
                dst,
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                **complete,
            )
        except ClientError as exc:
            self._abort(bucket, key, upload_id)
            raise StorageError(f"cannot copy '{src}' to '{dst}': the source changed or vanished") from exc
        except BaseException:
            self._abort(bucket, key, upload_id)
            raise
        copied = self._require_head(dst)
        return stored_token(copied) or self.identify(dst).checksum

    def move(self, src: str, dst: str) -> None:
        """Server-side copy, then delete the source (a delete marker in a versioned bucket)."""
        if parse_s3_uri(src)[2]:
            raise StorageError(f"cannot move '{src}': it is a versioned reference; move the current object")
        if self._head(dst) is not None:
            raise StorageError(f"cannot move '{src}' to '{dst}': the target exists")
        self.copy(src, dst)
        self.delete(src)

    def delete(self, uri: str) -> None:
        bucket, key, version = parse_s3_uri(uri)
        if version:
            raise StorageError(
                f"refusing to delete version '{version}' of '{uri}': events may still need it; noncurrent "
                "versions expire by the bucket's lifecycle rules"
            )
        if not key:
            raise StorageError(f"cannot delete '{uri}': it names no object key")
        with contextlib.suppress(ClientError):  # already gone: deletes are retried after crashes
            self._call("delete_object", uri, Bucket=bucket, Key=key)

    def touch(self, uri: str, mtime: float) -> None:
        """Restart the object's ``LastModified`` (S3 cannot set it) by copying it onto itself.

        ``MetadataDirective='REPLACE'`` is what makes S3 accept a copy onto the same key; the requested time
        is kept in the metadata for the record, the retention clock is the server's ``LastModified``.
        """
        bucket, key = self._plain_target(uri)
        head = self._require_head(uri)
        metadata = {**head.get("Metadata", {}), TOUCH_METADATA_KEY: f"{mtime:.3f}"}
        if int(head["ContentLength"]) > self.copy_multipart_threshold:
            self._multipart_copy(uri, uri, bucket, key, {**head, "Metadata": metadata})
            return
        extra: dict[str, Any] = {"MetadataDirective": "REPLACE", "Metadata": metadata}
        if head.get("ContentType"):
            extra["ContentType"] = head["ContentType"]
        self._single_copy(uri, uri, bucket, key, int(head["ContentLength"]), extra)

    def makedirs(self, uri: str) -> None:
        """Nothing to do: S3 has no directories; a prefix exists once an object is below it."""
        parse_s3_uri(uri)

    def delete_tree(self, uri: str) -> None:
        bucket, key, version = parse_s3_uri(uri)
        if version or not key.strip("/"):
            raise StorageError(f"refusing to delete '{uri}': name a prefix below the bucket, not a version")
        prefix = key.rstrip("/") + "/"
        paginator = self.client.get_paginator("list_objects_v2")
        batch: list[dict[str, str]] = []
        try:
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
                for obj in page.get("Contents", []):
                    batch.append({"Key": obj["Key"]})
                    if len(batch) == DELETE_BATCH:
                        self._delete_batch(uri, bucket, batch)
                        batch = []
        except ClientError as exc:
            if _code(exc) == "NoSuchBucket":
                return
            raise StorageError(f"cannot list '{uri}' to delete it: {_code(exc)}: {exc}") from exc
        if batch:
            self._delete_batch(uri, bucket, batch)

    def _delete_batch(self, uri: str, bucket: str, keys: list[dict[str, str]]) -> None:
        response = self._call("delete_objects", uri, Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        errors = response.get("Errors", [])
        if errors:
            first = errors[0]
            raise StorageError(
                f"could not delete {len(errors)} objects under '{uri}', e.g. '{first.get('Key')}': "
                f"{first.get('Code')}: {first.get('Message')}"
            )


class ResumingBody(io.RawIOBase):
    """A GetObject body that survives resets and truncation by asking for the rest (see the module doc).

    ``args`` are the request's arguments (bucket, key, version). The re-requests are pinned to the object
    the first answer came from: its VersionId where the bucket keeps versions, else ``If-Match`` its ETag.
    A body shorter than its ``Content-Length`` without any error is treated as cut short too.
    """

    def __init__(self, fs: S3FileSystem, uri: str, args: dict[str, Any], response: dict[str, Any]) -> None:
        super().__init__()
        self._fs, self._uri = fs, uri
        self._body: Any = response["Body"]
        self._size = int(response["ContentLength"])  # ``S3FileSystem._get_sized``: always there
        self._offset = 0
        self._retries = 0
        self._total: int | None = None  # the object's size by a re-request, until its body confirms it
        pin = {k: v for k, v in args.items() if k in ("Bucket", "Key")}
        version = args.get("VersionId") or _real_version(response.get("VersionId"))
        if version:
            pin["VersionId"] = version
        elif response.get("ETag"):
            pin["IfMatch"] = response["ETag"]
        self._pin = pin

    @property
    def retries(self) -> int:
        """How many ranged re-requests this body needed."""
        return self._retries

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if not len(view) or self._offset >= self._size:
            return 0
        try:
            count = self._read_some(view)
        except STREAM_ERRORS:
            count = self._read_retrying(view)
        self._offset += count
        return count

    def readall(self) -> bytes:
        """The rest of the object in one buffer (``RawIOBase`` would read it 8 KiB at a time)."""
        out = bytearray(max(self._size - self._offset, 0))
        done = 0
        while True:
            while done < len(out):
                view = memoryview(out)
                try:
                    count = self.readinto(view[done:])
                finally:
                    view.release()
                if not count:
                    return bytes(out[:done])
                done += count
            if self._offset >= self._size:
                return bytes(out)
            # The size grew: the first answer's was cut short with its headers (``_reopen``). A new buffer,
            # not ``extend``: a failed read may keep a view of this one alive until the garbage collector
            # runs (an exception's traceback in a reference cycle), and a bytearray with a view cannot grow.
            grown = bytearray(done + self._size - self._offset)
            grown[:done] = out
            out = grown

    def _read_retrying(self, view: memoryview) -> int:
        """The read after a failed one: ranged re-requests with backoff, a bounded number of times."""
        retrying = Retrying(
            stop=stop_after_attempt(STREAM_ATTEMPTS - 1),
            wait=wait_exponential(multiplier=STREAM_BACKOFF_SECONDS[0], max=STREAM_BACKOFF_SECONDS[1])
            + wait_random(0, STREAM_BACKOFF_SECONDS[0]),
            retry=retry_if_exception_type(STREAM_ERRORS),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return self._read_some(view)
        except STREAM_ERRORS as exc:
            raise StorageError(
                f"reading '{self._uri}' failed at byte {self._offset} of {self._size} after {STREAM_ATTEMPTS} "
                f"attempts ({type(exc).__name__}: {exc}); the store or the network keeps cutting the "
                "connection: retry later"
            ) from exc
        raise AssertionError("unreachable")

    def _read_some(self, view: memoryview) -> int:
        if self._body is None:
            self._reopen()
        try:
            count = self._body.readinto(view[: self._size - self._offset])
        except STREAM_ERRORS:
            self._discard()
            raise
        if not count:  # the stream ended before Content-Length without saying so
            self._discard()
            raise http.client.IncompleteRead(b"", self._size - self._offset)
        if self._total is not None:  # this answer's headers were whole (its body came): its size holds
            self._size, self._total = self._total, None
        return int(count)

    def _reopen(self) -> None:
        self._retries += 1
        log.info(
            "S3 body of '%s' cut at byte %d of %d; asking for the rest", self._uri, self._offset, self._size
        )
        try:
            response = self._fs.client.get_object(Range=f"bytes={self._offset}-", **self._pin)
        except ClientError as exc:
            raise StorageError(
                f"'{self._uri}' changed or vanished while being read (at byte {self._offset}): "
                f"{_code(exc)}; read it again"
            ) from exc
        except BotoCoreError as exc:
            raise StorageError(f"S3 get_object on '{self._uri}' failed: {exc}") from exc
        except ValueError as exc:  # cut inside a header's value: ask again, as for a cut body
            raise http.client.IncompleteRead(b"", self._size - self._offset) from exc
        self._body = response["Body"]
        # ``http.client`` ends headers where the connection ends, so the first answer's Content-Length may
        # have been cut to a prefix of its digits (its body then is empty: that is why this re-request).
        # The object's size is the total of this answer's Content-Range, once its body shows it was whole.
        self._total = _range_total(response.get("ContentRange"))

    def _discard(self) -> None:
        body, self._body = self._body, None
        with contextlib.suppress(Exception):
            body.close()

    def close(self) -> None:
        if self._body is not None:
            self._discard()
        super().close()


def _range_total(content_range: str | None) -> int | None:
    """The object's size from a ranged answer's ``Content-Range`` (``bytes 100-199/1000``), if it says."""
    total = (content_range or "").rpartition("/")[2]
    return int(total) if total.isdigit() else None


def _read_full(stream: BinaryIO, size: int) -> bytes:
    """Read up to ``size`` bytes, looping over short reads (network streams return what has arrived)."""
    chunks = []
    remaining = size
    while remaining > 0:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


_default: tuple[int, S3FileSystem] | None = None
_default_lock = threading.Lock()


def default_s3_filesystem() -> S3FileSystem:
    """The store the standard AWS configuration names, one instance (and client) per process."""
    global _default
    current = _default
    if current is not None and current[0] == os.getpid():
        return current[1]
    with _default_lock:
        if _default is None or _default[0] != os.getpid():
            _default = (os.getpid(), S3FileSystem())
        return _default[1]


def reset_default_s3_filesystem() -> None:
    """Forget the default store's client, e.g. after changing AWS environment variables (tests)."""
    global _default
    with _default_lock:
        _default = None
