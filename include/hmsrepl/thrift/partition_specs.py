"""Hive 4's partition projection and PartitionSpec grouping, on the partitions' Thrift structs.

``get_partitions_with_specs`` answers with only the fields a projection spec names (dot paths such as
``sd.location``; a prefix such as ``sd`` names every field below it), the partitions' parameters narrowed by
SQL ``LIKE`` key patterns, and the partitions grouped as Hive's ``MetaStoreServerUtils`` groups them: those
under the table's directory that share a storage descriptor (columns, formats, serde) are sent once with
that descriptor rooted at the table's location and a relative path each (``PartitionSpecWithSharedSD``);
the rest (elsewhere, skewed, bucketed unlike the first) are sent whole in one ``PartitionListComposingSpec``.
A Hive 4 client (``MetaStoreServerUtils.getPartitionsByProjectSpec``) rebuilds each partition from them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hmsrepl.exceptions import MetastoreError
from hmsrepl.thrift.idl import hms

#: Every field path a projection may name (Hive's ``PartitionProjectionEvaluator``), by the struct that holds it.
SINGLE_VALUED = (
    "dbName",
    "tableName",
    "createTime",
    "lastAccessTime",
    "sd.location",
    "sd.inputFormat",
    "sd.outputFormat",
    "sd.compressed",
    "sd.numBuckets",
    "sd.serdeInfo.name",
    "sd.serdeInfo.serializationLib",
    "sd.serdeInfo.description",
    "sd.serdeInfo.serializerClass",
    "sd.serdeInfo.deserializerClass",
    "sd.serdeInfo.serdeType",
    "catName",
    "writeId",
)
MULTI_VALUED = (
    "values",
    "sd.cols.name",
    "sd.cols.type",
    "sd.cols.comment",
    "sd.serdeInfo.parameters",
    "sd.bucketCols",
    "sd.sortCols.col",
    "sd.sortCols.order",
    "sd.parameters",
    "sd.skewedInfo.skewedColNames",
    "sd.skewedInfo.skewedColValues",
    "sd.skewedInfo.skewedColValueLocationMaps",
    "parameters",
    "privileges.userPrivileges",
    "privileges.groupPrivileges",
    "privileges.rolePrivileges",
)
ALL_FIELDS = frozenset(SINGLE_VALUED + MULTI_VALUED)

#: The struct each nested field path builds (a list field's elements for cols and sortCols).
_NESTED = {
    "sd": hms.StorageDescriptor,
    "sd.serdeInfo": hms.SerDeInfo,
    "sd.cols": hms.FieldSchema,
    "sd.sortCols": hms.Order,
    "sd.skewedInfo": hms.SkewedInfo,
    "privileges": hms.PrincipalPrivilegeSet,
}


def _expand(fields: Iterable[str]) -> frozenset[str]:
    """The field paths ``fields`` name: each one itself if it is a path, else every path it begins
    (Hive's ``startsWith``, so ``sd`` is the whole descriptor); a name that begins none is refused with
    Hive's own message."""
    out: set[str] = set()
    for field in fields:
        if field in ALL_FIELDS:
            out.add(field)
            continue
        found = {path for path in ALL_FIELDS if path.startswith(field)}
        if not found:
            raise MetastoreError(f"Invalid field name {field}")
        out |= found
    return frozenset(out)


def _like(pattern: str) -> re.Pattern[str]:
    """SQL ``LIKE`` as Hive's queries run it: ``%`` any run, ``_`` one character, backslash escapes."""
    out, chars = [], iter(pattern)
    for char in chars:
        if char == "\\":
            out.append(re.escape(next(chars, "\\")))
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    return re.compile("".join(out), re.DOTALL)


@dataclass(frozen=True)
class Projection:
    """A request's projection spec: the field paths to send (None: all of them) and the parameter keys."""

    fields: frozenset[str] | None
    include: re.Pattern[str] | None = None
    exclude: re.Pattern[str] | None = None

    @classmethod
    def of(cls, spec: Any) -> Projection:
        """The spec's field list checked and expanded; an empty or missing list sends whole partitions."""
        if spec is None:
            return cls(None)
        requested = list(spec.fieldList or [])
        return cls(
            _expand(requested) if requested else None,
            _like(spec.includeParamKeyPattern) if spec.includeParamKeyPattern is not None else None,
            _like(spec.excludeParamKeyPattern) if spec.excludeParamKeyPattern is not None else None,
        )

    def apply(self, part: Any) -> Any:
        """``part`` holding only the projected fields (the rest unset), parameters narrowed: a new struct
        where anything is left out, ``part`` itself otherwise (it may be the metadata cache's, so it is
        never changed; ``group_by_storage`` only reads it)."""
        out = part if self.fields is None else _copy_paths(part, self.fields, "")
        if out.parameters is not None and (self.include is not None or self.exclude is not None):
            out = copy.copy(out) if out is part else out
            out.parameters = {key: value for key, value in out.parameters.items() if self._keeps(key)}
        return out

    def _keeps(self, key: str) -> bool:
        if self.include is not None and not self.include.fullmatch(key):
            return False
        return self.exclude is None or not self.exclude.fullmatch(key)


def _copy_paths(source: Any, paths: frozenset[str], prefix: str) -> Any:
    """A new struct of ``source``'s type with only the fields named by ``paths`` (relative to ``prefix``).

    Whole fields are shared with ``source``, not copied: nothing here or in ``group_by_storage`` changes them.
    """
    out = type(source)()
    for name in list(vars(out)):
        setattr(out, name, None)  # unset, not the IDL default: a field not asked for is not sent
    for name in {path.split(".", 1)[0] for path in paths}:
        value = getattr(source, name, None)
        here = f"{prefix}{name}"
        below = frozenset(path.split(".", 1)[1] for path in paths if path.startswith(name + "."))
        if value is None or not below or here not in _NESTED:
            setattr(out, name, value)
        elif isinstance(value, list):
            setattr(out, name, [_copy_paths(item, below, here + ".") for item in value])
        else:
            setattr(out, name, _copy_paths(value, below, here + "."))
    return out


# -- grouping ------------------------------------------------------------------------------------------------


def _serde_key(serde: Any) -> tuple[Any, ...] | None:
    if serde is None:
        return None
    params = tuple(sorted((serde.parameters or {}).items()))
    fields = ("name", "serializationLib", "description", "serializerClass", "deserializerClass", "serdeType")
    return (*(getattr(serde, f, None) for f in fields), params)


def _sd_key(base: str | None, sd: Any) -> tuple[Any, ...]:
    """What partitions must share to be sent with one descriptor: Hive's ``StorageDescriptorKey`` (the base
    location, formats, columns, serde)."""
    cols = tuple((c.name, c.type, c.comment) for c in sd.cols or ())
    return (base, sd.inputFormat, sd.outputFormat, cols, _serde_key(sd.serdeInfo))


_UNSET = ("unset",)


def _group_key(part: Any, table_path: str | None, buckets: int | None) -> tuple[Any, ...]:
    sd = part.sd
    if sd is None:
        return _UNSET
    skewed = sd.skewedInfo is not None and bool(sd.skewedInfo.skewedColNames)
    if skewed or sd.numBuckets != buckets:  # kept apart: their skew or bucket count is their own
        return _sd_key(sd.location, sd)
    if sd.location is not None and table_path is not None and sd.location.startswith(table_path):
        return _sd_key(table_path, sd)
    return _sd_key(sd.location, sd)


def group_by_storage(table: Any, parts: Sequence[Any]) -> list[Any]:
    """``parts`` (projected) as Hive's list of ``PartitionSpec``: one shared-descriptor spec per descriptor
    under the table's directory, in the order each first appears, then one list of the others, whole."""
    table_path = table.sd.location if table.sd is not None else None
    buckets = parts[0].sd.numBuckets if parts and parts[0].sd is not None else None
    shared: dict[tuple[Any, ...], tuple[Any, list[Any]]] = {}
    others: list[Any] = []
    for part in parts:
        key = _group_key(part, table_path, buckets)
        base = None if key is _UNSET else key[0]
        if key is not _UNSET and base is not None and base != table_path:
            others.append(part)
            continue
        first, members = shared.setdefault(key, (part, []))
        relative = None
        if key is not _UNSET and part.sd.location is not None and table_path is not None:
            relative = part.sd.location[len(table_path) :]
        members.append(
            hms.PartitionWithoutSD(
                values=part.values,
                createTime=part.createTime,
                lastAccessTime=part.lastAccessTime,
                relativePath=relative,
                parameters=part.parameters,
            )
        )
    names = {"dbName": table.dbName, "tableName": table.tableName, "catName": table.catName}
    specs = []
    for key, (first, members) in shared.items():
        sd = hms.StorageDescriptor() if key is _UNSET else copy.deepcopy(first.sd)
        if key is not _UNSET:
            sd.location = key[0]  # the table's directory: each member's path is relative to it
        specs.append(
            hms.PartitionSpec(
                rootPath=sd.location,
                sharedSDPartitionSpec=hms.PartitionSpecWithSharedSD(partitions=members, sd=sd),
                **names,
            )
        )
    if others:
        specs.append(
            hms.PartitionSpec(partitionList=hms.PartitionListComposingSpec(partitions=others), **names)
        )
    return specs
