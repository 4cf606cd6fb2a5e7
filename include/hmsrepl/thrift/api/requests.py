"""Hive 4's request forms of calls served in their classic form: one struct in, the classic call's path out.

A Hive 4 client (``HiveMetaStoreClient`` 4.x, Trino's and Spark's newer clients) sends DDL as
``create_table_req``, ``alter_table_req``, ``drop_database_req``, ... and falls back to the classic call only
on an unknown-method error. Each form here unpacks its request and runs the classic call of the area that
serves it, so it takes the same catalog write path (replica protection, location ownership, events, Spark's
statistics) and answers with the exceptions its Hive 4 signature declares (``handler.to_thrift_error``).
"""

from __future__ import annotations

from typing import Any

from hmsrepl.cache.attribution import TXN_ID_PROPERTY, WRITE_ID_PROPERTY
from hmsrepl.exceptions import InvalidObjectError, InvalidOperationError
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.thrift.api.base import Area, HandlerContext, _write_ids
from hmsrepl.thrift.api.constraints import ConstraintApi
from hmsrepl.thrift.api.databases import DatabaseApi
from hmsrepl.thrift.api.partition_reads import PartitionReadApi, _table_id, partition_values
from hmsrepl.thrift.api.partitions import PartitionWriteApi
from hmsrepl.thrift.api.statistics import StatisticsApi
from hmsrepl.thrift.api.tables import TableApi
from hmsrepl.thrift.api.transactions import TransactionApi
from hmsrepl.thrift.catalogs import check_struct, parse_db_name
from hmsrepl.thrift.idl import hms

#: Hive's ``DatabaseType.REMOTE``: a database served by a data connector.
_REMOTE = 2

_CONSTRAINT_FIELDS = (
    "primaryKeys",
    "foreignKeys",
    "uniqueConstraints",
    "notNullConstraints",
    "defaultConstraints",
    "checkConstraints",
)


def _required(method: str, value: Any, field: str, struct: str) -> Any:
    """A field the classic call cannot do without: refused naming it, as Hive's own server does."""
    if value is None or value == "":
        raise InvalidObjectError(f"{method} without {struct}.{field}; set it")
    return value


def _snapshot(req: Any) -> tuple[ValidWriteIdList | None, int | None]:
    """The reader's ValidWriteIdList and table id a read request carries (None where it has none; Hive's
    -1 is no id)."""
    return _write_ids(getattr(req, "validWriteIdList", None)), _table_id(getattr(req, "id", None))


class RequestFormApi(Area):
    """The Hive 4 ``*_req`` forms of databases, tables, partitions, statistics and transactions."""

    def __init__(self, context: HandlerContext) -> None:
        super().__init__(context)
        self._databases = DatabaseApi(context)
        self._tables = TableApi(context)
        self._constraints = ConstraintApi(context)
        self._partitions = PartitionWriteApi(context)
        self._partition_reads = PartitionReadApi(context)
        self._statistics = StatisticsApi(context)
        self._transactions = TransactionApi(context)

    # -- databases ---------------------------------------------------------------------------------------------
    def create_database_req(self, createDatabaseRequest: Any) -> None:
        """Hive 4.1+'s ``createDatabase``: the request's fields are a ``Database``'s, renamed."""
        req = createDatabaseRequest
        name = _required("create_database_req", req.databaseName, "databaseName", "CreateDatabaseRequest")
        if req.type == _REMOTE or req.dataConnectorName:
            raise InvalidObjectError(
                f"database '{name}': remote databases (data connectors) are not supported by this metastore; "
                "create a native one"
            )
        database = hms.Database(
            name=name,
            description=req.description,
            locationUri=req.locationUri,
            parameters=req.parameters,
            ownerName=req.ownerName,
            ownerType=req.ownerType,
            managedLocationUri=req.managedLocationUri,
        )
        self._databases.create_database(database)

    def alter_database_req(self, alterDbReq: Any) -> None:
        """Hive 4.2's ``alterDatabase``."""
        req = alterDbReq
        name = _required("alter_database_req", req.oldDbName, "oldDbName", "AlterDatabaseRequest")
        database = _required("alter_database_req", req.newDb, "newDb", "AlterDatabaseRequest")
        check_struct(database)
        self._databases.alter_database(parse_db_name(name) or name, database)

    def drop_database_req(self, req: Any) -> None:
        """``ignoreUnknownDb`` is Hive's ``DROP DATABASE IF EXISTS``: a missing database is not an error."""
        name = _required("drop_database_req", req.name, "name", "DropDatabaseRequest")
        if req.ignoreUnknownDb and name.lower() not in self.catalog.get_databases():
            return
        self._databases.drop_database(name, req.deleteData is not False, bool(req.cascade))

    # -- tables ------------------------------------------------------------------------------------------------
    def create_table_req(self, request: Any) -> None:
        """With constraints it is ``create_table_with_constraints`` (one CREATE_TABLE event), else
        ``create_table_with_environment_context``."""
        table = _required("create_table_req", request.table, "table", "CreateTableRequest")
        check_struct(table)  # the table's catName and a qualified dbName, as the classic call checks them
        if any(getattr(request, field) for field in _CONSTRAINT_FIELDS):
            self._constraints.create_table_with_constraints(
                table, *(getattr(request, field) for field in _CONSTRAINT_FIELDS)
            )
            return
        self._tables.create_table_with_environment_context(table, request.envContext)

    def alter_table_req(self, req: Any) -> Any:
        table = _required("alter_table_req", req.table, "table", "AlterTableRequest")
        check_struct(table)
        context = self._joining(req.dbName, req.tableName, req.writeId, req.environmentContext)
        self._tables.alter_table_with_environment_context(req.dbName, req.tableName, table, context)
        return hms.AlterTableResponse()

    def drop_table_req(self, dropTableReq: Any) -> None:
        """Hive 4.2's ``dropTable``; without ``deleteData`` a managed table's files go, as Hive's default."""
        req = dropTableReq
        self._tables.drop_table_with_environment_context(
            req.dbName, req.tableName, req.deleteData is not False, req.envContext
        )

    def _joining(self, db_name: str, table_name: str, write_id: int | None, context: Any) -> Any:
        """The environment context with which a change carrying a write id joins the open transaction that
        holds it (``hmsrepl.txnId``, as the classic calls are told): its write is recorded under that write id.
        A write id no open transaction holds on the table is refused before anything changes."""
        if write_id is None or write_id <= 0:
            return context
        holder = self._holder(db_name, table_name, write_id, "alter")
        properties = dict(getattr(context, "properties", None) or {})
        properties.update({TXN_ID_PROPERTY: str(holder), WRITE_ID_PROPERTY: str(write_id)})
        return hms.EnvironmentContext(properties=properties)

    def _holder(self, db_name: str, table_name: str, write_id: int, verb: str) -> int:
        """The open transaction that holds ``write_id`` on the table, or the refusal naming the fix."""
        txns = self.store.txns
        holder = next(
            (
                txn
                for txn in txns.open_txns_writing(db_name)
                if txns.txn_write_id(txn, db_name.lower(), table_name.lower()) == write_id
            ),
            None,
        )
        if holder is None:
            raise InvalidOperationError(
                f"write id {write_id} of '{db_name}.{table_name}' is held by no open transaction; {verb} the "
                "table inside the transaction that allocated it (allocate_table_write_ids), or send writeId -1"
            )
        return holder

    def truncate_table(self, dbName: str, tableName: str, partNames: list[str] | None) -> None:
        """Hive's TRUNCATE TABLE: the table's (or the named partitions') files go to the change manager, a
        transactional table is emptied under a write id (``TableCatalog.truncate_table``)."""
        self.catalog.truncate_table(dbName, tableName, list(partNames) if partNames else None)

    def truncate_table_req(self, req: Any) -> Any:
        """With a ``writeId`` (Hive 4's TRUNCATE of a transactional table) the table is emptied as part of the
        client's open transaction that holds that write id: an empty base under it, noted as that
        transaction's write, so the table's write id advances and its COMMIT_TXN replicates the truncation;
        it shows when the client commits. Without one, as ``truncate_table``."""
        parts = list(req.partNames) if req.partNames else None
        if req.writeId is None or req.writeId <= 0:
            self.truncate_table(req.dbName, req.tableName, parts)
            return hms.TruncateTableResponse()
        within = (self._holder(req.dbName, req.tableName, req.writeId, "truncate"), req.writeId)
        self.catalog.truncate_table(req.dbName, req.tableName, parts, within=within)
        return hms.TruncateTableResponse()

    # Reads that carry the reader's ValidWriteIdList (and table id) answer from the state that list may see,
    # as get_table_req does: a transactional change the reader may not see yet is never returned.
    def get_fields_req(self, req: Any) -> Any:
        fields = self._tables.get_fields(req.dbName, req.tblName, *_snapshot(req))
        return hms.GetFieldsResponse(fields=fields)

    def get_schema_req(self, req: Any) -> Any:
        fields = self._tables.get_schema(req.dbName, req.tblName, *_snapshot(req))
        return hms.GetSchemaResponse(fields=fields)

    # -- partitions --------------------------------------------------------------------------------------------
    def alter_partitions_req(self, req: Any) -> Any:
        context = self._joining(req.dbName, req.tableName, req.writeId, req.environmentContext)
        self._partitions.alter_partitions_with_environment_context(
            req.dbName, req.tableName, list(req.partitions or []), context
        )
        return hms.AlterPartitionsResponse()

    def rename_partition_req(self, req: Any) -> Any:
        new_part = _required("rename_partition_req", req.newPart, "newPart", "RenamePartitionRequest")
        self._partitions.rename_partition(req.dbName, req.tableName, list(req.partVals or []), new_part)
        return hms.RenamePartitionResponse()

    def drop_partition_by_name_with_environment_context(
        self, db_name: str, tbl_name: str, part_name: str, deleteData: bool, environment_context: Any
    ) -> bool:
        return self._partitions.drop_partition_by_name(db_name, tbl_name, part_name, deleteData)

    def fetch_partition_names_req(self, partitionReq: Any) -> list[str]:
        """Hive 4.2's ``listPartitionNames``."""
        return self._partition_reads.get_partition_names(
            partitionReq.dbName, partitionReq.tblName, partitionReq.maxParts, *_snapshot(partitionReq)
        )

    def get_partitions_by_filter_req(self, req: Any) -> Any:
        """Hive 4.2's ``listPartitionsByFilter``: the partitions whole (no column or parameter projection)."""
        return self._partition_reads.get_partitions_by_filter(
            req.dbName, req.tblName, req.filter, req.maxParts
        )

    def drop_partition_req(self, dropPartitionReq: Any) -> bool:
        """Hive 4.2's ``dropPartition``: by name or by values; the files go unless ``deleteData`` is false."""
        req = dropPartitionReq
        values = list(req.partVals or []) if req.partName is None else partition_values(req.partName)
        return self._partitions.drop_partition(req.dbName, req.tblName, values, req.deleteData is not False)

    def get_partition_names_ps_req(self, req: Any) -> Any:
        names = self._partition_reads.get_partition_names_ps(
            req.dbName, req.tblName, list(req.partValues or []), req.maxParts, *_snapshot(req)
        )
        return hms.GetPartitionNamesPsResponse(names=names)

    def get_partitions_ps_with_auth_req(self, req: Any) -> Any:
        parts = self._partition_reads.get_partitions_ps(
            req.dbName, req.tblName, list(req.partVals or []), req.maxParts, *_snapshot(req)
        )
        return hms.GetPartitionsPsWithAuthResponse(partitions=list(parts))

    # -- statistics and transactions ---------------------------------------------------------------------------
    def update_table_column_statistics_req(self, req: Any) -> Any:
        return hms.SetPartitionsStatsResponse(result=self._statistics.set_aggr_stats_for(req))

    def update_partition_column_statistics_req(self, req: Any) -> Any:
        return hms.SetPartitionsStatsResponse(result=self._statistics.set_aggr_stats_for(req))

    def get_open_txns_req(self, getOpenTxnsRequest: Any) -> Any:
        """Every transaction of this server is of Hive's default type: none is left out by type."""
        return self._transactions.get_open_txns()
