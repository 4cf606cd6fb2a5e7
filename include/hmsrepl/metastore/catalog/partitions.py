"""Partition writes: add, alter and drop, each batch in one transaction with its events."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from hmsrepl.exceptions import (
    AlreadyExistsError,
    InvalidObjectError,
    InvalidOperationError,
    NoSuchPartitionError,
)
from hmsrepl.metastore import basic_stats, bulk_rows, listings, mariadb_partitions, pg_partitions
from hmsrepl.metastore import placement as placement_mod
from hmsrepl.metastore.applied_files import AppliedFiles
from hmsrepl.metastore.capture import declared_change
from hmsrepl.metastore.catalog.core import CatalogCore, CatalogFamily
from hmsrepl.metastore.catalog.held import (
    created_without_partitions,
    forget_table,
    held_tables,
    take_without_partitions,
)
from hmsrepl.metastore.catalog.partition_reads import PartitionReads
from hmsrepl.metastore.catalog.rows import (
    _INSERT_PARTITIONS_RETURNING,
    _bulk_update_partitions,
    _chunks,
    _lookup,
    _partition_from_row,
    _partition_name,
    _partition_snapshot,
    _snapshot,
)
from hmsrepl.metastore.eventlog import MetastoreTransaction
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.file_capture import describe_known
from hmsrepl.metastore.listings import ObjectKey
from hmsrepl.metastore.mariadb_version import JSON_TABLE_SINCE, mariadb_at_least
from hmsrepl.metastore.model import Partition, Table
from hmsrepl.metastore.names import CheckedPartitionNames
from hmsrepl.metastore.payloads import (
    MESSAGE_FORMAT_VERSION,
    AddPartitionBody,
    AlterPartitionBody,
    DataChange,
    DropPartitionBody,
    format2,
)
from hmsrepl.metastore.placement import Placement
from hmsrepl.metastore.schema import partition_key_vals, partitions
from hmsrepl.storage.base import join_uri

#: Inserts a page of partitions and their key values in one statement: (conn, table id, partition rows, each
#: one's key values) -> their new ids by name.
OneStatementInsert = Callable[
    [Connection, int, Sequence[dict[str, Any]], Sequence[Sequence[str]]], dict[str, int]
]


def _one_statement_insert(conn: Connection) -> OneStatementInsert | None:
    """The backend's insert of a page in one statement of one shape, the rows sent as one JSON document
    (PostgreSQL, ``pg_partitions``; MariaDB from 10.6, ``mariadb_partitions``); None where a page takes a
    multi-row insert and an ``executemany`` of its key values (SQLite, whose statements cost no round trip;
    MySQL and older MariaDB)."""
    if conn.dialect.name == "postgresql":
        return pg_partitions.insert_partitions
    if mariadb_at_least(conn.dialect, JSON_TABLE_SINCE):
        return mariadb_partitions.insert_partitions
    return None


class PartitionCatalog(CatalogFamily):
    """Adds, alters and drops partitions of a table."""

    def __init__(self, core: CatalogCore, reads: PartitionReads) -> None:
        super().__init__(core)
        self.reads = reads

    def add_partitions(
        self,
        db_name: str,
        table_name: str,
        parts: Sequence[Partition],
        *,
        if_not_exists: bool = False,
        applied_files: Sequence[AppliedFiles | None] | None = None,
        gather_stats: bool = False,
        new_ids: dict[str, int] | None = None,
        absent: bool = False,
    ) -> list[Partition]:
        """Add many partitions in one transaction with batched inserts and one ADD_PARTITION event.

        Returns the partitions added (with defaulted locations); with ``if_not_exists`` existing ones are
        skipped instead of failing the whole call. ``applied_files`` (one entry per partition, None: list
        it) and ``gather_stats``: as in ``create_table``. ``new_ids``, when given, receives the added
        partitions' ids by name: a caller recording something under them (a load's versions) needs no read
        of them back, a round trip per page on a server database. ``absent``: the caller knows none of
        ``parts`` exists (a bootstrap load filling a table it created in this transaction): they are not
        looked for, and one that does exist fails the call on the table's unique partition names.
        """
        table, placement = self.core.writable_table_placed(db_name, table_name)
        keys = table.partition_key_names
        if not keys:
            raise InvalidObjectError(
                f"table '{table.qualified_name}' is not partitioned; cannot add partitions"
            )
        now = int(time.time())
        prepared: dict[str, Partition] = {}
        applied: dict[str, AppliedFiles] = {}
        own = (table.db_name, table.table_name)
        names = CheckedPartitionNames(table.qualified_name, keys)  # per call: the keys' share of every name
        for index, part in enumerate(parts):
            if (part.db_name, part.table_name) != own:
                raise InvalidObjectError(
                    f"partition {part.values} names table '{part.db_name}.{part.table_name}', "
                    f"not '{table.qualified_name}'"
                )
            name = names.name(part.values)
            if name in prepared:
                raise InvalidObjectError(f"partition '{name}' is listed twice in one add_partitions call")
            if part.sd.location and part.create_time:  # located and dated already (a load's): kept as
                prepared[name] = part  # given, a copy per partition cost more than its insert
            else:
                location = part.sd.location or join_uri(table.sd.location or "", name)
                sd = part.sd.model_copy(update={"location": location})
                prepared[name] = part.model_copy(update={"sd": sd, "create_time": part.create_time or now})
            if applied_files is not None and applied_files[index] is not None:
                applied[name] = applied_files[index] or []
        location_keys = self._check_partition_locations(table, prepared, placement)
        self.intents.settle(
            [part.sd.location for part in prepared.values()], f"a partition of '{table.qualified_name}'"
        )
        with self.events.transaction() as tx:
            tbl_id, current, placed = self.core.load_table_placed(
                tx.conn, table.db_name, table.table_name, for_update=True
            )
            # A table this transaction created and has not added to yet has no partition to look for.
            fresh = take_without_partitions(self.events, tx.conn, tbl_id)
            existing = set() if fresh or absent else self._existing_names(tx.conn, tbl_id, list(prepared))
            if existing and not if_not_exists:
                raise AlreadyExistsError(
                    f"partition '{sorted(existing)[0]}' of table '{table.qualified_name}' already exists"
                    + (f" (and {len(existing) - 1} more)" if len(existing) > 1 else "")
                )
            added = [(name, part) for name, part in prepared.items() if name not in existing]
            docs = [
                part.model_dump_json(exclude={"write_id"}) for _, part in added
            ]  # rows' and events' source
            ids = self._insert_partitions(tx.conn, tbl_id, added, location_keys, docs)
            if new_ids is not None:
                new_ids.update(ids)
            self._count_odd(tx, tbl_id, placed.count_odd((n, location_keys[n]) for n, _ in added))
            if table.is_managed:  # made after commit: a failed or killed call leaves no directories
                # (but for those a load published: it made them, and removes them if its batch fails)
                self.intents.makedirs(
                    tx, [part.sd.location or "" for name, part in added if name not in applied]
                )
            if added:  # new ids, never used before: nothing recorded under them
                changes: list[DataChange | None] = [
                    self.core.captured(
                        tx.conn, ObjectKey(tbl_id, ids[name]), part.sd.location, applied.get(name), fresh=True
                    )
                    for name, part in added
                ]
                if gather_stats:
                    added = [
                        (name, _with_gathered(tx.conn, ObjectKey(tbl_id, ids[name]), current, part, None))
                        for name, part in added
                    ]
                    snapshots = [_snapshot(part) for _, part in added]
                else:  # the documents just stored: one decode each, not a second walk of the model
                    snapshots = [
                        _partition_snapshot(doc, part.write_id)
                        for doc, (_, part) in zip(docs, added, strict=True)
                    ]
                body = AddPartitionBody(
                    table=_snapshot(current),
                    partitions=snapshots,
                    v=MESSAGE_FORMAT_VERSION,
                    data=changes,
                )
                tx.emit(EventType.ADD_PARTITION, table.db_name, table.table_name, body)
        return [part for _, part in added]

    def _count_odd(self, tx: MetastoreTransaction, tbl_id: int, delta: int) -> None:
        """Add ``delta`` to the table's count of odd partitions, in its row and in the transaction's copy."""
        if not delta:
            return
        placement_mod.adjust(tx.conn, tbl_id, delta)
        held = held_tables(self.events, tx.conn)
        if held is None:
            return
        for key, row in list(held.items()):
            if row.tbl_id == tbl_id and row.odd_partitions is not None:
                held[key] = row._replace(odd_partitions=row.odd_partitions + delta)

    def _check_partition_locations(
        self, table: Table, parts: dict[str, Partition], placement: Placement | None
    ) -> dict[str, str | None]:
        """Refuse partition locations that are not their own (``LocationPolicy.check_partitions``); returns
        each one's lookup key by name. A table this transaction created and has not added to yet has no
        stored partition to compare them with: a bootstrap load saves that read for each table it creates."""
        with self.events.reader() as conn:
            return self.locations.check_partitions(
                conn,
                table.qualified_name,
                {name: part.sd.location for name, part in parts.items()},
                managed=table.is_managed,
                table_location=table.sd.location,
                table_id=table.id,
                placement=placement,
                stored=table.id is None or not created_without_partitions(self.events, conn, table.id),
            )

    def _existing_names(self, conn: Connection, tbl_id: int, names: Sequence[str]) -> set[str]:
        return set(self.core.part_ids(conn, tbl_id, names))

    def _insert_partitions(
        self,
        conn: Connection,
        tbl_id: int,
        added: Sequence[tuple[str, Partition]],
        keys: Mapping[str, str | None],
        docs: Sequence[str],
    ) -> dict[str, int]:
        """Insert partitions with their key values; returns their ids by name (``keys``: location keys; ``docs``:
        each one's document, ``model_dump_json`` without the write id, in the order of ``added``)."""
        out: dict[str, int] = {}
        # The new ids come back with the insert where the database returns rows from a multi-row insert
        # (PostgreSQL, SQLite, MariaDB 10.5+): one statement per chunk instead of an insert and a read back.
        returning = conn.dialect.insert_executemany_returning
        one_statement = _one_statement_insert(conn)
        for chunk, chunk_docs in zip(_chunks(added), _chunks(docs), strict=True):
            rows = [
                {
                    "tbl_id": tbl_id,
                    "part_name": name,
                    "location": part.sd.location,
                    "location_key": keys[name],
                    "doc": doc,
                    "write_id": part.write_id,
                }
                for (name, part), doc in zip(chunk, chunk_docs, strict=True)
            ]
            if one_statement is not None:
                out.update(one_statement(conn, tbl_id, rows, [p.values for _, p in chunk]))
                continue
            if returning:
                ids = {row.part_name: row.part_id for row in conn.execute(_INSERT_PARTITIONS_RETURNING, rows)}
            else:
                conn.execute(insert(partitions), rows)
                ids = {
                    row.part_name: row.part_id
                    for row in conn.execute(
                        select(partitions.c.part_name, partitions.c.part_id).where(
                            partitions.c.tbl_id == tbl_id,
                            partitions.c.part_name.in_([name for name, _ in chunk]),
                        )
                    )
                }
            bulk_rows.insert_rows(
                conn,
                partition_key_vals,
                ("part_id", "tbl_id", "idx", "value"),
                [
                    (ids[name], tbl_id, idx, value)
                    for name, part in chunk
                    for idx, value in enumerate(part.values)
                ],
            )
            out.update(ids)
        return out

    def alter_partitions(
        self,
        db_name: str,
        table_name: str,
        new_parts: Sequence[Partition],
        *,
        capture_files: bool = True,
        applied_files: Sequence[AppliedFiles | None] | None = None,
        declared: bool = False,
        gather_stats: bool = False,
    ) -> None:
        """Replace partitions' metadata (values unchanged); one ALTER_PARTITION event per partition.

        ``applied_files`` (one entry per partition, None: list it): as in ``create_table``. ``declared``:
        the client's INSERT just recorded the new files of these partitions (Hive's loadPartition fires it
        before this alter), so a partition that stays where it is is not listed (``capture.declared_change``).
        ``gather_stats``: as in ``create_table``.
        """
        table, placement = self.core.writable_table_placed(db_name, table_name)
        names = [_partition_name(table, part.values) for part in new_parts]
        applied = list(applied_files) if applied_files is not None else [None] * len(new_parts)
        keys = self._check_partition_locations(table, dict(zip(names, new_parts, strict=True)), placement)
        adopted = {
            name: self.trash.adopt(part.sd.location) if capture_files and given is None else []
            for name, part, given in zip(names, new_parts, applied, strict=True)
        }
        given_files = dict(zip(names, applied, strict=True))
        with self.events.transaction() as tx:
            tbl_id, current, placed = self.core.load_table_placed(
                tx.conn, table.db_name, table.table_name, for_update=True
            )
            old_rows = {}
            for chunk in _chunks(names):
                for row in tx.conn.execute(
                    select(
                        partitions.c.part_id,
                        partitions.c.part_name,
                        partitions.c.doc,
                        partitions.c.write_id,
                        partitions.c.location_key,
                    )
                    .where(partitions.c.tbl_id == tbl_id, partitions.c.part_name.in_(chunk))
                    .with_for_update()
                ):
                    old_rows[row.part_name] = row
            # Several partitions: one read finds those with nothing recorded (a metadata-only replica's, or
            # never written), whose capture then reads nothing (three statements each otherwise).
            unrecorded = (
                listings.unrecorded(tx.conn, tbl_id, [row.part_id for row in old_rows.values()])
                if capture_files and len(names) > 1 and len(set(names)) == len(names)
                else set()
            )
            updates = []
            for name, part in zip(names, new_parts, strict=True):
                if name not in old_rows:
                    raise NoSuchPartitionError(table.db_name, table.table_name, name)
                before = _partition_from_row(old_rows[name])
                part = part.model_copy(update={"write_id": before.write_id})
                data = None
                key = ObjectKey(tbl_id, old_rows[name].part_id)
                stays = part.sd.location == before.sd.location
                if capture_files and declared and given_files[name] is None and stays:
                    data = declared_change(tx.conn, key)
                elif capture_files:
                    data = self.core.captured(
                        tx.conn, key, part.sd.location, given_files[name], fresh=key.part_id in unrecorded
                    )
                if capture_files and gather_stats:
                    part = _with_gathered(tx.conn, key, current, part, before.parameters)
                updates.append(
                    {
                        "b_part_id": old_rows[name].part_id,
                        "b_doc": part.model_dump_json(),
                        "b_location": part.sd.location,
                        "b_key": keys[name],
                    }
                )
                body = AlterPartitionBody(
                    table=_snapshot(current),
                    before=_snapshot(before),
                    after=_snapshot(part),
                    recycled=adopted[name],
                    **format2(data),
                )
                tx.emit(EventType.ALTER_PARTITION, table.db_name, table.table_name, body)
            _bulk_update_partitions(tx.conn, updates)
            altered = dict.fromkeys(names)  # a partition named twice is written once (the last one)
            self._count_odd(
                tx,
                tbl_id,
                placed.count_odd((name, keys[name]) for name in altered)
                - placed.count_odd((name, old_rows[name].location_key) for name in altered),
            )

    def drop_partitions(
        self, db_name: str, table_name: str, values_list: Sequence[Sequence[str]], *, delete_data: bool = True
    ) -> list[Partition]:
        """Drop partitions in one transaction and one DROP_PARTITION event; files go to cmroot after commit."""
        self.core.check_writable(db_name)
        table = self.core.get_table(db_name, table_name)
        names = [_partition_name(table, values) for values in values_list]
        found = {
            _partition_name(table, p.values): p
            for p in self.reads.get_partitions_by_names(db_name, table_name, names)
        }
        for name in names:
            if name not in found:
                raise NoSuchPartitionError(table.db_name, table.table_name, name)
        dropped = [found[name] for name in names]
        recycle = delete_data and table.is_managed
        if recycle:  # only directories that are the partitions' own are emptied
            with self.events.reader() as conn:
                own = [
                    self.locations.removable(
                        conn,
                        f"partition '{table.qualified_name}/{name}'",
                        p.sd.location,
                        skip_partitions=(table.id or 0, set(names)),
                        owner_location=table.sd.location,
                    )
                    for name, p in zip(names, dropped, strict=True)
                ]
        else:
            own = [False] * len(dropped)
        with self.events.reader() as conn:
            known = self.core.known_files(
                conn, table.id or 0, self.core.part_ids(conn, table.id or 0, names).values()
            )
        batch = self.cm.files.batch()  # the partitions share the table's directories: resolved once
        recycled = [
            describe_known(p.sd.location, self.cm, _lookup(known, p.sd.location), batch) if keep else []
            for p, keep in zip(dropped, own, strict=True)
        ]
        with self.events.transaction() as tx:
            tbl_id, current, placed = self.core.load_table_placed(
                tx.conn, table.db_name, table.table_name, for_update=True
            )
            listings.forget_partitions(tx.conn, tbl_id, self.core.part_ids(tx.conn, tbl_id, names).values())
            for chunk in _chunks(names):
                if not placed.all_level and placed.odd is not None:  # none odd: none to take out
                    placement_mod.forget_odd(tx.conn, tbl_id, chunk)
                    forget_table(tx, tbl_id)
                part_ids = select(partitions.c.part_id).where(
                    partitions.c.tbl_id == tbl_id, partitions.c.part_name.in_(chunk)
                )
                tx.conn.execute(delete(partition_key_vals).where(partition_key_vals.c.part_id.in_(part_ids)))
                count = tx.conn.execute(
                    delete(partitions).where(partitions.c.tbl_id == tbl_id, partitions.c.part_name.in_(chunk))
                ).rowcount
                if count != len(chunk):
                    raise InvalidOperationError(
                        f"partitions of '{table.qualified_name}' were dropped concurrently; retry"
                    )
            tx.emit(
                EventType.DROP_PARTITION,
                table.db_name,
                table.table_name,
                DropPartitionBody(
                    table=_snapshot(current), partitions=[_snapshot(p) for p in dropped], recycled=recycled
                ),
            )
            if recycle:
                flat = [uri for uris in recycled for uri in uris]
                self.intents.recycle(
                    tx, flat, [p.sd.location or "" for p, keep in zip(dropped, own, strict=True) if keep]
                )
        return dropped


def _with_gathered(
    conn: Connection, key: ObjectKey, table: Table, part: Partition, before: dict[str, str] | None
) -> Partition:
    """The partition with the basic statistics of its recorded files (``basic_stats``); a new partition's
    row (``before`` None) is rewritten if they changed its parameters, an altered one's is written after."""
    params = basic_stats.gather(conn, key, table, before, part.parameters)
    if params is None:
        return part
    part = part.model_copy(update={"parameters": params})
    if before is None:
        doc = part.model_dump_json(exclude={"write_id"})
        conn.execute(update(partitions).where(partitions.c.part_id == key.part_id).values(doc=doc))
    return part
