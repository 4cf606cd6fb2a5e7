"""Staged copies of local files made (and renamed) relative to their directories, each opened and checked once.

A copy worker stages a slice of a big partition's files: the same source directory and the same target
directory for each of them. Checked and opened by full path, each copy paid for both paths: their parse,
an ``lstat`` of the source (is it a symlink leading out?), and the kernel's walk of every component twice.
Here each directory is opened once per runner (``RootedFileSystem.open_directory``: the real path of the
directory the kernel opened lies in the roots) and each file is opened by its one-segment name relative to
it (``storage.local.copy_unpublished_at``): the source without following a symlink, the target created
anew. Whatever this way cannot decide (a symlink, a missing file or directory, a name that is not one plain
segment, a copy that does not match its checksum) is left to the caller's copy by full paths
(``replication.filecopy.copy_verified``), which checks every path in full and tries cmroot, as it always
did. A load publishing a partition's staged copies into its new version renames each one the same way
(``rename_in_directories``), and a page of recorded files is pinned into cmroot so
(``link_in_directories``).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading

from hmsrepl.storage.checksum import checksum_size
from hmsrepl.storage.local import copy_unpublished_at, is_local_uri, local_path
from hmsrepl.storage.rooted import RootedFileSystem, plain_name


class OpenDirectories:
    """The directories a runner opened (``RootedFileSystem.open_directory``), by roots and URI, until
    ``close``. A directory that cannot be opened (not made yet) is not remembered: the next copy asks
    again. Safe to use from several threads."""

    def __init__(self) -> None:
        self._open: dict[tuple[tuple[str, ...], str], int] = {}
        self._lock = threading.Lock()

    def get(self, fs: RootedFileSystem, uri: str) -> int | None:
        """The descriptor of directory ``uri`` opened by ``fs`` (None: it cannot be opened now); raises
        OutsideRootsError when it lies outside ``fs``'s roots."""
        key = (fs.roots, uri)
        fd = self._open.get(key)
        if fd is not None:
            return fd
        with self._lock:
            fd = self._open.get(key)
            if fd is None:
                try:
                    fd = fs.open_directory(uri)
                except (FileNotFoundError, NotADirectoryError):
                    return None
                self._open[key] = fd
            return fd

    def close(self) -> None:
        with self._lock:
            opened, self._open = self._open, {}
        for fd in opened.values():
            with contextlib.suppress(OSError):
                os.close(fd)


def copy_in_directories(
    src: str,
    staged: str,
    checksum: str,
    *,
    source: RootedFileSystem,
    target: RootedFileSystem,
    opened: OpenDirectories,
) -> bool:
    """Copy the local file ``src`` to the new staged name ``staged`` through their open directories,
    verified against ``checksum``; returns whether a matching copy is now there. False when this way does
    not apply or did not get one (a symlink, a missing file or directory, a name that is not one plain
    segment, another store, another content): nothing is left under ``staged`` then, and the caller copies
    by full paths, checked in full. ``source`` and ``target`` check the directories (the caller checked that
    ``src`` may be read at all)."""
    ends = _open_ends(src, source, staged, target, opened) if checksum else None
    if ends is None:
        return False
    source_fd, source_name, target_fd, target_name = ends
    try:
        token = copy_unpublished_at(
            source_fd,
            source_name,
            target_fd,
            target_name,
            directory=local_path(staged.rpartition("/")[0]),
            size=checksum_size(checksum),
        )
    except OSError:  # a symlink (ELOOP), a missing file, a FIFO, a full disk: told apart by the full copy
        return False
    if token != checksum:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target_name, dir_fd=target_fd)
        return False
    return True


def rename_in_directories(
    src: str, dst: str, *, fs: RootedFileSystem, opened: OpenDirectories
) -> bool | None:
    """Rename the local name ``src`` to ``dst`` (replacing it) relative to their open directories, both in
    ``fs``'s roots: True when renamed, False when ``src`` is gone. None when this way does not apply (another
    store, a name that is not one plain segment, a directory that cannot be opened, another error, such as
    two devices): nothing was renamed, and the caller renames by full paths (``RootedFileSystem.rename``),
    checked in full. The names are acted on as names: a symlink is renamed, never followed."""
    ends = _open_ends(src, fs, dst, fs, opened)
    if ends is None:
        return None
    source_fd, source_name, target_fd, target_name = ends
    try:
        os.rename(source_name, target_name, src_dir_fd=source_fd, dst_dir_fd=target_fd)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    return True


def link_in_directories(src: str, dst: str, *, fs: RootedFileSystem, opened: OpenDirectories) -> bool:
    """Hard-link the regular file ``src`` to the new name ``dst`` relative to their open directories, both in
    ``fs``'s roots; returns whether it is linked. False when this way does not apply or did not link (a
    symlink or anything but a regular file, a name there already, another device, a name that is not one
    plain segment): nothing was linked, and the caller links by full paths, checked in full. The name is
    linked as it is, never through a symlink (one swapped in after the look links the symlink itself, and
    what it leads to is never read)."""
    ends = _open_ends(src, fs, dst, fs, opened)
    if ends is None:
        return False
    source_fd, source_name, target_fd, target_name = ends
    try:
        if not stat.S_ISREG(os.stat(source_name, dir_fd=source_fd, follow_symlinks=False).st_mode):
            return False
        os.link(source_name, target_name, src_dir_fd=source_fd, dst_dir_fd=target_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _open_ends(
    src: str, source: RootedFileSystem, dst: str, target: RootedFileSystem, opened: OpenDirectories
) -> tuple[int, str, int, str] | None:
    """The open directory and the name of each of two local paths (``src`` in ``source``'s roots, ``dst``
    in ``target``'s), or None when either is not local, not one plain name, or in a directory that cannot
    be opened now; OutsideRootsError when a directory lies outside its roots."""
    if not is_local_uri(src) or not is_local_uri(dst):
        return None
    source_dir, _, source_name = src.rpartition("/")
    target_dir, _, target_name = dst.rpartition("/")
    if not plain_name(source_name) or not plain_name(target_name):
        return None
    source_fd = opened.get(source, source_dir)
    target_fd = opened.get(target, target_dir) if source_fd is not None else None
    if source_fd is None or target_fd is None:
        return None
    return source_fd, source_name, target_fd, target_name
