"""Local directory trees: fast stat listings, directory walks and file counts below a local path.

These are the local answers of ``FileSystem.stat_tree``, ``count_files`` and ``directories``, kept out of
``storage.local`` because they run once per file of a partition at every write and are tuned for it.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator

#: A file's identity as a listing sees it, without reading it: (size in bytes, modification time in ns).
StatIdentity = tuple[int, int]


def local_stats(directory: str, out: dict[str, StatIdentity]) -> None:
    """Regular data files below a local directory into ``out``, with the rules of ``LocalFileSystem.list_files``.

    Only real directories are entered and only regular files listed (no symlinks, FIFOs or devices); the
    root itself is followed. Unlike ``list_files`` nothing is sorted and no directory entry is kept past its
    own step (a sorted listing holds every entry of a directory at once: about 1 KB per file), hidden
    entries are skipped with their whole subtree, and the modification time is the exact ``st_mtime_ns``.
    The walk fills a dict instead of yielding each file: it runs once per file of the partition at every
    write, and a generator's step per file cost a quarter of it (10,000 files).
    """
    for _ in _walk(directory, out, sys.maxsize):
        pass


def local_stat_pages(directory: str, page: int) -> Iterator[dict[str, StatIdentity]]:
    """``local_stats`` of ``directory`` in pages of about ``page`` files, in the walk's order (not sorted): a
    first capture of a partition of 1,000,000 files holds one page, not a dict of every file (some 190 MB).
    Each page is the caller's own; the walk goes on when the caller asks for the next."""
    out: dict[str, StatIdentity] = {}
    for _ in _walk(directory, out, page):
        yield dict(out)
        out.clear()
    if out:
        yield out


def _walk(directory: str, out: dict[str, StatIdentity], page: int) -> Iterator[None]:
    """Fill ``out`` with the data files below ``directory``, pausing (yielding) whenever it holds ``page``."""
    try:
        st = os.stat(directory)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        name = os.path.basename(directory)
        if stat.S_ISREG(st.st_mode) and not name.startswith(("_", ".")):
            out[name] = (st.st_size, st.st_mtime_ns)
        return
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    yield from _stats_below(fd, "", out, page)


def _stats_below(fd: int, prefix: str, out: dict[str, StatIdentity], page: int) -> Iterator[None]:
    """``local_stats`` of the open directory ``fd``, which it closes; pauses whenever ``out`` holds ``page``.

    Entries are listed and stat-ed relative to the directory's descriptor (``fstatat``), not by their
    whole path: the kernel resolves one name per file instead of every component of a warehouse path
    (ten or more for ``.../db.db/table/dt=.../hour=.../part-...``), about a quarter of the listing's time.
    Subdirectories are opened without following links, so one swapped for a link is not entered.
    """
    subdirs: list[str] = []
    is_regular, is_directory = stat.S_ISREG, stat.S_ISDIR
    try:
        with os.scandir(fd) as scan:
            for entry in scan:
                name = entry.name
                if name.startswith(("_", ".")):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if is_regular(st.st_mode):
                    out[prefix + name] = (st.st_size, st.st_mtime_ns)
                    if len(out) >= page:
                        yield
                elif is_directory(st.st_mode):
                    subdirs.append(name)
        for name in subdirs:
            try:
                below = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:  # vanished or replaced while listing: nothing below it
                continue
            yield from _stats_below(below, f"{prefix}{name}/", out, page)
    except OSError:  # vanished or unreadable while listing: nothing below it
        return
    finally:
        os.close(fd)


def named_stats(directory: str, names: Iterator[str] | list[str] | set[str]) -> dict[str, StatIdentity]:
    """Size and exact time of each named regular file below ``directory``: one ``stat`` each, no listing."""
    out: dict[str, StatIdentity] = {}
    for rel in names:
        try:
            st = os.stat(os.path.join(directory, rel), follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            out[rel] = (st.st_size, st.st_mtime_ns)
    return out


def count_local_data_files(directory: str) -> int:
    """How many data files ``local_stats`` would list below a local directory, by names and entry types
    alone (no stat per file): a cheap check that nothing was added or removed since a count was taken."""
    count = 0
    try:
        with os.scandir(directory) as scan:
            for entry in scan:
                if entry.name.startswith(("_", ".")):
                    continue
                if entry.is_file(follow_symlinks=False):
                    count += 1
                elif entry.is_dir(follow_symlinks=False):
                    count += count_local_data_files(entry.path)
    except OSError:  # vanished or unreadable: nothing below it
        return count
    return count


def local_file_ids(directory: str, prefix: str, out: dict[str, int]) -> None:
    """Data files below a local directory into ``out`` by relative path, with their inode numbers.

    The inode comes with each directory entry (``d_ino``): no stat per file, so comparing two versions of a
    partition of 10,000 files by identity costs two directory listings. Hidden entries are skipped with their
    subtree and symlinks are never followed, as in ``local_stats``.
    """
    try:
        with os.scandir(directory) as scan:
            for entry in scan:
                name = entry.name
                if name.startswith(("_", ".")):
                    continue
                if entry.is_file(follow_symlinks=False):
                    out[prefix + name] = entry.inode()
                elif entry.is_dir(follow_symlinks=False):
                    local_file_ids(entry.path, f"{prefix}{name}/", out)
    except OSError:  # vanished or unreadable: nothing below it
        return


def real_directories(directory: str, *, deepest_first: bool = False) -> Iterator[str]:
    """Every directory strictly below ``directory`` as a path, never entered through a symlink."""
    base = directory.rstrip("/") or "/"
    for dirpath, dirnames, _ in os.walk(base, topdown=not deepest_first):
        if deepest_first:
            if dirpath.rstrip("/") != base:
                yield dirpath
            continue
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                yield full
