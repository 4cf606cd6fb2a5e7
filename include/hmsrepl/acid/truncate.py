"""Truncating an insert-only table the way Hive 4 does: an empty overwrite under a write id, not a delete.

Deleting the files would pull rows from under readers holding an older snapshot, and a replica would never
hear of it (ACID data reaches it only through committed txns). Instead each location (the table's, or each
named partition's) gets an overwrite that writes no rows: a ``base_<wid>`` holding only a marker, which hides
everything below it from snapshots taken after its commit. Its COMMIT_TXN replicates like any overwrite (the
replica gets the empty base, ``acid_replay``), and older snapshots keep reading their files, which stay on
disk (as after any overwrite) until a major compaction of the location after later writes cleans them.

A partitioned table's partitions are emptied one txn each, in name order: a reader may see some emptied and
others not while it runs (Hive empties them in one txn).
"""

from __future__ import annotations

from collections.abc import Sequence

from hmsrepl.acid.insert_only import InsertOnlyWriter, require_insert_only
from hmsrepl.exceptions import NoSuchPartitionError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.service import Metastore


def truncate_insert_only(
    metastore: Metastore, table: Table, partition_names: Sequence[str] | None = None
) -> list[int]:
    """Empty ``table`` (or the named partitions; all when none are named); returns the write ids used."""
    require_insert_only(table, "truncate")
    catalog = metastore.catalog
    if not table.partition_keys:
        targets: list[list[str] | None] = [None]
    else:
        names = (
            list(partition_names)
            if partition_names
            else catalog.get_partition_names(table.db_name, table.table_name)
        )
        parts = catalog.get_partitions_by_names(table.db_name, table.table_name, sorted(names))
        found = {make_partition_name(table.partition_key_names, part.values) for part in parts}
        missing = sorted(set(names) - found)
        if missing:
            raise NoSuchPartitionError(table.db_name, table.table_name, missing[0])
        targets = [list(part.values) for part in parts]
    write_ids = []
    for values in targets:
        with InsertOnlyWriter(
            metastore, table.db_name, table.table_name, values, mode="overwrite", heartbeat=False
        ) as writer:
            pass  # no rows: the commit writes the empty base's marker
        write_ids.append(writer.write_id)
    return write_ids
