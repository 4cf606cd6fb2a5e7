"""The catalog's shared state and look-ups: what every object family reads and writes through."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, select

from hmsrepl.config import MetastoreConfig
from hmsrepl.exceptions import NoSuchDatabaseError, NoSuchTableError
from hmsrepl.metastore import listings
from hmsrepl.metastore.applied_files import AppliedDelta, AppliedFiles, ListingPages, applied_checksums
from hmsrepl.metastore.capture import capture, capture_delta
from hmsrepl.metastore.catalog.held import HeldRow, held_tables, hold_row
from hmsrepl.metastore.catalog.rows import (
    _AROUND_NEW_TABLE,
    _DB_DOC,
    _DB_DOC_AND_SETTLE,
    _DB_DOC_FOR_UPDATE,
    _DB_ID,
    _TABLE_ROW,
    _TABLE_ROW_FOR_UPDATE,
    DEFAULT_DB,
    _chunks,
    _table_from_row,
    partition_ids_named,
)
from hmsrepl.metastore.change_manager import ChangeManager
from hmsrepl.metastore.eventlog import EventLog
from hmsrepl.metastore.intents import FileIntents
from hmsrepl.metastore.listings import FileRecord, ObjectKey
from hmsrepl.metastore.location_policy import LocationPolicy, Surroundings, read_around_table
from hmsrepl.metastore.locations import canonical_or_none
from hmsrepl.metastore.messages import DataChange
from hmsrepl.metastore.model import Database, Table, TableType
from hmsrepl.metastore.page_capture import capture_pages, pages_qualify
from hmsrepl.metastore.placement import Placement
from hmsrepl.metastore.protection import check_params, is_privileged
from hmsrepl.metastore.schema import data_files, partitions, tbls
from hmsrepl.metastore.trash import TrashAdopter
from hmsrepl.storage.base import join_uri, path_key

_HELD_DATABASES = "catalog_held_databases"  # MetastoreTransaction.shared key: see CatalogCore.held_databases


class CatalogCore:
    """What every object family of the catalog shares: the event log whose transactions are the one write
    path, the change manager, the location policy and the intents owed after commit, and the look-ups of
    databases and tables each family's writes start from (their rows locked inside the write's transaction).
    """

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
        # The databases as a create last read them, by name, with their stored documents (None: read from no
        # row): where their new tables go by default is then known before the read
        # (``load_db_to_create_table_in``), and a create on that guess compares the document its own
        # statement reads with the one here (``guessed_db``). A stale entry costs a read, never a check.
        self._last_read: dict[str, tuple[Database, str | None]] = {}

    @classmethod
    def for_config(cls, events: EventLog, cm: ChangeManager, config: MetastoreConfig) -> CatalogCore:
        """The catalog state of a metastore configured by ``config``, with its location policy."""
        return cls(events, cm, config.warehouse, config.trash_root, policy=LocationPolicy.for_config(config))

    def refuse_protected(self, db: Database) -> None:
        """The entry check of a client write into a protected replica (``protection.check_params``), before
        any file work; every family asks it here, so it is one place to reason about."""
        check_params(db)

    def default_db_location(self, name: str) -> str:
        return self.warehouse if name == DEFAULT_DB else join_uri(self.warehouse, f"{name}.db")

    def get_database(self, name: str) -> Database:
        with self.events.reader() as conn:
            row = conn.execute(_DB_DOC, {"db_name": name.lower()}).first()
        if row is None:
            raise NoSuchDatabaseError(name.lower())
        return Database.model_validate_json(row.doc)

    def check_writable(self, db_name: str) -> None:
        """Refuse a client write into a protected replica before any file work (see ``protection``).

        The authoritative check runs again at commit, in the event log, for every write.
        """
        self.refuse_protected(self.get_database(db_name))

    def writable_table(self, db_name: str, table_name: str) -> Table:
        """``check_writable`` and ``get_table`` on one connection (a client write asks both, then changes)."""
        return self.writable_table_placed(db_name, table_name)[0]

    def writable_table_placed(self, db_name: str, table_name: str) -> tuple[Table, Placement]:
        """``writable_table`` with the table's placement (``metastore.placement``), read with its row.

        A privileged writer (a replication load) is never refused, so the database's row is not read for it:
        the table's own read says whether the database exists, and a load adding partitions to each table it
        creates saves a statement per table."""
        with self.events.reader() as conn:
            if not is_privileged():
                self.refuse_protected(self.load_db(conn, db_name.lower()))
            _, table, placement = self.load_table_placed(conn, db_name.lower(), table_name.lower())
            return table, placement

    def db_id(self, conn: Connection, name: str, *, missing_ok: bool = False) -> int | None:
        db_id = conn.execute(_DB_ID, {"db_name": name}).scalar()
        if db_id is None and not missing_ok:
            raise NoSuchDatabaseError(name)
        return db_id

    def load_db(self, conn: Connection, name: str, *, for_update: bool = False) -> Database:
        held = self.held_databases(conn)
        if held is not None and name in held:
            return held[name].model_copy(deep=True)
        if for_update:
            db_id = self.db_id(conn, name)
            row = conn.execute(_DB_DOC_FOR_UPDATE, {"db_id": db_id}).first()
        else:
            row = conn.execute(_DB_DOC, {"db_name": name}).first()
        if row is None:
            raise NoSuchDatabaseError(name)
        db = Database.model_validate_json(row.doc)
        if for_update and held is not None:
            held[name] = db.model_copy(deep=True)
        return db

    def load_db_to_create_in(self, conn: Connection, name: str) -> tuple[Database, bool]:
        """``load_db``, and whether file intents a new object may have to settle are pending, in one read
        (``FileIntents.settle``'s ``any_pending``; True when not read: a held row costs no statement)."""
        db, any_pending, _ = self._db_doc_to_create_in(conn, name)
        return db, any_pending

    def _db_doc_to_create_in(self, conn: Connection, name: str) -> tuple[Database, bool, str | None]:
        """``load_db_to_create_in`` with the stored document read (None: a held row, read from no row)."""
        held = self.held_databases(conn)
        if held is not None and name in held:
            return held[name].model_copy(deep=True), True, None
        row = conn.execute(_DB_DOC_AND_SETTLE, {"db_name": name}).first()
        if row is None:
            raise NoSuchDatabaseError(name)
        return Database.model_validate_json(row.doc), bool(row.settle), row.doc

    def load_db_to_create_table_in(
        self, conn: Connection, name: str, table: Table
    ) -> tuple[Database, bool, Surroundings | None]:
        """``load_db_to_create_in`` for one new table, and for a managed one the read around its location
        (``LocationPolicy.check_table``'s ``around``) in the same statement: one round trip instead of two.

        That needs the location before the database is read: the table's own, or its default place below
        the database's directory as last read here. When the database moved since, ``around`` is for another
        place than the table's, and the check reads again: a stale guess costs a statement, never a check.
        """
        held = self.held_databases(conn)
        guessed = self._last_read.get(name)
        uri = table.sd.location or (
            self.default_table_location(guessed[0], table) if guessed is not None else None
        )
        loc = canonical_or_none(uri) if uri and table.is_managed else None
        if loc is None or (held is not None and name in held):
            db, any_pending, doc = self._db_doc_to_create_in(conn, name)
            around = None
        else:
            around = read_around_table(conn, loc, _AROUND_NEW_TABLE, name)
            doc = around.database_docs.get(name)
            if doc is None:
                raise NoSuchDatabaseError(name)
            db, any_pending = Database.model_validate_json(doc), around.flagged
        self._last_read[name] = (db, doc)
        return db, any_pending, around

    def guessed_db(self, name: str) -> tuple[Database, str] | None:
        """The database ``name`` as a create last read it, with its stored document; None when unknown.

        A single create may insert its table on this guess and compare the document its own statement read
        with it afterwards (``TableCatalog``): a database changed since costs the create a second try, never
        a check made on a stale database.
        """
        db, doc = self._last_read.get(name, (None, None))
        return None if db is None or doc is None else (db, doc)

    def default_table_location(self, db: Database, table: Table) -> str | None:
        """Where ``table`` goes in ``db`` when the client names no location (views have none)."""
        if table.table_type == TableType.VIRTUAL_VIEW:
            return None
        return join_uri(
            db.table_root(table.is_managed) or self.default_db_location(db.name), table.table_name
        )

    def held_databases(self, conn: Connection) -> dict[str, Database] | None:
        """The database rows this thread's open transaction on ``conn`` holds locked FOR UPDATE, by name.

        No other writer can change a locked row until the commit, and this transaction's own changes go
        through ``alter_database`` and ``drop_database``, which keep the entry current. So a load batch,
        which locks its database first, reads the row once rather than once per table it creates. None: no
        open transaction on ``conn`` (a read outside one must see what others committed).
        """
        tx = self.events.current_transaction()
        if tx is None or tx.conn is not conn:
            return None
        held: dict[str, Database] = tx.shared.setdefault(_HELD_DATABASES, {})
        return held

    def get_table(self, db_name: str, table_name: str) -> Table:
        with self.events.reader() as conn:
            return self.load_table(conn, db_name.lower(), table_name.lower())[1]

    def load_table(
        self, conn: Connection, db_name: str, table_name: str, *, for_update: bool = False
    ) -> tuple[int, Table]:
        tbl_id, table, _ = self.load_table_placed(conn, db_name, table_name, for_update=for_update)
        return tbl_id, table

    def load_table_placed(
        self, conn: Connection, db_name: str, table_name: str, *, for_update: bool = False
    ) -> tuple[int, Table, Placement]:
        """``load_table`` with the table's placement, from the same row (no statement more). A row this
        thread's open transaction holds (``held_tables``) is answered without a statement."""
        found = self.find_table_placed(conn, db_name, table_name, for_update=for_update)
        if found is None:
            if self.db_id(conn, db_name, missing_ok=True) is None:
                raise NoSuchDatabaseError(db_name)
            raise NoSuchTableError(db_name, table_name)
        return found

    def find_table_placed(
        self, conn: Connection, db_name: str, table_name: str, *, for_update: bool = False
    ) -> tuple[int, Table, Placement] | None:
        """``load_table_placed``, or None when the table (or its database) does not exist."""
        held = held_tables(self.events, conn)
        row: Any = held.get((db_name, table_name)) if held is not None else None
        if row is None:
            query = _TABLE_ROW_FOR_UPDATE if for_update else _TABLE_ROW
            row = conn.execute(query, {"db_name": db_name, "name": table_name}).first()
            if row is None:
                return None
            if for_update and held is not None:
                hold_row(held, db_name, table_name, HeldRow(*row))
        return row.tbl_id, _table_from_row(row), Placement(row.location_key, row.odd_partitions)

    def captured(
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
        if isinstance(applied_files, ListingPages):  # a new object's listing, too long to hold
            if location and pages_qualify(self.cm, location, fresh):
                return capture_pages(conn, self.cm, key, location, applied_files).change
            applied_files = applied_files.as_change().added
        applied = applied_checksums(applied_files) if applied_files is not None else None
        return capture(conn, self.cm, key, location, applied=applied, fresh=fresh).change

    def part_ids(self, conn: Connection, tbl_id: int, names: Sequence[str]) -> dict[str, int]:
        return partition_ids_named(conn, tbl_id, names)

    def known_files(
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


class CatalogFamily:
    """One object family of the catalog (databases, tables, ...): it reads and writes through the shared
    core, so every family commits through the same event log and checks the same locations."""

    def __init__(self, core: CatalogCore) -> None:
        self.core = core

    @property
    def events(self) -> EventLog:
        return self.core.events

    @property
    def cm(self) -> ChangeManager:
        return self.core.cm

    @property
    def warehouse(self) -> str:
        return self.core.warehouse

    @property
    def trash(self) -> TrashAdopter:
        return self.core.trash

    @property
    def intents(self) -> FileIntents:
        return self.core.intents

    @property
    def locations(self) -> LocationPolicy:
        return self.core.locations
