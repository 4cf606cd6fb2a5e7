"""Local file system (and anything mounted): ``file:/x``, ``file:///x`` and plain ``/x`` paths.

Durability. A file written here is on disk when the write returns (``fdatasync``), unless it is written
inside ``deferred_sync``: a copier of many files (a Spark copy task) then syncs them all at once at the end
with one ``syncfs`` per file system, which costs one journal commit instead of one per file and lets the
disk write back several files while the next ones are being copied. Why not per file: in one run of
``bench/bench_copy.py`` here (medians), 20,000 files of 4 KiB: 1,594 files/s with a fsync each, 2,384 with
one sync per Spark task; 4 x 256 MiB: 0.86 s vs 0.56 s. ``Durability`` names the three modes: ``file``
(fsync each file), ``batch`` (one sync of the batch before it counts as done: as durable as ``file`` for
anyone who waits for the batch) and ``none`` (page cache only, like ``cp``: for scratch copies and
benchmarks; a crash can lose or truncate files that were reported copied). The price of ``batch``:
``syncfs`` also writes back whatever else is dirty on that file system, so a busy shared disk makes it
slower (and the figures noisier) than syncing only our files would.

The copy itself (``LocalFileSystem.copy``) reads the source once in large chunks, hashes each chunk and
writes it (measured on ext4 here: as fast as GNU cp's in-kernel ``copy_file_range``, which would need a
second pass over the copy to checksum it), and asks the kernel to start writing back every
``WRITEBACK_BYTES`` written (``sync_file_range``), so the final sync finds most of the file on disk already.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import errno
import os
import shutil
import stat
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, Literal, get_args

from hmsrepl.exceptions import StorageError
from hmsrepl.storage.base import FileStatus, FileSystem
from hmsrepl.storage.checksum import CHUNK_BYTES, ChecksumReader, RunningChecksum, checksum_stream
from hmsrepl.storage.local_tree import (
    StatIdentity,
    count_local_data_files,
    local_file_ids,
    local_stat_pages,
    local_stats,
    named_stats,
    real_directories,
)

Durability = Literal["file", "batch", "none"]
DURABILITY_MODES: tuple[str, ...] = get_args(Durability)
#: Written bytes after which the kernel is asked to start writing a copy back (asynchronously). Measured
#: here (4 x 256 MiB, two processes, durable at the end): 8 MiB 0.29-0.31 s, 32 MiB 0.31-0.89 s, never
#: 0.44-0.84 s; ``cp -r`` 0.26-0.28 s. Smaller steps only add system calls.
WRITEBACK_BYTES = 8 * 1024 * 1024
#: Chunk of a local copy: large enough that hashing releases the GIL (>= 1 MB) and syscalls are few.
COPY_CHUNK_BYTES = CHUNK_BYTES
_SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>: start writeback of dirty pages in the range, do not wait
#: Errors of ``link`` that mean "this store cannot link these two": the caller copies instead.
LINK_UNSUPPORTED = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP)


def _libc_function(name: str, *argtypes: type) -> Callable[..., int] | None:
    """A libc function by name (Linux-only ones are missing elsewhere: callers then fall back)."""
    try:
        function = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (AttributeError, OSError):
        return None
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_int
    return function  # type: ignore[no-any-return]


_syncfs = _libc_function("syncfs", ctypes.c_int)
_sync_file_range = _libc_function(
    "sync_file_range", ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint
)


def sync_file_systems(paths: Iterable[str]) -> None:
    """Make everything written to the file systems holding ``paths`` durable: one ``syncfs`` each.

    ``syncfs`` also writes back other processes' dirty data on that file system; it is still one journal
    commit where per-file fsyncs are one each. Without ``syncfs`` (not Linux), ``os.sync``.
    """
    by_device: dict[int, str] = {}
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            by_device.setdefault(os.stat(path).st_dev, path)
    if not by_device:
        return
    if _syncfs is None:
        os.sync()
        return
    for path in by_device.values():
        fd = os.open(path, os.O_RDONLY)
        try:
            if _syncfs(fd) != 0:
                error = ctypes.get_errno()
                raise StorageError(
                    f"cannot make writes to the file system of '{path}' durable (syncfs: "
                    f"{os.strerror(error)}); the copies written there are not trusted: copy them again"
                )
        finally:
            os.close(fd)


def sync_uris(uris: Iterable[str]) -> None:
    """``sync_file_systems`` of the local ones among ``uris`` (object stores' writes are durable already)."""
    sync_file_systems(local_path(uri) for uri in uris if is_local_uri(uri))


class SyncBatch:
    """Directories written to without a sync per file; ``flush`` syncs their file systems once each."""

    def __init__(self, durability: Durability) -> None:
        self.durability = durability
        self._directories: set[str] = set()
        self._lock = threading.Lock()

    def add(self, directory: str) -> None:
        with self._lock:
            self._directories.add(directory)

    def flush(self) -> None:
        with self._lock:
            directories, self._directories = self._directories, set()
        if self.durability == "batch":
            sync_file_systems(sorted(directories))

    def written(self) -> list[str]:
        """The directories written to so far (a copy process hands them to its parent's batch)."""
        with self._lock:
            return sorted(self._directories)


_batch: contextvars.ContextVar[SyncBatch | None] = contextvars.ContextVar("hmsrepl_sync_batch", default=None)


@contextlib.contextmanager
def deferred_sync(durability: Durability = "batch") -> Iterator[SyncBatch | None]:
    """Local writes in this context skip their per-file sync; with ``batch`` they are synced on leaving it.

    Only a body that finishes is synced: after an exception nothing of it may count as written. Threads
    inherit the context only when run in a copy of it (``contextvars.copy_context().run``). ``file``
    changes nothing (each file is synced as it is written).
    """
    if durability not in DURABILITY_MODES:
        raise ValueError(f"durability '{durability}' is not one of {', '.join(DURABILITY_MODES)}")
    if durability == "file":
        yield None
        return
    batch = SyncBatch(durability)
    token = _batch.set(batch)
    try:
        yield batch
    finally:
        _batch.reset(token)
    batch.flush()


@contextlib.contextmanager
def sync_handed_over() -> Iterator[SyncBatch]:
    """Local writes in this context skip their per-file sync and are not synced on leaving it either: the
    caller hands ``written()`` to the process that syncs them (``sync_later`` there, before it relies on
    them). For a copy process working for a load."""
    batch = SyncBatch("batch")
    token = _batch.set(batch)
    try:
        yield batch
    finally:
        _batch.reset(token)


def sync_later(directories: Iterable[str]) -> None:
    """Directories another process wrote to without a sync: synced with this context's open batch, or now
    when none is open (copy processes leave the sync to the load, one ``syncfs`` for all of them)."""
    batch = _batch.get()
    if batch is None:
        sync_file_systems(directories)
        return
    for directory in directories:
        batch.add(directory)


def _start_writeback(fd: int, offset: int, length: int) -> None:
    if _sync_file_range is not None:
        _sync_file_range(fd, offset, length, _SYNC_FILE_RANGE_WRITE)  # advisory: errors surface at the sync


def is_local_uri(uri: str) -> bool:
    """``file:`` URIs and plain paths (no scheme) are on the local (or a mounted) file system."""
    return uri.startswith("file:") or "://" not in uri


def local_path(uri: str) -> str:
    """Map a URI to a native path without URL-decoding (``%3A`` stays literally in the name)."""
    if uri.startswith("file://"):
        rest = uri[len("file://") :]
        if not rest.startswith("/"):  # file://host/path: only the local host is supported
            host, _, path = rest.partition("/")
            if host not in ("", "localhost"):
                raise StorageError(f"'{uri}' names host '{host}'; only local file URIs are supported")
            rest = "/" + path
        return "/" + rest.lstrip("/")
    if uri.startswith("file:"):
        return "/" + uri[len("file:") :].lstrip("/")
    return uri


class LocalFileSystem(FileSystem):
    hard_links = True
    has_directories = True
    writes_in_place = True
    cpu_bound = True

    def list_files(self, uri: str) -> Iterator[FileStatus]:
        """Regular files below ``uri``, sorted by path; nothing else is a data file.

        FIFOs, sockets, devices and symlinks are skipped, and subdirectories are entered only when they are
        real directories (``follow_symlinks=False``): opening a FIFO blocks a server thread, a link to
        ``/dev/zero`` never ends, and a link to a foreign file would list, checksum and replicate it. The
        root itself is followed (a location may be a link that the policy checked), but only to a
        directory or a regular file.
        """
        root = local_path(uri)
        try:
            st = os.stat(root)  # one call answers "file, directory or nothing" (a copy asks per file)
        except OSError:  # missing or unreadable: nothing listed, as os.path.isdir/isfile say
            return
        if not stat.S_ISDIR(st.st_mode):
            if stat.S_ISREG(st.st_mode):
                yield FileStatus(uri, st.st_size, st.st_mtime)
            return
        yield from _walk_regular(root, uri.rstrip("/"))

    def exists(self, uri: str) -> bool:
        return os.path.exists(local_path(uri))

    def checksum(self, uri: str) -> str:
        """Checksum of a regular file; anything else that took its place since it was listed is refused.

        Opened without following a final symlink and without blocking, then checked with ``fstat``: a FIFO
        swapped in after the listing would otherwise block this thread, a device never end.
        """
        path = local_path(uri)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise StorageError(f"cannot read '{uri}': {exc.strerror}") from exc
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise StorageError(f"cannot checksum '{uri}': it is not a regular file")
            os.set_blocking(fd, True)
            stream = os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        with stream:
            return checksum_stream(stream)

    def open_read(self, uri: str) -> BinaryIO:
        try:
            return open(local_path(uri), "rb")
        except OSError as exc:
            raise StorageError(f"cannot read '{uri}': {exc.strerror}") from exc

    def write_bytes(self, uri: str, data: bytes) -> None:
        with self._atomic_output(uri) as out:
            out.write(data)

    def write_stream(self, uri: str, stream: BinaryIO) -> str:
        """Stream into place in bounded memory, hashing while writing (one pass for copies)."""
        reader = ChecksumReader(stream)
        with self._atomic_output(uri) as out:
            shutil.copyfileobj(reader, out, CHUNK_BYTES)  # type: ignore[misc]
        return reader.token

    def copy(self, src: str, dst: str, size: int | None = None) -> str:
        """Copy reading the source once: each chunk is hashed, then written; returns the copy's checksum.

        The token is of the bytes written, so a caller comparing it with a recorded checksum verifies the
        copy; it is durable as ``_atomic_output`` says (``deferred_sync``).
        """
        try:
            source = os.open(local_path(src), os.O_RDONLY)
        except OSError as exc:
            raise StorageError(f"cannot read '{src}': {exc.strerror}") from exc
        try:
            with self._atomic_output(dst) as out:
                return _copy_hashing(source, out.fileno(), kick_writeback=_durable_writes())
        finally:
            os.close(source)

    def copy_unpublished(self, src: str, dst: str, size: int | None = None) -> str:
        """``copy`` written at ``dst`` itself (a hidden staged name): no temporary file, no rename, no
        directory check per file (a partition of 1,000,000 files paid all three for each). ``dst`` is
        opened without following a symlink planted under its name; durable as ``copy`` is."""
        try:
            source = os.open(local_path(src), os.O_RDONLY)
        except OSError as exc:
            raise StorageError(f"cannot read '{src}': {exc.strerror}") from exc
        path = local_path(dst)
        try:
            return _write_unpublished(source, path, None, os.path.dirname(path) or ".", size)
        finally:
            os.close(source)

    @staticmethod
    @contextlib.contextmanager
    def _atomic_output(uri: str) -> Iterator[BinaryIO]:
        """A temporary file beside the target, made durable and renamed over it: readers see old or new.

        Durable means ``fdatasync`` before the rename, or, inside ``deferred_sync``, the batch's one sync.
        """
        path = local_path(uri)
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as out:
                yield out
                out.flush()
                batch = _batch.get()
                if batch is None:
                    os.fdatasync(out.fileno())
                else:
                    batch.add(directory)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def move(self, src: str, dst: str) -> None:
        source, target = local_path(src), local_path(dst)
        if os.path.exists(target):
            raise StorageError(f"cannot move '{src}' to '{dst}': the target exists")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            os.rename(source, target)
        except OSError:  # across devices: copy then remove, so the file is never missing from both
            shutil.copy2(source, target)
            os.unlink(source)

    def delete(self, uri: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(local_path(uri))

    def touch(self, uri: str, mtime: float) -> None:
        os.utime(local_path(uri), (mtime, mtime))

    def makedirs(self, uri: str) -> None:
        self.make_directory(uri)

    def make_directory(self, uri: str) -> bool:
        """One ``mkdir`` when the parent exists (a load's version directory beside its object's), the whole
        chain otherwise; an existing directory (or a symlink to one) is no error, anything else is."""
        path = local_path(uri)
        try:
            os.mkdir(path)
        except FileNotFoundError:  # a missing parent: make the chain
            os.makedirs(path, exist_ok=True)
        except FileExistsError:
            if not os.path.isdir(path):
                raise
            return False
        return True

    def delete_tree(self, uri: str) -> None:
        shutil.rmtree(local_path(uri), ignore_errors=True)

    # -- directories, links and names (see ``FileSystem``) ---------------------------------------------
    def size(self, uri: str) -> int | None:
        try:
            return os.stat(local_path(uri)).st_size
        except OSError:
            return None

    def has_entry(self, uri: str) -> bool:
        return os.path.lexists(local_path(uri))

    def link(self, src: str, dst: str, *, replace: bool = False) -> bool:
        source, target = local_path(src), local_path(dst)
        for attempt in (1, 2):
            try:  # one system call in the usual case: a load links every file an object keeps
                os.link(source, target)
                return True
            except FileExistsError:
                if not replace or attempt == 2:
                    raise
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(target)
            except FileNotFoundError:  # the target's directory not made yet (or the source gone: raised next)
                if attempt == 2 or not os.path.lexists(source):
                    raise
                os.makedirs(os.path.dirname(target), exist_ok=True)
            except OSError as exc:
                if exc.errno in LINK_UNSUPPORTED:
                    return False
                raise
        return False  # pragma: no cover - the loop returns or raises

    def same_file(self, a: str, b: str) -> bool:
        try:
            return os.path.samefile(local_path(a), local_path(b))
        except OSError:
            return False

    def rename(self, src: str, dst: str) -> bool:
        """Rename within a device (False across devices), the target's directory made when it is missing:
        asked only when the rename fails, not before each of a partition's many renames."""
        source, target = local_path(src), local_path(dst)
        for attempt in (1, 2):
            try:
                os.rename(source, target)
            except FileNotFoundError:
                directory = os.path.dirname(target)
                if attempt == 2 or not directory or os.path.isdir(directory):
                    raise  # the source is gone
                os.makedirs(directory, exist_ok=True)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                return False
            else:
                return True
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def sync_directory(self, uri: str) -> None:
        """fsync of the directory itself; file systems that cannot sync directories still renamed atomically."""
        try:
            fd = os.open(local_path(uri), os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def is_directory(self, uri: str) -> bool:
        return os.path.isdir(local_path(uri))

    def directories(self, uri: str, *, deepest_first: bool = False) -> Iterator[str]:
        base, prefix = local_path(uri).rstrip("/"), uri.rstrip("/")
        for path in real_directories(base, deepest_first=deepest_first):
            yield prefix + path[len(base) :]

    def entry_names(self, uri: str) -> frozenset[str] | None:
        try:
            with os.scandir(local_path(uri)) as scan:
                return frozenset(entry.name for entry in scan)
        except (FileNotFoundError, NotADirectoryError):
            return frozenset()
        except OSError as exc:
            raise StorageError(f"cannot list '{uri}': {exc.strerror}") from exc

    def is_empty_directory(self, uri: str) -> bool:
        path = local_path(uri)
        try:
            with os.scandir(path) as scan:
                return next(scan, None) is None
        except OSError:
            return False

    def remove_empty_directory(self, uri: str) -> bool:
        try:
            os.rmdir(local_path(uri))
        except OSError:
            return False
        return True

    def write_unsynced(self, uri: str, data: bytes) -> None:
        self.write_unsynced_pieces(uri, (data,))

    def write_unsynced_pieces(self, uri: str, pieces: Iterable[bytes]) -> None:
        path = local_path(uri)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            for piece in pieces:
                out.write(piece)

    def sync_tree(self, uri: str) -> None:
        sync_file_systems([local_path(uri)])  # syncfs of that file system, not every disk's

    def entry_kind(self, uri: str) -> str | None:
        try:
            mode = os.lstat(local_path(uri)).st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot examine '{uri}': {exc.strerror}") from exc
        return "file" if stat.S_ISREG(mode) else "directory" if stat.S_ISDIR(mode) else "other"

    def entry_size(self, uri: str) -> tuple[str | None, int | None]:
        try:
            found = os.lstat(local_path(uri))
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            raise StorageError(f"cannot examine '{uri}': {exc.strerror}") from exc
        mode = found.st_mode
        if stat.S_ISREG(mode):
            return "file", found.st_size
        return ("directory" if stat.S_ISDIR(mode) else "other"), None

    def stat_tree(self, uri: str) -> dict[str, StatIdentity]:
        out: dict[str, StatIdentity] = {}
        local_stats(local_path(uri), out)
        return out

    def stat_pages(self, uri: str, page: int) -> Iterator[dict[str, StatIdentity]]:
        return local_stat_pages(local_path(uri), page)

    def stat_named(self, uri: str, names: Iterable[str]) -> dict[str, StatIdentity]:
        return named_stats(local_path(uri), list(names))

    def count_files(self, uri: str) -> int:
        return count_local_data_files(local_path(uri))

    def file_ids(self, uri: str) -> dict[str, int] | None:
        out: dict[str, int] = {}
        local_file_ids(local_path(uri), "", out)
        return out

    def copy_verified(
        self,
        src: str,
        dst: str,
        checksum: str,
        *,
        temp_prefix: str,
        chunk_bytes: int = 1024 * 1024,
        on_chunk: Callable[[], None] = lambda: None,
    ) -> None:
        """Copy between two local file systems without ever showing a partial or wrong file under ``dst``.

        The bytes go to ``<temp_prefix><name>-<random>`` beside the target, are hashed as they pass, synced,
        and compared with ``checksum``; only a matching copy is renamed into place (and its directory
        synced, so the rename is durable before the caller deletes the original). A temporary file left by
        a crash carries another name, so it is never taken for the real one. ``on_chunk`` runs after each
        chunk (crash tests stop there).
        """
        src_path, dst_path = local_path(src), local_path(dst)
        directory = os.path.dirname(dst_path)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f"{temp_prefix}{os.path.basename(dst_path)}-{uuid.uuid4().hex[:12]}")
        running = RunningChecksum()
        try:
            with open(src_path, "rb") as source, open(tmp, "wb") as out:
                while chunk := source.read(chunk_bytes):
                    running.update(chunk)
                    out.write(chunk)
                    on_chunk()
                out.flush()
                os.fsync(out.fileno())
            if checksum and running.token != checksum:
                raise StorageError(
                    f"copy of '{src_path}' to '{dst_path}' has checksum {running.token}, expected {checksum}; "
                    "the original was left in place: retry"
                )
            os.replace(tmp, dst_path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self.sync_directory(directory)


def _walk_regular(directory: str, uri_prefix: str) -> Iterator[FileStatus]:
    """Regular files under ``directory``, never through a symlink: its files by name, then each subdirectory.

    The order is ``os.walk``'s with sorted names, which listings always had. Only the names are held while
    the directory is walked (a sorted list of ``DirEntry`` keeps every file's cached stat alive: ~0.8 KB a
    file, most of a 1,000,000-file listing's memory).
    """
    try:
        with os.scandir(directory) as scan:
            names = sorted(entry.name for entry in scan)
    except OSError:  # vanished or unreadable while listing: nothing below it
        return
    subdirs = []
    for name in names:
        try:
            st = os.lstat(os.path.join(directory, name))
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            subdirs.append(name)
        elif stat.S_ISREG(st.st_mode):
            yield FileStatus(f"{uri_prefix}/{name}", st.st_size, st.st_mtime)
    for name in subdirs:
        yield from _walk_regular(os.path.join(directory, name), f"{uri_prefix}/{name}")


def copy_unpublished_at(
    source_dir: int, source_name: str, target_dir: int, target_name: str, *, directory: str, size: int
) -> str:
    """``LocalFileSystem.copy_unpublished`` between names in two open directories (descriptors a rooted file
    system opened and checked once for many names: ``RootedFileSystem.open_directory``); returns the copy's
    checksum token. Both names are single segments (``rooted.plain_name``), so neither can leave its
    directory. The source is opened without following a symlink (``ELOOP``: the caller checks that path in
    full instead) and without blocking on a FIFO; ``size``: the size its checksum records, read in one call
    for a small file (no read at its end). ``directory``: the target directory's path, for the sync batch.
    Raises ``OSError`` as the system calls do: nothing is left under the target name then."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    source = os.open(source_name, flags, dir_fd=source_dir)
    try:
        return _write_unpublished(source, target_name, target_dir, directory, size)
    finally:
        os.close(source)


def _write_unpublished(source: int, path: str, dir_fd: int | None, directory: str, size: int | None) -> str:
    """Copy the open ``source`` to a new staged name (``path``, relative to ``dir_fd`` when given), durable
    as ``copy`` is; a partial copy is never trusted, and not left behind either."""
    target = _open_unpublished(path, dir_fd)
    try:
        token = _copy_hashing(source, target, kick_writeback=_durable_writes(), size=size)
        _sync_written(target, directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path, dir_fd=dir_fd)
        raise
    finally:
        os.close(target)
    return token


def _open_unpublished(path: str, dir_fd: int | None = None) -> int:
    """Create a staged copy's name for writing, its directory made on first use (not below ``dir_fd``: that
    directory is open, so it exists). A file already under the name (a crashed attempt's) is unlinked first,
    never truncated: it may be a hard link of a published file (a version links the staged copies of its
    batch). A symlink under the name is removed, never followed."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for attempt in (1, 2, 3):
        try:
            # The mode of the temporary files ``copy`` writes.
            return os.open(path, flags, 0o600, dir_fd=dir_fd)
        except FileNotFoundError:
            if attempt == 3 or dir_fd is not None:
                raise
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        except FileExistsError:
            if attempt == 3:
                raise
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path, dir_fd=dir_fd)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _sync_written(fd: int, directory: str) -> None:
    """Make a written file durable: now (``fdatasync``), or with the open ``deferred_sync`` batch."""
    batch = _batch.get()
    if batch is None:
        os.fdatasync(fd)
    else:
        batch.add(directory)


def _durable_writes() -> bool:
    batch = _batch.get()
    return batch is None or batch.durability != "none"


def _copy_hashing(source: int, target: int, *, kick_writeback: bool, size: int | None = None) -> str:
    """Copy ``source`` to ``target`` (file descriptors) in one read pass; returns the token of what was written.

    ``size``: the size the source should have (its recorded checksum's). A read that asked for more and
    ended there is taken as the end: a file of 8 bytes costs one read of 9 bytes, not a read of a 4 MiB
    buffer and another of nothing at its end. The token is of the bytes written whatever the file holds
    beyond, so a copy that does not hold exactly the recorded content never matches its checksum."""
    running = RunningChecksum()
    kicked = 0
    want = COPY_CHUNK_BYTES if size is None or size < 0 else min(size + 1, COPY_CHUNK_BYTES)
    while chunk := os.read(source, want):
        running.update(chunk)
        view = memoryview(chunk)
        while view:
            view = view[os.write(target, view) :]
        if kick_writeback and running.size - kicked >= WRITEBACK_BYTES:
            _start_writeback(target, kicked, running.size - kicked)
            kicked = running.size
        if len(chunk) < want and running.size == size:
            break
        want = COPY_CHUNK_BYTES
    return running.token
