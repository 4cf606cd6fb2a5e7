"""Databases: create, read, alter and drop (a cascade drops their tables and functions first)."""

from __future__ import annotations

import time

from sqlalchemy import Connection, delete, insert, select, update

from hmsrepl.exceptions import AlreadyExistsError, InvalidOperationError
from hmsrepl.metastore.catalog.core import CatalogCore, CatalogFamily
from hmsrepl.metastore.catalog.functions import FunctionCatalog
from hmsrepl.metastore.catalog.rows import DEFAULT_DB, _snapshot
from hmsrepl.metastore.catalog.tables import TableCatalog
from hmsrepl.metastore.events import EventType
from hmsrepl.metastore.file_capture import describe_files
from hmsrepl.metastore.model import Database
from hmsrepl.metastore.names import check_identifier
from hmsrepl.metastore.patterns import matches
from hmsrepl.metastore.payloads import AlterDatabaseBody, DatabaseBody
from hmsrepl.metastore.schema import dbs, tbls


def _locations(db: Database) -> list[str]:
    """The directories a database owns: its location and, in Hive 4, its managed location."""
    return [uri for uri in (db.location_uri, db.managed_location_uri) if uri]


class DatabaseCatalog(CatalogFamily):
    """The catalog's databases."""

    def __init__(self, core: CatalogCore, tables: TableCatalog, functions: FunctionCatalog) -> None:
        super().__init__(core)
        self.tables = tables
        self.functions = functions

    def create_database(self, db: Database) -> Database:
        check_identifier(db.name, "database")
        db = db.model_copy(update={"location_uri": db.location_uri or self.core.default_db_location(db.name)})
        with self.events.reader() as conn:
            key = self.locations.check_database(
                conn, db.name, db.location_uri, is_default=db.name == DEFAULT_DB
            )
            managed_key = self._check_managed_location(conn, db)
        self.intents.settle(_locations(db), f"database '{db.name}'")
        with self.events.transaction() as tx:
            if self.core.db_id(tx.conn, db.name, missing_ok=True) is not None:
                raise AlreadyExistsError(
                    f"database '{db.name}' already exists; drop it first or use another name"
                )
            tx.conn.execute(
                insert(dbs).values(
                    name=db.name,
                    doc=db.model_dump_json(),
                    create_time=int(time.time()),
                    location_key=key,
                    managed_location_key=managed_key,
                )
            )
            tx.emit(EventType.CREATE_DATABASE, db.name, None, DatabaseBody(database=_snapshot(db)))
            self.intents.makedirs(tx, _locations(db))
        return db

    def _check_managed_location(self, conn: Connection, db: Database) -> str | None:
        """Hive 4's managed location obeys the rules of a database location: a managed root of this metastore,
        no protected path, no other database's, table's or partition's directory. Returns its lookup key."""
        if not db.managed_location_uri:
            return None
        return self.locations.check_database(conn, db.name, db.managed_location_uri, is_default=False)

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
            return self.core.load_db(tx.conn, name.lower(), for_update=True)

    def alter_database(self, name: str, new_db: Database) -> Database:
        name = name.lower()
        if new_db.name != name:
            raise InvalidOperationError(f"database '{name}' cannot be renamed (to '{new_db.name}')")
        self.core.check_writable(name)
        current = self.core.get_database(name)
        if not new_db.location_uri:  # a client that leaves the location out keeps it (as Hive does)
            new_db = new_db.model_copy(update={"location_uri": current.location_uri})
        keys: dict[str, str | None] = {}  # the lookup keys of the locations that change, kept beside them
        if new_db.location_uri != current.location_uri:
            with self.events.reader() as conn:
                keys["location_key"] = self.locations.check_database(
                    conn, name, new_db.location_uri, is_default=name == DEFAULT_DB
                )
        if new_db.managed_location_uri != current.managed_location_uri:
            with self.events.reader() as conn:
                keys["managed_location_key"] = self._check_managed_location(conn, new_db)
        with self.events.transaction() as tx:
            old = self.core.load_db(tx.conn, name, for_update=True)
            tx.conn.execute(
                update(dbs).where(dbs.c.name == name).values(doc=new_db.model_dump_json(), **keys)
            )
            held = self.core.held_databases(tx.conn)
            if held is not None:
                held[name] = new_db.model_copy(deep=True)
            tx.emit(
                EventType.ALTER_DATABASE,
                name,
                None,
                AlterDatabaseBody(before=_snapshot(old), after=_snapshot(new_db)),
            )
        return new_db

    def drop_database(self, name: str, *, delete_data: bool = True, cascade: bool = False) -> None:
        name = name.lower()
        if name == DEFAULT_DB:
            raise InvalidOperationError("database 'default' cannot be dropped")
        self.core.check_writable(name)
        tables = self.tables.get_tables(name)  # raises NoSuchDatabaseError
        functions = self.functions.get_functions(name)
        if (tables or functions) and not cascade:
            raise InvalidOperationError(
                f"database '{name}' is not empty ({len(tables)} tables, {len(functions)} functions); "
                "drop them first or use CASCADE"
            )
        for table in tables:
            self.tables.drop_table(name, table, delete_data=delete_data)
        for function in functions:
            self.functions.drop_function(name, function)
        removals = self._removals(name, self.core.get_database(name)) if delete_data else {}
        with self.events.transaction() as tx:
            db = self.core.load_db(tx.conn, name, for_update=True)
            db_id = self.core.db_id(tx.conn, name)
            if tx.conn.execute(select(tbls.c.tbl_id).where(tbls.c.db_id == db_id).limit(1)).first():
                raise InvalidOperationError(f"database '{name}' got a new table while being dropped; retry")
            tx.conn.execute(delete(dbs).where(dbs.c.db_id == db_id))
            (self.core.held_databases(tx.conn) or {}).pop(name, None)
            tx.emit(EventType.DROP_DATABASE, name, None, DatabaseBody(database=_snapshot(db)))
            removed = [uri for uri in _locations(db) if uri in removals]  # unless moved meanwhile
            if removed:
                self.intents.recycle(tx, [f for uri in removed for f in removals[uri]], removed)

    def _removals(self, name: str, db: Database) -> dict[str, list[str]]:
        """The database's directories a drop may remove (never the warehouse, nor one another object still
        uses), each with its loose files: recycled into the change manager, not deleted."""
        out: dict[str, list[str]] = {}
        for uri in _locations(db):
            if uri.rstrip("/") == self.warehouse.rstrip("/"):
                continue
            with self.events.reader() as conn:
                if self.locations.removable(conn, f"database '{name}'", uri, skip_db=name):
                    out[uri] = describe_files(uri, self.cm)
        return out
