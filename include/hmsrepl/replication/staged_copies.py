"""Which copies a load staged ahead of its first change (``prestage``), held in about 9 bytes a file.

The load publishes each staged copy once, when it writes the file's object, and needs to know meanwhile only
whether a verified copy of a planned target waits under its staged name and how it was made (from cmroot, or
found staged already by a copier): its size is the one its checksum records. A dictionary of target URIs
held some 200 bytes a file for the whole load (a partition of 1,000,000 files: 200 MB). Here each directory
keeps a sorted array of 64-bit keys, one per staged name: the name's hash with the two flags in its low bits,
and a byte a file marking the copies taken.

Two names whose keys agree (one pair in some 10**10 for a directory of 1,000,000 files) can only make the
load try to adopt a copy that is not there, which it tells (``adopt_staged_copy`` answers None and the file is
copied as usual), or leave one unused copy for the next sweep of staged leftovers. The hash is this
process's (``hash`` of the name): keys are made and looked up by the load process alone.

Copies *placed* in a new version under their own names (``CopyTask.in_place``) are counted apart as well: the
load takes them all at once when their count and a digest of their names are its listing's (``take_placed``).
"""

from __future__ import annotations

import hashlib
import heapq
from array import array
from bisect import bisect_left
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field

from hmsrepl.metastore.payloads import checksum_of
from hmsrepl.replication.apply_stats import ApplyStats
from hmsrepl.replication.filecopy import CopyResult
from hmsrepl.storage.base import path_key
from hmsrepl.storage.checksum import checksum_size
from hmsrepl.storage.rooted import RootedFileSystem
from hmsrepl.storage.staging import STAGING_PREFIX, staging_name

FROM_CMROOT, PREFETCHED, PLACED = 1, 2, 4
FLAGS = FROM_CMROOT | PREFETCHED | PLACED
RUN = 65_536  # keys sorted at a time while copies are added


def names_digest() -> hashlib.blake2b:
    """A digest of names in order (``add_names``): what ``StagedCopies.take_placed`` compares with the names
    placed in a directory, in the order they were staged. A cryptographic one (BLAKE2b), so no other list
    of names can be made to match, whatever the process's string hashes are seeded with."""
    return hashlib.blake2b(digest_size=16)


def add_names(digest: hashlib.blake2b, names: Iterable[str]) -> None:
    """Add ``names`` to ``digest``, each as its length and its UTF-8 bytes (no separator to forge)."""
    digest.update(b"".join(map(_framed, names)))


def _framed(name: str) -> bytes:
    """A name as ``add_names`` digests it: its length, then its UTF-8 bytes."""
    encoded = name.encode("utf-8", "surrogatepass")
    return len(encoded).to_bytes(4, "big") + encoded


def _key(name: str) -> int:
    """A file name's key without flags (a signed 64-bit value, low bits clear)."""
    return hash(name) & ~FLAGS


@dataclass
class _Directory:
    """One directory's staged names: keys added in staging order, in sorted runs of ``RUN`` keys, merged
    into one sorted array once the first is looked up (no list of a million ``int`` objects on the way)."""

    keys: array[int] = field(default_factory=lambda: array("q"))
    runs: list[array[int]] = field(default_factory=list)
    taken: bytearray | None = None  # per sorted key; None while keys are still being added
    placed: ApplyStats | None = None  # what the copies placed here add up to (``CopyTask.in_place``)
    placed_names: hashlib.blake2b | None = None  # a digest of their names in staging order (``names_digest``)
    pinned: int = 0  # the placed copies the staging pinned into cmroot (``prestage.PlacedPins``)

    def add(self, key: int) -> None:
        if self.taken is not None:  # looked up already (rare): what is not taken is added to again
            self.keys = array("q", (k for k, t in zip(self.keys, self.taken, strict=True) if not t))
            self.taken = None
        self.keys.append(key)
        if len(self.keys) >= RUN:
            self.runs.append(array("q", sorted(self.keys)))
            self.keys = array("q")

    def ready(self) -> bytearray:
        if self.taken is None:
            runs, self.runs = [*self.runs, array("q", sorted(self.keys))], []
            self.keys = array("q", heapq.merge(*runs)) if len(runs) > 1 else runs[0]
            self.taken = bytearray(len(self.keys))
        return self.taken

    def take(self, name: str) -> int | None:
        """The flags of ``name``'s copy, now taken (None: none staged, or taken already)."""
        taken, keys, key = self.ready(), self.keys, _key(name)
        at = bisect_left(keys, key)
        while at < len(keys) and keys[at] & ~FLAGS == key:
            if not taken[at]:
                taken[at] = 1
                return int(keys[at] & FLAGS)
            at += 1
        return None

    def untaken(self, name: str) -> bool:
        taken, keys, key = self.ready(), self.keys, _key(name)
        at = bisect_left(keys, key)
        while at < len(keys) and keys[at] & ~FLAGS == key:
            if not taken[at]:
                return True
            at += 1
        return False

    def left(self) -> int:
        return len(self.keys) - (sum(self.taken) if self.taken is not None else 0)

    def count(self) -> int:
        """The names added (taken or not)."""
        return len(self.keys) + sum(len(run) for run in self.runs)


class StagedCopies:
    """The copies staged ahead, by planned target URI: ``add`` each, ``take`` each as it is published."""

    def __init__(self) -> None:
        self._directories: dict[str, _Directory] = {}
        # The directories holding copies under their own names (new versions) that the staging made, and
        # those of them the load made its version in (``claim``).
        self._made: set[str] = set()
        self._claimed: set[str] = set()
        self._count = 0

    def add(self, target_uri: str, result: CopyResult, *, placed: bool = False, pinned: bool = False) -> None:
        """``placed``: the copy is under ``target_uri`` itself, in a new version (``CopyTask.in_place``);
        ``pinned``: the staging pinned it into cmroot too."""
        parent, _, name = target_uri.rpartition("/")
        directory = self._directories.get(parent)
        if directory is None:
            directory = self._directories[parent] = _Directory()
        flags = (
            (FROM_CMROOT if result.from_cmroot else 0)
            | (PREFETCHED if result.prefetched else 0)
            | (PLACED if placed else 0)
        )
        directory.add(_key(name) | flags)
        if placed:
            totals = directory.placed = directory.placed or ApplyStats()
            totals.files_copied += 1
            totals.bytes_copied += result.bytes_copied
            totals.files_from_cmroot += int(result.from_cmroot)
            totals.files_prefetched += int(result.prefetched)
            if directory.placed_names is None:
                directory.placed_names = names_digest()
            directory.placed_names.update(_framed(name))
            directory.pinned += int(pinned)
        self._count += 1

    def take(self, target_uri: str, encoded: str) -> CopyResult | None:
        """The staged copy of ``target_uri`` (None: none waits), no longer held here; ``encoded``: the
        file entry it was copied for, whose checksum gives its size."""
        if not self._count:
            return None
        parent, _, name = target_uri.rpartition("/")
        directory = self._directories.get(parent)
        flags = directory.take(name) if directory is not None else None
        if flags is None:
            return None
        self._taken(1)
        checksum = checksum_of(encoded)
        size = checksum_size(checksum) if checksum else 0
        return CopyResult(
            target_uri, "", size, bool(flags & FROM_CMROOT), bool(flags & PREFETCHED), bool(flags & PLACED)
        )

    def take_placed(self, directory: str, files: int, names: bytes) -> tuple[ApplyStats, bool] | None:
        """Take every copy placed in ``directory`` at once, when they are ``files`` copies whose names, in the
        order they were staged, have the digest ``names`` (of the listing the load publishes there, walked in
        its order: ``names_digest``) and none was taken yet: what they count, and whether the staging pinned
        every one of them. None when they are not exactly those names: nothing is taken then, and each is
        taken by name (``take``), as any copy staged ahead."""
        held = self._directories.get(directory)
        totals = held.placed if held is not None else None
        if held is None or totals is None or held.taken is not None:
            return None
        if (
            totals.files_copied != files
            or files != held.count()
            or held.placed_names is None
            or held.placed_names.digest() != names
        ):
            return None
        del self._directories[directory]
        self._taken(files)
        return totals, held.pinned == files

    def _taken(self, copies: int) -> None:
        """``copies`` more were taken: once none is left, nothing more is held."""
        self._count -= copies
        if not self._count:
            self._directories.clear()
            self._made.clear()
            self._claimed.clear()

    def __len__(self) -> int:
        return self._count

    def made(self, directories: Collection[str]) -> None:
        """The staging made ``directories``: a new version among them holds only the copies placed in it."""
        self._made = {directory for directory in directories if self._placed(directory)}

    def _placed(self, directory: str) -> bool:
        held = self._directories.get(directory)
        return held is not None and held.placed is not None

    def placed_in(self, directory: str) -> bool | None:
        """Whether copies were staged in ``directory`` under their own names (``CopyTask.in_place``): None
        when none were, True when the staging made the directory (it holds nothing else), else False (it was
        there before, e.g. an interrupted attempt's)."""
        if not self._placed(directory):
            return None
        return directory in self._made

    def claim(self, directory: str) -> None:
        """The load makes a version named ``directory``: the copies placed there are that version's now (taken
        by it, kept or removed as it finds them), never removed as unused (``untouched_placed``)."""
        if directory in self._made:
            self._claimed.add(directory)

    def untouched_placed(self) -> list[str]:
        """The new versions the staging made and placed copies in that the load never made: versions it never
        published (it failed first, or left the object stale), nothing of them named by any metadata and
        nothing else in them, to be removed whole."""
        return [directory for directory in self._made if directory not in self._claimed]

    def directories(self) -> list[str]:
        """The directories copies were staged in."""
        return list(self._directories)

    def unused(self, fs: RootedFileSystem, owed: Collection[str]) -> Iterator[str]:
        """The target URIs of copies not taken whose staged name no publish intent owes (``path_key`` of the
        staged names in ``owed``): each directory holding some is listed once."""
        for parent, directory in self._directories.items():
            if not directory.left():
                continue
            for entry in sorted(_names_in(fs, parent)):
                name = entry[len(STAGING_PREFIX) :]
                uri = f"{parent}/{name}"
                if (
                    entry.startswith(STAGING_PREFIX)
                    and directory.untaken(name)
                    and path_key(staging_name(uri)) not in owed
                ):
                    yield uri


def _names_in(fs: RootedFileSystem, directory: str) -> Collection[str]:
    """The names directly in ``directory``: one listing of its names where the store has directories,
    else its keys (a recursive listing: only the direct ones kept)."""
    names = fs.entry_names(directory)
    if names is not None:
        return names
    return [s.uri.rsplit("/", 1)[1] for s in fs.list_files(directory) if s.uri.rsplit("/", 1)[0] == directory]
