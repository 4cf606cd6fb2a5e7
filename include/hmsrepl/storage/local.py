"""Local file system (and anything mounted): ``file:/x``, ``file:///x`` and plain ``/x`` paths."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

from hmsrepl.exceptions import StorageError
from hmsrepl.storage.base import FileStatus, FileSystem
from hmsrepl.storage.checksum import CHUNK_BYTES, ChecksumReader, checksum_stream


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
    def list_files(self, uri: str) -> Iterator[FileStatus]:
        root = local_path(uri)
        if not os.path.isdir(root):
            if os.path.isfile(root):
                st = os.stat(root)
                yield FileStatus(uri, st.st_size, st.st_mtime)
            return
        prefix_len = len(root.rstrip("/"))
        uri_root = uri.rstrip("/")
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                st = os.stat(full)
                yield FileStatus(uri_root + full[prefix_len:], st.st_size, st.st_mtime)

    def exists(self, uri: str) -> bool:
        return os.path.exists(local_path(uri))

    def checksum(self, uri: str) -> str:
        with self.open_read(uri) as stream:
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

    @staticmethod
    @contextlib.contextmanager
    def _atomic_output(uri: str) -> Iterator[BinaryIO]:
        """A temporary file beside the target, synced and renamed over it: readers see old or new, never part."""
        path = local_path(uri)
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as out:
                yield out
                out.flush()
                os.fsync(out.fileno())
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
        os.makedirs(local_path(uri), exist_ok=True)

    def delete_tree(self, uri: str) -> None:
        shutil.rmtree(local_path(uri), ignore_errors=True)
