"""The storage interface: what the metastore, change manager and replication need from a file system.

Locations are kept exactly as clients sent them (``file:/w/t/p=k%3Av``): implementations map a URI to
their native path without URL-decoding, because Hive escapes partition values into directory names with
``%XX`` and decoding would name a different directory.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO


@dataclass(frozen=True)
class FileStatus:
    """One file found by a listing; ``uri`` keeps the scheme form of the listed root."""

    uri: str
    size: int
    mtime: float


class FileSystem(abc.ABC):
    """Operations on one storage scheme; every path argument is a URI or a plain absolute path."""

    @abc.abstractmethod
    def list_files(self, uri: str) -> Iterator[FileStatus]:
        """Yield every file below ``uri`` recursively (hidden ``_``/``.`` entries included); none if absent."""

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
        """Set the modification time, which cmroot retention counts from."""

    @abc.abstractmethod
    def makedirs(self, uri: str) -> None: ...

    @abc.abstractmethod
    def delete_tree(self, uri: str) -> None:
        """Remove a directory and what is left in it; missing is not an error."""


def filesystem_for(uri: str) -> FileSystem:
    """Choose the implementation by URI scheme; ``file:`` and plain paths are local."""
    scheme = uri.split(":", 1)[0].lower() if "://" in uri or uri.startswith("file:") else "file"
    if scheme == "file":
        from hmsrepl.storage.local import LocalFileSystem

        return LocalFileSystem()
    raise ValueError(f"unsupported storage scheme '{scheme}' in '{uri}'; use a local path or file: URI")


def join_uri(base: str, *names: str) -> str:
    """Join path segments onto a URI with single slashes, never re-encoding what is there."""
    out = base.rstrip("/")
    for name in names:
        out = f"{out}/{name.strip('/')}"
    return out


def base_name(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


def relative_to(uri: str, root: str) -> str:
    """The part of ``uri`` below ``root``; both must be spelled alike (as stored)."""
    prefix = root.rstrip("/") + "/"
    if not uri.startswith(prefix):
        raise ValueError(f"'{uri}' is not below '{root}'")
    return uri[len(prefix) :]
