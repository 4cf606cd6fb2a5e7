"""Hive's column-statistics structs <-> ``hmsrepl.metastore.statistics.ColumnStat``.

The union member's fields are kept as JSON by walking the struct's Thrift spec, so every member (and any
field Hive adds to one) round-trips without a converter per type; binary fields (bit vectors, decimal
digits) travel as base64.
"""

from __future__ import annotations

import base64
from typing import Any

from thriftpy2.thrift import TType

from hmsrepl.exceptions import InvalidObjectError
from hmsrepl.metastore.statistics import KINDS, ColumnStat
from hmsrepl.thrift.idl import hms

_BINARY = 18  # thriftpy2 tags 'binary' fields with its own type id


def struct_to_json(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for entry in type(obj).thrift_spec.values():
        ttype, name = entry[0], entry[1]
        value = getattr(obj, name)
        if value is None:
            continue
        if ttype == _BINARY:
            out[name] = base64.b64encode(value).decode("ascii")
        elif ttype == TType.STRUCT:
            out[name] = struct_to_json(value)
        else:
            out[name] = value
    return out


def struct_from_json(cls: Any, doc: dict[str, Any]) -> Any:  # cls: a thriftpy2 struct class
    values: dict[str, Any] = {}
    for entry in cls.thrift_spec.values():
        ttype, name = entry[0], entry[1]
        if name not in doc or doc[name] is None:
            continue
        if ttype == _BINARY:
            values[name] = base64.b64decode(doc[name])
        elif ttype == TType.STRUCT:
            values[name] = struct_from_json(entry[2], doc[name])
        else:
            values[name] = doc[name]
    return cls(**values)


def stat_from_thrift(obj: Any) -> ColumnStat:
    data = obj.statsData
    members = [k for k in KINDS if data is not None and getattr(data, k, None) is not None]
    if len(members) != 1:
        raise InvalidObjectError(
            f"statistics of column '{obj.colName}' must set exactly one ColumnStatisticsData member, "
            f"not {len(members)}; set e.g. longStats or stringStats"
        )
    return ColumnStat(
        obj.colName or "", obj.colType or "", members[0], struct_to_json(getattr(data, members[0]))
    )


def stat_to_thrift(stat: ColumnStat) -> Any:
    member_cls = hms.ColumnStatisticsData.thrift_spec[KINDS.index(stat.kind) + 1][2]
    data = hms.ColumnStatisticsData(**{stat.kind: struct_from_json(member_cls, stat.data)})
    return hms.ColumnStatisticsObj(colName=stat.col_name, colType=stat.col_type, statsData=data)
