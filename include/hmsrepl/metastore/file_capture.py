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

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from hmsrepl.concurrency import bounded_map
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.storage.base import (
    FileIdentity,
    FileStatus,
    FileSystem,
    base_name,
    is_hidden,
    relative_to,
)
from hmsrepl.storage.local_tree import StatIdentity
from hmsrepl.storage.rooted import RootedFileSystem

PARALLEL_CHECKSUM_THRESHOLD = 8


def list_data_files(fs: RootedFileSystem, location: str | None) -> list[FileStatus]:
    """The data files below ``location``, listed through ``fs`` (bound to the roots the work may touch)."""
    return list(_data_files(fs, location)) if location else []


def _data_files(fs: RootedFileSystem, location: str) -> Iterator[FileStatus]:
    """The data files below ``location`` as the store lists them, hidden entries left out."""
    return (status for status in fs.list_files(location) if not is_hidden(_relative(status.uri, location)))


def _relative(uri: str, location: str) -> str:
    return relative_to(uri, location) if uri.rstrip("/") != location.rstrip("/") else base_name(uri)


def stat_listing(fs: RootedFileSystem, location: str | None) -> dict[str, StatIdentity]:
    """Data files below ``location`` by relative path, with size and modification time: one listing, no
    reads, one small tuple per file (a 1,000,000-file partition fits in a few hundred MB)."""
    if not location:
        return {}
    return fs.stat_tree(location)


def count_data_files(fs: RootedFileSystem, location: str) -> int:
    """How many data files ``list_data_files`` would return, holding none of them: on a local disk by names
    and entry types alone (no stat per file), on an object store from the listing pages (1,000 keys a
    request). A cheap check that nothing was added or removed since a count was taken."""
    return fs.count_files(location)


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
    """Encoded URIs (``fileuri#checksum#cmroot#subdir[#versionid]``) of the data files under ``location``.

    Read through the change manager's file system (its cmroot and the metastore's data roots): a location or
    a listed file (a symlink) outside them is refused with ``OutsideRootsError``, never read."""
    fs = cm.files.batch()
    if files is None:
        files = list_data_files(fs, location)
    if not files or location is None:
        return []
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


def describe_known(
    location: str | None, cm: ChangeManager, known: KnownIdentity, files: RootedFileSystem | None = None
) -> list[str]:
    """``describe_files``, reading only the files ``known`` has no identity for (new or changed ones).

    ``files``: a batch of ``cm.files`` (``RootedFileSystem.batch``) shared by a caller that describes many
    locations of one tree (a table's partitions): their common directories are resolved once for all."""
    if not location:
        return []
    out: dict[str, str] = {}
    unknown: list[str] = []
    # One tree: its directories resolved once for all its files, each file checked.
    fs = cm.files.batch() if files is None else files
    for rel, now in stat_listing(fs, location).items():
        identity = known(rel, now)
        if identity is None:
            unknown.append(rel)
        else:
            out[rel] = encode_at(cm, location, rel, identity)
    uris = [f"{location.rstrip('/')}/{rel}" for rel in unknown]
    for rel, identity in zip(unknown, identify_all(fs, uris), strict=True):
        out[rel] = encode_at(cm, location, rel, identity)
    return [out[rel] for rel in sorted(out)]
