"""Rows of the catalog's tables as models, the statements every family runs, and small helpers they share.

Statements used for every created table are built once (see the note on the look-ups below).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, overload

import msgspec
from sqlalchemy import Connection, CursorResult, and_, bindparam, exists, insert, select, update

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore.capture import still_recorded
from hmsrepl.metastore.intents import ANY_SETTLE_CANDIDATE
from hmsrepl.metastore.json_aggregate import json_rows_of
from hmsrepl.metastore.listings import FileRecord
from hmsrepl.metastore.location_policy import around_table_query
from hmsrepl.metastore.model import Database, Function, Partition, Table
from hmsrepl.metastore.partitions_named import ByBackend
from hmsrepl.metastore.payloads import (
    DatabaseSnapshot,
    FunctionSnapshot,
    PartitionSnapshot,
    Snapshot,
    TableSnapshot,
    snapshot_of,
    snapshot_of_json,
)
from hmsrepl.metastore.schema import dbs, partitions, tbls
from hmsrepl.storage.base import FileIdentity, join_uri, path_key
from hmsrepl.storage.local_tree import StatIdentity

BATCH = 500
# Builds a caller's object straight from a stored partition document and its write id, skipping the model.
Decode = Callable[[str, int], Any] | None
DEFAULT_DB = "default"

# Look-ups run several times for every table a client or a replication load creates, built once with bound
# parameters: building a statement and its cache key costs SQLAlchemy ~40 us a call, several times what
# SQLite then takes to answer it (a built statement keeps its cache key).
_DB_ID = select(dbs.c.db_id).where(dbs.c.name == bindparam("db_name"))
_DB_DOC = select(dbs.c.doc).where(dbs.c.name == bindparam("db_name"))
# The database a table is created in, and whether file intents it may have to settle first are pending.
_DB_DOC_AND_SETTLE = select(dbs.c.doc, ANY_SETTLE_CANDIDATE.label("settle")).where(
    dbs.c.name == bindparam("db_name")
)
# For one new managed table whose location is known before its database is read: the location check's read
# and the pending intents, the database's row among the others the check reads (``read_around_table``).
_AROUND_NEW_TABLE = around_table_query(ANY_SETTLE_CANDIDATE)
# Locked by primary key only: a lock taken through the unique name index first holds that index entry while
# it waits for the row, which MariaDB turns into a deadlock with a writer holding the row (the locker loses).
_DB_DOC_FOR_UPDATE = select(dbs.c.doc).where(dbs.c.db_id == bindparam("db_id")).with_for_update()
_INSERT_TABLE = insert(tbls)  # built once: a load creates tables by the hundred
# A database's id and whether it holds a table of that name, in one statement (every created table asks).
_DB_ID_AND_TABLE = (
    select(dbs.c.db_id, tbls.c.tbl_id)
    .select_from(dbs)
    .outerjoin(tbls, and_(tbls.c.db_id == dbs.c.db_id, tbls.c.tbl_name == bindparam("name")))
    .where(dbs.c.name == bindparam("db_name"))
)
# With the table's placement (``metastore.placement``): a write of partitions reads both with the row.
_TABLE_ROW = (
    select(tbls.c.tbl_id, tbls.c.doc, tbls.c.write_id, tbls.c.location_key, tbls.c.odd_partitions)
    .join(dbs, dbs.c.db_id == tbls.c.db_id)
    .where(dbs.c.name == bindparam("db_name"), tbls.c.tbl_name == bindparam("name"))
)
# Only the table's row is locked (its database's id comes from a subquery, which a locking read leaves unlocked
# on every backend, where ``FOR UPDATE OF`` is PostgreSQL's alone): locking the database's row too made each
# write of a table wait for the writes of the database's other tables, and two loading tables deadlocked there.
_TABLE_ROW_FOR_UPDATE = (
    select(tbls.c.tbl_id, tbls.c.doc, tbls.c.write_id, tbls.c.location_key, tbls.c.odd_partitions)
    .where(
        tbls.c.db_id == select(dbs.c.db_id).where(dbs.c.name == bindparam("db_name")).scalar_subquery(),
        tbls.c.tbl_name == bindparam("name"),
    )
    .with_for_update()
)
# A table's row inserted into its database only where the name is free, returning its id: what
# ``_DB_ID_AND_TABLE`` and ``_INSERT_TABLE`` do, in one round trip (no row back: see which one refuses).
_TABLE_VALUES = ("tbl_name", "tbl_type", "location", "location_key", "doc", "write_id", "odd_partitions")
_INSERT_IF_FREE = insert(tbls).from_select(
    ["db_id", *_TABLE_VALUES],
    select(dbs.c.db_id, *(bindparam(name, type_=tbls.c[name].type) for name in _TABLE_VALUES)).where(
        dbs.c.name == bindparam("db_name"),
        ~exists().where(tbls.c.db_id == dbs.c.db_id, tbls.c.tbl_name == bindparam("tbl_name")),
    ),
)
_INSERT_TABLE_IF_FREE = _INSERT_IF_FREE.returning(tbls.c.tbl_id)
# The same insert answering, with the new id, ``_AROUND_NEW_TABLE``'s read as one JSON value (its parameters:
# ``around_params``): a single create inserts first and checks after, in one round trip (``guessed_create``).
# The read may see the new row itself: a table of the same name, which the location check leaves to the
# name's own refusal, and which here can only be this one (the insert happens only where the name is free).
_INSERT_TABLE_READING_AROUND = _INSERT_IF_FREE.returning(
    tbls.c.tbl_id,
    json_rows_of(_AROUND_NEW_TABLE).label("around"),
)
_INSERT_PARTITIONS_RETURNING = insert(partitions).returning(partitions.c.part_name, partitions.c.part_id)


@overload
def _snapshot(obj: Database) -> DatabaseSnapshot: ...
@overload
def _snapshot(obj: Table) -> TableSnapshot: ...
@overload
def _snapshot(obj: Partition) -> PartitionSnapshot: ...
@overload
def _snapshot(obj: Function) -> FunctionSnapshot: ...
def _snapshot(obj: Database | Table | Partition | Function) -> Snapshot:
    """The object as its event records it (the typed form of its JSON snapshot)."""
    return snapshot_of(obj, _SNAPSHOT_TYPES[type(obj)])


def _partition_snapshot(doc: str, write_id: int) -> PartitionSnapshot:
    """``_snapshot`` of a partition from its stored document (``Partition.model_dump_json`` without the write id,
    which the row keeps in its own column) and its write id."""
    snapshot = snapshot_of_json(doc, PartitionSnapshot)
    return msgspec.structs.replace(snapshot, write_id=write_id) if write_id else snapshot


_SNAPSHOT_TYPES: dict[type[Database | Table | Partition | Function], type[Snapshot]] = {
    Database: DatabaseSnapshot,
    Table: TableSnapshot,
    Partition: PartitionSnapshot,
    Function: FunctionSnapshot,
}


def _chunks(items: Sequence[Any], size: int = BATCH) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# Built once (a load asks this for every table it writes: building the statement at each call cost more
# than running it), one shape per backend (``partitions_named``).
_IDS_NAMED = ByBackend(
    lambda named: (
        select(named.rows.c.part_name, named.rows.c.part_id).select_from(named.source).where(named.picked)
    )
)


def partition_ids_named(conn: Connection, tbl_id: int, names: Sequence[str]) -> dict[str, int]:
    """The ids of those of ``names`` that are partitions of the table ``tbl_id``, by name."""
    out: dict[str, int] = {}
    statement = _IDS_NAMED.for_(conn)
    for chunk in _chunks(list(names)):
        rows = conn.execute(statement, {"tbl_id": tbl_id, "names": list(chunk)})
        out.update({name: part_id for name, part_id in rows})
    return out


def _table_from_row(row: Any) -> Table:
    table = Table.model_validate_json(row.doc)
    return table.model_copy(update={"id": row.tbl_id, "write_id": row.write_id})


def _partition_from_row(row: Any) -> Partition:
    # The model is this call's own: its write id is set in place (as ``model_copy`` would set it, and marked
    # set), not on a copy, which cost a third of reading a partition (a bootstrap dump reads every one).
    part = Partition.model_validate_json(row.doc)
    part.write_id = row.write_id
    return part


def _decoded(rows: Iterable[Any], decode: Decode) -> list[Any]:
    """Partition rows as models, or as what ``decode(doc, write_id)`` builds (the Thrift read path's structs)."""
    if decode is None:
        return [_partition_from_row(row) for row in rows]
    return [decode(row.doc, row.write_id) for row in rows]


def _partition_name(table: Table, values: Sequence[str]) -> str:
    try:
        return make_partition_name(table.partition_key_names, values)
    except ValueError as exc:
        raise InvalidObjectError(f"table '{table.qualified_name}': {exc}") from exc


def _bulk_update_partitions(conn: Connection, updates: list[dict[str, Any]]) -> None:
    """Rewrite partitions' documents and locations: rows of ``b_part_id``, ``b_doc``, ``b_location`` and
    ``b_key`` (the location's lookup key)."""
    from sqlalchemy import bindparam

    if not updates:
        return
    stmt = (
        update(partitions)
        .where(partitions.c.part_id == bindparam("b_part_id"))
        .values(doc=bindparam("b_doc"), location=bindparam("b_location"), location_key=bindparam("b_key"))
    )
    for chunk in _chunks(updates):
        conn.execute(stmt, list(chunk))


def _lookup(known: dict[str, FileRecord], location: str | None) -> Any:
    """``describe_known``'s question for files below ``location``, answered from recorded files."""
    root = join_uri(location or "", "")

    def identity(rel: str, stat: StatIdentity) -> FileIdentity | None:
        return still_recorded(known.get(path_key(root + rel.lstrip("/"))), stat)

    return identity


def _inserted_id(result: CursorResult[Any]) -> int:
    """The primary key a one-row insert generated (SQLAlchemy types it optional: other statements have none)."""
    key = result.inserted_primary_key
    if key is None:
        raise RuntimeError("the insert returned no primary key")
    return int(key[0])
