"""Partition writes over Thrift: add, alter, rename and drop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hmsrepl.cache.attribution import requested_txn
from hmsrepl.exceptions import InvalidObjectError, InvalidOperationError
from hmsrepl.formats.partition_names import make_partition_name
from hmsrepl.metastore.model import Partition
from hmsrepl.metastore.spark_stats_sync import has_spark_stats, with_row_count
from hmsrepl.thrift import convert
from hmsrepl.thrift.api.base import Area, _properties
from hmsrepl.thrift.api.partition_reads import partition_values
from hmsrepl.thrift.budget import charge
from hmsrepl.thrift.idl import hms


def _with_names(part: Any, db_name: str, table_name: str) -> Any:
    part.dbName = part.dbName or db_name
    part.tableName = part.tableName or table_name
    return part


#: Memory the models (and stored documents) built from one partition struct of a request take, at least
#: (3.8 kB measured for a partition without parameters; charged per struct before they are built).
PARTITION_MODEL_BYTES = 4096


def _partition_models(parts: Sequence[Any], db_name: str, tbl_name: str) -> list[Partition]:
    """A request's partitions as models, their memory charged to the call's budget before they are built
    (a 99 MB ``add_partitions`` builds ~2 GB of models): refused with the method's MetaException naming the
    limit when it cannot be had."""
    charge(len(parts) * PARTITION_MODEL_BYTES)
    return [convert.partition_from_thrift(p, db_name, tbl_name) for p in parts]


def _with_row_counts(
    models: list[Partition], before: dict[str, dict[str, str]], names: Sequence[str] | None = None
) -> list[Partition]:
    """Partitions with the row count Spark measured in this write, if any (``spark_stats_sync``)."""
    out = []
    for index, model in enumerate(models):
        previous = before.get(names[index], {}) if names is not None else {}
        params = with_row_count(previous, model.parameters)
        out.append(model if params == model.parameters else model.model_copy(update={"parameters": params}))
    return out


class PartitionWriteApi(Area):
    """Adds, alters and drops partitions; an alter declared by this connection's INSERTs lists nothing."""

    def _add(self, parts: Sequence[Any], if_not_exists: bool = False) -> list[Partition]:
        if not parts:
            return []
        first = parts[0]
        models = _with_row_counts(_partition_models(parts, first.dbName, first.tableName), {})
        if not any(has_spark_stats(m.parameters) for m in models):
            return self.catalog.add_partitions(
                first.dbName, first.tableName, models, if_not_exists=if_not_exists, gather_stats=True
            )
        with self.store.events.transaction():
            added = self.catalog.add_partitions(
                first.dbName, first.tableName, models, if_not_exists=if_not_exists, gather_stats=True
            )
            self._follow_spark_stats(first.dbName, first.tableName, added, {})
        return added

    def _follow_spark_stats(
        self, db_name: str, tbl_name: str, parts: Sequence[Partition], before: dict[str, dict[str, str]]
    ) -> None:
        """Hive's statistics of each written partition follow its Spark parameters (``spark_stats_sync``)."""
        table = self.catalog.get_table(db_name, tbl_name)
        for part in parts:
            name = make_partition_name(table.partition_key_names, part.values)
            self.store.spark_stats.follow_params(table, name, before.get(name, {}), part.parameters)

    def add_partition(self, new_part: Any) -> Any:
        [added] = self._add([new_part])
        return convert.partition_to_thrift(
            self.catalog.get_partition(added.db_name, added.table_name, added.values)
        )

    def add_partition_with_environment_context(self, new_part: Any, environment_context: Any) -> Any:
        txn = requested_txn(_properties(environment_context))
        if txn is None:
            return self.add_partition(new_part)
        db_name, tbl_name = new_part.dbName, new_part.tableName
        write = self.txn_writes.resolve(txn[0], txn[1], db_name, tbl_name)
        [added] = self.txn_writes.add_partitions(
            db_name, tbl_name, [convert.partition_from_thrift(new_part)], write
        )
        return convert.partition_to_thrift(self.catalog.get_partition(db_name, tbl_name, added.values))

    def add_partitions(self, new_parts: list[Any]) -> int:
        return len(self._add(new_parts or []))

    def add_partitions_req(self, request: Any) -> Any:
        parts = [
            p if p.dbName and p.tableName else _with_names(p, request.dbName, request.tblName)
            for p in request.parts or []
        ]
        added = self._add(parts, if_not_exists=bool(request.ifNotExists))
        if request.needResult is False:
            return hms.AddPartitionsResult()
        return hms.AddPartitionsResult(partitions=[convert.partition_to_thrift(p) for p in added])

    def drop_partition(self, db_name: str, tbl_name: str, part_vals: list[str], delete_data: bool) -> bool:
        self.catalog.drop_partitions(db_name, tbl_name, [part_vals], delete_data=bool(delete_data))
        return True

    def drop_partition_with_environment_context(
        self, db_name: str, tbl_name: str, part_vals: list[str], delete_data: bool, environment_context: Any
    ) -> bool:
        return self.drop_partition(db_name, tbl_name, part_vals, delete_data)

    def drop_partition_by_name(self, db_name: str, tbl_name: str, part_name: str, delete_data: bool) -> bool:
        return self.drop_partition(db_name, tbl_name, partition_values(part_name), delete_data)

    def drop_partitions_req(self, req: Any) -> Any:
        if req.parts is None or req.parts.names is None:
            raise InvalidObjectError(
                f"drop_partitions_req on '{req.dbName}.{req.tblName}': dropping by expression is not supported; "
                "pass partition names"
            )
        names = list(req.parts.names)
        if req.ifExists is not False:
            existing = {
                self._name(p) for p in self.catalog.get_partitions_by_names(req.dbName, req.tblName, names)
            }
            names = [n for n in names if n in existing]
        dropped = self.catalog.drop_partitions(
            req.dbName,
            req.tblName,
            [partition_values(n) for n in names],
            delete_data=req.deleteData is not False,
        )
        if req.needResult is False:
            return hms.DropPartitionsResult()
        return hms.DropPartitionsResult(partitions=[convert.partition_to_thrift(p) for p in dropped])

    def _name(self, part: Partition) -> str:
        table = self.catalog.get_table(part.db_name, part.table_name)
        return make_partition_name(table.partition_key_names, part.values)

    def alter_partition(self, db_name: str, tbl_name: str, new_part: Any) -> None:
        self.alter_partitions(db_name, tbl_name, [new_part])

    def alter_partitions(self, db_name: str, tbl_name: str, new_parts: list[Any]) -> None:
        """An alter of partitions this connection's INSERTs recorded since their last alter is declared by
        them: Hive's loadPartition fires the INSERT naming the new files, then alters the partition, which
        then lists nothing (``CatalogService.alter_partitions``, ``declared``). A dynamic-partition load
        interleaves several partitions' pairs on one connection; each alter takes its own INSERT's
        declaration."""
        models = _partition_models(new_parts or [], db_name, tbl_name)
        pending = self._declared()
        written = [(db_name.lower(), tbl_name.lower(), tuple(m.values)) for m in models]
        declared = bool(written) and all(key in pending for key in written)
        for key in written:
            pending.pop(key, None)
        if not any(has_spark_stats(m.parameters) for m in models):
            self.catalog.alter_partitions(db_name, tbl_name, models, declared=declared, gather_stats=True)
            return
        table = self.catalog.get_table(db_name, tbl_name)
        names = [make_partition_name(table.partition_key_names, m.values) for m in models]
        before = {
            make_partition_name(table.partition_key_names, p.values): p.parameters
            for p in self.catalog.get_partitions_by_names(db_name, tbl_name, names)
        }
        models = _with_row_counts(models, before, names)
        with self.store.events.transaction():
            self.catalog.alter_partitions(db_name, tbl_name, models, declared=declared, gather_stats=True)
            self._follow_spark_stats(db_name, tbl_name, models, before)

    def alter_partition_with_environment_context(
        self, db_name: str, tbl_name: str, new_part: Any, environment_context: Any
    ) -> None:
        self.alter_partitions_with_environment_context(db_name, tbl_name, [new_part], environment_context)

    def alter_partitions_with_environment_context(
        self, db_name: str, tbl_name: str, new_parts: list[Any], environment_context: Any
    ) -> None:
        """With property ``hmsrepl.txnId`` (see hmsrepl.cache.attribution) the change joins that txn."""
        txn = requested_txn(_properties(environment_context))
        if txn is None:
            return self.alter_partitions(db_name, tbl_name, new_parts)
        write = self.txn_writes.resolve(txn[0], txn[1], db_name, tbl_name)
        models = _partition_models(new_parts or [], db_name, tbl_name)
        self.txn_writes.alter_partitions(db_name, tbl_name, models, write)
        return None

    def rename_partition(self, db_name: str, tbl_name: str, part_vals: list[str], new_part: Any) -> None:
        if list(new_part.values or []) != list(part_vals or []):
            raise InvalidOperationError(
                f"renaming partitions of '{db_name}.{tbl_name}' is not supported; drop and add instead"
            )
        self.alter_partitions(db_name, tbl_name, [new_part])
