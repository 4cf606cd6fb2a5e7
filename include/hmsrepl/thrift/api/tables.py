"""Tables over Thrift: DDL, reads (Hive 3/4 request forms included) (constraints: ``api.constraints``)."""

from __future__ import annotations

from typing import Any

from hmsrepl.cache.attribution import requested_txn
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.metastore.model import Table
from hmsrepl.metastore.spark_stats_sync import has_spark_stats, with_row_count
from hmsrepl.thrift import convert
from hmsrepl.thrift.api.base import Area, _properties, _write_ids
from hmsrepl.thrift.budget import CallMemory
from hmsrepl.thrift.idl import hms


class TableApi(Area):
    """Tables of the catalog."""

    def get_fields(
        self,
        db_name: str,
        table_name: str,
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
    ) -> list[Any]:
        """The table's columns; with a reader's list (Hive 4's ``get_fields_req``), of the state it may see."""
        table = self.reads.table(db_name, table_name, write_ids, table_id)
        return [convert.field_to_thrift(c) for c in table.sd.cols]

    def get_schema(
        self,
        db_name: str,
        table_name: str,
        write_ids: ValidWriteIdList | None = None,
        table_id: int | None = None,
    ) -> list[Any]:
        table = self.reads.table(db_name, table_name, write_ids, table_id)
        return [convert.field_to_thrift(c) for c in [*table.sd.cols, *table.partition_keys]]

    def get_fields_with_environment_context(
        self, db_name: str, table_name: str, environment_context: Any
    ) -> list[Any]:
        return self.get_fields(db_name, table_name)

    def get_schema_with_environment_context(
        self, db_name: str, table_name: str, environment_context: Any
    ) -> list[Any]:
        return self.get_schema(db_name, table_name)

    def create_table(self, tbl: Any) -> None:
        """A table created with Spark's statistics parameters gets their Hive statistics in the same commit
        (``metastore.spark_stats_sync``)."""
        table = convert.table_from_thrift(tbl)
        if not has_spark_stats(table.parameters):
            self.catalog.create_table(table, gather_stats=True)
            return
        table = table.model_copy(update={"parameters": with_row_count({}, table.parameters)})
        with self.store.events.transaction():
            created = self.catalog.create_table(table, gather_stats=True)
            self.store.spark_stats.follow_params(created, None, {}, created.parameters)

    def create_table_with_environment_context(self, tbl: Any, environment_context: Any) -> None:
        self.create_table(tbl)

    def drop_table(self, dbname: str, name: str, delete_data: bool) -> None:
        self.catalog.drop_table(dbname, name, delete_data=bool(delete_data))

    def drop_table_with_environment_context(
        self, dbname: str, name: str, delete_data: bool, environment_context: Any
    ) -> None:
        self.drop_table(dbname, name, delete_data)

    def get_tables(self, db_name: str, pattern: str) -> list[str]:
        return self.catalog.get_tables(db_name, pattern)

    def get_tables_by_type(self, db_name: str, pattern: str, table_type: str) -> list[str]:
        return self.catalog.get_tables(db_name, pattern, table_type or None)

    def get_all_tables(self, db_name: str) -> list[str]:
        return self.catalog.get_tables(db_name)

    def get_table_meta(self, db_patterns: str, tbl_patterns: str, tbl_types: list[str] | None) -> list[Any]:
        out = []
        for db in self.catalog.get_databases(db_patterns):
            names = self.catalog.get_tables(db, tbl_patterns)
            for table in self.catalog.get_table_objects(db, names):
                if tbl_types and str(table.table_type) not in tbl_types:
                    continue
                out.append(
                    hms.TableMeta(
                        dbName=db,
                        tableName=table.table_name,
                        tableType=str(table.table_type),
                        comments=table.parameters.get("comment"),
                        catName=convert.CATALOG,
                    )
                )
        return out

    def get_table(self, dbname: str, tbl_name: str) -> Any:
        return self.reads.table(dbname, tbl_name, to=convert.table_to_thrift)

    def get_table_objects_by_name(self, dbname: str, tbl_names: list[str]) -> list[Any]:
        """Each chunk's tables charged to the call's memory budget before they are decoded."""
        return self.reads.tables(
            dbname, tbl_names or [], to=convert.table_to_thrift, charges=CallMemory.current()
        )

    def get_table_req(self, req: Any) -> Any:
        """Hive 4 sends the reader's ValidWriteIdList (field 6) and the table id (field 11, -1 if unset)."""
        write_ids = _write_ids(req.validWriteIdList) if req.validWriteIdList else None
        table_id = req.id if req.id is not None and req.id >= 0 else None
        table = self.reads.table(req.dbName, req.tblName, write_ids, table_id, to=convert.table_to_thrift)
        return hms.GetTableResult(table=table)

    def alter_table(self, dbname: str, tbl_name: str, new_tbl: Any) -> None:
        """A client that names its files in INSERTs on this connection declares its table writes: Hive's
        loadTable alters the table, then fires the INSERT naming the new files, so the alter lists nothing
        (``CatalogService.alter_table``, ``declared``)."""
        declares = getattr(self._local, "declares", False)
        table = convert.table_from_thrift(new_tbl)
        before = self.catalog.get_table(dbname, tbl_name)
        if not (has_spark_stats(before.parameters) or has_spark_stats(table.parameters)):
            self.catalog.alter_table(dbname, tbl_name, table, declared=declares, gather_stats=True)
            return
        self._alter_with_spark_stats(dbname, tbl_name, before, table, declares)

    def _alter_with_spark_stats(
        self, dbname: str, tbl_name: str, before: Table, table: Table, declares: bool
    ) -> None:
        """An alter that changes Spark's statistics parameters changes Hive's statistics in the same commit
        (``metastore.spark_stats_sync``): Spark's ANALYZE stores them, its INSERT drops them."""
        params = with_row_count(before.parameters, table.parameters)
        table = table.model_copy(update={"parameters": params})
        with self.store.events.transaction():
            altered = self.catalog.alter_table(dbname, tbl_name, table, declared=declares, gather_stats=True)
            self.store.spark_stats.follow_params(altered, None, before.parameters, altered.parameters)

    def alter_table_with_environment_context(
        self, dbname: str, tbl_name: str, new_tbl: Any, environment_context: Any
    ) -> None:
        """With property ``hmsrepl.txnId`` (see hmsrepl.cache.attribution) the change joins that txn."""
        txn = requested_txn(_properties(environment_context))
        if txn is None:
            return self.alter_table(dbname, tbl_name, new_tbl)
        # Not Table.writeId: clients send back the table they read, whose writeId is the previous write's.
        write = self.txn_writes.resolve(txn[0], txn[1], dbname, tbl_name)
        self.txn_writes.alter_table(dbname, tbl_name, convert.table_from_thrift(new_tbl), write)
        return None

    def alter_table_with_cascade(self, dbname: str, tbl_name: str, new_tbl: Any, cascade: bool) -> None:
        self.alter_table(dbname, tbl_name, new_tbl)

    # -- Hive 3/4 catalog reads ----------------------------------------------------------------------------------
    def get_table_objects_by_name_req(self, req: Any) -> Any:
        names = list(req.tblNames or [])
        if not names and req.tablesPattern:
            names = self.catalog.get_tables(req.dbName, req.tablesPattern)
        tables = self.catalog.get_table_objects(req.dbName, names)
        return hms.GetTablesResult(tables=[convert.table_to_thrift(t) for t in tables])

    def get_tables_ext(self, req: Any) -> list[Any]:
        names = self.catalog.get_tables(req.database, req.tableNamePattern or "*")
        if req.limit is not None and req.limit >= 0:
            names = names[: req.limit]
        return [hms.ExtendedTableInfo(tblName=name) for name in names]
