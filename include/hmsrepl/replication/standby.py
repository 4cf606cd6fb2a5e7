"""Standby version directories: an object's replaced version kept to start its next version from.

A change that must appear at once (one Spark append of several files, a step of several files) takes a new
version directory, which must hold every file the object keeps: a partition of 10,000 files cost 10,000
links, and retiring the old version 10,000 removals, for 8 files added. Readers list one directory per
object (Hive, Trino and Spark read a partition's location, recursively or not), so an overlay beside the
kept files would not be read: the version must hold them all.

It need not be built from nothing. Once the readers' grace period of a replaced version has passed (no
reader lists it any more, the same promise that lets retirement delete it), its retirement *parks* it at
the object's standby name (``filecopy.standby_location``) instead of removing it: what the newer version did
not carry is recycled as before, the rest (hard links of files the object still holds) stays. The next
version of the object renames the standby to its own name, a directory no metadata names, and makes it hold
exactly the listing by comparing it with the current version by file identity (inode numbers, from the two
directory listings alone): it links what it lacks, unlinks what the current version no longer holds, and
copies the new files. That costs two directory listings and the files that changed since the standby was
current, not one link per kept file. The location flip, the readers' atomicity and the retirement of the
version it replaces are those of any new version (``replica_versions``).

Only stores with hard links park standbys (an object store's "link" is a copy). A retirement of a version
that was not mostly carried (an overwrite, a drop) removes the object's standby too, so a standby never holds
content the object lost. Sweeps keep the standby of an object that metadata names (``leftovers``), and remove
the others. Every step is safe to repeat after a kill: a parked standby is a directory no one reads, and a
version built from a standby is a version directory like any other, rebuilt by the rerun from what it holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.schema import partitions, tbls
from hmsrepl.replication.failures import fault_point
from hmsrepl.replication.filecopy import logical_location, standby_location
from hmsrepl.replication.leftovers import Retirement, named_locations
from hmsrepl.storage.base import join_uri
from hmsrepl.storage.rooted import RootedFileSystem


def park_or_drop(store: Metastore, retirements: Iterable[Retirement]) -> tuple[list[Retirement], int]:
    """Park the retirements that name a standby (in order); drop the standby of any other replaced version.

    Returns the retirements still to be removed as usual (those not parked) and how many files parking
    recycled. The caller holds the replica database's row lock, which every load batch holds while it
    writes: no batch is claiming a standby meanwhile."""
    rest: list[Retirement] = []
    recycled = 0
    for retirement in retirements:
        if retirement.standby:
            parked = park(store, retirement)
            if parked is not None:
                recycled += parked
                continue
        elif retirement.recycle:
            drop_standby_of(store.cm.files, retirement.directory)
        rest.append(retirement)
    return rest, recycled


def park(store: Metastore, retirement: Retirement) -> int | None:
    """Make a retired version its object's standby; how many files were recycled (None: not parked).

    Not parked (removed as usual instead): a store without hard links, or a directory that a table or
    partition still names, at or below it."""
    fs = store.cm.files
    directory = retirement.directory.rstrip("/")
    if not fs.exists(directory):
        return 0  # parked (or removed) before a kill; its ticket is all that was left
    named = named_locations(store, directory)
    if not fs.traits(directory).hard_links or named.data or named.containers:
        return None
    if not _object_exists(store, directory):
        return None  # dropped or renamed since this version was retired: no object to keep a standby for
    # A version built from a standby carried every file it held: nothing to list for recycling.
    ids = {} if retirement.whole else fs.file_ids(directory) or {}
    replaced = [join_uri(directory, rel) for rel in ids if rel not in retirement.carried]
    statuses = [s for s in (fs.status(uri) for uri in replaced) if s is not None]
    if statuses:  # replaced on the source: kept in the replica's cmroot (a replica is a source too)
        store.cm.recycle(describe_files(directory, store.cm, statuses))
        fault_point()
    for status in statuses:
        fs.delete(status.uri)  # a no-op where recycling moved it
    standby = retirement.standby
    if fs.has_entry(standby):
        fs.delete_tree(standby)  # an older standby: this one is closer to the object's current version
        fault_point()
    if not fs.rename(directory, standby):
        return None
    fault_point()
    return len(statuses)


def _object_exists(store: Metastore, directory: str) -> bool:
    """Whether a table or partition still has the logical location of the retired version ``directory``."""
    logical = logical_location(directory.rstrip("/"))
    with store.events.reader() as conn:
        for column in (tbls.c.location, partitions.c.location):
            for (location,) in conn.execute(
                select(column).where(column.startswith(logical, autoescape=True))
            ):
                if location and logical_location(location.rstrip("/")) == logical:
                    return True
    return False


def standby_of(directory: str) -> str:
    """The standby of the object whose version (or staging area) ``directory`` is."""
    return standby_location(logical_location(directory))


def drop_standby_of(fs: RootedFileSystem, directory: str) -> None:
    """Remove the standby of the object whose version ``directory`` is (it may hold content the object lost).

    Under the replica database's row lock only: a load claiming the standby renames it meanwhile."""
    standby = standby_of(directory)
    if standby != directory.rstrip("/") and fs.has_entry(standby):
        fs.delete_tree(standby)
        fault_point()


def claim(fs: RootedFileSystem, logical: str, new: str) -> bool:
    """Rename the object's standby to ``new`` (a version directory no metadata names); False if it has none.

    A ``new`` already there is what an interrupted attempt of the same batch left (built from the standby or
    not): it is gone on from, whatever it holds (``fill`` compares every file)."""
    if fs.is_directory(new):
        return True
    return fs.rename(standby_location(logical), new)


def fill(
    fs: RootedFileSystem, new: str, held: dict[str, int], current: str, added: Iterable[str]
) -> set[str]:
    """Make ``new`` hold exactly the files ``current`` holds (``held``: its ``file_ids``; the same files, by
    identity), none of ``added`` (copied in next): links what it lacks, unlinks the rest. Returns the paths
    it holds from ``current``."""
    have = fs.file_ids(new) or {}
    fresh = set(added)
    for rel, ident in have.items():
        if held.get(rel) != ident or rel in fresh:
            fs.delete(join_uri(new, rel))
            fault_point()
    for rel, ident in held.items():
        if have.get(rel) != ident:
            fs.link_or_copy(join_uri(current, rel), join_uri(new, rel))
            fault_point()
    return set(held)
