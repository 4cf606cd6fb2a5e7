"""A bootstrap dump's listing of a big recorded object, walked a page of its records at a time.

``describe_recorded`` lists a location whole and holds its records by path to find each file's checksum: for a
partition of 1,000,000 files that is the records (some 170 MB), the listing (some 190 MB) and the encoded
files (some 180 MB) at once, then their text. An object the metastore recorded (its captures keep the record
in step with the location) is instead walked in path order from its records (``listings.stream_sorted``):
each page of records is stated by name (one ``stat`` each, no listing), a file whose size and time are the
recorded ones keeps its recorded checksum, a changed one is read, a gone one is left out; the page's encoded
files go to the caller (the dump's ``_files``, written as they come) and are not kept.

A file the metastore never recorded (dropped there by hand) has no record to walk: the location's file count
(by names alone, nothing held) tells whether there is one. Then the walk ends with ``UnrecordedFilesError``
and the caller describes the location whole (``held``), as before: only a location with files no writer told
the metastore about costs the memory of its listing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import islice

from hmsrepl.exceptions import HmsReplError
from hmsrepl.metastore import listings
from hmsrepl.metastore.capture import still_recorded
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.file_capture import encode_at, identify_all
from hmsrepl.metastore.listings import FileRecord, ObjectKey
from hmsrepl.metastore.payloads import referenced_bytes
from hmsrepl.metastore.recorded_listing import Reader
from hmsrepl.storage.base import FileIdentity
from hmsrepl.storage.checksum import checksum_size
from hmsrepl.storage.rooted import RootedFileSystem

#: A recorded listing longer than this is walked (``RecordedPages``), not held: the most files a dump writes
#: into a page of partitions (``layout.PAGE_FILES``), so every walked listing gets a ``_files`` of its own.
LONG_LISTING = 10_000
#: Records stated, encoded and handed on at a time.
PAGE = 10_000


class UnrecordedFilesError(HmsReplError):
    """The location holds files the metastore never recorded: its records alone cannot list it."""


class RecordedPages:
    """The encoded files of a recorded object's location in path order, in pages, as ``describe_recorded``
    lists them: walked once by the writer of its ``_files`` (a walk reads what changed since the record).

    ``len`` is the recorded count (what decides where the listing is written); ``written`` and
    ``written_bytes`` count the files of the last whole walk and the bytes their checksum tokens name
    (the dump's tally), with no second walk."""

    def __init__(
        self,
        reader: Reader,
        cm: ChangeManager,
        key: ObjectKey,
        location: str,
        count: int,
        held: Callable[[], list[str]],
    ) -> None:
        self._reader = reader
        self._cm = cm
        self._key = key
        self.location = location
        self._count = count
        self._held = held
        self.written = 0
        self.written_bytes = 0

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[list[str]]:
        """Each page of encoded files; ``UnrecordedFilesError`` at the end when the location holds a file
        no record names (nothing the caller wrote from the walk is then a listing)."""
        self.written = self.written_bytes = 0
        fs = self._cm.files.batch()  # one tree: its directories resolved once for all its files
        on_disk = fs.count_files(self.location)
        present = 0
        with self._reader() as conn:
            records = listings.stream_sorted(conn, self._key)
            while page := list(islice(records, PAGE)):
                stats = fs.stat_named(self.location, [record.rel_path for record in page])
                present += len(stats)
                encoded = self._encode(fs, [r for r in page if r.rel_path in stats], stats)
                self.written += len(encoded)
                yield encoded
        if present != on_disk:
            raise UnrecordedFilesError(
                f"'{self.location}' holds {on_disk} data files, {present} of them recorded"
            )

    def held(self) -> list[str]:
        """The whole listing, described as before (a location holding files never recorded), counted as
        the walk counts."""
        listing = self._held()
        self.written = len(listing)
        self.written_bytes = referenced_bytes(listing)
        return listing

    def _encode(
        self, fs: RootedFileSystem, page: list[FileRecord], stats: dict[str, tuple[int, int]]
    ) -> list[str]:
        """The page's files encoded in order: a recorded identity where the file is still the one recorded,
        else what reading it now finds (the changed files of the page, read together)."""
        identities: list[FileIdentity | None] = [still_recorded(r, stats[r.rel_path]) for r in page]
        changed = [i for i, identity in enumerate(identities) if identity is None]
        if changed:
            uris = [f"{self.location.rstrip('/')}/{page[i].rel_path}" for i in changed]
            for i, found in zip(changed, identify_all(fs, uris), strict=True):
                identities[i] = found
        out = []
        for record, identity in zip(page, identities, strict=True):
            assert identity is not None
            self.written_bytes += max(checksum_size(identity.checksum), 0)
            out.append(encode_at(self._cm, self.location, record.rel_path, identity))
        return out
