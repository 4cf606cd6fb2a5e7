"""Locations a database's metadata names that do not exist: a source readers would fail on.

A replica can equal its source while both are broken the same way, or the source alone is: a partition
whose directory is gone makes Spark fail with "Input path does not exist" although every file compares
equal. ``repl verify`` therefore also checks the source's own metadata against its storage.

Only filesystems with directories are checked: on an object store an empty table or partition has no
prefix at all, which is its normal state, not a fault.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.replication.policy import ReplicationPolicy


def _named(store: Any, db_name: str, policy: ReplicationPolicy | None) -> Iterator[tuple[str, str]]:
    """(what, location) for the database, each table (views name none) and each partition."""
    catalog = store.catalog
    db = catalog.get_database(db_name)
    if db.location_uri:
        yield f"database {db_name}", db.location_uri
    names = [t for t in catalog.get_tables(db_name) if policy is None or policy.includes_table(t)]
    for table in catalog.get_table_objects(db_name, names):
        if table.sd.location:
            yield f"table {table.table_name}", table.sd.location
        for part in catalog.get_partitions(db_name, table.table_name) if table.partition_keys else []:
            if part.sd.location:
                name = make_partition_name(table.partition_key_names, part.values)
                yield f"partition {table.table_name}/{name}", part.sd.location


def missing_locations(store: Any, db_name: str, policy: ReplicationPolicy | None = None) -> list[str]:
    """One line per location the metadata names that does not exist (local filesystems only). Looked at
    through the metastore's rooted file system: a location outside its configured roots is not looked at
    (a ``verify`` run whose settings name fewer roots than the metastore's own compares the rest)."""
    fs = store.cm.files
    return [
        f"{what}: location '{location}' does not exist"
        for what, location in _named(store, db_name, policy)
        if fs.contains(location, follow=False)
        and fs.traits(location).has_directories
        and not fs.exists(location)
    ]
