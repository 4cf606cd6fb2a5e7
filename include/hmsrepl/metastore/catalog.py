"""Databases, tables, partitions and functions, each change committed together with its event.

Data files are captured inside the write's transaction, after the table's row is locked
(``metastore.capture``): the location is listed, compared with the recorded listing, and only new or changed
files are read; events carry that diff (message format 2). Files a drop removes are recycled into cmroot
only after it committed, so a failed commit never loses data. The work owed after a commit (recycling,
removing a dropped object's directory, making a new object's directory) is recorded as a durable intent in
the same transaction (``metastore.intents``): a crash after the commit leaves it for housekeeping to finish,
and a new object never adopts the files of a dropped one of the same name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, insert, select, update

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import (
    AlreadyExistsError,
    InvalidObjectError,
    InvalidOperationError,
    NoSuchDatabaseError,
    NoSuchFunctionError,
    NoSuchPartitionError,
    NoSuchTableError,
)
from hmsrepl.formats.file_uri import EncodedFileUri
from hmsrepl.formats.iceberg_tables import metadata_refusal
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore import listings
from hmsrepl.metastore.applied_files import AppliedDelta, AppliedFiles, AppliedListing, applied_checksums
from hmsrepl.metastore.capture import (
    Captured,
    capture,
    capture_delta,
    capture_named,
    declared_change,
    describe_recorded,
    relative_names,
    still_recorded,
)
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.eventlog import EventLog
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.file_capture import StatIdentity, describe_files, describe_known
from hmsrepl.metastore.intents import FileIntents
from hmsrepl.metastore.listings import FileRecord, ObjectKey
from hmsrepl.metastore.location_policy import LocationPolicy
from hmsrepl.metastore.locations import location_key
from hmsrepl.metastore.messages import DataChange, MessageBuilder
from hmsrepl.metastore.model import Database, Function, Partition, Table, TableType
from hmsrepl.metastore.moves import move_directory
from hmsrepl.metastore.names import check_identifier, check_partition_values
from hmsrepl.metastore.partition_filter import apply_filter, parse_filter, statement_time_limit
from hmsrepl.metastore.patterns import matches
from hmsrepl.metastore.protection import check_params, refusal
from hmsrepl.metastore.schema import (
    data_files,
    dbs,
    funcs,
    next_write_id,
    partition_key_vals,
    partitions,
    tbls,
    txn_to_write_id,
    txn_write_notifications,
)
from hmsrepl.metastore.trash import TrashAdopter
from hmsrepl.storage.base import FileIdentity, join_uri, path_key

BATCH = 500
# Builds a caller's object straight from a stored partition document and its write id, skipping the model.
Decode = Callable[[str, int], Any] | None
DEFAULT_DB = "default"

# Look-ups run several times for every table a client or a replication load creates, built once with bound
# parameters: building a statement and its cache key costs SQLAlchemy ~40 us a call, several times what
# SQLite then takes to answer it (a built statement keeps its cache key).
_DB_ID = select(dbs.c.db_id).where(dbs.c.name == bindparam("db_name"))
_DB_DOC = select(dbs.c.doc).where(dbs.c.name == bindparam("db_name"))
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
_TABLE_ROW = (
    select(tbls.c.tbl_id, tbls.c.doc, tbls.c.write_id)
    .join(dbs, dbs.c.db_id == tbls.c.db_id)
    .where(dbs.c.name == bindparam("db_name"), tbls.c.tbl_name == bindparam("name"))
)
_TABLE_ROW_FOR_UPDATE = _TABLE_ROW.with_for_update()
_INSERT_PARTITIONS_RETURNING = insert(partitions).returning(partitions.c.part_name, partitions.c.part_id)


def _snapshot(obj: Database | Table | Partition | Function) -> dict[str, Any]:
    return obj.model_dump(mode="json")


def _chunks(items: Sequence[Any], size: int = BATCH) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class CatalogService:
    def __init__(
        self,
        events: EventLog,
        cm: ChangeManager,
        warehouse: str,
        trash_root: str = "",
        *,
        policy: LocationPolicy | None = None,
    ) -> None:
        self.events = events
        self.cm = cm
        self.warehouse = warehouse.rstrip("/")
        self.trash = TrashAdopter(trash_root, cm)
        self.intents = FileIntents(events, cm)
        self.locations = policy or LocationPolicy(
            warehouse, protected=[("HMSREPL_CMROOT", cm.cmroot), ("HMSREPL_TRASH_ROOT", trash_root)]
        )

    @classmethod
    def for_config(cls, events: EventLog, cm: ChangeManager, config: MetastoreConfig) -> CatalogService:
        """The catalog of a metastore configured by ``config``, with its location policy."""
        return cls(events, cm, config.warehouse, config.trash_root, policy=LocationPolicy.for_config(config))

    # -- databases -------------------------------------------------------------------------------------
    def default_db_location(self, name: str) -> str:
        return self.warehouse if name == DEFAULT_DB else join_uri(self.warehouse, f"{name}.db")

    def create_database(self, db: Database) -> Database:
        check_identifier(db.name, "database")
        db = db.model_copy(update={"location_uri": db.location_uri or self.default_db_location(db.name)})
        with self.events.reader() as conn:
            self.locations.check_database(conn, db.name, db.location_uri, is_default=db.name == DEFAULT_DB)
        self.intents.settle([db.location_uri], f"database '{db.name}'")
        with self.events.transaction() as tx:
            if self._db_id(tx.conn, db.name, missing_ok=True) is not None:
                raise AlreadyExistsError(
                    f"database '{db.name}' already exists; drop it first or use another name"
                )
            tx.conn.execute(
                insert(dbs).values(name=db.name, doc=db.model_dump_json(), create_time=int(time.time()))
            )
            tx.emit(EventType.CREATE_DATABASE, db.name, None, {"database": _snapshot(db)})
            self.intents.makedirs(tx, [db.location_uri or ""])
        return db

    def get_database(self, name: str) -> Database:
        with self.events.reader() as conn:
            row = conn.execute(_DB_DOC, {"db_name": name.lower()}).first()
        if row is None:
            raise NoSuchDatabaseError(name.lower())
        return Database.model_validate_json(row.doc)

    def get_databases(self, pattern: str | None = None) -> list[str]:
        with self.events.reader() as conn:
            names = conn.execute(select(dbs.c.name).order_by(dbs.c.name)).scalars().all()
        return [name for name in names if matches(pattern, name)]

    def lock_database(self, name: str) -> Database:
        """The database, its row locked until the caller's transaction ends (call inside ``transaction()``).

        Writers that decide from a database's parameters what to do next (a load reading ``repl.last.id``)
        take this lock first, so two of them never both act on the same reading.
        """
        with self.events.transaction() as tx:
            return self._load_db(tx.conn, name.lower(), for_update=True)

    def alter_database(self, name: str, new_db: Database) -> Database:
        name = name.lower()
        if new_db.name != name:
            raise InvalidOperationError(f"database '{name}' cannot be renamed (to '{new_db.name}')")
        self._check_writable(name)
        current = self.get_database(name)
        if not new_db.location_uri:  # a client that leaves the location out keeps it (as Hive does)
            new_db = new_db.model_copy(update={"location_uri": current.location_uri})
        if new_db.location_uri != current.location_uri:
            with self.events.reader() as conn:
                self.locations.check_database(conn, name, new_db.location_uri, is_default=name == DEFAULT_DB)
        with self.events.transaction() as tx:
            old = self._load_db(tx.conn, name, for_update=True)
            tx.conn.execute(update(dbs).where(dbs.c.name == name).values(doc=new_db.model_dump_json()))
            tx.emit(
                EventType.ALTER_DATABASE, name, None, {"before": _snapshot(old), "after": _snapshot(new_db)}
            )
        return new_db

    def drop_database(self, name: str, *, delete_data: bool = True, cascade: bool = False) -> None:
        name = name.lower()
        if name == DEFAULT_DB:
            raise InvalidOperationError("database 'default' cannot be dropped")
        self._check_writable(name)
        tables = self.get_tables(name)  # raises NoSuchDatabaseError
        functions = self.get_functions(name)
        if (tables or functions) and not cascade:
            raise InvalidOperationError(
                f"database '{name}' is not empty ({len(tables)} tables, {len(functions)} functions); "
                "drop them first or use CASCADE"
            )
        for table in tables:
            self.drop_table(name, table, delete_data=delete_data)
        for function in functions:
            self.drop_function(name, function)
        location = self.get_database(name).location_uri
        remove = bool(delete_data and location and location.rstrip("/") != self.warehouse)
        if remove:
            with self.events.reader() as conn:
                remove = self.locations.removable(conn, f"database '{name}'", location, skip_db=name)
        leftovers = describe_files(location, self.cm) if remove else []  # loose files: recycled, not deleted
        with self.events.transaction() as tx:
            db = self._load_db(tx.conn, name, for_update=True)
            db_id = self._db_id(tx.conn, name)
            if tx.conn.execute(select(tbls.c.tbl_id).where(tbls.c.db_id == db_id).limit(1)).first():
                raise InvalidOperationError(f"database '{name}' got a new table while being dropped; retry")
            tx.conn.execute(delete(dbs).where(dbs.c.db_id == db_id))
            tx.emit(EventType.DROP_DATABASE, name, None, {"database": _snapshot(db)})
            if remove and db.location_uri == location:
                self.intents.recycle(tx, leftovers, [location or ""])

    def _check_writable(self, db_name: str) -> None:
        """Refuse a client write into a protected replica before any file work (see ``protection``).

        The authoritative check runs again at commit, in the event log, for every write.
        """
        check_params(self.get_database(db_name))

    def _writable_table(self, db_name: str, table_name: str) -> Table:
        """``_check_writable`` and ``get_table`` on one connection (a client write asks both, then changes)."""
        with self.events.reader() as conn:
            check_params(self._load_db(conn, db_name.lower()))
            return self._load_table(conn, db_name.lower(), table_name.lower())[1]

    def _db_id(self, conn: Connection, name: str, *, missing_ok: bool = False) -> int | None:
        db_id = conn.execute(_DB_ID, {"db_name": name}).scalar()
        if db_id is None and not missing_ok:
            raise NoSuchDatabaseError(name)
        return db_id

    def _load_db(self, conn: Connection, name: str, *, for_update: bool = False) -> Database:
        if for_update:
            db_id = self._db_id(conn, name)
            row = conn.execute(_DB_DOC_FOR_UPDATE, {"db_id": db_id}).first()
        else:
            row = conn.execute(_DB_DOC, {"db_name": name}).first()
        if row is None:
            raise NoSuchDatabaseError(name)
        return Database.model_validate_json(row.doc)

    # -- tables ----------------------------------------------------------------------------------------
    def create_table(self, table: Table, *, applied_files: AppliedFiles | None = None) -> Table:
        """Create a table; the CREATE_TABLE event lists the files already at its location (a complete change).

        ``applied_files``: the encoded files a replication load just placed there (see ``applied_files``),
        recorded with their verified checksums instead of reading the files again.
        """
        check_identifier(table.table_name, "table")
        key = None
        with self.events.reader() as conn:  # the database and the location checks: one connection
            db = self._load_db(conn, table.db_name.lower())
            check_params(db)  # protected replica: refused before any file work
            if table.table_type != TableType.VIRTUAL_VIEW and not table.sd.location:
                location = join_uri(db.location_uri or self.default_db_location(db.name), table.table_name)
                table = table.model_copy(update={"sd": table.sd.model_copy(update={"location": location})})
            _check_table(table)
            table = table.model_copy(
                update={"create_time": table.create_time or int(time.time()), "write_id": 0}
            )
            location = table.sd.location
            if location:
                key = self.locations.check_table(
                    conn, table.qualified_name, location, managed=table.is_managed
                )
        self.intents.settle([location], f"table '{table.qualified_name}'")
        with self.events.transaction() as tx:
            found = tx.conn.execute(
                _DB_ID_AND_TABLE, {"db_name": table.db_name, "name": table.table_name}
            ).first()
            if found is None:
                raise NoSuchDatabaseError(table.db_name)
            db_id = found.db_id
            if found.tbl_id is not None:
                raise AlreadyExistsError(
                    f"table '{table.qualified_name}' already exists; drop it or use another name"
                )
            tbl_id = tx.conn.execute(
                _INSERT_TABLE,
                {
                    "db_id": db_id,
                    "tbl_name": table.table_name,
                    "tbl_type": str(table.table_type),
                    "location": location,
                    "location_key": key,
                    "doc": table.model_dump_json(exclude={"id", "write_id"}),
                    "write_id": 0,
                },
            ).inserted_primary_key[0]
            table = table.model_copy(update={"id": tbl_id})
            if location and table.is_managed:  # made after commit: a failed create leaves no directory
                self.intents.makedirs(tx, [location])
            data = None
            if location and not table.partition_keys:  # partitions carry their own files
                listings.forget(tx.conn, ObjectKey(tbl_id))
                data = self._captured(tx.conn, ObjectKey(tbl_id), location, applied_files, fresh=True)
            tx.emit(
                EventType.CREATE_TABLE,
                table.db_name,
                table.table_name,
                MessageBuilder({"table": _snapshot(table)}).with_data(data),
            )
        return table

    def get_table(self, db_name: str, table_name: str) -> Table:
        with self.events.reader() as conn:
            return self._load_table(conn, db_name.lower(), table_name.lower())[1]

    def find_table(self, db_name: str, table_name: str) -> Table | None:
        """The table, or None when it or its database does not exist: one query, where ``get_table`` needs a
        second to say which is missing (a load asks this of every table it creates)."""
        with self.events.reader() as conn:
            row = conn.execute(_TABLE_ROW, {"db_name": db_name.lower(), "name": table_name.lower()}).first()
        return _table_from_row(row) if row is not None else None

    def get_table_objects(self, db_name: str, table_names: Sequence[str]) -> list[Table]:
        """Tables by name in one query per chunk; unknown names are skipped (Hive's get_table_objects_by_name)."""
        db_name = db_name.lower()
        out: list[Table] = []
        with self.events.reader() as conn:
            db_id = self._db_id(conn, db_name)
            for chunk in _chunks([name.lower() for name in table_names]):
                rows = conn.execute(
                    select(tbls.c.tbl_id, tbls.c.doc, tbls.c.write_id).where(
                        tbls.c.db_id == db_id, tbls.c.tbl_name.in_(chunk)
                    )
                )
                out.extend(_table_from_row(row) for row in rows)
        return out

    def get_tables(
        self, db_name: str, pattern: str | None = None, table_type: str | None = None
    ) -> list[str]:
        db_name = db_name.lower()
        with self.events.reader() as conn:
            db_id = self._db_id(conn, db_name)
            query = select(tbls.c.tbl_name).where(tbls.c.db_id == db_id).order_by(tbls.c.tbl_name)
            if table_type:
                query = query.where(tbls.c.tbl_type == table_type)
            names = conn.execute(query).scalars().all()
        return [name for name in names if matches(pattern, name)]

    def _load_table(
        self, conn: Connection, db_name: str, table_name: str, *, for_update: bool = False
    ) -> tuple[int, Table]:
        query = _TABLE_ROW_FOR_UPDATE if for_update else _TABLE_ROW
        row = conn.execute(query, {"db_name": db_name, "name": table_name}).first()
        if row is None:
            if self._db_id(conn, db_name, missing_ok=True) is None:
                raise NoSuchDatabaseError(db_name)
            raise NoSuchTableError(db_name, table_name)
        return row.tbl_id, _table_from_row(row)

    def alter_table(
        self,
        db_name: str,
        table_name: str,
        new_table: Table,
        *,
        capture_files: bool = True,
        applied_files: AppliedFiles | None = None,
        declared: bool = False,
    ) -> Table:
        """Change a table; a new db/name is a rename. The ALTER_TABLE event holds both snapshots.

        A managed table whose data sits at its default location moves with a rename, as in Hive, and its
        partitions' locations under it follow. ``applied_files``: as in ``create_table``. ``declared``: the
        client names the files it writes in INSERTs (Hive's loadTable alters the table, then fires the
        INSERT), so a table that stays where it is is not listed; it is marked for the listing
        reconciliation in case no INSERT follows (``capture.declared_change``).
        """
        db_name, table_name = db_name.lower(), table_name.lower()
        self._check_writable(db_name)
        old = self.get_table(db_name, table_name)
        renamed = (new_table.db_name, new_table.table_name) != (db_name, table_name)
        move: tuple[str, str] | None = None
        if renamed:
            check_identifier(new_table.table_name, "table")
            default_old = join_uri(self.get_database(db_name).location_uri or "", table_name)
            if old.is_managed and old.sd.location and old.sd.location.rstrip("/") == default_old:
                target_db = self.get_database(new_table.db_name)
                new_location = join_uri(target_db.location_uri or "", new_table.table_name)
                if new_table.sd.location in (None, old.sd.location):
                    new_table = new_table.model_copy(
                        update={"sd": new_table.sd.model_copy(update={"location": new_location})}
                    )
                    move = (old.sd.location, new_location)
        new_table = new_table.model_copy(update={"id": old.id, "write_id": old.write_id})
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
                known = self._known_files(conn, old.id or 0, None)
            self.cm.preserve(describe_known(move[0], self.cm, _lookup(known, move[0])))
        elif captured and applied_files is None:
            recycled = self.trash.adopt(new_table.sd.location)
        with self.events.transaction() as tx:
            tbl_id, current = self._load_table(tx.conn, db_name, table_name, for_update=True)
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
                values["db_id"] = self._db_id(tx.conn, new_table.db_name)
            if renamed:
                clash = tx.conn.execute(
                    select(tbls.c.tbl_id).where(
                        tbls.c.db_id == values.get("db_id", self._db_id(tx.conn, db_name)),
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
            data = None
            stays = not renamed and new_table.sd.location == old.sd.location
            if captured and declared and applied is None and stays:
                data = declared_change(tx.conn, ObjectKey(tbl_id))
                listings.mark_unlisted(tx.conn, ObjectKey(tbl_id), time.time_ns())
            elif captured:  # a move is captured at the old place; the files it added are named at the new one
                where = move[0] if move else new_table.sd.location
                data = self._captured(tx.conn, ObjectKey(tbl_id), where, applied)
                if move:
                    data = _rerooted(data, move[0], move[1])
            body = {"before": _snapshot(current), "after": _snapshot(new_table), "recycled": recycled}
            tx.emit(EventType.ALTER_TABLE, db_name, table_name, MessageBuilder(body).with_data(data))
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
        self, db_name: str, table_name: str, partition_names: Sequence[str] | None = None
    ) -> None:
        """Remove all data files (recycled into cmroot); visible as ALTER events with a complete, empty change."""
        self._check_writable(db_name)
        table = self.get_table(db_name, table_name)
        if not table.is_managed:
            raise InvalidOperationError(f"cannot truncate external table '{table.qualified_name}'")
        if table.partition_keys:
            names = (
                list(partition_names) if partition_names else self.get_partition_names(db_name, table_name)
            )
            targets = {
                make_partition_name(table.partition_key_names, p.values): p
                for p in self.get_partitions_by_names(db_name, table_name, names)
            }
            self._check_truncatable(table, [p.sd.location for p in targets.values()], {*names})
            with self.events.reader() as conn:
                ids = self._part_ids(conn, table.id or 0, list(targets))
                known = self._known_files(conn, table.id or 0, list(ids.values()))
            recycled = {
                name: describe_known(p.sd.location, self.cm, _lookup(known, p.sd.location))
                for name, p in targets.items()
            }
            with self.events.transaction() as tx:
                tbl_id, _ = self._load_table(tx.conn, table.db_name, table.table_name, for_update=True)
                for name, part in targets.items():
                    body = {
                        "table": _snapshot(table),
                        "before": _snapshot(part),
                        "after": _snapshot(part),
                        "recycled": recycled[name],
                    }
                    emptied = _emptied(tx.conn, ObjectKey(tbl_id, ids[name]))
                    tx.emit(
                        EventType.ALTER_PARTITION,
                        table.db_name,
                        table.table_name,
                        MessageBuilder(body).with_data(emptied),
                    )
                self.intents.recycle(tx, [uri for uris in recycled.values() for uri in uris])
            return
        self._check_truncatable(table, [table.sd.location], set())
        with self.events.reader() as conn:
            known = self._known_files(conn, table.id or 0, [listings.TABLE_LEVEL])
        files = describe_known(table.sd.location, self.cm, _lookup(known, table.sd.location))
        with self.events.transaction() as tx:
            tbl_id, _ = self._load_table(tx.conn, table.db_name, table.table_name, for_update=True)
            body = {"before": _snapshot(table), "after": _snapshot(table), "recycled": files}
            emptied = _emptied(tx.conn, ObjectKey(tbl_id))
            tx.emit(
                EventType.ALTER_TABLE,
                table.db_name,
                table.table_name,
                MessageBuilder(body).with_data(emptied),
            )
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
        self._check_writable(db_name)
        db_name, table_name = db_name.lower(), table_name.lower()
        table = self.get_table(db_name, table_name)
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
                known = self._known_files(conn, table.id or 0, None)
            for location in own:
                recycled.extend(describe_known(location, self.cm, _lookup(known, location)))
                extra_dirs.append(location)
        with self.events.transaction() as tx:
            tbl_id, current = self._load_table(tx.conn, db_name, table_name, for_update=True)
            if current.id != table.id:
                raise InvalidOperationError(
                    f"table '{db_name}.{table_name}' was replaced concurrently; retry"
                )
            part_ids = select(partitions.c.part_id).where(partitions.c.tbl_id == tbl_id)
            tx.conn.execute(delete(partition_key_vals).where(partition_key_vals.c.part_id.in_(part_ids)))
            tx.conn.execute(delete(partitions).where(partitions.c.tbl_id == tbl_id))
            tx.conn.execute(delete(tbls).where(tbls.c.tbl_id == tbl_id))
            listings.forget_table(tx.conn, tbl_id)
            _forget_write_ids(tx.conn, db_name, table_name)
            tx.emit(
                EventType.DROP_TABLE, db_name, table_name, {"table": _snapshot(table), "recycled": recycled}
            )
            if delete_data and table.is_managed:
                self.intents.recycle(tx, recycled, extra_dirs)
        return table

    def _iter_partitions_outside(self, table: Table) -> Iterable[Partition]:
        """Partitions whose location is not below the table's (their files are not in the table's listing)."""
        root = (table.sd.location or "").rstrip("/") + "/"
        for part in self.get_partitions(table.db_name, table.table_name):
            if part.sd.location and not part.sd.location.startswith(root):
                yield part

    # -- partitions ------------------------------------------------------------------------------------
    def add_partitions(
        self,
        db_name: str,
        table_name: str,
        parts: Sequence[Partition],
        *,
        if_not_exists: bool = False,
        applied_files: Sequence[AppliedFiles | None] | None = None,
    ) -> list[Partition]:
        """Add many partitions in one transaction with batched inserts and one ADD_PARTITION event.

        Returns the partitions added (with defaulted locations); with ``if_not_exists`` existing ones are
        skipped instead of failing the whole call. ``applied_files`` (one entry per partition, None: list
        it): as in ``create_table``.
        """
        table = self._writable_table(db_name, table_name)
        keys = table.partition_key_names
        if not keys:
            raise InvalidObjectError(
                f"table '{table.qualified_name}' is not partitioned; cannot add partitions"
            )
        now = int(time.time())
        prepared: dict[str, Partition] = {}
        applied: dict[str, AppliedFiles] = {}
        for part in parts:
            if (part.db_name, part.table_name) != (table.db_name, table.table_name):
                raise InvalidObjectError(
                    f"partition {part.values} names table '{part.db_name}.{part.table_name}', "
                    f"not '{table.qualified_name}'"
                )
            name = _partition_name(table, part.values)
            check_partition_values(table.qualified_name, keys, part.values)
            if name in prepared:
                raise InvalidObjectError(f"partition '{name}' is listed twice in one add_partitions call")
            location = part.sd.location or join_uri(table.sd.location or "", name)
            sd = part.sd.model_copy(update={"location": location})
            prepared[name] = part.model_copy(update={"sd": sd, "create_time": part.create_time or now})
            if applied_files is not None and applied_files[len(prepared) - 1] is not None:
                applied[name] = applied_files[len(prepared) - 1] or []
        keys = self._check_partition_locations(table, prepared)
        self.intents.settle(
            [part.sd.location for part in prepared.values()], f"a partition of '{table.qualified_name}'"
        )
        with self.events.transaction() as tx:
            tbl_id, current = self._load_table(tx.conn, table.db_name, table.table_name, for_update=True)
            existing = self._existing_names(tx.conn, tbl_id, list(prepared))
            if existing and not if_not_exists:
                raise AlreadyExistsError(
                    f"partition '{sorted(existing)[0]}' of table '{table.qualified_name}' already exists"
                    + (f" (and {len(existing) - 1} more)" if len(existing) > 1 else "")
                )
            added = [(name, part) for name, part in prepared.items() if name not in existing]
            ids = self._insert_partitions(tx.conn, tbl_id, added, keys)
            if table.is_managed:  # made after commit: a failed or killed call leaves no directories
                self.intents.makedirs(tx, [part.sd.location or "" for _, part in added])
            if added:
                listings.forget_partitions(tx.conn, tbl_id, ids.values())
                changes = [
                    self._captured(
                        tx.conn, ObjectKey(tbl_id, ids[name]), part.sd.location, applied.get(name), fresh=True
                    )
                    for name, part in added
                ]
                body = {"table": _snapshot(current), "partitions": [_snapshot(part) for _, part in added]}
                tx.emit(
                    EventType.ADD_PARTITION,
                    table.db_name,
                    table.table_name,
                    MessageBuilder(body).with_partition_data(changes),
                )
        return [part for _, part in added]

    def _check_partition_locations(self, table: Table, parts: dict[str, Partition]) -> dict[str, str | None]:
        """Refuse partition locations that are not their own (``LocationPolicy.check_partitions``); returns
        each one's lookup key by name."""
        with self.events.reader() as conn:
            return self.locations.check_partitions(
                conn,
                table.qualified_name,
                {name: part.sd.location for name, part in parts.items()},
                managed=table.is_managed,
                table_location=table.sd.location,
                table_id=table.id,
            )

    def _existing_names(self, conn: Connection, tbl_id: int, names: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for chunk in _chunks(names):
            found.update(
                conn.execute(
                    select(partitions.c.part_name).where(
                        partitions.c.tbl_id == tbl_id, partitions.c.part_name.in_(chunk)
                    )
                ).scalars()
            )
        return found

    def _insert_partitions(
        self,
        conn: Connection,
        tbl_id: int,
        added: Sequence[tuple[str, Partition]],
        keys: Mapping[str, str | None],
    ) -> dict[str, int]:
        """Insert partitions with their key values; returns their ids by name (``keys``: location keys)."""
        out: dict[str, int] = {}
        # The new ids come back with the insert where the database returns rows from a multi-row insert
        # (PostgreSQL, SQLite, MariaDB 10.5+): one statement per chunk instead of an insert and a read back.
        returning = conn.dialect.insert_executemany_returning
        for chunk in _chunks(added):
            rows = [
                {
                    "tbl_id": tbl_id,
                    "part_name": name,
                    "location": part.sd.location,
                    "location_key": keys[name],
                    "doc": part.model_dump_json(exclude={"write_id"}),
                    "write_id": part.write_id,
                }
                for name, part in chunk
            ]
            if returning:
                ids = dict(conn.execute(_INSERT_PARTITIONS_RETURNING, rows).all())
            else:
                conn.execute(insert(partitions), rows)
                ids = dict(
                    conn.execute(
                        select(partitions.c.part_name, partitions.c.part_id).where(
                            partitions.c.tbl_id == tbl_id,
                            partitions.c.part_name.in_([name for name, _ in chunk]),
                        )
                    ).all()
                )
            conn.execute(
                insert(partition_key_vals),
                [
                    {"part_id": ids[name], "tbl_id": tbl_id, "idx": idx, "value": value}
                    for name, part in chunk
                    for idx, value in enumerate(part.values)
                ],
            )
            out.update(ids)
        return out

    def get_partition(self, db_name: str, table_name: str, values: Sequence[str]) -> Partition:
        return self._partition_of(self.get_table(db_name, table_name), values)

    def _partition_of(self, table: Table, values: Sequence[str]) -> Partition:
        """A partition of a table the caller read already (its row only)."""
        name = _partition_name(table, values)
        found = self.get_partitions_by_names(table.db_name, table.table_name, [name])
        if not found:
            raise NoSuchPartitionError(table.db_name, table.table_name, name)
        return found[0]

    def get_partitions_by_names(
        self, db_name: str, table_name: str, names: Sequence[str], *, decode: Decode = None
    ) -> list[Any]:
        with self.events.reader() as conn:
            tbl_id, _ = self._load_table(conn, db_name.lower(), table_name.lower())
            return self._partitions_named(conn, tbl_id, names, decode)

    def partitions_of(self, table: Table, names: Sequence[str]) -> list[Partition]:
        """``get_partitions_by_names`` of a table the caller just read (by its id: the table is not read
        again; a replication load asks this for every group of partitions it applies)."""
        if table.id is None:
            return self.get_partitions_by_names(table.db_name, table.table_name, names)
        with self.events.reader() as conn:
            return self._partitions_named(conn, table.id, names, None)

    @staticmethod
    def _partitions_named(conn: Connection, tbl_id: int, names: Sequence[str], decode: Decode) -> list[Any]:
        out: list[Any] = []
        for chunk in _chunks(list(names)):
            rows = conn.execute(
                select(partitions.c.doc, partitions.c.write_id)
                .where(partitions.c.tbl_id == tbl_id, partitions.c.part_name.in_(chunk))
                .order_by(partitions.c.part_name)
            )
            out.extend(_decoded(rows, decode))
        return out

    def get_partitions(
        self, db_name: str, table_name: str, max_parts: int = -1, *, decode: Decode = None
    ) -> list[Any]:
        with self.events.reader() as conn:
            tbl_id, _ = self._load_table(conn, db_name.lower(), table_name.lower())
            query = (
                select(partitions.c.doc, partitions.c.write_id)
                .where(partitions.c.tbl_id == tbl_id)
                .order_by(partitions.c.part_name)
            )
            if max_parts >= 0:
                query = query.limit(max_parts)
            return _decoded(conn.execute(query), decode)

    def get_partition_names(self, db_name: str, table_name: str, max_parts: int = -1) -> list[str]:
        with self.events.reader() as conn:
            tbl_id, _ = self._load_table(conn, db_name.lower(), table_name.lower())
            query = (
                select(partitions.c.part_name)
                .where(partitions.c.tbl_id == tbl_id)
                .order_by(partitions.c.part_name)
            )
            if max_parts >= 0:
                query = query.limit(max_parts)
            return list(conn.execute(query).scalars())

    def get_partitions_ps(
        self,
        db_name: str,
        table_name: str,
        partial_values: Sequence[str],
        max_parts: int = -1,
        *,
        decode: Decode = None,
    ) -> list[Any]:
        """Partitions matching a partial spec: an empty value matches anything (Hive's get_partitions_ps)."""
        table = self.get_table(db_name, table_name)
        if len(partial_values) > len(table.partition_keys):
            raise InvalidObjectError(
                f"partial spec {list(partial_values)} has more values than table '{table.qualified_name}' has keys"
            )
        with self.events.reader() as conn:
            query = select(partitions.c.doc, partitions.c.write_id).where(partitions.c.tbl_id == table.id)
            for idx, value in enumerate(partial_values):
                if value == "":
                    continue
                kv = partition_key_vals.alias(f"kv{idx}")
                query = query.join(
                    kv, and_(kv.c.part_id == partitions.c.part_id, kv.c.idx == idx, kv.c.value == value)
                )
            query = query.order_by(partitions.c.part_name)
            if max_parts >= 0:
                query = query.limit(max_parts)
            return _decoded(conn.execute(query), decode)

    def get_partitions_by_filter(
        self, db_name: str, table_name: str, filter_text: str, max_parts: int = -1, *, decode: Decode = None
    ) -> list[Any]:
        """Partitions matching a Hive filter expression, evaluated by the database (see partition_filter)."""
        table = self.get_table(db_name, table_name)
        node = parse_filter(filter_text) if filter_text.strip() else None
        with (
            self.events.reader() as conn,
            statement_time_limit(conn, f"partition filter on '{table.qualified_name}'"),
        ):
            query = select(partitions.c.doc, partitions.c.write_id).where(partitions.c.tbl_id == table.id)
            if node is not None:
                query = apply_filter(query, node, table)
            query = query.order_by(partitions.c.part_name)
            if max_parts >= 0:
                query = query.limit(max_parts)
            return _decoded(conn.execute(query), decode)

    def alter_partitions(
        self,
        db_name: str,
        table_name: str,
        new_parts: Sequence[Partition],
        *,
        capture_files: bool = True,
        applied_files: Sequence[AppliedFiles | None] | None = None,
        declared: bool = False,
    ) -> None:
        """Replace partitions' metadata (values unchanged); one ALTER_PARTITION event per partition.

        ``applied_files`` (one entry per partition, None: list it): as in ``create_table``. ``declared``:
        the client's INSERT just recorded the new files of these partitions (Hive's loadPartition fires it
        before this alter), so a partition that stays where it is is not listed (``capture.declared_change``).
        """
        table = self._writable_table(db_name, table_name)
        names = [_partition_name(table, part.values) for part in new_parts]
        applied = list(applied_files) if applied_files is not None else [None] * len(new_parts)
        keys = self._check_partition_locations(table, dict(zip(names, new_parts, strict=True)))
        adopted = {
            name: self.trash.adopt(part.sd.location) if capture_files and given is None else []
            for name, part, given in zip(names, new_parts, applied, strict=True)
        }
        given_files = dict(zip(names, applied, strict=True))
        with self.events.transaction() as tx:
            tbl_id, current = self._load_table(tx.conn, table.db_name, table.table_name, for_update=True)
            old_rows = {}
            for chunk in _chunks(names):
                for row in tx.conn.execute(
                    select(
                        partitions.c.part_id, partitions.c.part_name, partitions.c.doc, partitions.c.write_id
                    )
                    .where(partitions.c.tbl_id == tbl_id, partitions.c.part_name.in_(chunk))
                    .with_for_update()
                ):
                    old_rows[row.part_name] = row
            updates = []
            for name, part in zip(names, new_parts, strict=True):
                if name not in old_rows:
                    raise NoSuchPartitionError(table.db_name, table.table_name, name)
                before = _partition_from_row(old_rows[name])
                part = part.model_copy(update={"write_id": before.write_id})
                updates.append(
                    {
                        "b_part_id": old_rows[name].part_id,
                        "b_doc": part.model_dump_json(),
                        "b_location": part.sd.location,
                        "b_key": keys[name],
                    }
                )
                data = None
                key = ObjectKey(tbl_id, old_rows[name].part_id)
                stays = part.sd.location == before.sd.location
                if capture_files and declared and given_files[name] is None and stays:
                    data = declared_change(tx.conn, key)
                elif capture_files:
                    data = self._captured(tx.conn, key, part.sd.location, given_files[name])
                body = {
                    "table": _snapshot(current),
                    "before": _snapshot(before),
                    "after": _snapshot(part),
                    "recycled": adopted[name],
                }
                tx.emit(
                    EventType.ALTER_PARTITION,
                    table.db_name,
                    table.table_name,
                    MessageBuilder(body).with_data(data),
                )
            _bulk_update_partitions(tx.conn, updates)

    def drop_partitions(
        self, db_name: str, table_name: str, values_list: Sequence[Sequence[str]], *, delete_data: bool = True
    ) -> list[Partition]:
        """Drop partitions in one transaction and one DROP_PARTITION event; files go to cmroot after commit."""
        self._check_writable(db_name)
        table = self.get_table(db_name, table_name)
        names = [_partition_name(table, values) for values in values_list]
        found = {
            _partition_name(table, p.values): p
            for p in self.get_partitions_by_names(db_name, table_name, names)
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
            known = self._known_files(
                conn, table.id or 0, self._part_ids(conn, table.id or 0, names).values()
            )
        recycled = [
            describe_known(p.sd.location, self.cm, _lookup(known, p.sd.location)) if keep else []
            for p, keep in zip(dropped, own, strict=True)
        ]
        with self.events.transaction() as tx:
            tbl_id, current = self._load_table(tx.conn, table.db_name, table.table_name, for_update=True)
            listings.forget_partitions(tx.conn, tbl_id, self._part_ids(tx.conn, tbl_id, names).values())
            for chunk in _chunks(names):
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
                {
                    "table": _snapshot(current),
                    "partitions": [_snapshot(p) for p in dropped],
                    "recycled": recycled,
                },
            )
            if recycle:
                flat = [uri for uris in recycled for uri in uris]
                self.intents.recycle(
                    tx, flat, [p.sd.location or "" for p, keep in zip(dropped, own, strict=True) if keep]
                )
        return dropped

    # -- data changes ----------------------------------------------------------------------------------
    def insert(
        self,
        db_name: str,
        table_name: str,
        partition_values: Sequence[str] | None = None,
        *,
        new_files: Sequence[str] | None = None,
        replace: bool = False,
        applied_files: AppliedListing | None = None,
        applied_recycled: Sequence[str] = (),
    ) -> list[str]:
        """Record new data in a table or partition (an INSERT event with files and checksums).

        The event's ``data`` is the diff from the recorded listing (files added or changed, paths removed,
        the listing's count and digest after the change: a reader applying it holds exactly this listing,
        never a mix of old and new data); ``new_files`` what the writer added (``new_files`` argument: those
        files, which must exist; else the files the diff found new). A client whose alter already listed
        its files (an alter_table before the INSERT, from a connection that had not named files yet) logs an
        empty change; into a partition, Spark's INSERT comes first and records the files itself.
        With ``replace`` (INSERT OVERWRITE) every other data file leaves the listing and is recycled into
        cmroot after commit. Returns the encoded URIs of the new files.

        A replication load that made the location hold exactly ``applied_files`` records that listing (see
        ``create_table``); it already kept the files it replaced (``applied_recycled``) in this metastore's
        cmroot, so nothing is recycled after commit.
        """
        self._check_writable(db_name)
        table = self.get_table(db_name, table_name)
        partition = self._partition_of(table, partition_values) if partition_values else None
        if table.partition_keys and partition is None:
            raise InvalidObjectError(
                f"table '{table.qualified_name}' is partitioned; name the partition written"
            )
        location = (partition.sd if partition else table.sd).location
        applied = None
        if applied_files is not None:
            new_files, replace = None, True
            adopted, applied = list(applied_recycled), applied_checksums(applied_files)
        else:
            adopted = self.trash.adopt(location)
        named = relative_names(location or "", new_files) if new_files is not None else None
        with self.events.transaction() as tx:
            tbl_id, current = self._load_table(tx.conn, table.db_name, table.table_name, for_update=True)
            part_id = listings.TABLE_LEVEL
            if partition is not None:
                name = _partition_name(table, partition.values)
                part_id = self._part_ids(tx.conn, tbl_id, [name]).get(name)
                if part_id is None:
                    raise NoSuchPartitionError(table.db_name, table.table_name, name)
            key = ObjectKey(tbl_id, part_id)
            got: Captured
            if named is not None and not replace:  # the writer says what it added: look at that only
                got = capture_named(tx.conn, self.cm, key, location, named)
            else:
                got = capture(
                    tx.conn, self.cm, key, location, applied=applied, named=named, only_named=replace
                )
            added = got.named if named is not None else list(got.change.added)
            body = {
                "table": _snapshot(current),
                "partition": _snapshot(partition) if partition else None,
                "replace": replace,
                "new_files": added,
                "recycled": adopted + got.excluded,
            }
            tx.emit(
                EventType.INSERT, table.db_name, table.table_name, MessageBuilder(body).with_data(got.change)
            )
            self.intents.recycle(tx, got.excluded)
        return added

    def reconcile_listing(self, key: ObjectKey) -> bool:
        """List an object that declared writes left unlisted and log what no writer named.

        Spark names the files of an append in its INSERT and the alter that follows lists nothing, so a
        file dropped or removed by hand beside it would wait for the next overwrite. This compares the
        recorded listing with the whole location, once for all the appends since the object was marked
        (``listings.mark_unlisted``), and logs the difference in an ALTER_PARTITION (or ALTER_TABLE) event
        whose metadata is unchanged; when the writers told everything, nothing is logged. The table's row is
        locked as by any write. Returns whether an event was logged.
        """
        with self.events.transaction() as tx:
            row = tx.conn.execute(
                select(tbls.c.tbl_id, tbls.c.doc, tbls.c.write_id)
                .where(tbls.c.tbl_id == key.tbl_id)
                .with_for_update()
            ).first()
            if row is None or listings.unlisted_since(tx.conn, key) is None:
                return False  # dropped, or listed by a write in the meantime
            table = _table_from_row(row)
            if refusal(table.db_name, self._load_db(tx.conn, table.db_name).parameters):
                listings.mark_listed(tx.conn, key)  # a protected replica's listing is its loads' business
                return False
            partition = None
            if key.part_id != listings.TABLE_LEVEL:
                found = tx.conn.execute(
                    select(partitions.c.doc, partitions.c.write_id).where(partitions.c.part_id == key.part_id)
                ).first()
                if found is None:
                    return False
                partition = _partition_from_row(found)
            location = (partition.sd if partition is not None else table.sd).location
            change = capture(tx.conn, self.cm, key, location).change
            if change.is_empty:
                return False
            before = _snapshot(partition if partition is not None else table)
            body: dict[str, Any] = {"before": before, "after": before, "recycled": []}
            kind = EventType.ALTER_TABLE
            if partition is not None:
                body, kind = {"table": _snapshot(table), **body}, EventType.ALTER_PARTITION
            tx.emit(kind, table.db_name, table.table_name, MessageBuilder(body).with_data(change))
        return True

    # -- recorded listings -----------------------------------------------------------------------------
    def describe_data(self, table: Table, partition: Partition | None = None) -> list[str]:
        """Encoded files of a table's (or one of its partitions') location, as a bootstrap dump lists them.

        The checksums come from the recorded listing wherever a file's size and modification time are the
        recorded ones: a bootstrap dump lists the warehouse, it does not read it again (only files changed
        behind the metastore's back, or never recorded, are read).
        """
        location = (partition or table).sd.location
        if not location or table.id is None:
            return describe_files(location, self.cm)
        recorded = self.recorded_listings(table, [partition] if partition is not None else [])
        return describe_recorded(location, self.cm, recorded.get(location, {}))

    def describe_partitions(self, table: Table, parts: Sequence[Partition]) -> list[list[str]]:
        """``describe_data`` of each of a page of the table's partitions, in order: their recorded listings
        come in a few statements for the page (a bootstrap dump of 100,000 partitions would otherwise send
        two per partition)."""
        if table.id is None:
            return [describe_files(part.sd.location, self.cm) for part in parts]
        recorded = self.recorded_listings(table, parts)
        return [
            describe_recorded(part.sd.location, self.cm, recorded.get(part.sd.location, {}))
            if part.sd.location
            else describe_files(part.sd.location, self.cm)
            for part in parts
        ]

    def recorded_listings(
        self, table: Table, partitions: Sequence[Partition] = ()
    ) -> dict[str, dict[str, FileRecord]]:
        """Recorded files (relative path -> record) of the table's own location, or of each partition's.

        What a bootstrap dump needs to list a table without reading the files it recorded (on one process,
        ``describe_data``; on Spark executors, the listings are shipped with the locations).
        """
        if table.id is None:
            return {}
        with self.events.reader() as conn:
            if not partitions:
                location = table.sd.location
                return {location: listings.read(conn, ObjectKey(table.id))} if location else {}
            keys = table.partition_key_names
            locations = {make_partition_name(keys, p.values): p.sd.location for p in partitions}
            ids = self._part_ids(conn, table.id, list(locations))
            recorded = listings.read_many(conn, table.id, ids.values())
            return {
                location: recorded.get(ids[name], {})
                for name, location in locations.items()
                if location and name in ids
            }

    def _captured(
        self,
        conn: Connection,
        key: ObjectKey,
        location: str | None,
        applied_files: AppliedFiles | None,
        *,
        fresh: bool = False,
    ) -> DataChange:
        """The data change a write records for one object: from its location, or from what a load applied."""
        if isinstance(applied_files, AppliedDelta):
            return capture_delta(conn, self.cm, key, location, applied_files).change
        applied = applied_checksums(applied_files) if applied_files is not None else None
        return capture(conn, self.cm, key, location, applied=applied, fresh=fresh).change

    def _part_ids(self, conn: Connection, tbl_id: int, names: Sequence[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for chunk in _chunks(list(names)):
            out.update(
                conn.execute(
                    select(partitions.c.part_name, partitions.c.part_id).where(
                        partitions.c.tbl_id == tbl_id, partitions.c.part_name.in_(chunk)
                    )
                ).all()
            )
        return out

    def _known_files(
        self, conn: Connection, tbl_id: int, part_ids: Iterable[int] | None
    ) -> dict[str, FileRecord]:
        """Recorded files of a table's objects (``None``: all of them) by absolute path key: the checksums a
        drop or truncate reuses for files it recycles instead of reading them again. Only the named objects'
        rows are read: dropping one partition of a large table costs that partition."""
        roots: dict[int, str] = {}
        wanted = None if part_ids is None else sorted(set(part_ids))
        if wanted is None or listings.TABLE_LEVEL in wanted:
            table_location = conn.execute(select(tbls.c.location).where(tbls.c.tbl_id == tbl_id)).scalar()
            if table_location:
                roots[listings.TABLE_LEVEL] = table_location
        locations = select(partitions.c.part_id, partitions.c.location).where(partitions.c.tbl_id == tbl_id)
        files = select(
            data_files.c.part_id,
            data_files.c.rel_path,
            data_files.c.size,
            data_files.c.mtime_ns,
            data_files.c.checksum,
            data_files.c.version_id,
        ).where(data_files.c.tbl_id == tbl_id)
        if wanted is None:
            batches = [(locations, files)]
        else:
            batches = [
                (
                    locations.where(partitions.c.part_id.in_(chunk)),
                    files.where(data_files.c.part_id.in_(chunk)),
                )
                for chunk in _chunks(wanted)
            ]
        out: dict[str, FileRecord] = {}
        for located, recorded in batches:
            roots.update((part_id, location) for part_id, location in conn.execute(located) if location)
            for row in conn.execute(recorded):
                root = roots.get(row.part_id)
                if root is not None:
                    out[path_key(join_uri(root, row.rel_path))] = FileRecord(*row[1:])
        return out

    # -- functions -------------------------------------------------------------------------------------
    def create_function(self, function: Function) -> Function:
        check_identifier(function.function_name, "function")
        function = function.model_copy(update={"create_time": function.create_time or int(time.time())})
        with self.events.transaction() as tx:
            db_id = self._db_id(tx.conn, function.db_name)
            if tx.conn.execute(
                select(funcs.c.func_id).where(
                    funcs.c.db_id == db_id, funcs.c.func_name == function.function_name
                )
            ).first():
                raise AlreadyExistsError(
                    f"function '{function.db_name}.{function.function_name}' already exists"
                )
            tx.conn.execute(
                insert(funcs).values(
                    db_id=db_id, func_name=function.function_name, doc=function.model_dump_json()
                )
            )
            tx.emit(EventType.CREATE_FUNCTION, function.db_name, None, {"function": _snapshot(function)})
        return function

    def get_function(self, db_name: str, function_name: str) -> Function:
        with self.events.reader() as conn:
            db_id = self._db_id(conn, db_name.lower())
            row = conn.execute(
                select(funcs.c.doc).where(funcs.c.db_id == db_id, funcs.c.func_name == function_name.lower())
            ).first()
        if row is None:
            raise NoSuchFunctionError(db_name.lower(), function_name.lower())
        return Function.model_validate_json(row.doc)

    def get_functions(self, db_name: str, pattern: str | None = None) -> list[str]:
        with self.events.reader() as conn:
            db_id = self._db_id(conn, db_name.lower())
            names = conn.execute(
                select(funcs.c.func_name).where(funcs.c.db_id == db_id).order_by(funcs.c.func_name)
            ).scalars()
            return [name for name in names if matches(pattern, name)]

    def drop_function(self, db_name: str, function_name: str) -> None:
        function = self.get_function(db_name, function_name)
        with self.events.transaction() as tx:
            db_id = self._db_id(tx.conn, function.db_name)
            count = tx.conn.execute(
                delete(funcs).where(funcs.c.db_id == db_id, funcs.c.func_name == function.function_name)
            ).rowcount
            if count == 0:
                raise NoSuchFunctionError(function.db_name, function.function_name)
            tx.emit(EventType.DROP_FUNCTION, function.db_name, None, {"function": _snapshot(function)})

    # -- read-only queries for the metadata cache ------------------------------------------------------
    def get_partition_docs(self, db_name: str, table_name: str) -> list[tuple[str, str, int]]:
        """Every partition of a table as stored: (name, JSON document, write id), ordered by name.

        The metadata cache loads whole tables; raw documents let it parse them once, after the read (which
        keeps its consistency window short), and size them without serialising again. Rows are streamed,
        so a 100,000-partition table does not sit in the driver's buffer twice.
        """
        with self.events.reader() as conn:
            tbl_id, _ = self._load_table(conn, db_name.lower(), table_name.lower())
            query = (
                select(partitions.c.part_name, partitions.c.doc, partitions.c.write_id)
                .where(partitions.c.tbl_id == tbl_id)
                .order_by(partitions.c.part_name)
                .execution_options(yield_per=5_000)
            )
            out: list[tuple[str, str, int]] = []
            for rows in conn.execute(query).partitions():
                out.extend((row.part_name, row.doc, row.write_id) for row in rows)
            return out


def _table_from_row(row: Any) -> Table:
    table = Table.model_validate_json(row.doc)
    return table.model_copy(update={"id": row.tbl_id, "write_id": row.write_id})


def _partition_from_row(row: Any) -> Partition:
    return Partition.model_validate_json(row.doc).model_copy(update={"write_id": row.write_id})


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


def _lookup(known: dict[str, FileRecord], location: str | None) -> Any:
    """``describe_known``'s question for files below ``location``, answered from recorded files."""
    root = join_uri(location or "", "")

    def identity(rel: str, stat: StatIdentity) -> FileIdentity | None:
        return still_recorded(known.get(path_key(root + rel.lstrip("/"))), stat)

    return identity


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
