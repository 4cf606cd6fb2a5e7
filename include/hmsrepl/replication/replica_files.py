"""The replica's own verified listing of each table and partition, and the data changes a load applies to it.

A load used to learn what a replica object holds by listing its current version directory and reading every
file again (checksum) to decide which files a new version may keep: one new file into a partition of 10,000
files cost 10,000 file reads. Instead, a load records what it verified and published, in the replica's own
``data_files`` table (``metastore.listings``, keyed by the replica's table and partition ids, so renames and
location flips keep the record), and the next load starts from that record: it applies the event's
``DataChange`` (a format-2 delta, or the complete listing of a format-1 event) and keeps every file the record
names with the same checksum. Before trusting a kept file it checks size and modification time against the
record (one directory listing, no read); a file that changed behind the replica's back is read once and, if
its content changed, copied again from the source. Without a record (replicas loaded before records existed)
the current directory is listed and read once, as loads always did, and recorded for the next load.
``repl verify`` still reads everything.

Memory: a listing is held as dicts keyed by relative path (path -> encoded URI, path -> modification time),
never one object per file; records are read row by row and written in chunks, so a partition of 1,000,000
files costs those dicts and nothing of its size more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice

from sqlalchemy import Connection, select

from hmsrepl.formats.file_uri import SEPARATOR
from hmsrepl.metastore import listings
from hmsrepl.metastore.applied_files import AppliedDelta, AppliedFiles, ListingPages
from hmsrepl.metastore.capture import same_stat
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.file_capture import describe_files, list_data_files
from hmsrepl.metastore.listings import FileRecord, ObjectKey
from hmsrepl.metastore.messages import DataChange, checksum_of, relative_path
from hmsrepl.metastore.payloads import place_and_checksum
from hmsrepl.metastore.schema import data_files
from hmsrepl.storage.base import relative_to, store_traits
from hmsrepl.storage.checksum import checksum_size
from hmsrepl.storage.rooted import RootedFileSystem

WRITE_CHUNK = 5_000


#: A data change as a load applies it: a change, or a new object's whole listing read in pages.
LoadedChange = DataChange | ListingPages


def as_change(files: LoadedChange | Sequence[str] | None) -> LoadedChange | None:
    """A data change from what callers pass: a change, a complete listing (bootstraps; too long to hold: left
    in its pages), or None (no data)."""
    if files is None or isinstance(files, DataChange | ListingPages):
        return files
    return DataChange(tuple(files), (), complete=True)


class AddedOneByOne(DataChange, frozen=True, omit_defaults=True):
    """A composed change each of whose steps added one new file and removed nothing, ``added`` in step order.

    Publishing its files one after the other shows readers only listings the source had, one per step (an
    append, a streaming micro-batch), so a load may add them in place (``TargetWriter``); one step that adds
    several files must appear at once and takes a new version.
    """


def adds_one_file(change: DataChange | None) -> bool:
    """The change adds exactly one file and removes nothing (one step of ``AddedOneByOne``)."""
    return change is not None and len(change.added) == 1 and not change.removed and not change.complete


def compose(first: DataChange | None, then: DataChange | None) -> DataChange | None:
    """One change with the effect of ``first`` followed by ``then`` (O(files the two name), no listing).

    A load folds an object's successive changes within one batch into one and publishes one version; the
    result carries ``then``'s count and digest, which describe the listing after both. Successive one-file
    additions of new paths compose into ``AddedOneByOne``; an empty step keeps what ``first`` was.
    """
    if first is None or then is None or then.complete:
        return then if then is not None else first
    gone = set(then.removed)
    added = {relative_path(e): e for e in first.added}
    one_by_one = (isinstance(first, AddedOneByOne) or adds_one_file(first)) and (
        then.is_empty or (adds_one_file(then) and relative_path(then.added[0]) not in added)
    )
    for rel in gone:
        added.pop(rel, None)
    added.update((relative_path(e), e) for e in then.added)
    removed = () if first.complete else tuple(dict.fromkeys((*first.removed, *then.removed)))
    kind = AddedOneByOne if one_by_one and len(added) > 1 else DataChange
    return kind(tuple(added.values()), removed, first.complete, then.count, then.digest)


@dataclass
class HeldListing:
    """What a replica object's current version holds, as the replica verified it."""

    files: dict[str, str] = field(default_factory=dict)  # relative path -> encoded URI (with checksum)
    stamps: dict[str, int] = field(default_factory=dict)  # relative path -> modification time (ns)
    recorded: bool = True  # from the record (False: listed and read just now, so nothing to re-check)


def read_record(conn: Connection, key: ObjectKey, location: str) -> HeldListing | None:
    """The recorded listing of a replica object, its files named below ``location`` (None: no record)."""
    held = HeldListing()
    rows = conn.execute(
        select(data_files.c.rel_path, data_files.c.mtime_ns, data_files.c.checksum).where(
            data_files.c.tbl_id == key.tbl_id, data_files.c.part_id == key.part_id
        )
    )
    base = location.rstrip("/")
    for rel, stamp, checksum in rows:  # the encoded form of ``EncodedFileUri``, written out: one per file
        subdir = rel.rsplit("/", 1)[0] if "/" in rel else ""
        held.files[rel] = f"{base}/{rel}{SEPARATOR}{checksum}{SEPARATOR}{SEPARATOR}{subdir}"
        held.stamps[rel] = stamp
    return held if held.files else None


def scan(location: str, cm: ChangeManager) -> HeldListing:
    """List and read a directory once (the object has no record yet): its files with fresh checksums."""
    statuses = list_data_files(cm.files, location)
    held = HeldListing(recorded=False)
    for status, encoded in zip(statuses, describe_files(location, cm, statuses), strict=True):
        rel = relative_to(status.uri, location)
        held.files[rel] = encoded
        held.stamps[rel] = status.stamp
    return held


def unchanged(held: HeldListing, wanted: Mapping[str, str]) -> set[str]:
    """Paths whose wanted content the held version already has (same checksum)."""
    out = set()
    for rel, encoded in wanted.items():
        have = held.files.get(rel)
        if have is not None and (have is encoded or checksum_of(have) == checksum_of(encoded)):
            out.add(rel)
    return out


def drift(
    fs: RootedFileSystem, location: str, held: HeldListing, kept: set[str]
) -> tuple[set[str], dict[str, int]]:
    """Which ``kept`` files no longer are what the record says, and new stamps of those that still are.

    One listing of the directory; a file whose size or modification time differs from the record is read
    (checksum) to decide: same content (e.g. touched) keeps it with a new stamp, else it has drifted (as has
    a file gone missing) and must be copied again.
    """
    seen: set[str] = set()
    drifted: set[str] = set()
    restamped: dict[str, int] = {}
    for status in fs.list_files(location):
        rel = relative_to(status.uri, location)
        if rel not in kept:
            continue
        seen.add(rel)
        stamp = status.stamp
        if same_stat((status.size, stamp), (_size_of(held.files[rel]), held.stamps[rel])):
            continue
        checksum = checksum_of(held.files[rel])
        if status.size == checksum_size(checksum) and fs.checksum(status.uri) == checksum:
            restamped[rel] = stamp
        else:
            drifted.add(rel)
    drifted |= kept - seen
    return drifted, restamped


def _size_of(encoded: str) -> int:
    """The size in an encoded URI's checksum token (``crc32c-<hex>-<size>``), without decoding the rest."""
    return checksum_size(encoded.split(SEPARATOR, 2)[1])


def stamp_of(fs: RootedFileSystem, uri: str) -> int:
    """The stamp (``FileStatus.stamp``) of one published file: one stat, or one HEAD."""
    status = fs.status(uri)
    if status is None:
        raise FileNotFoundError(uri)
    return status.stamp


@dataclass
class Published:
    """A version a load made (or kept) for an object, and what its record must become."""

    location: str
    # relative path -> encoded URI: everything the version holds (a new object's listing: left in its pages)
    files: dict[str, str] | ListingPages
    stamps: dict[str, int]  # relative path -> modification time of files whose record is new or changed
    removed: set[str]  # recorded paths the version no longer holds
    replace: bool  # no record existed: record every file (``stamps`` then covers all of them)
    in_place: bool = False  # ``files`` are only the ones added to ``location``, staged until the commit
    delta: bool = (
        False  # ``files`` are only the ones added: the version keeps every recorded file (a standby)
    )
    #: Files copied into a new version whose stamps are not read yet, and how to read one (its relative
    #: path): only a record the catalog's own call does not write needs them (``records``). A new version's
    #: catalog call logs its whole listing and records it, stating the directory once: a stat per file here as
    #: well cost a partition of 1,000,000 files a million more ``stat`` calls and a dict of their stamps.
    unstamped: list[str] = field(default_factory=list)
    stamp: Callable[[str], int] | None = None

    @property
    def changed_files(self) -> int:
        """How many files the record gets anew (new, or a new stamp)."""
        return len(self.stamps) + len(self.unstamped)

    @property
    def as_delta(self) -> bool:
        """Whether the catalog records the version from its change alone: where the record was kept and the
        files kept their identity (added in place, or linked into a new version on a local disk). Otherwise
        it takes the whole listing and records it a batch at a time: no record yet, a version mostly new (a
        new object, a bootstrap: the change is the listing), or an object store (whose copies are new
        objects with new stamps and versions, each looked up)."""
        if self.in_place or self.delta:
            return True
        if self.replace:
            return False
        assert isinstance(self.files, dict)  # only a new object's listing is left in its pages (``replace``)
        mostly_kept = 2 * (self.changed_files + len(self.removed)) < len(self.files)
        return mostly_kept and store_traits(self.location).hard_links

    def applied(self) -> AppliedFiles:
        """What the replica's own event records: the version's change (``as_delta``) or its whole listing."""
        if not self.as_delta:
            return self.files
        return AppliedDelta(tuple(self.records()), tuple(sorted(self.removed)), staged=self.in_place)

    def records(self) -> Iterator[FileRecord]:
        if self.unstamped:
            assert self.stamp is not None, "a version with unstamped files says how to stamp them"
            self.stamps.update((rel, self.stamp(rel)) for rel in self.unstamped)
            self.unstamped = []
        if isinstance(self.files, ListingPages):  # stated a page at a time, never held
            assert self.stamp is not None, "a version published from pages says how to stamp its files"
            for encoded in self.files.lines():
                rel, checksum = place_and_checksum(encoded)
                yield FileRecord(rel, checksum_size(checksum), self.stamp(rel), checksum)
            return
        for rel in self.files if self.replace else self.stamps:
            checksum = checksum_of(self.files[rel])
            yield FileRecord(rel, checksum_size(checksum), self.stamps[rel], checksum)


def record(conn: Connection, key: ObjectKey, published: Published) -> None:
    """Write what a version holds into the replica's record of the object (only the difference, usually)."""
    if published.replace:
        listings.forget(conn, key)
    removed: Iterable[str] = () if published.replace else published.removed
    records = published.records()
    while True:
        chunk = list(islice(records, WRITE_CHUNK))
        if not chunk and not removed:
            return
        listings.apply(conn, key, chunk, removed)
        removed = ()
        if len(chunk) < WRITE_CHUNK:
            return
