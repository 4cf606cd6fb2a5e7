"""A client's request to compact one table or partition: Hive's ``ALTER TABLE ... COMPACT`` (Thrift
``compact``/``compact2``) and ``SHOW COMPACTIONS`` (``show_compact``), answered from the compaction queue.

A request is checked before anything is queued, so a wrong one fails with a message naming the fix and leaves
no row: the table exists and is insert-only (the only kind the worker compacts), a partitioned table names one
of its partitions and a plain one names none, and the database is not protected. A protected replica
compacts on its own schedule (its housekeeping queues work without this check); a client may not queue work
on it, as it may not write it. The check runs in the DB transaction that inserts the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hmsrepl.acid.compaction_queue import (
    COMPACTION_TYPES,
    CompactionQueue,
    CompactionRecord,
    QueuedRequest,
)
from hmsrepl.acid.insert_only import require_insert_only
from hmsrepl.exceptions import InvalidInputError, InvalidObjectError
from hmsrepl.formats.partition_names import make_partition_name, parse_partition_name
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.protection import check_queued_request
from hmsrepl.metastore.service import Metastore


def request_compaction(
    metastore: Metastore, db_name: str, table_name: str, part_name: str | None, type_: str
) -> QueuedRequest:
    """Queue a compaction of ``db.table`` (``part_name``: one of its partitions, ``k=v[/k2=v2]``), or name
    the compaction already queued, working or cleaning there."""
    if type_ not in COMPACTION_TYPES:
        raise InvalidInputError(
            f"compaction of '{db_name}.{table_name}': type '{type_}' is not supported; "
            f"ask for {' or '.join(COMPACTION_TYPES)}"
        )
    table = metastore.catalog.get_table(db_name, table_name)
    require_insert_only(table, "compact")
    part = canonical_partition_name(metastore, table, part_name or None)
    return CompactionQueue(metastore.events).request(
        table.db_name,
        table.table_name,
        part,
        type_,
        guard=lambda conn: check_queued_request(conn, table.db_name),
    )


def canonical_partition_name(metastore: Metastore, table: Table, part_name: str | None) -> str | None:
    """The partition's name as the queue keeps it (the initiator's spelling), after checking it exists."""
    name = table.qualified_name
    keys = table.partition_key_names
    if not keys:
        if part_name:
            raise InvalidObjectError(
                f"table '{name}' is not partitioned; compact it without a partition name (got '{part_name}')"
            )
        return None
    if not part_name:
        raise InvalidObjectError(
            f"table '{name}' is partitioned; name the partition to compact, e.g. "
            f"{'/'.join(f'{key}=...' for key in keys)}"
        )
    try:
        pairs = parse_partition_name(part_name)
    except ValueError as exc:
        raise InvalidObjectError(f"compaction of '{name}': {exc}") from exc
    if [key.lower() for key, _ in pairs] != [key.lower() for key in keys]:
        raise InvalidObjectError(
            f"compaction of '{name}': partition '{part_name}' does not name the keys "
            f"{'/'.join(keys)} in that order"
        )
    values = [value for _, value in pairs]
    metastore.catalog.get_partition(table.db_name, table.table_name, values)  # NoSuchPartitionError
    return make_partition_name(keys, values)


@dataclass(frozen=True)
class ShowFilter:
    """Hive 4's ``ShowCompactRequest`` filters; every field unset (Hive 3's empty request) shows all rows."""

    id: int | None = None
    db_name: str | None = None
    table_name: str | None = None
    part_name: str | None = None
    type_: str | None = None
    state: str | None = None
    limit: int | None = None
    newest_first: bool = False


def show_compactions(metastore: Metastore, show: ShowFilter | None = None) -> list[CompactionRecord]:
    """Rows of the queue, oldest first unless asked otherwise, filtered as ``show`` says."""
    show = show or ShowFilter()
    rows: Sequence[CompactionRecord] = CompactionQueue(metastore.events).records(
        db_name=show.db_name or None, table_name=show.table_name or None
    )
    out = [
        row
        for row in rows
        if (show.id is None or row.id == show.id)
        and (not show.part_name or row.part_name == show.part_name)
        and (not show.type_ or row.type == show.type_)
        and (not show.state or row.state == show.state.lower())
    ]
    if show.newest_first:
        out.reverse()
    return out[: show.limit] if show.limit is not None and show.limit > 0 else out
