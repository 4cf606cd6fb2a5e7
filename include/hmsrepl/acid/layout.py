"""Where an insert-only table keeps its ACID directories, and what is directly in each such location.

The initiator, the worker and the cleaner all work per location (the table's own, or each partition's) and
all need the same grouping of a listing by top-level entry, so it lives here once.
"""

from __future__ import annotations

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.formats.partition_names import make_partition_name, parse_partition_name
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.service import Metastore
from hmsrepl.storage.base import FileStatus, relative_to
from hmsrepl.storage.rooted import RootedFileSystem


def locations(metastore: Metastore, table: Table) -> list[tuple[str | None, str]]:
    """(partition name or ``None``, location) of every location of ``table`` that holds data."""
    if not table.partition_keys:
        return [(None, table.sd.location)] if table.sd.location else []
    keys = table.partition_key_names
    return [
        (make_partition_name(keys, part.values), part.sd.location)
        for part in metastore.catalog.get_partitions(table.db_name, table.table_name)
        if part.sd.location
    ]


def location_of(metastore: Metastore, table: Table, part_name: str | None) -> str:
    """The location of the table (``part_name`` ``None``) or of one of its partitions, by name."""
    if part_name is None:
        if table.partition_keys:
            raise InvalidObjectError(
                f"table '{table.qualified_name}' is partitioned; name the partition to compact"
            )
        location = table.sd.location
    else:
        values = [value for _, value in parse_partition_name(part_name)]
        location = metastore.catalog.get_partition(table.db_name, table.table_name, values).sd.location
    if not location:
        raise InvalidObjectError(
            f"'{table.qualified_name}' {part_name or ''} has no location".replace("  ", " ")
        )
    return location


def entries(fs: RootedFileSystem, location: str) -> dict[str, list[FileStatus]]:
    """Files under ``location`` grouped by the top-level entry (directory or file) they are in, listed
    through ``fs`` (the metastore's roots)."""
    if not fs.exists(location):
        return {}
    out: dict[str, list[FileStatus]] = {}
    for status in fs.list_files(location):
        out.setdefault(relative_to(status.uri, location).split("/", 1)[0], []).append(status)
    return out
