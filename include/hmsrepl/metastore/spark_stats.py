"""Spark's column statistics parameters <-> Hive's column statistics, both ways.

Spark (``ANALYZE TABLE t COMPUTE STATISTICS FOR COLUMNS ...`` through its Hive client) keeps its statistics
as table or partition parameters, never through Hive's statistics calls:

- ``spark.sql.statistics.colStats.<column>.<field>``, fields ``version`` (always written, ``2``),
  ``distinctCount``, ``nullCount``, ``min``, ``max``, ``avgLen``, ``maxLen`` and ``histogram``; ``<column>`` is
  the column's name as Spark's schema spells it (case kept); min/max are written for numbers, booleans,
  dates (``yyyy-MM-dd``) and timestamps (``yyyy-MM-dd HH:mm:ss.SSSSSS``, UTC), never for strings or binaries;
- ``spark.sql.statistics.numRows`` and ``spark.sql.statistics.totalSize``.

Hive readers (Trino, Impala, Hive) read Hive's column statistics only, so this module translates one into
the other, typed by the Hive column type as Hive's ``ColumnStatisticsData`` members:

=====================================  =============  ============================================
Hive column type                       member         from Spark's fields
=====================================  =============  ============================================
tinyint, smallint, int, bigint         longStats      min/max -> low/high, distinctCount, nullCount
float, double                          doubleStats    min/max -> low/high, distinctCount, nullCount
decimal(p,s)                           decimalStats   min/max -> low/high (unscaled, scale), ...
date                                   dateStats      min/max -> days since the epoch, ...
timestamp                              longStats      distinctCount and nullCount only (*)
string, varchar(n), char(n)            stringStats    maxLen, avgLen, distinctCount, nullCount
binary                                 binaryStats    maxLen, avgLen, nullCount
boolean                                booleanStats   true/false counts when min/max and numRows
                                                      tell them, else -1 (unknown, Impala's way)
=====================================  =============  ============================================

Hive's NDV counts null as one more value (Trino subtracts one where a column has nulls); Spark's
``distinctCount`` does not, so a column with nulls gets ``distinctCount + 1``.

(*) Hive before 4 and Trino know no timestamp member; they keep a timestamp's counts in ``longStats``
without bounds, and so does the translation. Counts Spark did not write read -1 (unknown). Columns of
other types (arrays, maps, structs) and partition columns have no Hive column statistics: skipped.

The reverse direction rewrites the Spark fields of a column that Hive's statistics now describe: counts,
lengths and bounds from Hive's, ``histogram`` dropped (it described the old data), bounds Hive's member does
not carry dropped; ``version`` and the fixed lengths of fixed-width types are kept.
"""

from __future__ import annotations

import base64
import datetime
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from hmsrepl.metastore.payloads import ColumnStat

PREFIX = "spark.sql.statistics."
COL_STATS_PREFIX = PREFIX + "colStats."
NUM_ROWS = PREFIX + "numRows"
TOTAL_SIZE = PREFIX + "totalSize"
FIELDS = ("version", "distinctCount", "nullCount", "min", "max", "avgLen", "maxLen", "histogram")
UNKNOWN = -1  # a count Hive requires that nobody measured (Trino and Impala read a negative one as unknown)

_LONG_TYPES = {"tinyint", "smallint", "int", "integer", "bigint"}
_DOUBLE_TYPES = {"float", "double", "double precision"}
_STRING_TYPES = {"string", "varchar", "char"}
_EPOCH = datetime.date(1970, 1, 1)


@dataclass(frozen=True)
class SparkColumn:
    """One column's Spark statistics parameters: ``name`` as the keys spell it, ``fields`` by field name."""

    name: str
    fields: Mapping[str, str]

    def param_keys(self) -> list[str]:
        return [f"{COL_STATS_PREFIX}{self.name}.{field}" for field in self.fields]


def spark_columns(params: Mapping[str, str]) -> dict[str, SparkColumn]:
    """Spark's column statistics in ``params``, by lower-cased column name (Hive's spelling)."""
    found: dict[str, dict[str, str]] = {}
    names: dict[str, str] = {}
    for key, value in params.items():
        if not key.startswith(COL_STATS_PREFIX):
            continue
        name, _, field = key[len(COL_STATS_PREFIX) :].rpartition(".")
        if name and field in FIELDS:
            names.setdefault(name.lower(), name)
            found.setdefault(name.lower(), {})[field] = value
    return {col: SparkColumn(names[col], fields) for col, fields in found.items()}


def hive_kind(col_type: str) -> str | None:
    """The ``ColumnStatisticsData`` member a column of this Hive type is described by (None: no statistics)."""
    base = col_type.strip().lower().split("(")[0].strip()
    if base in _LONG_TYPES or base == "timestamp":
        return "longStats"
    if base in _DOUBLE_TYPES:
        return "doubleStats"
    if base in _STRING_TYPES:
        return "stringStats"
    return {
        "decimal": "decimalStats",
        "numeric": "decimalStats",
        "date": "dateStats",
        "binary": "binaryStats",
        "boolean": "booleanStats",
    }.get(base)


def _count(fields: Mapping[str, str], name: str) -> int:
    value = fields.get(name)
    return int(value) if value is not None else UNKNOWN


def _hive_distinct(fields: Mapping[str, str]) -> int:
    """Hive's NDV from Spark's: Hive counts null as a value (Trino subtracts one when a column has nulls),
    Spark counts the values only."""
    distinct, nulls = _count(fields, "distinctCount"), _count(fields, "nullCount")
    return distinct + 1 if distinct >= 0 and nulls > 0 else distinct


def _decimal_json(value: Decimal) -> dict[str, Any]:
    exponent = value.as_tuple().exponent
    scale = -int(exponent) if isinstance(exponent, int) and exponent < 0 else 0
    unscaled = int(value.scaleb(scale))
    size = max(1, (unscaled.bit_length() + 8) // 8)
    raw = unscaled.to_bytes(size, "big", signed=True)
    return {"scale": scale, "unscaled": base64.b64encode(raw).decode("ascii")}


def _decimal_value(doc: Mapping[str, Any]) -> Decimal:
    unscaled = int.from_bytes(base64.b64decode(doc["unscaled"]), "big", signed=True)
    return Decimal(unscaled).scaleb(-int(doc["scale"]))


def _days(text: str) -> int:
    return (datetime.date.fromisoformat(text.strip()) - _EPOCH).days


def _bounds(kind: str, col_type: str, fields: Mapping[str, str]) -> dict[str, Any]:
    """Hive's low/high values from Spark's min/max (none for a timestamp's long statistics)."""
    out: dict[str, Any] = {}
    is_timestamp = col_type.strip().lower().startswith("timestamp")
    for spark_field, hive_field in (("min", "lowValue"), ("max", "highValue")):
        text = fields.get(spark_field)
        if text is None or is_timestamp:
            continue
        if kind == "longStats":
            out[hive_field] = int(text)
        elif kind == "doubleStats":
            out[hive_field] = float(text)
        elif kind == "decimalStats":
            out[hive_field] = _decimal_json(Decimal(text))
        elif kind == "dateStats":
            out[hive_field] = {"daysSinceEpoch": _days(text)}
    return out


def _boolean_counts(fields: Mapping[str, str], rows: int | None) -> tuple[int, int]:
    """True and false counts where Spark's min/max and the row count tell them; else unknown."""
    low, high = fields.get("min"), fields.get("max")
    nulls = _count(fields, "nullCount")
    if rows is None or nulls < 0 or low is None or low != high:
        if low is None and high is None and rows is not None and rows == nulls:
            return 0, 0  # only nulls
        return UNKNOWN, UNKNOWN
    non_null = rows - nulls
    return (non_null, 0) if low.strip().lower() == "true" else (0, non_null)


def to_hive(column: SparkColumn, col_name: str, col_type: str, rows: int | None = None) -> ColumnStat | None:
    """Hive's statistics of one column from Spark's parameters; None for a type Hive keeps none of, or for
    parameters Spark itself could not read (Spark then ignores them too)."""
    kind = hive_kind(col_type)
    if kind is None or "version" not in column.fields:
        return None
    fields = column.fields
    try:
        data: dict[str, Any]
        if kind == "booleanStats":
            trues, falses = _boolean_counts(fields, rows)
            data = {"numTrues": trues, "numFalses": falses, "numNulls": _count(fields, "nullCount")}
        elif kind in ("stringStats", "binaryStats"):
            avg = fields.get("avgLen")
            data = {
                "maxColLen": _count(fields, "maxLen"),
                "avgColLen": float(avg) if avg is not None else float(UNKNOWN),
                "numNulls": _count(fields, "nullCount"),
            }
            if kind == "stringStats":
                data["numDVs"] = _hive_distinct(fields)
        else:
            data = {
                **_bounds(kind, col_type, fields),
                "numNulls": _count(fields, "nullCount"),
                "numDVs": _hive_distinct(fields),
            }
    except (ValueError, InvalidOperation, OverflowError):
        return None
    return ColumnStat(col_name.lower(), col_type.lower(), kind, data)


# -- Hive -> Spark ----------------------------------------------------------------------------------------
def _spark_number(value: Any) -> str:
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


def _spark_bounds(stat: ColumnStat) -> dict[str, str]:
    data = stat.data
    out: dict[str, str] = {}
    for hive_field, spark_field in (("lowValue", "min"), ("highValue", "max")):
        value = data.get(hive_field)
        if value is None:
            continue
        if stat.kind in ("longStats", "doubleStats"):
            if stat.col_type.startswith("timestamp"):
                continue
            out[spark_field] = _spark_number(value)
        elif stat.kind == "decimalStats":
            out[spark_field] = format(_decimal_value(value), "f")
        elif stat.kind == "dateStats":
            out[spark_field] = (_EPOCH + datetime.timedelta(days=int(value["daysSinceEpoch"]))).isoformat()
        elif stat.kind == "timestampStats":
            moment = datetime.datetime.fromtimestamp(int(value["secondsSinceEpoch"]), datetime.UTC)
            out[spark_field] = moment.strftime("%Y-%m-%d %H:%M:%S.%f")
    if stat.kind == "booleanStats":
        trues, falses = data.get("numTrues", UNKNOWN), data.get("numFalses", UNKNOWN)
        if trues >= 0 and falses >= 0 and trues + falses > 0:
            out["min"] = "false" if falses > 0 else "true"
            out["max"] = "true" if trues > 0 else "false"
    return out


def to_spark(stat: ColumnStat, current: SparkColumn) -> dict[str, str]:
    """The Spark fields of a column whose Hive statistics are now ``stat``, from its ``current`` fields:
    what Hive's statistics say replaces what Spark had; what they contradict but cannot say is dropped."""
    data = stat.data
    out = {k: v for k, v in current.fields.items() if k in ("version", "avgLen", "maxLen")}
    out.setdefault("version", "2")
    nulls, distinct = data.get("numNulls"), data.get("numDVs")
    if nulls is not None and nulls >= 0:
        out["nullCount"] = str(int(nulls))
    if distinct is not None and distinct >= 0:  # Hive's NDV counts null as a value, Spark's does not
        out["distinctCount"] = str(int(distinct) - (1 if distinct > 0 and (nulls or 0) > 0 else 0))
    if stat.kind in ("stringStats", "binaryStats"):
        out.pop("avgLen", None)
        out.pop("maxLen", None)
        if data.get("maxColLen") is not None and data["maxColLen"] >= 0:
            out["maxLen"] = str(int(data["maxColLen"]))
        if data.get("avgColLen") is not None and data["avgColLen"] >= 0:
            out["avgLen"] = str(round(data["avgColLen"]))
    out.update(_spark_bounds(stat))
    return out


def spark_params(column: SparkColumn, fields: Mapping[str, str]) -> dict[str, str]:
    """``fields`` as parameters under the column's name as Spark spells it."""
    return {f"{COL_STATS_PREFIX}{column.name}.{field}": value for field, value in fields.items()}


def row_count(params: Mapping[str, str]) -> int | None:
    """Spark's row count of the table or partition, if it measured one."""
    value = params.get(NUM_ROWS)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
