"""Lists the data files of a table or partition and describes them for events, with checksums.

Hidden entries (any path component starting with ``_`` or ``.``, e.g. ``_SUCCESS`` and Hadoop's ``.crc``
side files) are not data, as in Hive's listing filter, and are left out.

Each file is described by one ``identify`` call, which yields its checksum and, in a versioned store, the
version id that checksum belongs to (on S3: one HEAD when the object carries a CRC32C, no download). Calls
run in parallel as the store suits (``FileSystem.io_parallelism``): object stores are latency bound.

Writes do not describe whole locations any more: ``metastore.capture`` lists them (``stat_listing``, no
reads) and identifies only the files that are new or changed since the metastore recorded them.
``describe_known`` does the same for a location about to be recycled, with checksums it already knows.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from hmsrepl.concurrency import bounded_map
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.storage.base import FileIdentity, FileStatus, FileSystem, base_name, filesystem_for, relative_to
from hmsrepl.storage.local import is_local_uri, local_path

PARALLEL_CHECKSUM_THRESHOLD = 8

#: A file's identity as a listing sees it, without reading it: (size in bytes, modification time in ns).
StatIdentity = tuple[int, int]


def is_hidden(relative_path: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative_path.split("/"))


def list_data_files(location: str | None) -> list[FileStatus]:
    return list(_data_files(location)) if location else []


def _data_files(location: str) -> Iterator[FileStatus]:
    """The data files below ``location`` as the store lists them, hidden entries left out."""
    fs = filesystem_for(location)
    return (status for status in fs.list_files(location) if not is_hidden(_relative(status.uri, location)))


def _relative(uri: str, location: str) -> str:
    return relative_to(uri, location) if uri.rstrip("/") != location.rstrip("/") else base_name(uri)


def stat_listing(location: str | None) -> dict[str, StatIdentity]:
    """Data files below ``location`` by relative path, with size and modification time: one listing, no
    reads, one small tuple per file (a 1,000,000-file partition fits in a few hundred MB)."""
    if not location:
        return {}
    if is_local_uri(location):
        out_local: dict[str, StatIdentity] = {}
        _local_stats(local_path(location), out_local)
        return out_local
    fs = filesystem_for(location)
    out: dict[str, StatIdentity] = {}
    for status in fs.list_files(location):
        rel = _relative(status.uri, location)
        if not is_hidden(rel):
            out[rel] = (status.size, status.stamp)
    return out


def _local_stats(directory: str, out: dict[str, StatIdentity]) -> None:
    """Regular data files below a local directory into ``out``, with the rules of ``LocalFileSystem.list_files``.

    Only real directories are entered and only regular files listed (no symlinks, FIFOs or devices); the
    root itself is followed. Unlike ``list_files`` nothing is sorted and no directory entry is kept past its
    own step (a sorted listing holds every entry of a directory at once: about 1 KB per file), hidden
    entries are skipped with their whole subtree, and the modification time is the exact ``st_mtime_ns``.
    The loop fills a dict instead of yielding: it runs once per file of the partition at every write, and
    a generator's step per file cost a quarter of it (10,000 files).
    """
    try:
        st = os.stat(directory)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        name = os.path.basename(directory)
        if stat.S_ISREG(st.st_mode) and not is_hidden(name):
            out[name] = (st.st_size, st.st_mtime_ns)
        return
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    _stats_below(fd, "", out)


def _stats_below(fd: int, prefix: str, out: dict[str, StatIdentity]) -> None:
    """``_local_stats`` of the open directory ``fd``, which it closes.

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
                elif is_directory(st.st_mode):
                    subdirs.append(name)
        for name in subdirs:
            try:
                below = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:  # vanished or replaced while listing: nothing below it
                continue
            _stats_below(below, f"{prefix}{name}/", out)
    except OSError:  # vanished or unreadable while listing: nothing below it
        return
    finally:
        os.close(fd)


def count_data_files(location: str) -> int:
    """How many data files ``list_data_files`` would return, holding none of them: on a local disk by names
    and entry types alone (no stat per file), on an object store from the listing pages (1,000 keys a
    request). A cheap check that nothing was added or removed since a count was taken."""
    if is_local_uri(location):
        return count_local_data_files(local_path(location))
    return sum(1 for _ in _data_files(location))


def count_local_data_files(directory: str) -> int:
    """How many data files ``_local_stats`` would list below a local directory, by names and entry types
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


def identify_all(fs: FileSystem, uris: Sequence[str]) -> list[FileIdentity]:
    """``fs.identify`` of each URI, in parallel as the store suits."""
    if len(uris) >= PARALLEL_CHECKSUM_THRESHOLD:
        with ThreadPoolExecutor(max_workers=fs.io_parallelism) as pool:
            return list(bounded_map(pool, fs.identify, uris, fs.io_parallelism))
    return [fs.identify(uri) for uri in uris]


def encode_at(cm: ChangeManager, location: str, rel: str, identity: FileIdentity) -> str:
    """The event form of the file ``rel`` below ``location``."""
    subdir = rel.rsplit("/", 1)[0] if "/" in rel else ""
    return cm.encode(f"{location.rstrip('/')}/{rel}", identity.checksum, subdir, identity.version_id)


def describe_files(
    location: str | None, cm: ChangeManager, files: list[FileStatus] | None = None
) -> list[str]:
    """Encoded URIs (``fileuri#checksum#cmroot#subdir[#versionid]``) of the data files under ``location``."""
    if files is None:
        files = list_data_files(location)
    if not files or location is None:
        return []
    fs = filesystem_for(location)
    identities = identify_all(fs, [s.uri for s in files])
    out = []
    for status, identity in zip(files, identities, strict=True):
        rel = _relative(status.uri, location)
        subdir = rel.rsplit("/", 1)[0] if "/" in rel else ""
        out.append(cm.encode(status.uri, identity.checksum, subdir, identity.version_id))
    return out


#: What the metastore recorded of a file, by its relative path and current stat identity: its identity
#: (checksum, version) when the file is still the one recorded, else None (it must be read).
KnownIdentity = Callable[[str, StatIdentity], FileIdentity | None]


def describe_known(location: str | None, cm: ChangeManager, known: KnownIdentity) -> list[str]:
    """``describe_files``, reading only the files ``known`` has no identity for (new or changed ones)."""
    if not location:
        return []
    out: dict[str, str] = {}
    unknown: list[str] = []
    for rel, now in stat_listing(location).items():
        identity = known(rel, now)
        if identity is None:
            unknown.append(rel)
        else:
            out[rel] = encode_at(cm, location, rel, identity)
    fs = filesystem_for(location)
    uris = [f"{location.rstrip('/')}/{rel}" for rel in unknown]
    for rel, identity in zip(unknown, identify_all(fs, uris), strict=True):
        out[rel] = encode_at(cm, location, rel, identity)
    return [out[rel] for rel in sorted(out)]
