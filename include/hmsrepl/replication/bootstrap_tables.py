"""The tables of one bootstrap batch, gathered before any is written, so those that take no data with them
are created by one catalog call.

A batch writes many small tables in one transaction (``BOOTSTRAP_BATCH_OBJECTS``). Created one at a time,
each new table costs the database's row, a read of the locations around its own and its insert: three
statements a table, most of a small table's cost on a database server, paid again on the client for each
(the driver's and SQLAlchemy's work per statement). A partitioned table is only a container when created (its
partitions carry the data), so the new ones of a batch are created together (``TargetWriter.create_tables``):
the database read once, every location checked in one read, one insert. Their partitions follow, table by
table, in the same transaction, so readers of the replica still see whole tables or none.

To know when a batch is full before writing it, each table's partitions are read one page ahead; the rest
of a large table's partitions stay in the dump until they are written, a page at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from hmsrepl.replication import iceberg
from hmsrepl.replication.layout import DumpDir, DumpedPartition, DumpLayout
from hmsrepl.replication.target import TargetWriter


@dataclass
class GatheredTable:
    """A dumped table of the batch and its partitions: the first ``ahead`` already read, then the rest of
    the dump's stream (read as they are written)."""

    document: dict[str, Any]
    partitions: Iterator[DumpedPartition]
    ahead: int  # partitions read ahead: the table's weight in its batch, at most a page

    @property
    def name(self) -> str:
        return str(self.document["table_name"])


def gather_table(dump: DumpDir, db_name: str, document: dict[str, Any], page: int) -> GatheredTable:
    """``document``'s table with up to ``page`` of its partitions read ahead (none for an unpartitioned one);
    a listing in its own directory is left in the dump, read a page at a time as it is published."""
    if not document.get("partition_keys"):
        return GatheredTable(document, iter(()), 0)
    stream = dump.partitions_paged(DumpLayout.table_dir(db_name, document["table_name"]))
    ahead = list(itertools.islice(stream, page))
    return GatheredTable(document, itertools.chain(ahead, stream), len(ahead))


def create_new_tables(
    writer: TargetWriter, tables: Sequence[GatheredTable], present: Collection[str]
) -> set[str]:
    """Create, in one catalog call, the batch's partitioned tables not ``present`` on the replica (lower-case
    names listed before the first batch); answers the names created.

    Each table absent from the replica is noted as such first, so one created table by table (unpartitioned
    ones, which take data, and Iceberg tables, whose metadata is rewritten for the replica) costs no read of
    its name either."""
    absent = [table for table in tables if table.name.lower() not in present]
    writer.assume_absent(table.name for table in absent)
    containers = []
    for table in absent:
        if not table.document.get("partition_keys"):
            continue
        mapped = writer.mapping.table(table.document)
        if not iceberg.is_iceberg(mapped) and writer.claim_absent(mapped.table_name):
            containers.append(mapped)
    writer.create_tables(containers)
    return {table.table_name.lower() for table in containers}
