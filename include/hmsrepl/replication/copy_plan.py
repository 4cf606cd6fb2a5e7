"""The copy tasks of a load: one per target path of the files a dump names, a page at a time.

A task names the file to read (the dump's encoded entry), where its copy goes on the replica, and the roots
both sides are bound to. Planning reads the dump as it goes and never holds a whole dump's tasks: a partition
of 1,000,000 files held a task, its target URI and its outcome per file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from hmsrepl.metastore.messages import relative_path
from hmsrepl.metastore.payloads import ObjectMetadata, convert, metadata_location
from hmsrepl.replication.filecopy import CopyTask, versioned_location
from hmsrepl.replication.layout import FILES, METADATA, TABLE, DumpDir, DumpLayout, DumpMetadata
from hmsrepl.replication.locations import LocationMapper
from hmsrepl.replication.source_roots import SourceRoots
from hmsrepl.storage.base import join_uri
from hmsrepl.storage.rooted import RootedFileSystem


class DumpedObject(NamedTuple):
    """A page of the files a dump names for one table or partition, as the load's copies are planned."""

    location: str | None  # the object's source location
    files: Sequence[str]  # a page of its encoded files
    own_listing: bool = False  # a partition whose listing has its own directory in the dump (a big one)


class CopyPlanner:
    """Plans the copies of one load into one replica database.

    ``replica_files``: the replica's data roots and cmroot (copies stage there). ``version``: the event id a
    bootstrap names its new versions by; None for a load that fills no version of its own.
    """

    def __init__(
        self,
        mapper: LocationMapper,
        replica_files: RootedFileSystem,
        source_roots: SourceRoots,
        version: int | None = None,
    ) -> None:
        self.mapper, self.replica_files, self.source_roots = mapper, replica_files, source_roots
        self.version = version

    def pages(self, objects: Iterable[DumpedObject], page: int | None = None) -> Iterator[list[CopyTask]]:
        """One task per target path, for ``objects`` of the dump, in pages of ``page`` tasks (None: all in
        one). The last version of a path wins within a page (a bootstrap's pages cut only the listing of
        one object, which names each of its paths once).

        With a ``version``, a partition whose listing has its own directory in the dump (more than a page of
        files) is copied straight into the version directory it will take (``versioned_location``), under the
        files' own names, on stores with hard links: no metadata names that directory before the load
        commits, as for any version the load fills, and its publication then renames nothing (a partition of
        1,000,000 files renamed each one)."""
        replica_roots = self.replica_files.roots
        cmroot = self.source_roots.cmroot
        tasks: dict[str, CopyTask] = {}
        for source_location, files, own_listing in objects:
            target_location = self.mapper.map(source_location)
            if not target_location:
                continue
            in_place = (
                self.version is not None
                and own_listing
                and self.replica_files.traits(target_location).hard_links
            )
            version_location = versioned_location(target_location, self.version or 0) if in_place else ""
            roots = (source_location or "", cmroot)
            for encoded in files:
                rel = relative_path(encoded)
                # A file in a subdirectory (a union's) is staged at the logical location, as any other copy: a
                # version's own directory is then the only one copies are placed in.
                placed = in_place and "/" not in rel
                target_uri = join_uri(version_location if placed else target_location, rel)
                tasks[target_uri] = CopyTask(encoded, target_uri, roots, cmroot, replica_roots, placed)
                if page is not None and len(tasks) >= page:
                    yield list(tasks.values())
                    tasks = {}
        if tasks:
            yield list(tasks.values())


def bootstrap_objects(
    dump: DumpDir, meta: DumpMetadata, *, own_listings: bool = True
) -> Iterator[DumpedObject]:
    """(source location, files, own listing) of every table and partition of a bootstrap dump, one at a time
    (a million partitions are never held as a list), an object's listing a page at a time: one of many files
    comes as several of its location and a page of its files. Without ``own_listings``, the partitions in
    directories of their own are left out (``own_listing_objects`` gives them) and their listings not read."""
    for relative in dump.metadata_files(meta.db_name):
        found = DumpLayout.entry(relative)
        if found.kind != TABLE or found.table is None:
            continue  # partitions in their own directories come with their table's
        table = convert(dump.read_json(relative), ObjectMetadata, relative)
        for page in dump.files_pages(relative[: -len(METADATA)] + FILES):
            yield DumpedObject(table.location, page)
        for dumped, listing in dump.partition_listings(DumpLayout.table_dir(meta.db_name, found.table)):
            if listing is not None and not own_listings:
                continue
            location = metadata_location(dumped.document, dumped.where)
            for page in [dumped.files or []] if listing is None else listing:
                yield DumpedObject(location, page, own_listing=listing is not None)


def own_listing_objects(dump: DumpDir, meta: DumpMetadata) -> Iterator[DumpedObject]:
    """The pages of a bootstrap's partitions in directories of their own, in the order its validation hands
    them on (``DumpDir.own_listings``)."""
    for relative, listing in dump.own_listings(meta.db_name):
        location = metadata_location(dump.read_json(relative), relative)
        for page in listing:
            yield DumpedObject(location, page, own_listing=True)
