"""Hive 4's partition reads by request: ``get_partitions_with_specs`` and ``get_partition_names_req``.

Both read through the metadata cache like the classic reads (``CachedReads``), with the reader's
ValidWriteIdList when the request carries one, so a transactional table's partitions are answered from the
state that list may see (or refused as not yet visible), never from a newer or uncommitted one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from hmsrepl.exceptions import MetastoreError
from hmsrepl.formats.partition_names import make_partition_name, parse_partition_name
from hmsrepl.formats.writeids import ValidWriteIdList
from hmsrepl.thrift import convert
from hmsrepl.thrift.api.base import Area, _write_ids
from hmsrepl.thrift.api.partition_reads import _capped, _table_id
from hmsrepl.thrift.idl import hms
from hmsrepl.thrift.partition_specs import Projection, group_by_storage

#: Hive's ``hive.exec.default.partition.name``: the value of a partition whose key was NULL.
DEFAULT_PARTITION_NAME = "__HIVE_DEFAULT_PARTITION__"

#: The expression Hive's client sends for "no filter" (``Hive.getPartitionNames``): one byte, -1.
EMPTY_EXPRESSION = b"\xff"

_INTEGRAL = {"tinyint", "smallint", "int", "integer", "bigint"}


class PartitionSpecApi(Area):
    """Partitions filtered by a filter spec and projected by a projection spec; names by expression."""

    def get_partitions_with_specs(self, request: Any) -> Any:
        """Hive's filter modes: BY_NAMES (exact names), BY_VALUES (values in key order, empty for any, as
        ``get_partitions_ps``), BY_EXPR (filter strings in ``get_partitions_by_filter``'s language, ANDed).
        Unlike Hive 4.0, whose metastore drops the filter when the field list is empty, the filter applies
        to whole partitions too."""
        db, tbl = request.dbName, request.tblName
        write_ids = _write_ids(request.validWriteIdList)
        table = self.reads.table(db, tbl, write_ids, to=convert.table_to_thrift)
        projection = Projection.of(request.projectionSpec)  # a bad field name is refused before any read
        parts = self._filtered(table, request.filterSpec, write_ids)
        return hms.GetPartitionsResponse(
            partitionSpec=group_by_storage(table, [projection.apply(p) for p in parts])
        )

    def _filtered(self, table: Any, spec: Any, write_ids: ValidWriteIdList | None) -> list[Any]:
        db, tbl = table.dbName, table.tableName
        structs: dict[str, Any] = {"to": convert.partition_to_thrift}
        mode = spec.filterMode if spec is not None else None
        if mode is None:
            return self._all(
                db, tbl, lambda limit: self.reads.partitions(db, tbl, limit, write_ids, **structs)
            )
        filters = list(spec.filters or [])
        if not filters:
            raise MetastoreError("Invalid filter expressions in the filter spec")
        if mode == hms.PartitionFilterMode.BY_NAMES:
            keys = [k.name for k in table.partitionKeys or []]
            found = self.reads.partitions_by_names(db, tbl, filters, write_ids, **structs)
            return sorted(found, key=lambda p: make_partition_name(keys, p.values))
        if mode == hms.PartitionFilterMode.BY_VALUES:
            keys = table.partitionKeys or []
            if len(filters) > len(keys):
                raise MetastoreError(
                    f"Incorrect number of partition values. numPartKeys={len(keys)}, "
                    f"part_val=[{', '.join(filters)}]"
                )
            return self._all(
                db, tbl, lambda limit: self.reads.partitions_ps(db, tbl, filters, limit, write_ids, **structs)
            )
        if mode == hms.PartitionFilterMode.BY_EXPR:
            text = " AND ".join(f"({f})" for f in filters)
            return self._all(
                db,
                tbl,
                lambda limit: self.reads.partitions_by_filter(db, tbl, text, limit, write_ids, **structs),
            )
        raise MetastoreError(f"Unsupported filter mode {mode}")

    @staticmethod
    def _all(db: str, tbl: str, fetch: Callable[[int], Sequence[Any]]) -> list[Any]:
        """Every match, within the per-call partition cap (``HMSREPL_MAX_PARTITIONS_PER_CALL``)."""
        return list(_capped(db, tbl, -1, fetch))

    def get_partition_names_req(self, req: Any) -> list[str]:
        """Names of the partitions an expression keeps, in the request's ``order`` (``"0,1:+-"``: key
        positions, then + or - for each), at most ``maxParts``. Only the empty expression can be evaluated
        here: Hive's are Kryo-serialized Java objects, which only Hive's own classes read."""
        if req.expr not in (None, EMPTY_EXPRESSION):
            raise MetastoreError(
                f"get_partition_names_req on '{req.dbName}.{req.tblName}': serialized Hive expressions "
                "cannot be evaluated by this metastore; send the empty expression (one byte 0xFF) and filter "
                "the names, or call get_partitions_by_filter"
            )
        write_ids = _write_ids(req.validWriteIdList)
        table_id = _table_id(req.id)
        order = _order_specs(req.order)
        limit = -1 if req.maxParts is None or req.maxParts < 0 else req.maxParts
        if not order:
            return self.reads.partition_names(req.dbName, req.tblName, limit, write_ids, table_id)
        table = self.reads.table(req.dbName, req.tblName, write_ids, table_id)
        names = self.reads.partition_names(req.dbName, req.tblName, -1, write_ids, table_id)
        default = req.defaultPartitionName or DEFAULT_PARTITION_NAME
        types = [key.type.lower() for key in table.partition_keys]
        ordered = _ordered(names, order, types, default)
        return ordered if limit < 0 else ordered[:limit]


def _order_specs(order: str | None) -> list[tuple[int, bool]]:
    """Hive's ``MetaStoreUtils.makeOrderSpecs``: ``"0,1:+-"`` -> [(0, ascending), (1, descending)]; a
    blank or malformed spec orders by name."""
    if not order or not order.strip() or order.count(":") != 1:
        return []
    positions, directions = order.split(":")
    indexes = positions.split(",")
    if len(indexes) != len(directions):
        raise MetastoreError(f"The length of partition keys and sort order do not mismatch, order: {order}")
    try:
        return [(int(i), d == "+") for i, d in zip(indexes, directions, strict=True)]
    except ValueError as exc:
        raise MetastoreError(f"Invalid partition order '{order}': positions must be numbers") from exc


def _ordered(names: list[str], order: list[tuple[int, bool]], types: list[str], default: str) -> list[str]:
    """``names`` sorted by their values at the ordered key positions, typed as Hive's query compares them
    (integral keys as numbers); the default partition's value is NULL, last ascending and first descending
    (PostgreSQL's and Derby's NULL order). Ties keep name order."""
    for index, _ in order:
        if not 0 <= index < len(types):
            raise MetastoreError(f"Invalid partition order: key position {index} of {len(types)} keys")
    rows = [(name, [value for _, value in parse_partition_name(name)]) for name in sorted(names)]
    for index, ascending in reversed(order):  # stable sorts, least significant key first

        def key(row: tuple[str, list[str]], index: int = index, ascending: bool = ascending) -> Any:
            value = row[1][index]
            if value == default:  # NULL: the greatest, so last ascending and first descending
                return (1, 0)
            return (0, _typed(value, types[index]))

        rows.sort(key=key, reverse=not ascending)
    return [name for name, _ in rows]


def _typed(value: str, type_name: str) -> Any:
    if type_name in _INTEGRAL:
        try:
            return (0, Decimal(value), "")
        except InvalidOperation:
            return (1, Decimal(0), value)  # not a number: after the numbers, by text
    return (0, Decimal(0), value)
