"""Creating, adding and dropping a table's constraints: each change is the table's own CREATE_TABLE or
ALTER_TABLE (``metastore.constraints`` says why they live in the table's document).

Checked before anything changes, as Hive's ``ObjectStore`` checks them: the columns exist in the table, a
foreign key's parent table and columns exist, and no constraint name is taken in the database. A refused
change leaves the catalog as it was.
"""

from __future__ import annotations

from sqlalchemy import select

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore.catalog.core import CatalogFamily
from hmsrepl.metastore.catalog.rows import _table_from_row
from hmsrepl.metastore.catalog.tables import TableCatalog
from hmsrepl.metastore.constraints import TableConstraints, check_columns, check_names_free
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.protection import ReplicaProtectedError
from hmsrepl.metastore.schema import tbls


class ConstraintCatalog(CatalogFamily):
    """Constraints of the catalog's tables."""

    def __init__(self, tables: TableCatalog) -> None:
        super().__init__(tables.core)
        self.tables = tables

    def create_table_with_constraints(self, table: Table, constraints: TableConstraints) -> Table:
        """The table and its constraints: one transaction, one CREATE_TABLE event."""
        self._check(table, constraints, self.taken_names(table.db_name))
        return self.tables.create_table(table.model_copy(update={"constraints": constraints}))

    def add_constraints(self, db_name: str, table_name: str, added: TableConstraints) -> Table:
        """Add constraints to a table: its ALTER_TABLE event."""
        self.core.check_writable(db_name)
        table = self.core.get_table(db_name, table_name)
        self._check(table, added, self.taken_names(table.db_name))
        merged = (table.constraints or TableConstraints()).merged(added)
        return self.tables.alter_table(
            db_name, table_name, table.model_copy(update={"constraints": merged}), capture_files=False
        )

    def drop_constraint(self, db_name: str, table_name: str, name: str) -> Table:
        """Drop one constraint by name: its table's ALTER_TABLE event (an empty set, not None, so the
        replica's copy loses it too)."""
        self.core.check_writable(db_name)
        table = self.core.get_table(db_name, table_name)
        left = (table.constraints or TableConstraints()).without(name, table.qualified_name)
        return self.tables.alter_table(
            db_name, table_name, table.model_copy(update={"constraints": left}), capture_files=False
        )

    def follow_parent(self, parent: Table, renamed_to: Table | None) -> None:
        """Other tables' foreign keys whose parent is ``parent`` follow it, inside the caller's transaction:
        renamed with it (``renamed_to``) or dropped with it (None), each an ALTER_TABLE of its table, so a
        replica's keys follow too. The parent's own keys to itself follow in its own change
        (``TableCatalog.alter_table``). A child in a protected replica is left to its replication: its
        source's own child follows and replicates, and a parent's drop is not refused for it."""
        if parent.constraints is None:
            return  # never had a primary or unique key, so no foreign key names it (``_check``): no scan
        key = (parent.db_name, parent.table_name)
        new = None if renamed_to is None else (renamed_to.db_name, renamed_to.table_name)
        for child in self.referencing(parent):
            followed = child.constraints.following(child.db_name, key, new) if child.constraints else None
            if followed is not None and not self._protected(child.db_name):
                self.tables.alter_table(
                    child.db_name,
                    child.table_name,
                    child.model_copy(update={"constraints": followed}),
                    capture_files=False,
                )

    def _protected(self, db_name: str) -> bool:
        try:
            self.core.check_writable(db_name)
        except ReplicaProtectedError:
            return True
        return False

    def referencing(self, parent: Table) -> list[Table]:
        """The tables, in any database, other than ``parent`` whose foreign keys may name it (their documents
        name its table; ``TableConstraints.following`` tells exactly)."""
        named = '%"parent_table":"' + parent.table_name + '"%'  # a '_' in it only widens the match
        with self.events.reader() as conn:
            rows = conn.execute(
                select(tbls.c.tbl_id, tbls.c.doc, tbls.c.write_id).where(
                    tbls.c.doc.like(named), tbls.c.tbl_id != (parent.id or -1)
                )
            ).all()
        return [table for table in map(_table_from_row, rows) if table.constraints]

    def tables_with_constraints(self, db_name: str) -> list[Table]:
        """The tables of a database that hold any constraint: only their documents are read."""
        with self.events.reader() as conn:
            db_id = self.core.db_id(conn, db_name.lower())
            rows = conn.execute(
                select(tbls.c.tbl_id, tbls.c.doc, tbls.c.write_id).where(
                    tbls.c.db_id == db_id, tbls.c.doc.like('%"constraints":{%')
                )
            ).all()
        return [table for table in map(_table_from_row, rows) if table.constraints]

    def taken_names(self, db_name: str) -> set[str]:
        """The constraint names used in a database."""
        return {
            name
            for t in self.tables_with_constraints(db_name)
            if t.constraints
            for name in t.constraints.names()
        }

    def _check(self, table: Table, constraints: TableConstraints, taken: set[str]) -> None:
        columns = [c.name for c in [*table.sd.cols, *table.partition_keys]]
        check_columns(constraints, columns, table.qualified_name)
        check_names_free(constraints, taken, table.db_name)
        for key in constraints.foreign_keys:
            parent_db = key.parent_db or table.db_name
            if (parent_db, key.parent_table) == (table.db_name, table.table_name):
                parent_cols = columns
            else:
                parent = self.core.get_table(parent_db, key.parent_table)
                parent_cols = [c.name for c in [*parent.sd.cols, *parent.partition_keys]]
                held = parent.constraints
                if held is None or not (held.primary_key or held.unique):  # Hive's ObjectStore refuses it too
                    raise InvalidObjectError(
                        f"foreign key '{key.name}': table '{parent_db}.{key.parent_table}' has no primary key or "
                        "unique constraint to reference; add one to it first"
                    )
            for column in key.parent_columns:
                if column not in parent_cols:
                    raise InvalidObjectError(
                        f"foreign key '{key.name}': parent column '{column}' is not a column of table "
                        f"'{parent_db}.{key.parent_table}'"
                    )
