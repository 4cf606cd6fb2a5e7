"""The directories a replica owns outside its database's directory, where its loads may leave things behind.

A replica's external tables (and any object its source keeps outside the source database's directory) live
outside the replica database's directory, wherever the load's ``LocationMapper`` put them. Loads publish
each change as a version directory beside the object's logical location (``e1.hmsrepl-v47``,
``e1/d=0.hmsrepl-v47``), so what a replica owns out there is, for each such object, its logical name in its
parent directory: every entry of that parent whose logical name is the object's (its versions, the
directories of its dropped partitions inside a partitioned table's container). Entries beside them with
other names may be another replica's or the source's own and are never the replica's to report.

This is derived from the replica's metadata alone, so it holds for any layout the load uses. A layout that
gives each replica a directory of its own (every entry below it the replica's) adds that directory whole
(``OwnedDirectory(root, None)``): the entries below it are then dropped as covered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hmsrepl.metastore import Metastore
from hmsrepl.replication.filecopy import logical_location
from hmsrepl.replication.replica_layout import is_below as _below
from hmsrepl.replication.replica_layout import owned_external_root


@dataclass(frozen=True)
class OwnedDirectory:
    """A directory to look in, and the logical names of its entries that are the replica's (None: all)."""

    root: str
    names: frozenset[str] | None = None

    def owns(self, relative: str) -> bool:
        """Whether an entry at ``relative`` below ``root`` (as ``Leftovers.describe`` names it) is the replica's."""
        if self.names is None:
            return True
        first = relative.strip("/").split("/", 1)[0]
        return logical_location(first) in self.names


def external_dirs(store: Metastore, db_name: str) -> list[OwnedDirectory]:
    """Where the replica database ``db_name`` owns entries outside its database directory."""
    catalog = store.catalog
    db = catalog.get_database(db_name)
    db_root = (db.location_uri or catalog.default_db_location(db_name)).rstrip("/")
    locations: list[str] = []
    for table in catalog.get_table_objects(db_name, catalog.get_tables(db_name)):
        locations.append(table.sd.location or "")
        if table.partition_keys:
            table_root = logical_location(table.sd.location or "")
            locations += [
                p.sd.location or ""
                for p in catalog.get_partitions(db_name, table.table_name)
                if not _below(logical_location(p.sd.location or ""), table_root)
            ]
    families = [_family(loc) for loc in locations if loc and not _below(logical_location(loc), db_root)]
    own_root = owned_external_root(store, db_name)  # everything below it is this replica's, named or not
    return merge([*families, *([OwnedDirectory(own_root)] if own_root else [])])


def merge(dirs: Iterable[OwnedDirectory]) -> list[OwnedDirectory]:
    """One entry per directory (names united), without directories inside one owned whole."""
    by_root: dict[str, frozenset[str] | None] = {}
    for owned in dirs:
        root = owned.root.rstrip("/")
        if owned.names is None or (root in by_root and by_root[root] is None):
            by_root[root] = None
        else:
            by_root[root] = (by_root.get(root) or frozenset()) | owned.names
    whole = [root for root, names in by_root.items() if names is None]
    return [
        OwnedDirectory(root, names)
        for root, names in sorted(by_root.items())
        if not any(_below(root, other) and root != other for other in whole)
    ]


def _family(location: str) -> OwnedDirectory:
    """The parent of an object's logical location, owning the entries of the object's logical name."""
    parent, _, name = logical_location(location).rpartition("/")
    return OwnedDirectory(parent, frozenset({name}))
