"""The listing a replication load published, as the checksums the load verified.

A replica logs what its loads apply like any other write (so a replica can itself be replicated: chains and
reverse replication). A load has just made a location hold exactly a list of files whose checksums it
verified while copying; reading them again would re-read every byte. The listing is instead taken from the
copied files: each one's place below the location (``subdir`` and name, as at the source) and its checksum.
``metastore.capture`` records exactly that listing (stating the files for their sizes and modification times,
no reads) and logs its diff from the previous record.

Stores that keep object versions (S3 with versioning) still look the new files up: an event there pins the
version it saw, which only a lookup of the object can tell (one HEAD per file, no download).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from hmsrepl.exceptions import HmsReplError
from hmsrepl.metastore.listings import FileRecord
from hmsrepl.metastore.messages import DataChange, checksum_of
from hmsrepl.metastore.payloads import place_and_checksum
from hmsrepl.storage.base import is_hidden


@dataclass(frozen=True)
class AppliedDelta:
    """What a load changed in a location whose record it kept: the records of its new or changed files and
    the recorded paths it no longer holds.

    The location's other files are the recorded ones (a new version links them: same inode, so the same
    size and modification time; files added in place leave them untouched), so only the change is recorded:
    the capture costs what changed, not what the object holds. Each record comes with the size, modification
    time and checksum the load verified. ``staged``: files added in place, still under their staged names
    while the load's transaction runs (a rename keeps the time); their publish intent pins them.
    """

    records: tuple[FileRecord, ...]
    removed: tuple[str, ...] = ()
    staged: bool = False


class ListingChangedError(HmsReplError):
    """A listing read again during a load is not what its first reading was (its dump changed under the load)."""


class ListingPages:
    """A new object's whole listing of encoded files, too long to hold, walked a page at a time and read again
    (``read``) for each walk: a dump's ``_files`` of 1,000,000 lines is some 170 MB of lines, and as much again
    as a dict by path.

    A bootstrap load walks it three times: to publish the version, to record it, and to write the replica's
    event (``page_capture``). Each walk after the first must read the very same lines (count and a BLAKE2
    digest of the pages), else it fails with ``ListingChangedError`` before the batch commits: a dump
    rewritten under the load never gets other files recorded or logged than the ones it copied and verified.
    """

    def __init__(self, read: Callable[[], Iterable[Sequence[str]]], where: str) -> None:
        self._read = read
        self.where = where
        self._first: tuple[int, bytes] | None = None  # the first whole walk's line count and digest
        #: Every file of the listing is pinned into the replica's cmroot already (the load staged and pinned
        #: each copy: ``replication.prestage``), so recording it pins nothing again.
        self.pinned = False

    def __iter__(self) -> Iterator[Sequence[str]]:
        digest = hashlib.blake2b(digest_size=16)
        count = 0
        for page in self._read():
            digest.update("\n".join(page).encode())
            digest.update(b"\n")
            count += len(page)
            yield page
        walked = (count, digest.digest())
        if self._first is None:
            self._first = walked
        elif walked != self._first:
            raise ListingChangedError(
                f"the listing '{self.where}' changed while the load read it ({self._first[0]} lines, then "
                f"{count}); nothing of this batch was applied: stop what writes to the dump, then load again"
            )

    def lines(self) -> Iterator[str]:
        """Every line, page after page."""
        for page in self:
            yield from page

    def as_change(self) -> DataChange:
        """The listing held whole, as a complete change (where a load must compare it with what is there)."""
        return DataChange(tuple(self.lines()), (), complete=True)


AppliedListing = Sequence[str] | Mapping[str, str]
"""A location's whole listing as a load made it: encoded files, or the load's own listing (relative path ->
encoded)."""

AppliedFiles = AppliedListing | AppliedDelta | ListingPages
"""What a load made a location hold: its whole listing (held, or read again a page at a time), or its change
to the recorded one."""


class ChecksumView(Mapping[str, str]):
    """Relative path -> checksum over a load's listing, hidden entries left out, computed on access: the
    listing of a partition of 1,000,000 files is not copied into a second map of paths and checksums."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self._files = files
        self._count = sum(1 for rel in files if not is_hidden(rel))

    def __getitem__(self, rel: str) -> str:
        if is_hidden(rel):
            raise KeyError(rel)
        return checksum_of(self._files[rel])

    def __iter__(self) -> Iterator[str]:
        return (rel for rel in self._files if not is_hidden(rel))

    def __len__(self) -> int:
        return self._count


def applied_checksums(applied: AppliedListing) -> Mapping[str, str]:
    """Relative path -> checksum of the encoded files a load made a location hold (hidden entries left out)."""
    if isinstance(applied, Mapping):
        return ChecksumView(applied)
    out: dict[str, str] = {}
    for text in applied:
        relative, checksum = place_and_checksum(text)
        if not is_hidden(relative):
            out[relative] = checksum
    return out
