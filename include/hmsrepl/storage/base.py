"""The storage interface: what the metastore, change manager and replication need from a file system.

Locations are kept exactly as clients sent them (``file:/w/t/p=k%3Av``): implementations map a URI to
their native path without URL-decoding, because Hive escapes partition values into directory names with
``%XX`` and decoding would name a different directory.

Implementations: local paths and ``file:`` URIs (``storage.local``), ``s3://`` (also spelled ``s3a://``
and ``s3n://`` by Hadoop clients; ``storage.s3``) and ``hdfs://`` (over WebHDFS; ``storage.hdfs``). Read methods (``exists``, ``open_read``, ``checksum``,
``identify``, ``copy``) also accept a *versioned reference* (``s3://<versionid>@bucket/key``, see
``formats.file_uri``) that names one version of an object in a versioned bucket.

Copies between two stores go through ``copy_file``/``move_file`` here: server-side when both URIs are in the
same store (``FileSystem.same_store``), streamed otherwise. ``copy_files`` is the entry point for Spark
tasks: a plain module-level function (picklable by reference) whose file systems make their own clients in
each process.
"""

from __future__ import annotations

import abc
import functools
import hashlib
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO

from hmsrepl.concurrency import bounded_map
from hmsrepl.exceptions import StorageError
from hmsrepl.formats.file_uri import split_versioned_reference
from hmsrepl.storage.checksum import checksum_bytes, parse_checksum_token

S3_SCHEMES = ("s3", "s3a", "s3n")


#: Distinct entity-tag marks a stamp can carry in its sub-second nanoseconds, 2,000 ns apart (more than the
#: 1,000 ns two spellings of one modification time may differ by, see ``metastore.capture.same_stat``).
ETAG_MARKS = 500_000
ETAG_MARK_STEP_NS = 2_000


@dataclass(frozen=True)
class FileStatus:
    """One file found by a listing; ``uri`` keeps the scheme form of the listed root.

    ``etag``: an object store's entity tag (None on file systems), which changes with every write.
    """

    uri: str
    size: int
    mtime: float
    etag: str | None = None

    @property
    def stamp(self) -> int:
        """What tells this file's write from another one at the same path of the same size, without reading it.

        The modification time in nanoseconds; on an object store, plus a mark of the ETag in the sub-second
        nanoseconds: S3 reports whole seconds, so an object overwritten by as many bytes within the second
        it was recorded in would otherwise look unchanged. Stamps are compared for equality only.
        """
        stamp = round(self.mtime * 1_000_000_000)
        if self.etag:
            digest = hashlib.blake2b(self.etag.encode(), digest_size=8).digest()
            stamp += int.from_bytes(digest, "big") % ETAG_MARKS * ETAG_MARK_STEP_NS
        return stamp


@dataclass(frozen=True)
class FileIdentity:
    """What pins a file's content: its checksum token and, in a versioned store, the version it was read at.

    Both describe the same object version (one HEAD on S3), so an event never pairs a checksum with the id
    of a different version.
    """

    checksum: str
    version_id: str | None = None


class FileSystem(abc.ABC):
    """Operations on one storage scheme; every path argument is a URI or a plain absolute path."""

    #: Threads worth using for per-file metadata calls (checksums of many files): local files are CPU and
    #: disk bound, object stores are latency bound and gain from more requests in flight.
    io_parallelism: int = 4
    #: Whether ``move`` within the store keeps the file's modification time (a rename does; an object
    #: store's copy + delete writes a new object dated now). cmroot retention must count from recycling.
    move_keeps_mtime: bool = True
    #: Whether files can be hard-linked (a pin is then a link; object stores pin by version id instead).
    hard_links: bool = False
    #: Whether directories exist of their own (object stores only have keys with slashes).
    has_directories: bool = False
    #: Whether a file can be rewritten in place, so a modification time just taken may not yet tell two
    #: writes apart (object stores write whole objects, each with a new entity tag and version).
    writes_in_place: bool = False
    #: Whether per-file work on the store keeps this host's CPU busy rather than waiting on a server (local
    #: files: a copy opens, hashes and writes in this process, a look is one ``lstat``): threads then add
    #: only their hand-offs, and several processes are what makes it faster.
    cpu_bound: bool = False

    @abc.abstractmethod
    def list_files(self, uri: str) -> Iterator[FileStatus]:
        """Yield every file below ``uri`` recursively (hidden ``_``/``.`` entries included); none if absent."""

    def status(self, uri: str) -> FileStatus | None:
        """One file's size, time and entity tag, or None when no file is there (a stat; one HEAD on S3)."""
        for found in self.list_files(uri):
            if found.uri.rstrip("/") == uri.rstrip("/"):
                return found
        return None

    @abc.abstractmethod
    def exists(self, uri: str) -> bool: ...

    @abc.abstractmethod
    def checksum(self, uri: str) -> str:
        """The file's checksum token (see ``storage.checksum``)."""

    @abc.abstractmethod
    def open_read(self, uri: str) -> BinaryIO: ...

    @abc.abstractmethod
    def write_bytes(self, uri: str, data: bytes) -> None:
        """Write a whole small file atomically (readers see the old file or the new one, never a part)."""

    @abc.abstractmethod
    def move(self, src: str, dst: str) -> None:
        """Move a file, creating the target's parent; the target must not exist."""

    @abc.abstractmethod
    def delete(self, uri: str) -> None:
        """Delete one file; a missing file is not an error (deletes are retried after crashes)."""

    @abc.abstractmethod
    def touch(self, uri: str, mtime: float) -> None:
        """Set the modification time, which cmroot retention counts from.

        Stores that cannot set a time (S3: ``LastModified`` is the server's clock at the last write) restart
        it at their current time instead; callers use this only to restart retention with ``now``.
        """

    @abc.abstractmethod
    def makedirs(self, uri: str) -> None: ...

    @abc.abstractmethod
    def delete_tree(self, uri: str) -> None:
        """Remove a directory and what is left in it; missing is not an error."""

    # -- operations with a generic default; implementations override where the store does better ----------
    def identify(self, uri: str) -> FileIdentity:
        """Checksum and version of the file as one consistent pair (no version where none are kept)."""
        return FileIdentity(self.checksum(uri), None)

    def expire_pins(self, root: str, cutoff: float) -> int:
        """Remove the pins this store took itself for files at or below ``root`` (HDFS snapshots that
        ``identify`` made) before ``cutoff`` (epoch seconds); how many. Stores that pin by hard links into
        cmroot, or keep object versions of their own, take none."""
        return 0

    def write_stream(self, uri: str, stream: BinaryIO) -> str:
        """Write a whole file from a stream; returns the checksum token of what was written.

        The default buffers the stream in memory and calls ``write_bytes``; stores with a streaming writer
        (S3: multipart upload) override it so large files never sit in memory whole.
        """
        data = stream.read()
        self.write_bytes(uri, data)
        return checksum_bytes(data)

    def copy(self, src: str, dst: str, size: int | None = None) -> str:
        """Copy a file within this store (``src`` may be a versioned reference); returns the copy's checksum.

        ``size``, when the caller knows it, spares stores a lookup. The default streams through this
        process; S3 overrides it with a server-side copy.
        """
        with self.open_read(src) as stream:
            return self.write_stream(dst, stream)

    def copy_unpublished(self, src: str, dst: str, size: int | None = None) -> str:
        """``copy`` to a name no reader looks at (a hidden staged copy, verified before it is published): a
        store may then write it in place, without a temporary name and a rename of its own. A partial copy
        left by a crash is found by its checksum, never trusted. The default is ``copy``."""
        return self.copy(src, dst, size)

    def replace(self, src: str, dst: str) -> None:
        """Put ``src`` at ``dst`` whole, replacing a file there, and remove ``src`` (publishing a staged copy).

        Readers see the old file or the new one, never neither. The default copies then deletes (an object
        store replaces a key whole); file systems with an atomic replacing rename (HDFS) override it.
        """
        self.copy(src, dst)
        self.delete(src)

    def same_store(self, other: FileSystem) -> bool:
        """True when ``copy``/``move`` between the two can stay inside one store (no bytes through us)."""
        return type(self) is type(other)

    # -- directories, links and names: what a file system has and an object store does not ----------------
    # The defaults are an object store's answers (no directories, no links, no atomic rename); callers use
    # them instead of ``os`` calls so that every path they touch passes through a FileSystem (and, bound to
    # roots, through ``storage.rooted``).
    def size(self, uri: str) -> int | None:
        """The file's size in bytes, or None when no file is there."""
        found = self.status(uri)
        return None if found is None else found.size

    def has_entry(self, uri: str) -> bool:
        """Whether anything is under this name (locally also a dangling symlink, which ``exists`` denies)."""
        return self.exists(uri)

    def make_directory(self, uri: str) -> bool:
        """``makedirs``, answering whether this call made the directory (False: an entry was there already).

        One question where a caller would otherwise ask ``has_entry`` and then ``makedirs``: a load makes a
        version directory per object and lists it only when an interrupted attempt left it."""
        existed = self.has_entry(uri)
        self.makedirs(uri)
        return not existed

    def link(self, src: str, dst: str, *, replace: bool = False) -> bool:
        """Give ``dst`` the content of ``src`` without copying bytes (a hard link), creating its parent.

        False when this store cannot link these two (another device, links not allowed, an object store):
        the caller copies instead. An existing ``dst`` raises FileExistsError unless ``replace``.
        """
        return False

    def same_file(self, a: str, b: str) -> bool:
        """Whether two names are one file (a hard link); never on stores without links."""
        return False

    def rename(self, src: str, dst: str) -> bool:
        """Rename atomically within one file system, creating the target's parent (an existing target is
        replaced); False when that cannot be done atomically (another device, an object store)."""
        return False

    def sync_directory(self, uri: str) -> None:
        """Make renames into or out of a directory durable; stores without directories have nothing to do."""
        return None  # nothing to make durable

    def is_directory(self, uri: str) -> bool:
        return False

    def directories(self, uri: str, *, deepest_first: bool = False) -> Iterator[str]:
        """Every real directory strictly below ``uri`` (never through a symlink); none on object stores."""
        return iter(())

    def is_empty_directory(self, uri: str) -> bool:
        return False

    def entry_names(self, uri: str) -> frozenset[str] | None:
        """The names of the entries directly in the directory ``uri`` (none when it is not there), in one
        listing: for callers asking about many names of one directory. None: this store answers per name
        only (``exists``)."""
        return None

    def remove_empty_directory(self, uri: str) -> bool:
        """Remove ``uri`` if it is a directory holding nothing; True when removed. Object stores have no
        directories: nothing to remove."""
        return False

    def write_unsynced(self, uri: str, data: bytes) -> None:
        """Write a small file that ``sync_tree`` later makes durable with all the others (a dump's files:
        the dump counts only once acknowledged). Object stores write whole objects anyway."""
        self.write_bytes(uri, data)

    def write_unsynced_pieces(self, uri: str, pieces: Iterable[bytes]) -> None:
        """``write_unsynced`` of the pieces joined, written as they come where the store can (a dump's
        ``_files`` of 1,000,000 lines is some 170 MB); object stores write whole objects: joined here."""
        self.write_unsynced(uri, b"".join(pieces))

    def sync_tree(self, uri: str) -> None:
        """Make everything written below ``uri`` durable (one sync of its file system); object stores' writes
        are durable when they return."""
        return None  # nothing to make durable

    def entry_kind(self, uri: str) -> str | None:
        """What is under this name, not following a final link: ``file``, ``directory``, ``other`` (a link,
        FIFO, device) or None when nothing is. Object stores hold files only."""
        return "file" if self.exists(uri) else None

    def entry_size(self, uri: str) -> tuple[str | None, int | None]:
        """``entry_kind`` and, for a regular file, its size (else None): what a load's pre-flight asks of
        every source file, in one call (locally one ``lstat``, not an ``lstat`` and a ``stat``)."""
        kind = self.entry_kind(uri)
        return kind, self.size(uri) if kind == "file" else None

    def stat_tree(self, uri: str) -> dict[str, tuple[int, int]]:
        """Data files below ``uri`` by relative path, as (size, stamp): hidden entries (a component starting
        with ``_`` or ``.``) left out, no reads. A file named by ``uri`` itself is listed under its name."""
        return next(self.stat_pages(uri, sys.maxsize), {})

    def stat_pages(self, uri: str, page: int) -> Iterator[dict[str, tuple[int, int]]]:
        """``stat_tree`` in pages of at most ``page`` files, in the store's listing order, as the caller takes
        them: a first capture of a partition of 1,000,000 files never holds the whole listing."""
        out: dict[str, tuple[int, int]] = {}
        for status in self.list_files(uri):
            rel = _relative_or_name(status.uri, uri)
            if not is_hidden(rel):
                out[rel] = (status.size, status.stamp)
                if len(out) >= page:
                    yield out
                    out = {}
        if out:
            yield out

    def stat_named(self, uri: str, names: Iterable[str]) -> dict[str, tuple[int, int]]:
        """(size, stamp) of each named regular file below ``uri`` that is there; no listing of ``uri``."""
        out: dict[str, tuple[int, int]] = {}
        for rel in names:
            found = self.status(f"{uri.rstrip('/')}/{rel}")
            if found is not None:
                out[rel] = (found.size, found.stamp)
        return out

    def count_files(self, uri: str) -> int:
        """How many data files ``stat_tree`` would list, holding none of them."""
        return sum(1 for status in self.list_files(uri) if not is_hidden(_relative_or_name(status.uri, uri)))

    def file_ids(self, uri: str) -> dict[str, int] | None:
        """Data files below ``uri`` by relative path (as ``stat_tree`` lists them), each with a number two names
        share exactly when they are one file (a hard link), read from the directory entries alone (no stat per
        file). None on stores without hard links, where two names are never one file."""
        return None


_registered: dict[str, FileSystem] = {}
_registry_lock = threading.Lock()


def register_filesystem(prefix: str, fs: FileSystem) -> None:
    """Serve URIs starting with ``prefix`` (e.g. ``s3://dr-bucket``) by ``fs`` instead of the scheme default.

    For a second store that the standard AWS configuration does not describe, e.g. the replica's S3 endpoint
    (``S3FileSystem(profile_name='dr')``). The longest matching prefix wins.
    """
    with _registry_lock:
        _registered[prefix.rstrip("/")] = fs


def unregister_filesystem(prefix: str) -> None:
    with _registry_lock:
        _registered.pop(prefix.rstrip("/"), None)


def uri_scheme(uri: str) -> str:
    """The lower-case scheme; ``file`` for ``file:`` URIs and plain paths."""
    return uri.split(":", 1)[0].lower() if "://" in uri or uri.startswith("file:") else "file"


def filesystem_for(uri: str) -> FileSystem:
    """Choose the implementation by registered prefix, else by URI scheme; ``file:`` and plain paths are local."""
    if _registered:
        plain, _ = split_versioned_reference(uri)
        matches = [p for p in _registered if plain == p or plain.startswith(p + "/")]
        if matches:
            return _registered[max(matches, key=len)]
    scheme = uri_scheme(uri)
    if scheme == "file":
        return _local_filesystem()
    if scheme in S3_SCHEMES:
        from hmsrepl.storage.s3 import default_s3_filesystem

        return default_s3_filesystem()
    if scheme == "hdfs":
        from hmsrepl.storage.hdfs import hdfs_filesystem_for

        return hdfs_filesystem_for(uri)
    raise ValueError(
        f"unsupported storage scheme '{scheme}' in '{uri}'; use a local path, a file: URI, s3://bucket/key "
        "or hdfs://namenode:port/path"
    )


@functools.cache
def _local_filesystem() -> FileSystem:
    """The one local file system (it keeps no state: every call of ``filesystem_for`` may share it)."""
    from hmsrepl.storage.local import LocalFileSystem

    return LocalFileSystem()


@dataclass(frozen=True)
class StoreTraits:
    """What a store is like, without touching any file: what callers outside ``storage/`` may know of a
    store whose files they reach only through a ``RootedFileSystem`` (see ``FileSystem``'s attributes)."""

    io_parallelism: int
    move_keeps_mtime: bool
    hard_links: bool
    has_directories: bool
    writes_in_place: bool
    cpu_bound: bool = False


def store_traits(uri: str) -> StoreTraits:
    """The traits of the store ``uri`` names (no I/O: its scheme and registered prefixes decide)."""
    return _traits_of(filesystem_for(uri))


@functools.lru_cache(maxsize=64)
def _traits_of(fs: FileSystem) -> StoreTraits:
    """A store's traits, made once per store: they are its class's constants, and a load asks them per file
    (a partition of 1,000,000 files made three million of them)."""
    return StoreTraits(
        fs.io_parallelism,
        fs.move_keeps_mtime,
        fs.hard_links,
        fs.has_directories,
        fs.writes_in_place,
        fs.cpu_bound,
    )


def copy_file(src: str, dst: str, expected_checksum: str | None = None, *, unpublished: bool = False) -> str:
    """Copy one file between any two locations; returns the copy's checksum token.

    Server-side when both are in one store (S3 CopyObject: no bytes through this process), streamed and
    hashed in one pass otherwise. With ``expected_checksum`` a copy that does not match is deleted and
    StorageError raised, so a wrong copy is never left in place. ``unpublished``: ``dst`` is a name no reader
    looks at (``FileSystem.copy_unpublished``).
    """
    src_fs, dst_fs = filesystem_for(src), filesystem_for(dst)
    if src_fs.same_store(dst_fs):
        size = parse_checksum_token(expected_checksum)[1] if expected_checksum else None
        token = src_fs.copy_unpublished(src, dst, size) if unpublished else src_fs.copy(src, dst, size)
    else:
        with src_fs.open_read(src) as stream:
            token = dst_fs.write_stream(dst, stream)
    if expected_checksum and token != expected_checksum:
        dst_fs.delete(dst)
        raise StorageError(
            f"copy of '{src}' to '{dst}' has checksum {token}, expected {expected_checksum}; the source "
            "changed since it was recorded or the copy was damaged: the copy was removed, retry it"
        )
    return token


def move_file(src: str, dst: str) -> None:
    """Move a file between any two locations; the target must not exist.

    Within one store this is the store's own move (a rename locally, copy + delete on S3); across stores
    the file is copied, and deleted from the source only after the copy is complete.
    """
    src_fs, dst_fs = filesystem_for(src), filesystem_for(dst)
    if src_fs.same_store(dst_fs):
        src_fs.move(src, dst)
        return
    if dst_fs.exists(dst):
        raise StorageError(f"cannot move '{src}' to '{dst}': the target exists")
    copy_file(src, dst)
    src_fs.delete(src)


def copy_files(tasks: Iterable[Sequence[str | None]], threads: int = 16) -> list[str]:
    """Copy many files with ``threads`` copies in flight; returns their checksum tokens in task order.

    Each task is ``(src, dst)`` or ``(src, dst, expected_checksum)``. Module-level so that Spark can ship
    it to executors (``rdd.mapPartitions(lambda rows: copy_files(list(rows)))``): the file systems it uses
    create their own S3 client in each executor process.
    """
    work = [tuple(task) for task in tasks]

    def run(task: tuple[str | None, ...]) -> str:
        src, dst, *rest = task
        if not src or not dst:
            raise ValueError(f"copy task {task!r} needs a source and a target")
        return copy_file(src, dst, rest[0] if rest else None)

    if len(work) <= 1 or threads <= 1:
        return [run(task) for task in work]
    workers = min(threads, len(work))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(bounded_map(pool, run, work, workers))


def path_key(uri: str) -> str:
    """A comparison key for URIs that name the same file in different spellings (``file:/x`` = ``/x``)."""
    if uri.startswith("file:"):
        from hmsrepl.storage.local import local_path

        return local_path(uri)
    return uri


def join_uri(base: str, *names: str) -> str:
    """Join path segments onto a URI with single slashes, never re-encoding what is there."""
    out = base.rstrip("/")
    for name in names:
        out = f"{out}/{name.strip('/')}"
    return out


def is_hidden(relative_path: str) -> bool:
    """Hive's listing filter: a component starting with ``_`` or ``.`` (``_SUCCESS``, ``.crc``) is not data.

    A component starts the path or follows a slash: three string tests, no split (a load asks this of each
    of a 1,000,000-file partition's names several times)."""
    return relative_path.startswith(("_", ".")) or "/_" in relative_path or "/." in relative_path


def _relative_or_name(uri: str, root: str) -> str:
    return relative_to(uri, root) if uri.rstrip("/") != root.rstrip("/") else base_name(uri)


def parent_uri(uri: str) -> str:
    """The URI of the directory holding ``uri`` (its last segment cut)."""
    return uri.rstrip("/").rsplit("/", 1)[0] or "/"


def base_name(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


def relative_to(uri: str, root: str) -> str:
    """The part of ``uri`` below ``root``; both must be spelled alike (as stored)."""
    prefix = root.rstrip("/") + "/"
    if not uri.startswith(prefix):
        raise ValueError(f"'{uri}' is not below '{root}'")
    return uri[len(prefix) :]
