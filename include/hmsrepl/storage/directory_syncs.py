"""Which directories a piece of file work must make durable before it is recorded as done, each synced once.

Renaming a file changes two directories: the one it left and the one it entered. Until both are synced
(fsync of the directory), a power cut may undo the rename, so work that renames (recycling a dropped
object's files into cmroot) syncs them before its intent row is deleted: once per directory, not per file.

A directory the same work then removes needs no sync of its own. Syncing its parent makes the removal
durable, and a removed directory lists nothing after a power cut, so no file can come back in it; the files'
new names are synced where they went. A drop of a table of 1,000 partitions then costs two fsyncs (cmroot
and the table's parent) instead of 1,001. That holds only where the parent may be synced (it lies in the
roots): otherwise the removed directory's own entries are synced before it goes, as without this shortcut.
"""

from __future__ import annotations

from hmsrepl.storage.base import parent_uri
from hmsrepl.storage.rooted import RootedFileSystem


class DirectorySyncs:
    """Directories awaiting their fsync, each with the rooted file system that may touch it."""

    def __init__(self) -> None:
        self._pending: dict[str, RootedFileSystem] = {}

    def add(self, fs: RootedFileSystem, *directories: str) -> None:
        for directory in directories:
            self._pending.setdefault(directory.rstrip("/") or "/", fs)

    def _within(self, directory: str) -> list[str]:
        prefix = directory.rstrip("/") + "/"
        return [d for d in self._pending if d == directory.rstrip("/") or d.startswith(prefix)]

    def before_removing(self, fs: RootedFileSystem, directory: str) -> None:
        """Called before ``directory`` is removed: if its parent cannot be synced, sync what lies in it now."""
        if not fs.contains(parent_uri(directory.rstrip("/")), follow=False):
            for pending in sorted(self._within(directory)):
                self._pending.pop(pending).sync_directory(pending)

    def removed(self, fs: RootedFileSystem, directory: str) -> None:
        """``directory`` is gone: its parent's sync stands for every pending directory in it."""
        parent = parent_uri(directory.rstrip("/"))
        if not fs.contains(parent, follow=False):
            return  # synced in ``before_removing``
        for pending in self._within(directory):
            del self._pending[pending]
        self._pending.setdefault(parent, fs)

    def flush(self) -> None:
        """Sync every pending directory (sorted: a stable order for tests and traces), then forget them."""
        for directory, fs in sorted(self._pending.items()):
            fs.sync_directory(directory)
        self._pending.clear()
