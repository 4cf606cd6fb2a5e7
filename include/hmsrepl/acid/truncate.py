"""Truncating an insert-only table the way Hive 4 does: an empty overwrite under a write id, not a delete.

Deleting the files would pull rows from under readers holding an older snapshot, and a replica would never
hear of it (ACID data reaches it only through committed txns). Instead each location (the table's, or each
named partition's) gets an overwrite that writes no rows: a ``base_<wid>`` holding only a marker, which hides
everything below it from snapshots taken after its commit. Its COMMIT_TXN replicates like any overwrite (the
replica gets the empty base, ``acid_replay``), and older snapshots keep reading their files, which stay on
disk (as after any overwrite) until a major compaction of the location after later writes cleans them.

All locations are emptied in one txn under one write id (the table's write id for that txn, as Hive
allocates it): a reader sees every partition emptied or none, and the replica replays one COMMIT_TXN.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence

from hmsrepl.acid.directories import base_dir_name
from hmsrepl.acid.insert_only import EMPTY_DIRECTORY_MARKER, require_insert_only
from hmsrepl.exceptions import InvalidObjectError, InvalidOperationError, NoSuchPartitionError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.service import Metastore
from hmsrepl.storage.base import join_uri


def truncate_insert_only(
    metastore: Metastore,
    table: Table,
    partition_names: Sequence[str] | None = None,
    within: tuple[int, int] | None = None,
) -> list[int]:
    """Empty ``table`` (or the named partitions; all when none are named) in one txn; returns its write id
    (a list, one id per txn used).

    ``within`` (txn id, write id) empties it as part of that open txn, under the write id it holds on the
    table (Hive 4's ``truncate_table_req`` with a ``writeId``): the change shows when that txn commits and
    goes if it aborts; the caller commits.
    """
    require_insert_only(table, "truncate")
    targets = _locations(metastore, table, partition_names)
    txns = metastore.txns
    if within is not None:
        _write_empty_bases(metastore, table, targets, *within, fresh=False)
        return [within[1]]
    [txn_id] = txns.open_txns(1, user="hive", host=socket.gethostname())
    try:
        [allocation] = txns.allocate_table_write_ids([txn_id], table.db_name, table.table_name)
        _write_empty_bases(metastore, table, targets, txn_id, allocation.write_id, fresh=True)
        txns.commit_txn(txn_id)
    except BaseException as exc:
        txns.abort_txns([txn_id], reason=f"truncate failed: {exc}")
        raise
    return [allocation.write_id]


def _write_empty_bases(
    metastore: Metastore,
    table: Table,
    targets: list[tuple[list[str] | None, str]],
    txn_id: int,
    write_id: int,
    *,
    fresh: bool,
) -> None:
    """An empty ``base_<write_id>`` (only the marker) in each location, each one noted as written by the txn.

    A base that already holds files is refused before anything is written: after a fresh allocation they
    can only be a dropped table's leftovers; in a client's txn, rows that txn wrote there."""
    fs = metastore.cm.files
    bases = [(values, join_uri(location, base_dir_name(write_id))) for values, location in targets]
    for _, base in bases:
        if next(iter(fs.list_files(base)), None) is not None:
            why = (
                "although write id {w} of '{t}' was just allocated (left by a dropped table of the same name?); "
                "move them away, then retry"
                if fresh
                else "written under write id {w} of '{t}' by the same transaction; truncate before writing, "
                "or abort that transaction"
            )
            raise InvalidOperationError(
                f"directory '{base}' already holds files " + why.format(w=write_id, t=table.qualified_name)
            )
    for values, base in bases:
        fs.makedirs(base)
        fs.write_bytes(join_uri(base, EMPTY_DIRECTORY_MARKER), b"")  # no rows: the marker hides the rest
        metastore.txns.add_write_notification(txn_id, write_id, table.db_name, table.table_name, values, [])


def _locations(
    metastore: Metastore, table: Table, partition_names: Sequence[str] | None
) -> list[tuple[list[str] | None, str]]:
    """(partition values or None, location) of every location to empty; refuses a missing partition
    before any txn opens."""
    catalog = metastore.catalog
    if not table.partition_keys:
        found: list[tuple[list[str] | None, str | None]] = [(None, table.sd.location)]
    else:
        names = (
            list(partition_names)
            if partition_names
            else catalog.get_partition_names(table.db_name, table.table_name)
        )
        parts = catalog.get_partitions_by_names(table.db_name, table.table_name, sorted(names))
        seen = {make_partition_name(table.partition_key_names, part.values) for part in parts}
        missing = sorted(set(names) - seen)
        if missing:
            raise NoSuchPartitionError(table.db_name, table.table_name, missing[0])
        found = [(list(part.values), part.sd.location) for part in parts]
    out: list[tuple[list[str] | None, str]] = []
    for values, location in found:
        if not location:
            where = f"partition {values} of table" if values else "table"
            raise InvalidObjectError(f"{where} '{table.qualified_name}' has no location; cannot truncate it")
        out.append((values, location))
    return out
