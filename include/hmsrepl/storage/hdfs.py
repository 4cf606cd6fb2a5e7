"""HDFS through WebHDFS (fsspec's client): ``hdfs://namenode:port/path``, the URIs Hive and Spark write.

Locations keep the ``hdfs://`` form clients use; each NameNode's WebHDFS address is configured beside it,
since WebHDFS listens on the NameNode's HTTP port, not its RPC port:

- ``HMSREPL_WEBHDFS_ENDPOINTS``: ``hdfs://nn1:8020=http://nn1:9870,hdfs://nn2:8020=https://nn2:9871``.
  Without an entry a NameNode ``host[:port]`` is reached at ``http://host:9870`` (Hadoop 3's default).
- ``HMSREPL_HDFS_USER``: the user named to WebHDFS with simple authentication (default: the OS user).
- ``HMSREPL_HDFS_CHECKSUM``: ``composite`` (default) asks HDFS for the whole-file CRC32C
  (``storage.hadoop_checksums``), ``read`` always reads and hashes.
- ``HMSREPL_HDFS_SNAPSHOTS``: ``pin`` (default) pins files below snapshottable directories with HDFS
  snapshots (``storage.hdfs_snapshots``), ``off`` never takes one.

How HDFS differs from a local disk, and what this module does about it:

- *Writes* go to a hidden temporary file beside the target, renamed over it when complete
  (``RENAME`` with ``OVERWRITE``, ``replace``), so readers never see part of a file, as locally; a load's
  staged copies are published the same way.
- *Moves* within one NameNode are renames (atomic, keep the modification time); ``storage.base.move_file``
  copies and verifies across file systems. cmroot and trash on HDFS therefore recycle by rename.
- *Copies* within HDFS are streamed through this process: WebHDFS has no server-side copy (Spark copies run
  on the executors, next to the data).
- *Checksums* come from HDFS without reading the file when it can give a composite CRC32C; otherwise the
  file is read and hashed.
- *Versions*: below a snapshottable directory, ``identify`` pins a file with a snapshot and answers its
  path as the version id; read methods accept the versioned reference ``hdfs://<id>@namenode/path`` and
  read the file as that snapshot keeps it, as S3 reads an object version (``storage.hdfs_snapshots``).
- *Processes*: an instance pickles without its HTTP session; each process (a Spark executor's Python worker
  included) opens its own on first use.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import threading
from collections.abc import Iterator
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from requests.exceptions import ConnectionError

from hmsrepl.exceptions import StorageError
from hmsrepl.formats.file_uri import split_versioned_reference, versioned_reference
from hmsrepl.storage.base import FileIdentity, FileStatus, FileSystem, uri_scheme
from hmsrepl.storage.checksum import CHUNK_BYTES, ChecksumReader, checksum_stream
from hmsrepl.storage.hdfs_snapshots import SnapshotPins, path_in_snapshot

HDFS_SCHEMES = ("hdfs",)
DEFAULT_WEBHDFS_PORT = 9870
ENDPOINTS_ENV = "HMSREPL_WEBHDFS_ENDPOINTS"
USER_ENV = "HMSREPL_HDFS_USER"
CHECKSUM_ENV = "HMSREPL_HDFS_CHECKSUM"
CHECKSUM_MODES = ("composite", "read")
SNAPSHOTS_ENV = "HMSREPL_HDFS_SNAPSHOTS"
SNAPSHOT_MODES = ("pin", "off")
#: Operations that only read, and so may name a file as a snapshot keeps it (a versioned reference).
READ_OPERATIONS = frozenset({"GETFILESTATUS", "OPEN", "GETFILECHECKSUM"})


def parse_hdfs_uri(uri: str) -> tuple[str, str]:
    """(NameNode authority, absolute path) of ``hdfs://authority/path``; StorageError for anything else."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() not in HDFS_SCHEMES:
        raise StorageError(f"'{uri}' is not an HDFS URI; write hdfs://namenode:port/path")
    authority, _, path = rest.partition("/")
    if not authority:
        raise StorageError(f"'{uri}' names no NameNode; write hdfs://namenode:port/path")
    return authority.lower(), "/" + path.rstrip("/") if path.strip("/") else "/"


def configured_endpoints() -> dict[str, str]:
    """NameNode authority -> WebHDFS base URL, from ``HMSREPL_WEBHDFS_ENDPOINTS`` (ValueError if malformed)."""
    endpoints: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in os.environ.get(ENDPOINTS_ENV, "").split(","))):
        namenode, sep, url = entry.partition("=")
        if not sep or not url.startswith(("http://", "https://")):
            raise ValueError(
                f"{ENDPOINTS_ENV} entry '{entry}' is not of the form hdfs://namenode:port=http://host:port"
            )
        endpoints[parse_hdfs_uri(namenode.strip())[0]] = url.strip().rstrip("/")
    return endpoints


def webhdfs_url(authority: str) -> str:
    """The WebHDFS base URL of a NameNode: configured, else its host at Hadoop 3's default HTTP port."""
    configured = configured_endpoints().get(authority)
    if configured:
        return configured
    host = authority.rsplit(":", 1)[0] if not authority.endswith("]") else authority
    return f"http://{host}:{DEFAULT_WEBHDFS_PORT}"


class HdfsFileSystem(FileSystem):
    """One NameNode's file system (``hdfs://<namenode>``) over its WebHDFS endpoint."""

    io_parallelism = 8

    #: HDFS has real directories (a trash, a partition directory) and renames, but no hard links.
    has_directories = True

    def __init__(
        self,
        namenode: str,
        webhdfs: str | None = None,
        *,
        user: str | None = None,
        checksum_mode: str | None = None,
        snapshots: str | None = None,
    ) -> None:
        self.namenode = namenode.lower()
        self.webhdfs = (webhdfs or webhdfs_url(self.namenode)).rstrip("/")
        self.user = user or os.environ.get(USER_ENV) or getpass.getuser()
        mode = checksum_mode or os.environ.get(CHECKSUM_ENV) or "composite"
        if mode not in CHECKSUM_MODES:
            raise ValueError(f"{CHECKSUM_ENV}='{mode}' is not one of {', '.join(CHECKSUM_MODES)}")
        self.checksum_mode = mode
        pinning = snapshots or os.environ.get(SNAPSHOTS_ENV) or "pin"
        if pinning not in SNAPSHOT_MODES:
            raise ValueError(f"{SNAPSHOTS_ENV}='{pinning}' is not one of {', '.join(SNAPSHOT_MODES)}")
        self.snapshots = pinning
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._pins = SnapshotPins(self._request)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_client", "_client_lock", "_pins")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client, self._client_lock = None, threading.Lock()
        self._pins = SnapshotPins(self._request)

    @property
    def client(self) -> Any:
        """fsspec's WebHDFS client, made on first use in each process (``skip_instance_cache``: not shared)."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    from fsspec.implementations.webhdfs import WebHDFS

                    url = urlsplit(self.webhdfs)
                    self._client = WebHDFS(
                        url.hostname,
                        port=url.port or DEFAULT_WEBHDFS_PORT,
                        user=self.user,
                        use_https=url.scheme == "https",
                        skip_instance_cache=True,
                    )
        return self._client

    def same_store(self, other: FileSystem) -> bool:
        return isinstance(other, HdfsFileSystem) and other.namenode == self.namenode

    def _path(self, uri: str, *, version_ok: bool = False) -> str:
        """The NameNode path of ``uri``; of a versioned reference (reads only), the path in its snapshot."""
        plain, version = split_versioned_reference(uri)
        authority, path = parse_hdfs_uri(plain)
        if authority != self.namenode:
            raise StorageError(f"'{uri}' is not on NameNode '{self.namenode}'")
        if version is None:
            return path
        if not version_ok:
            raise StorageError(
                f"'{uri}' names a file as an HDFS snapshot keeps it, which can only be read; use its plain path"
            )
        return path_in_snapshot(version, path)

    def _call(self, op: str, uri: str, method: str = "get", **params: Any) -> Any:
        """One WebHDFS operation on ``uri`` (a versioned reference for reads only)."""
        return self._request(
            op, self._path(uri, version_ok=op in READ_OPERATIONS), method, shown=uri, **params
        )

    def _request(self, op: str, path: str, method: str = "get", *, shown: str = "", **params: Any) -> Any:
        """One WebHDFS operation on a NameNode path; errors other than a missing file become StorageError
        naming the URI (``shown``)."""
        shown = shown or f"hdfs://{self.namenode}{path}"
        try:
            response = self.client._call(op, method=method, path=path, **params)
            return response.json() if response.content else {}  # RENAME with options answers no body
        except FileNotFoundError:
            raise
        except ConnectionError as exc:
            raise StorageError(
                f"HDFS {op} of '{shown}' failed: WebHDFS at {self.webhdfs} does not answer; check that the "
                f"NameNode's HTTP address is set in {ENDPOINTS_ENV} (hdfs://namenode:port=http://host:port)"
            ) from exc
        except (OSError, RuntimeError, ValueError) as exc:
            raise StorageError(f"HDFS {op} of '{shown}' failed: {exc}") from exc

    def _file_status(self, uri: str) -> dict[str, Any] | None:
        try:
            status: dict[str, Any] = self._call("GETFILESTATUS", uri)["FileStatus"]
            return status
        except FileNotFoundError:
            return None

    def list_files(self, uri: str) -> Iterator[FileStatus]:
        """Files below ``uri`` recursively, sorted by path within each directory; a file lists itself."""
        top = self._file_status(uri)
        if top is None:
            return
        if top["type"] == "FILE":
            yield FileStatus(uri, int(top["length"]), top["modificationTime"] / 1000)
            return
        for directory, entries in self._walk(uri):
            for entry in entries:
                if entry["type"] == "FILE":
                    child = f"{directory}/{entry['pathSuffix']}"
                    yield FileStatus(child, int(entry["length"]), entry["modificationTime"] / 1000)

    def _walk(self, uri: str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """Each directory below ``uri`` (itself first) with its entries sorted by name, depth first in name
        order; a directory removed while walked is skipped."""
        pending = [uri.rstrip("/")]
        while pending:
            directory = pending.pop()
            try:
                entries = self._call("LISTSTATUS", directory)["FileStatuses"]["FileStatus"]
            except FileNotFoundError:  # removed while listed
                continue
            entries = sorted(entries, key=lambda e: e["pathSuffix"])
            yield directory, entries
            subdirs = [f"{directory}/{e['pathSuffix']}" for e in entries if e["type"] == "DIRECTORY"]
            pending.extend(reversed(subdirs))

    def status(self, uri: str) -> FileStatus | None:
        found = self._file_status(uri)
        if found is None or found["type"] != "FILE":
            return None
        return FileStatus(uri, int(found["length"]), found["modificationTime"] / 1000)

    def exists(self, uri: str) -> bool:
        return self._file_status(uri) is not None

    def is_directory(self, uri: str) -> bool:
        found = self._file_status(uri)
        return found is not None and found["type"] == "DIRECTORY"

    def entry_kind(self, uri: str) -> str | None:
        found = self._file_status(uri)
        if found is None:
            return None
        return {"FILE": "file", "DIRECTORY": "directory"}.get(found["type"], "other")

    def directories(self, uri: str, *, deepest_first: bool = False) -> Iterator[str]:
        """Directories below ``uri`` (not ``uri`` itself), parents before children unless ``deepest_first``."""
        top = uri.rstrip("/")
        found = [directory for directory, _ in self._walk(uri) if directory != top]
        return iter(sorted(found, key=lambda d: d.count("/"), reverse=deepest_first))

    def is_empty_directory(self, uri: str) -> bool:
        if not self.is_directory(uri):
            return False
        return not self._call("LISTSTATUS", uri)["FileStatuses"]["FileStatus"]

    def remove_empty_directory(self, uri: str) -> bool:
        """Remove ``uri`` if it is an empty directory (a non-recursive DELETE refuses a non-empty one)."""
        if not self.is_empty_directory(uri):
            return False
        try:
            return bool(self._call("DELETE", uri, "delete", recursive="false").get("boolean"))
        except (FileNotFoundError, StorageError):
            return False

    def checksum(self, uri: str) -> str:
        """The file's token: HDFS's composite CRC32C when it gives one, else the file read and hashed."""
        if self.checksum_mode == "composite":
            from hmsrepl.storage.hadoop_checksums import composite_checksum

            try:
                token = composite_checksum(f"hdfs://{self.namenode}{self._path(uri, version_ok=True)}")
            except FileNotFoundError as exc:
                raise StorageError(f"cannot read '{uri}': no such file") from exc
            if token is not None:
                return token
        with self.open_read(uri) as stream:
            return checksum_stream(stream)

    def identify(self, uri: str) -> FileIdentity:
        """Checksum and version as one pair: below a snapshottable directory the file is pinned by a
        snapshot (its path is the version) and the checksum read from there; elsewhere no version."""
        plain, version = split_versioned_reference(uri)
        if version is not None or self.snapshots == "off":
            return FileIdentity(self.checksum(uri), version)
        path = self._path(plain)
        live = self._file_status(plain)
        if live is None or live["type"] != "FILE":
            raise StorageError(f"cannot read '{uri}': no such file")
        pinned = self._pins.pin(path, live)
        if pinned is None:
            return FileIdentity(self.checksum(plain), None)
        return FileIdentity(self.checksum(versioned_reference(plain, pinned)), pinned)

    def expire_pins(self, root: str, cutoff: float) -> int:
        """Delete the snapshots ``identify`` took (never an operator's) before ``cutoff`` on snapshottable
        directories at, above or below ``root``."""
        return 0 if self.snapshots == "off" else self._pins.expire(self._path(root), cutoff)

    def open_read(self, uri: str) -> BinaryIO:
        path = self._path(uri, version_ok=True)
        try:
            return self.client.open(path, "rb", block_size=CHUNK_BYTES)  # type: ignore[no-any-return]
        except FileNotFoundError as exc:
            raise StorageError(f"cannot read '{uri}': no such file") from exc

    def write_bytes(self, uri: str, data: bytes) -> None:
        self._write(uri, lambda out: out.write(data))

    def write_stream(self, uri: str, stream: BinaryIO) -> str:
        """Stream into place in bounded memory, hashing while writing (one pass for copies)."""
        reader = ChecksumReader(stream)

        def pump(out: Any) -> None:
            while chunk := reader.read(CHUNK_BYTES):
                out.write(chunk)

        self._write(uri, pump)
        return reader.token

    def _write(self, uri: str, fill: Any) -> None:
        """Write a hidden temporary file beside ``uri`` and rename it over the target when complete."""
        path = self._path(uri)
        parent, _, name = path.rpartition("/")
        tmp_uri = f"hdfs://{self.namenode}{parent}/.tmp-{os.urandom(8).hex()}-{name}"
        try:
            with self.client.open(self._path(tmp_uri), "wb", block_size=CHUNK_BYTES) as out:
                fill(out)
            self.replace(tmp_uri, uri)
        except BaseException:
            self.delete(tmp_uri)
            raise

    def rename(self, src: str, dst: str) -> bool:
        """Rename within the NameNode, creating the target's parent and replacing a file there: atomic."""
        self.makedirs(dst.rsplit("/", 1)[0])
        self.replace(src, dst)
        return True

    def replace(self, src: str, dst: str) -> None:
        """A rename over ``dst`` (``RENAME`` with ``OVERWRITE``): atomic, no bytes copied."""
        try:
            renamed = self._call("RENAME", src, "put", destination=self._path(dst), renameoptions="OVERWRITE")
        except FileNotFoundError as exc:
            raise StorageError(f"cannot rename '{src}' over '{dst}': no such file") from exc
        if renamed.get("boolean") is False:
            raise StorageError(f"cannot rename '{src}' over '{dst}': HDFS refused the rename")

    def move(self, src: str, dst: str) -> None:
        """A rename within the NameNode (atomic; the modification time is kept)."""
        target = self._path(dst)
        if self.exists(dst):
            raise StorageError(f"cannot move '{src}' to '{dst}': the target exists")
        self.makedirs(dst.rsplit("/", 1)[0])
        try:
            renamed = self._call("RENAME", src, "put", destination=target)
        except FileNotFoundError as exc:
            raise StorageError(f"cannot move '{src}': no such file") from exc
        if renamed.get("boolean") is not True:  # HDFS answers false, not an error, for a missing source
            why = "HDFS refused the rename" if self.exists(src) else "no such file"
            raise StorageError(f"cannot move '{src}' to '{dst}': {why}")

    def delete(self, uri: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._call("DELETE", uri, "delete", recursive="false")

    def touch(self, uri: str, mtime: float) -> None:
        self._call("SETTIMES", uri, "put", modificationtime=int(mtime * 1000), accesstime=-1)

    def makedirs(self, uri: str) -> None:
        self._call("MKDIRS", uri, "put")

    def delete_tree(self, uri: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._call("DELETE", uri, "delete", recursive="true")


_instances: dict[str, HdfsFileSystem] = {}
_instances_lock = threading.Lock()


def hdfs_filesystem_for(uri: str) -> HdfsFileSystem:
    """The file system of ``uri``'s NameNode, one instance per NameNode and process."""
    if uri_scheme(uri) not in HDFS_SCHEMES:
        raise StorageError(f"'{uri}' is not an HDFS URI; write hdfs://namenode:port/path")
    authority, _ = parse_hdfs_uri(split_versioned_reference(uri)[0])
    with _instances_lock:
        if authority not in _instances:
            _instances[authority] = HdfsFileSystem(authority)
        return _instances[authority]


def reset_hdfs_filesystems() -> None:
    """Forget the per-NameNode instances (after the endpoint configuration changed, e.g. in tests)."""
    with _instances_lock:
        _instances.clear()
