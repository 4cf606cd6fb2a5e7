"""Table constraints over Thrift (Hive 3+): the six reads, ``create_table_with_constraints``, the ``add_*``
calls and ``drop_constraint``. They are kept in the table's document (``metastore.constraints``)."""

from __future__ import annotations

from typing import Any

from hmsrepl.thrift import constraints as cstr
from hmsrepl.thrift import convert
from hmsrepl.thrift.api.base import Area
from hmsrepl.thrift.idl import hms


class ConstraintApi(Area):
    """Constraints of the catalog's tables; reading those of a missing table names it."""

    # -- reads: Trino and Hive 3 clients read them for every table they plan with ---------------------------
    def get_primary_keys(self, request: Any) -> Any:
        table = self.reads.table(request.db_name, request.tbl_name)
        return hms.PrimaryKeysResponse(primaryKeys=cstr.primary_keys(table))

    def get_foreign_keys(self, request: Any) -> Any:
        """Either side may be named: the foreign keys of a table, those that reference it, or both."""
        child = (request.foreign_db_name, request.foreign_tbl_name)
        parent = (request.parent_db_name, request.parent_tbl_name)
        for db_name, tbl_name in (child, parent):
            if db_name and tbl_name:
                self.reads.table(db_name, tbl_name)
        if child[0] and child[1]:
            keys = cstr.foreign_keys(self.reads.table(*child))
        elif parent[0]:
            keys = [k for t in self._tables(parent[0]) for k in cstr.foreign_keys(t)]
        else:
            keys = []
        if parent[0] and parent[1]:
            keys = [
                k for k in keys if (k.pktable_db, k.pktable_name) == (parent[0].lower(), parent[1].lower())
            ]
        return hms.ForeignKeysResponse(foreignKeys=keys)

    def _tables(self, db_name: str) -> list[Any]:
        """The tables of a database that may reference a parent: those holding any constraint."""
        return self.catalog.constraints.tables_with_constraints(db_name)

    def get_unique_constraints(self, request: Any) -> Any:
        table = self.reads.table(request.db_name, request.tbl_name)
        return hms.UniqueConstraintsResponse(uniqueConstraints=cstr.unique_constraints(table))

    def get_not_null_constraints(self, request: Any) -> Any:
        table = self.reads.table(request.db_name, request.tbl_name)
        return hms.NotNullConstraintsResponse(notNullConstraints=cstr.not_null_constraints(table))

    def get_default_constraints(self, request: Any) -> Any:
        table = self.reads.table(request.db_name, request.tbl_name)
        return hms.DefaultConstraintsResponse(defaultConstraints=cstr.default_constraints(table))

    def get_check_constraints(self, request: Any) -> Any:
        table = self.reads.table(request.db_name, request.tbl_name)
        return hms.CheckConstraintsResponse(checkConstraints=cstr.check_constraints(table))

    def get_all_table_constraints(self, request: Any) -> Any:
        """Hive 4's one read of every kind (the foreign keys are the table's own, as the child)."""
        table = self.reads.table(request.dbName, request.tblName)
        every = hms.SQLAllTableConstraints(
            primaryKeys=cstr.primary_keys(table),
            foreignKeys=cstr.foreign_keys(table),
            uniqueConstraints=cstr.unique_constraints(table),
            notNullConstraints=cstr.not_null_constraints(table),
            defaultConstraints=cstr.default_constraints(table),
            checkConstraints=cstr.check_constraints(table),
        )
        return hms.AllTableConstraintsResponse(allTableConstraints=every)

    # -- writes: one CREATE_TABLE or ALTER_TABLE event each ----------------------------------------------------
    def create_table_with_constraints(
        self,
        tbl: Any,
        primaryKeys: list[Any] | None,
        foreignKeys: list[Any] | None = None,
        uniqueConstraints: list[Any] | None = None,
        notNullConstraints: list[Any] | None = None,
        defaultConstraints: list[Any] | None = None,
        checkConstraints: list[Any] | None = None,
    ) -> None:
        """Hive 2.3 clients send the table, primary and foreign keys only (Hive 3 added the others)."""
        table = convert.table_from_thrift(tbl)
        declared = cstr.from_thrift(
            table.table_name,
            primaryKeys or [],
            foreignKeys or [],
            uniqueConstraints or [],
            notNullConstraints or [],
            defaultConstraints or [],
            checkConstraints or [],
        )
        self.catalog.constraints.create_table_with_constraints(table, cstr.relative(declared, table.db_name))

    def add_primary_key(self, req: Any) -> None:
        rows = req.primaryKeyCols or []
        self._add(cstr.table_named(rows, "table_db", "table_name"), primary_keys=rows)

    def add_foreign_key(self, req: Any) -> None:
        rows = req.foreignKeyCols or []
        self._add(cstr.table_named(rows, "fktable_db", "fktable_name"), foreign_keys=rows)

    def add_unique_constraint(self, req: Any) -> None:
        rows = req.uniqueConstraintCols or []
        self._add(cstr.table_named(rows, "table_db", "table_name"), unique=rows)

    def add_not_null_constraint(self, req: Any) -> None:
        rows = req.notNullConstraintCols or []
        self._add(cstr.table_named(rows, "table_db", "table_name"), not_null=rows)

    def add_default_constraint(self, req: Any) -> None:
        rows = req.defaultConstraintCols or []
        self._add(cstr.table_named(rows, "table_db", "table_name"), defaults=rows)

    def add_check_constraint(self, req: Any) -> None:
        rows = req.checkConstraintCols or []
        self._add(cstr.table_named(rows, "table_db", "table_name"), checks=rows)

    def _add(self, where: tuple[str, str], **rows: Any) -> None:
        db_name, table_name = where
        added = cstr.relative(cstr.from_thrift(table_name, **rows), db_name)
        self.catalog.constraints.add_constraints(db_name, table_name, added)

    def drop_constraint(self, req: Any) -> None:
        self.catalog.constraints.drop_constraint(req.dbname, req.tablename, req.constraintname)
