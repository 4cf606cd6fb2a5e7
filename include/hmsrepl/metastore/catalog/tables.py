"""Tables: create, read, alter (rename and move included), truncate and drop."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, insert, select, update

from hmsrepl.exceptions import (
    AlreadyExistsError,
    InvalidObjectError,
    InvalidOperationError,
    NoSuchDatabaseError,
)
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.formats.iceberg_tables import metadata_refusal
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import basic_stats, listings, placement
from hmsrepl.metastore.applied_files import AppliedFiles
from hmsrepl.metastore.capture import declared_change
from hmsrepl.metastore.catalog.core import CatalogCore, CatalogFamily
from hmsrepl.metastore.catalog.held import (
    HeldRow,
    forget_table,
    held_tables,
    hold_row,
    note_without_partitions,
)
from hmsrepl.metastore.catalog.partition_reads import PartitionReads
from hmsrepl.metastore.catalog.rows import (
    _AROUND_NEW_TABLE,
    _DB_ID_AND_TABLE,
    _INSERT_TABLE,
    _INSERT_TABLE_IF_FREE,
    _INSERT_TABLE_READING_AROUND,
    _bulk_update_partitions,
    _chunks,
    _inserted_id,
    _lookup,
    _snapshot,
    _table_from_row,
)
from hmsrepl.metastore.eventlog import MetastoreTransaction
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.file_capture import describe_known
from hmsrepl.metastore.json_aggregate import decode_rows
from hmsrepl.metastore.list_parameter import in_list_parameter
from hmsrepl.metastore.listings import ObjectKey
from hmsrepl.metastore.location_policy import AroundRow, Surroundings, around_params, surroundings_of
from hmsrepl.metastore.locations import Location, canonical_or_none, key_of, location_key
from hmsrepl.metastore.messages import DataChange
from hmsrepl.metastore.model import Database, Partition, Table
from hmsrepl.metastore.moves import move_directory
from hmsrepl.metastore.names import check_identifier
from hmsrepl.metastore.partition_pages import Charges, page_cost
from hmsrepl.metastore.patterns import matches
from hmsrepl.metastore.payloads import (
    AlterPartitionBody,
    AlterTableBody,
    CreateTableBody,
    DropTableBody,
    format2,
)
from hmsrepl.metastore.repl_source import check_rename_allowed
from hmsrepl.metastore.schema import (
    dbs,
    next_write_id,
    partition_key_vals,
    partitions,
    tbls,
    txn_to_write_id,
    txn_write_notifications,
)
from hmsrepl.metastore.statement_batch import StatementBatch, result_sets
from hmsrepl.storage.base import join_uri

#: How a transactional table is emptied: (table, partition names or None, (txn id, write id) to join or None).
TransactionalTruncate = Callable[[Table, Sequence[str] | None, tuple[int, int] | None], object]


class TableCatalog(CatalogFamily):
    """A database's tables; their partitions are read through ``PartitionReads``."""

    def __init__(self, core: CatalogCore, reads: PartitionReads) -> None:
        super().__init__(core)
        self.reads = reads
        self.transactional_truncate: TransactionalTruncate | None = None
        """How a transactional table is truncated (set by ``Metastore``: ``acid.truncate``, which needs
        the txn manager this catalog does not know)."""
        self.parent_follower: Callable[[Table, Table | None], None] | None = None
        """Called inside a rename's or a drop's transaction with the table and what it became (None:
        dropped), for other tables' foreign keys to follow it (``ConstraintCatalog.follow_parent``)."""

    def create_table(
        self, table: Table, *, applied_files: AppliedFiles | None = None, gather_stats: bool = False
    ) -> Table:
        """Create a table; the CREATE_TABLE event lists the files already at its location (a complete change).

        ``applied_files``: the encoded files a replication load just placed there (see ``applied_files``),
        recorded with their verified checksums instead of reading the files again. ``gather_stats``: a
        client's write, whose basic statistics the metastore gathers (``basic_stats``).
        """
        return self.create_tables([table], applied_files=[applied_files], gather_stats=gather_stats)[0]

    def create_tables(
        self,
        tables: Sequence[Table],
        *,
        applied_files: Sequence[AppliedFiles | None] | None = None,
        gather_stats: bool = False,
    ) -> list[Table]:
        """Create tables of one database in one transaction, as ``create_table`` creates each, with one
        CREATE_TABLE event each, in order; ``applied_files``: one entry per table.

        Their locations are checked together, in one read of the objects around them all (a replication load
        creating the tables of a batch): each is compared with the others too, as creating them one after
        the other would compare it with those made before it.
        """
        if not tables:
            return []
        db_names = {table.db_name.lower() for table in tables}
        if len(db_names) != 1:
            raise InvalidOperationError(
                f"create_tables creates the tables of one database, not of {sorted(db_names)}"
            )
        (db_name,) = db_names
        for table in tables:
            check_identifier(table.table_name, "table")
        given = list(applied_files) if applied_files is not None else [None] * len(tables)
        if len(tables) == 1:
            created = self._create_on_guess(tables[0], given[0], gather_stats)
            if created is not None:
                return [created]
        now = int(time.time())
        prepared: list[Table] = []
        with self.events.reader() as conn:  # the database and the location checks: one connection
            around = None
            if len(tables) == 1:  # and its location's surroundings, read together
                db, any_pending, around = self.core.load_db_to_create_table_in(conn, db_name, tables[0])
            else:
                db, any_pending = self.core.load_db_to_create_in(conn, db_name)
            self.core.refuse_protected(db)  # protected replica: refused before any file work
            for table in tables:
                placed = self._placed(db, table, now)
                _check_table(placed)
                prepared.append(placed)
            keys = self.locations.check_tables(
                conn, [(t.qualified_name, t.sd.location, t.is_managed) for t in prepared], around=around
            )
        what = f"table '{prepared[0].qualified_name}'" if len(prepared) == 1 else f"tables of '{db_name}'"
        self.intents.settle([t.sd.location for t in prepared], what, any_pending=any_pending)
        with self.events.transaction() as tx:
            rows = _table_rows(prepared, keys)
            ids = self._insert_rows(tx.conn, db_name, prepared, rows)
            return [
                self._created(tx, table.model_copy(update={"id": tbl_id}), applied, gather_stats, row)
                for table, tbl_id, applied, row in zip(prepared, ids, given, rows, strict=True)
            ]

    def _placed(self, db: Database, table: Table, now: int) -> Table:
        """The table as it is stored in ``db``: at its default location when the client named none, created
        ``now`` unless it says when, with no write id yet."""
        default = None if table.sd.location else self.core.default_table_location(db, table)
        sd = table.sd.model_copy(update={"location": default}) if default is not None else table.sd
        return table.model_copy(update={"sd": sd, "create_time": table.create_time or now, "write_id": 0})

    def _create_on_guess(
        self, table: Table, applied_files: AppliedFiles | None, gather_stats: bool
    ) -> Table | None:
        """``create_tables`` for one managed table, one round trip shorter: inserted first, inside the write's
        transaction, into its database as last read (``CatalogCore.guessed_db``), by a statement that also
        reads what lies around its location (``_insert_reading_around``). The checks then run on that read,
        in the order ``create_tables`` runs them on its read before the transaction, and a refusal rolls the
        insert back. A wrong guess (the database changed or gone, the name taken, file intents to settle
        first) rolls back too and returns None: the caller creates the table from a read, which decides and
        words any refusal. Also None when there is nothing to guess from, or inside a caller's transaction
        (which a wrong guess would roll back).
        """
        name = table.db_name.lower()
        guess = self.core.guessed_db(name)
        if guess is None or self.events.current_transaction() is not None:
            return None
        if not self.events.write_engine.dialect.insert_returning:
            return None
        db, doc = guess
        placed = self._placed(db, table, int(time.time()))
        loc = canonical_or_none(placed.sd.location) if placed.sd.location and placed.is_managed else None
        if loc is None:  # a view, an EXTERNAL table, or a location whose refusal the read path words
            return None
        (row,) = _table_rows([placed], [key_of(loc)])
        try:
            with self.events.transaction() as tx:
                tbl_id, around = _insert_reading_around(tx.conn, name, row, loc)
                if tbl_id is None or around.flagged or around.database_docs.get(name) != doc:
                    raise _WrongGuess
                tx.database_docs[name] = doc  # as this transaction read it: the commit's check judges it
                self.core.refuse_protected(db)
                _check_table(placed)
                self.locations.check_tables(
                    tx.conn, [(placed.qualified_name, placed.sd.location, True)], around=around
                )
                created = placed.model_copy(update={"id": tbl_id})
                return self._created(tx, created, applied_files, gather_stats, row)
        except _WrongGuess:
            return None

    @staticmethod
    def _insert_rows(
        conn: Connection, db_name: str, tables: Sequence[Table], rows: Sequence[dict[str, Any]]
    ) -> list[int]:
        """The tables' rows, inserted where their names are free; returns their new ids, in order."""
        if len(rows) > 1 and conn.dialect.insert_executemany_returning_sort_by_parameter_order:
            # Many (a load's batch): the database's id and the names taken in one read, then one insert
            # returning the ids, instead of a statement per table.
            names = [row["tbl_name"] for row in rows]
            found = conn.execute(_DB_ID_AND_NAMES_TAKEN, {"db_name": db_name, "names": names}).all()
            if not found:
                raise NoSuchDatabaseError(db_name)
            taken = {row.tbl_name for row in found if row.tbl_name is not None}
            twice = {name for name in names if names.count(name) > 1}
            for table in tables:
                if table.table_name in taken | twice:
                    raise AlreadyExistsError(
                        f"table '{table.qualified_name}' already exists; drop it or use another name"
                    )
            db_id = found[0].db_id
            return list(
                conn.execute(_INSERT_TABLES_RETURNING, [{**row, "db_id": db_id} for row in rows]).scalars()
            )
        return [_insert_row(conn, table, row) for table, row in zip(tables, rows, strict=True)]

    def _created(
        self,
        tx: MetastoreTransaction,
        table: Table,
        applied_files: AppliedFiles | None,
        gather_stats: bool,
        row: dict[str, Any],
    ) -> Table:
        """A table just inserted (``row``): its directory intent, its files' record, the transaction's copy
        of its row and its event."""
        location = table.sd.location
        tbl_id = table.id or 0
        if location and table.is_managed:  # made after commit: a failed create leaves no directory
            self.intents.makedirs(tx, [location])
        data = None
        if location and not table.partition_keys:  # partitions carry their own files
            # A new id (ids are never reused) has nothing recorded under it: nothing to forget or read.
            data = self.core.captured(tx.conn, ObjectKey(tbl_id), location, applied_files, fresh=True)
            if gather_stats:
                table = with_gathered_table(tx.conn, tbl_id, table, None)
        held = held_tables(self.events, tx.conn)
        if held is not None and not gather_stats:  # inserted here: no other writer changes it now
            hold = HeldRow(tbl_id, str(row["doc"]), 0, row["location_key"], 0)
            hold_row(held, table.db_name, table.table_name, hold)
        if table.partition_keys:  # its first add_partitions has no partition to look for
            note_without_partitions(tx, tbl_id)
        tx.emit(
            EventType.CREATE_TABLE,
            table.db_name,
            table.table_name,
            CreateTableBody(table=_snapshot(table), **format2(data)),
        )
        return table

    def find_table(self, db_name: str, table_name: str) -> Table | None:
        """The table, or None when it or its database does not exist: one query, where ``get_table`` needs a
        second to say which is missing (a load asks this of every table it creates)."""
        with self.events.reader() as conn:
            found = self.core.find_table_placed(conn, db_name.lower(), table_name.lower())
        return found[1] if found is not None else None

    def existing_table_names(self, db_name: str, table_names: Sequence[str]) -> set[str]:
        """Which of ``table_names`` exist in the database (none if it does not), in one query per chunk.

        Names only, no documents: a replication load asks this once for every table a batch of events
        names, so the tables it is about to create cost no read each (``TargetWriter.get_table``).
        """
        found: set[str] = set()
        with self.events.reader() as conn:
            for chunk in _chunks(sorted({name.lower() for name in table_names})):
                found.update(
                    conn.execute(_NAMES_TAKEN, {"db_name": db_name.lower(), "names": list(chunk)}).scalars()
                )
        return found

    def get_table_objects(
        self, db_name: str, table_names: Sequence[str], *, charges: Charges | None = None
    ) -> list[Table]:
        """Tables by name in one query per chunk; unknown names are skipped (Hive's get_table_objects_by_name).
        Each chunk's decoding (the models, then the caller's conversion of them) is charged to ``charges``
        before it is done."""
        db_name = db_name.lower()
        out: list[Table] = []
        with self.events.reader() as conn:
            db_id = self.core.db_id(conn, db_name)
            for chunk in _chunks([name.lower() for name in table_names]):
                rows = conn.execute(
                    select(tbls.c.tbl_id, tbls.c.doc, tbls.c.write_id).where(
                        tbls.c.db_id == db_id, tbls.c.tbl_name.in_(chunk)
                    )
                ).all()
                if charges is not None:
                    charges.charge(2 * page_cost(rows))
                out.extend(_table_from_row(row) for row in rows)
        return out

    def get_tables(
        self, db_name: str, pattern: str | None = None, table_type: str | None = None
    ) -> list[str]:
        db_name = db_name.lower()
        with self.events.reader() as conn:
            db_id = self.core.db_id(conn, db_name)
            query = select(tbls.c.tbl_name).where(tbls.c.db_id == db_id).order_by(tbls.c.tbl_name)
            if table_type:
                query = query.where(tbls.c.tbl_type == table_type)
            names = conn.execute(query).scalars().all()
        return [name for name in names if matches(pattern, name)]

    def alter_table(
        self,
        db_name: str,
        table_name: str,
        new_table: Table,
        *,
        capture_files: bool = True,
        applied_files: AppliedFiles | None = None,
        declared: bool = False,
        gather_stats: bool = False,
    ) -> Table:
        """Change a table; a new db/name is a rename. The ALTER_TABLE event holds both snapshots.

        ``new_table.constraints`` None keeps the table's constraints (``metastore.constraints``).

        A managed table whose data sits at its default location moves with a rename, as in Hive, and its
        partitions' locations under it follow. ``applied_files``: as in ``create_table``. ``declared``: the
        client names the files it writes in INSERTs (Hive's loadTable alters the table, then fires the
        INSERT), so a table that stays where it is is not listed; it is marked for the listing
        reconciliation in case no INSERT follows (``capture.declared_change``). ``gather_stats``: as in
        ``create_table``.
        """
        db_name, table_name = db_name.lower(), table_name.lower()
        self.core.check_writable(db_name)
        old = self.core.get_table(db_name, table_name)
        renamed = (new_table.db_name, new_table.table_name) != (db_name, table_name)
        move: tuple[str, str] | None = None
        if renamed:
            check_identifier(new_table.table_name, "table")
            old_db = self.core.get_database(db_name)
            if new_table.db_name.lower() != db_name:
                new_db = self.core.get_database(new_table.db_name)
                self.core.refuse_protected(new_db)  # a protected replica's refusal says more than Hive's
                check_rename_allowed(old_db, new_db, table_name, new_table.table_name.lower())
            default_old = join_uri(old_db.table_root(old.is_managed) or "", table_name)
            if old.is_managed and old.sd.location and old.sd.location.rstrip("/") == default_old:
                target_db = self.core.get_database(new_table.db_name)
                new_location = join_uri(target_db.table_root(True) or "", new_table.table_name)
                if new_table.sd.location in (None, old.sd.location):
                    new_table = new_table.model_copy(
                        update={"sd": new_table.sd.model_copy(update={"location": new_location})}
                    )
                    move = (old.sd.location, new_location)
        update_: dict[str, Any] = {"id": old.id, "write_id": old.write_id}
        if new_table.constraints is None:  # a client's alter sends none: the stored ones stay (as in Hive)
            update_["constraints"] = old.constraints
        new_table = new_table.model_copy(update=update_)
        if renamed and new_table.constraints is not None:  # its keys to itself follow it
            new_key = (new_table.db_name, new_table.table_name)
            own = new_table.constraints.following(db_name, (db_name, table_name), new_key)
            if own is not None:
                new_table = new_table.model_copy(update={"constraints": own})
        _check_table(new_table)
        if new_table.sd.location and (
            (new_table.sd.location, new_table.is_managed) != (old.sd.location, old.is_managed) or move
        ):
            with self.events.reader() as conn:
                self.locations.check_table(
                    conn,
                    new_table.qualified_name,
                    new_table.sd.location,
                    managed=new_table.is_managed,
                    table_id=old.id,
                )
        recycled: list[str] = []
        captured = not new_table.partition_keys and (capture_files or move is not None)
        applied = None if move else applied_files
        if move:  # events before the rename name the old paths: keep them in cmroot
            with self.events.reader() as conn:
                known = self.core.known_files(conn, old.id or 0, None)
            self.cm.preserve(describe_known(move[0], self.cm, _lookup(known, move[0])))
        elif captured and applied_files is None:
            recycled = self.trash.adopt(new_table.sd.location)
        with self.events.transaction() as tx:
            tbl_id, current, placed = self.core.load_table_placed(
                tx.conn, db_name, table_name, for_update=True
            )
            if current.id != old.id:
                raise InvalidOperationError(
                    f"table '{db_name}.{table_name}' was replaced concurrently; retry"
                )
            values: dict[str, Any] = {
                "tbl_name": new_table.table_name,
                "location": new_table.sd.location,
                "location_key": location_key(new_table.sd.location),
                "tbl_type": str(new_table.table_type),
                "doc": new_table.model_dump_json(exclude={"id", "write_id"}),
            }
            if new_table.db_name != db_name:
                values["db_id"] = self.core.db_id(tx.conn, new_table.db_name)
            if renamed:
                clash = tx.conn.execute(
                    select(tbls.c.tbl_id).where(
                        tbls.c.db_id == values.get("db_id", self.core.db_id(tx.conn, db_name)),
                        tbls.c.tbl_name == new_table.table_name,
                    )
                ).first()
                if clash:
                    raise AlreadyExistsError(
                        f"cannot rename to '{new_table.qualified_name}': that table exists"
                    )
            tx.conn.execute(update(tbls).where(tbls.c.tbl_id == tbl_id).values(**values))
            moved_partitions: list[str] = []
            if renamed:
                moved_partitions = self._rewrite_partitions_for_rename(tx.conn, tbl_id, new_table, move)
                _rename_write_ids(tx.conn, (db_name, table_name), (new_table.db_name, new_table.table_name))
            forget_table(tx, tbl_id)
            if new_table.partition_keys and (renamed or values["location_key"] != placed.table_key):
                placement.recount(tx.conn, tbl_id)  # the default places moved (or partitions were rewritten)
            data = None
            stays = not renamed and new_table.sd.location == old.sd.location
            if captured and declared and applied is None and stays:
                data = declared_change(tx.conn, ObjectKey(tbl_id))
                listings.mark_unlisted(tx.conn, ObjectKey(tbl_id), time.time_ns())
            elif captured:  # a move is captured at the old place; the files it added are named at the new one
                where = move[0] if move else new_table.sd.location
                data = self.core.captured(tx.conn, ObjectKey(tbl_id), where, applied)
                if move:
                    data = _rerooted(data, move[0], move[1])
            if captured and gather_stats:
                new_table = with_gathered_table(tx.conn, tbl_id, new_table, current.parameters)
            body = AlterTableBody(
                before=_snapshot(current), after=_snapshot(new_table), recycled=recycled, **format2(data)
            )
            tx.emit(EventType.ALTER_TABLE, db_name, table_name, body)
            if renamed and self.parent_follower is not None:
                self.parent_follower(old, new_table)
            if move:
                source, target = move
                # Inside the transaction: if the move fails, the rename rolls back with it.
                move_directory(source, target, moved_partitions)
        return new_table

    def _rewrite_partitions_for_rename(
        self, conn: Connection, tbl_id: int, table: Table, move: tuple[str, str] | None
    ) -> list[str]:
        """Name the renamed table in its partitions; returns the new locations of those the move carries."""
        rows = conn.execute(
            select(partitions.c.part_id, partitions.c.doc).where(partitions.c.tbl_id == tbl_id)
        ).all()
        updates = []
        moved = []
        for row in rows:
            part = Partition.model_validate_json(row.doc)
            location = part.sd.location
            if move and location and location.startswith(move[0].rstrip("/") + "/"):
                location = move[1].rstrip("/") + location[len(move[0].rstrip("/")) :]
                moved.append(location)
            part = part.model_copy(
                update={
                    "db_name": table.db_name,
                    "table_name": table.table_name,
                    "sd": part.sd.model_copy(update={"location": location}),
                }
            )
            updates.append(
                {
                    "b_part_id": row.part_id,
                    "b_doc": part.model_dump_json(),
                    "b_location": location,
                    "b_key": location_key(location),
                }
            )
        _bulk_update_partitions(conn, updates)
        return moved

    def truncate_table(
        self,
        db_name: str,
        table_name: str,
        partition_names: Sequence[str] | None = None,
        *,
        within: tuple[int, int] | None = None,
    ) -> None:
        """Remove all data files (recycled into cmroot); visible as ALTER events with a complete, empty change.

        A transactional table is emptied as Hive 4 does it, by an empty overwrite under a write id
        (``acid.truncate``): readers keep their snapshots and the COMMIT_TXN replicates. ``within`` (txn id,
        write id) makes it part of that open txn, under its write id (Hive 4's ``truncate_table_req``).
        """
        self.core.check_writable(db_name)
        table = self.core.get_table(db_name, table_name)
        if not table.is_managed:
            raise InvalidOperationError(f"cannot truncate external table '{table.qualified_name}'")
        if within is not None and not table.is_transactional:
            raise InvalidOperationError(
                f"cannot truncate '{table.qualified_name}' under write id {within[1]}: the table is not "
                "transactional; truncate it without a write id"
            )
        if table.is_transactional:
            if self.transactional_truncate is None:
                raise InvalidOperationError(
                    f"cannot truncate transactional table '{table.qualified_name}' from a bare catalog: open "
                    "it through Metastore, which empties it under a write id"
                )
            self.transactional_truncate(table, partition_names, within)
            return
        if table.partition_keys:
            names = (
                list(partition_names)
                if partition_names
                else self.reads.get_partition_names(db_name, table_name)
            )
            targets = {
                make_partition_name(table.partition_key_names, p.values): p
                for p in self.reads.get_partitions_by_names(db_name, table_name, names)
            }
            self._check_truncatable(table, [p.sd.location for p in targets.values()], {*names})
            with self.events.reader() as conn:
                ids = self.core.part_ids(conn, table.id or 0, list(targets))
                known = self.core.known_files(conn, table.id or 0, list(ids.values()))
            batch = self.cm.files.batch()  # the partitions share the table's directories: resolved once
            recycled = {
                name: describe_known(p.sd.location, self.cm, _lookup(known, p.sd.location), batch)
                for name, p in targets.items()
            }
            with self.events.transaction() as tx:
                tbl_id, _ = self.core.load_table(tx.conn, table.db_name, table.table_name, for_update=True)
                for name, part in targets.items():
                    emptied = _emptied(tx.conn, ObjectKey(tbl_id, ids[name]))
                    body = AlterPartitionBody(
                        table=_snapshot(table),
                        before=_snapshot(part),
                        after=_snapshot(part),
                        recycled=recycled[name],
                        **format2(emptied),
                    )
                    tx.emit(EventType.ALTER_PARTITION, table.db_name, table.table_name, body)
                self.intents.recycle(tx, [uri for uris in recycled.values() for uri in uris])
            return
        self._check_truncatable(table, [table.sd.location], set())
        with self.events.reader() as conn:
            known = self.core.known_files(conn, table.id or 0, [listings.TABLE_LEVEL])
        files = describe_known(table.sd.location, self.cm, _lookup(known, table.sd.location))
        with self.events.transaction() as tx:
            tbl_id, _ = self.core.load_table(tx.conn, table.db_name, table.table_name, for_update=True)
            emptied = _emptied(tx.conn, ObjectKey(tbl_id))
            truncated = AlterTableBody(
                before=_snapshot(table), after=_snapshot(table), recycled=files, **format2(emptied)
            )
            tx.emit(EventType.ALTER_TABLE, table.db_name, table.table_name, truncated)
            self.intents.recycle(tx, files)

    def _check_truncatable(self, table: Table, locations: Sequence[str | None], names: set[str]) -> None:
        """Refuse to empty a directory outside the managed roots or one that holds another object."""
        with self.events.reader() as conn:
            for location in locations:
                reason = self.locations.removal_refusal(
                    conn,
                    location or "",
                    skip_table_id=None if names else table.id,
                    skip_partitions=(table.id or 0, names) if names else None,
                    owner_location=table.sd.location if names else None,
                )
                if reason:
                    raise InvalidOperationError(
                        f"cannot truncate '{table.qualified_name}': its directory '{location}' is not its "
                        f"own ({reason}); move the table's data to a directory of its own first"
                    )

    def drop_table(self, db_name: str, table_name: str, *, delete_data: bool = True) -> Table:
        """Drop a table and its partitions; a managed table's files are recycled into cmroot after commit."""
        self.core.check_writable(db_name)
        db_name, table_name = db_name.lower(), table_name.lower()
        table = self.core.get_table(db_name, table_name)
        recycled: list[str] = []
        extra_dirs: list[str] = []
        if delete_data and table.is_managed:
            locations = [table.sd.location, *(p.sd.location for p in self._iter_partitions_outside(table))]
            with self.events.reader() as conn:  # only directories that are the table's own are emptied
                own = [
                    location or ""
                    for location in locations
                    if self.locations.removable(
                        conn, f"table '{table.qualified_name}'", location, skip_table_id=table.id
                    )
                ]
            with self.events.reader() as conn:
                known = self.core.known_files(conn, table.id or 0, None)
            batch = self.cm.files.batch()  # the partitions share the table's directories: resolved once
            for location in own:
                recycled.extend(describe_known(location, self.cm, _lookup(known, location), batch))
                extra_dirs.append(location)
        with self.events.transaction() as tx:
            tbl_id, current = self.core.load_table(tx.conn, db_name, table_name, for_update=True)
            if current.id != table.id:
                raise InvalidOperationError(
                    f"table '{db_name}.{table_name}' was replaced concurrently; retry"
                )
            part_ids = select(partitions.c.part_id).where(partitions.c.tbl_id == tbl_id)
            tx.conn.execute(delete(partition_key_vals).where(partition_key_vals.c.part_id.in_(part_ids)))
            tx.conn.execute(delete(partitions).where(partitions.c.tbl_id == tbl_id))
            tx.conn.execute(delete(tbls).where(tbls.c.tbl_id == tbl_id))
            forget_table(tx, tbl_id)
            listings.forget_table(tx.conn, tbl_id)
            _forget_write_ids(tx.conn, db_name, table_name)
            tx.emit(
                EventType.DROP_TABLE,
                db_name,
                table_name,
                DropTableBody(table=_snapshot(table), recycled=recycled),
            )
            if delete_data and table.is_managed:
                self.intents.recycle(tx, recycled, extra_dirs)
            if self.parent_follower is not None:
                self.parent_follower(table, None)
        return table

    def _iter_partitions_outside(self, table: Table) -> Iterable[Partition]:
        """Partitions whose location is not below the table's (their files are not in the table's listing)."""
        root = (table.sd.location or "").rstrip("/") + "/"
        for part in self.reads.get_partitions(table.db_name, table.table_name):
            if part.sd.location and not part.sd.location.startswith(root):
                yield part


def with_gathered_table(conn: Connection, tbl_id: int, table: Table, before: dict[str, str] | None) -> Table:
    """The table with the basic statistics of its recorded files (``basic_stats``), its row rewritten if
    they changed its parameters (after the capture that recorded them, inside the write's transaction: a
    create, an alter, or an INSERT into the table, ``DataCatalog.insert``)."""
    params = basic_stats.gather(conn, ObjectKey(tbl_id), table, before, table.parameters)
    if params is None:
        return table
    table = table.model_copy(update={"parameters": params})
    doc = table.model_dump_json(exclude={"id", "write_id"})
    conn.execute(update(tbls).where(tbls.c.tbl_id == tbl_id).values(doc=doc))
    return table


_INSERT_TABLES_RETURNING = insert(tbls).returning(tbls.c.tbl_id, sort_by_parameter_order=True)
# Built once, the names one list parameter (``list_parameter``): a load asks these for every batch of tables,
# and each new count of names was a new statement text (on PostgreSQL, parsed again and never prepared).
# The database's id and which of the names it holds already (the id alone when none: an outer join).
_DB_ID_AND_NAMES_TAKEN = (
    select(dbs.c.db_id, tbls.c.tbl_name)
    .select_from(dbs)
    .outerjoin(tbls, and_(tbls.c.db_id == dbs.c.db_id, in_list_parameter(tbls.c.tbl_name, "names")))
    .where(dbs.c.name == bindparam("db_name"))
)
_NAMES_TAKEN = (
    select(tbls.c.tbl_name)
    .join(dbs, dbs.c.db_id == tbls.c.db_id)
    .where(dbs.c.name == bindparam("db_name"), in_list_parameter(tbls.c.tbl_name, "names"))
)


def _table_rows(tables: Sequence[Table], keys: Sequence[str | None]) -> list[dict[str, Any]]:
    """The ``tbls`` rows of new tables (``keys``: their location keys)."""
    return [
        {
            "tbl_name": table.table_name,
            "tbl_type": str(table.table_type),
            "location": table.sd.location,
            "location_key": key,
            "doc": table.model_dump_json(exclude={"id", "write_id"}),
            "write_id": 0,
            "odd_partitions": 0,  # no partitions yet (``placement``)
        }
        for table, key in zip(tables, keys, strict=True)
    ]


class _WrongGuess(Exception):
    """A create made on a guess found the guess wrong: its transaction rolls back (``_create_on_guess``)."""


def _insert_reading_around(
    conn: Connection, db_name: str, row: dict[str, Any], loc: Location
) -> tuple[int | None, Surroundings]:
    """Insert a new table's ``row`` into ``db_name`` where its name is free, and read what lies around its
    location ``loc`` (``read_around_table``'s read), in one round trip on PostgreSQL and MariaDB. Returns
    the new id (None: not inserted) and the read.

    PostgreSQL: the read rides in the insert's ``RETURNING`` as one JSON value. MariaDB: the insert and the
    read are one request of two statements (``statement_batch`` says why not as on PostgreSQL). SQLite: a
    statement after the insert (its compiler writes the columns of a ``RETURNING`` clause without their
    tables, in its subqueries too, which breaks the read's joins; in process a statement costs no round trip).
    """
    params = {**row, "db_name": db_name, **around_params(loc, db_name)}
    if conn.dialect.name == "postgresql":
        found = conn.execute(_INSERT_TABLE_READING_AROUND, params).first()
        if found is None:
            return None, surroundings_of([], loc)
        rows = [AroundRow(*values) for values in decode_rows(found.around)]
        return int(found.tbl_id), surroundings_of(rows, loc)
    if conn.dialect.name in ("mysql", "mariadb"):
        inserted, around = result_sets(conn, _INSERT_TABLE_THEN_AROUND, params)
        tbl_id = inserted[0][0] if inserted else None
        return tbl_id, surroundings_of([AroundRow(*values) for values in around], loc)
    tbl_id = conn.execute(_INSERT_TABLE_IF_FREE, params).scalar()
    if tbl_id is None:
        return None, surroundings_of([], loc)
    return int(tbl_id), surroundings_of(conn.execute(_AROUND_NEW_TABLE, params).all(), loc)


_INSERT_TABLE_THEN_AROUND = StatementBatch(_INSERT_TABLE_IF_FREE, _AROUND_NEW_TABLE)


def _insert_row(conn: Connection, table: Table, row: dict[str, Any]) -> int:
    """One table's row, inserted where its name is free (one statement where the database returns rows);
    refuses a missing database or a taken name."""
    tbl_id = None
    if conn.dialect.insert_returning:
        tbl_id = conn.execute(_INSERT_TABLE_IF_FREE, {**row, "db_name": table.db_name}).scalar()
    if tbl_id is None:  # not inserted (say why), or a database without INSERT ... RETURNING
        found = conn.execute(_DB_ID_AND_TABLE, {"db_name": table.db_name, "name": table.table_name}).first()
        if found is None:
            raise NoSuchDatabaseError(table.db_name)
        if found.tbl_id is not None:
            raise AlreadyExistsError(
                f"table '{table.qualified_name}' already exists; drop it or use another name"
            )
        tbl_id = _inserted_id(conn.execute(_INSERT_TABLE, {**row, "db_id": found.db_id}))
    return int(tbl_id)


def _check_table(table: Table) -> None:
    """What a table's own document must satisfy, as created or altered (its final location decided): no
    column twice, and an Iceberg table's metadata below its own location (``formats.iceberg_tables``)."""
    seen: set[str] = set()
    for col in [*table.sd.cols, *table.partition_keys]:
        if col.name in seen:
            raise InvalidObjectError(f"table '{table.qualified_name}' has column '{col.name}' twice")
        seen.add(col.name)
    reason = metadata_refusal(table.qualified_name, table.parameters, table.sd.location)
    if reason:
        raise InvalidObjectError(reason)


def _reroot(encoded: str, old_root: str, new_root: str) -> str:
    entry = EncodedFileUri.decode(encoded)
    moved = new_root.rstrip("/") + entry.file_uri[len(old_root.rstrip("/")) :]
    return EncodedFileUri(moved, entry.checksum, entry.cmroot, entry.subdir, entry.version_id).encode()


def _rerooted(change: DataChange, old_root: str, new_root: str) -> DataChange:
    """A change captured before a move, naming its added files where the move puts them."""
    added = tuple(_reroot(uri, old_root, new_root) for uri in change.added)
    return DataChange(added, change.removed, change.complete, change.count, change.digest)


def _emptied(conn: Connection, key: ObjectKey) -> DataChange:
    """Record an object as holding no file (a truncate): a complete change with no files."""
    after = listings.replace_all(conn, key, [])
    return DataChange((), (), True, after.count, after.digest)


def _forget_write_ids(conn: Connection, db_name: str, table_name: str) -> None:
    """A dropped table's write ids must not leak into a new table created under the same name."""
    for table in (next_write_id, txn_to_write_id):
        conn.execute(delete(table).where(table.c.db_name == db_name, table.c.tbl_name == table_name))


def _rename_write_ids(conn: Connection, old: tuple[str, str], new: tuple[str, str]) -> None:
    """Write ids follow a renamed table (Hive's onRename), keeping its snapshots readable."""
    for table in (next_write_id, txn_to_write_id, txn_write_notifications):
        conn.execute(
            update(table)
            .where(table.c.db_name == old[0], table.c.tbl_name == old[1])
            .values(db_name=new[0], tbl_name=new[1])
        )
