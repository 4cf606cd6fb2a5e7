"""Spark's statistics parameters <-> Hive's column statistics, for every column type and both directions.

The parameters are those Spark 4 writes for ``ANALYZE TABLE ... COMPUTE STATISTICS FOR COLUMNS`` (seen on
this metastore: min/max for numbers, booleans, dates and timestamps; lengths for every type).
"""

from __future__ import annotations

import base64
import json

import pytest

from hmsrepl.metastore import basic_stats
from hmsrepl.metastore.payloads import ColumnStat
from hmsrepl.metastore.spark_stats import (
    SparkColumn,
    hive_kind,
    spark_columns,
    spark_params,
    to_hive,
    to_spark,
)
from hmsrepl.metastore.spark_stats_sync import has_spark_stats, with_row_count

P = "spark.sql.statistics.colStats."


def column(name: str, **fields: str) -> SparkColumn:
    return SparkColumn(name, {"version": "2", **fields})


def decimal(unscaled: int, scale: int) -> dict[str, object]:
    size = max(1, (unscaled.bit_length() + 8) // 8)
    raw = unscaled.to_bytes(size, "big", signed=True)
    return {"scale": scale, "unscaled": base64.b64encode(raw).decode("ascii")}


COUNTS = {"distinctCount": "2", "nullCount": "1"}

CASES = [
    # (Hive type, Spark fields, Hive member, Hive data)
    (
        "int",
        {"min": "1", "max": "2", "avgLen": "4", "maxLen": "4"},
        "longStats",
        {"lowValue": 1, "highValue": 2},
    ),
    ("bigint", {"min": "-7", "max": "8"}, "longStats", {"lowValue": -7, "highValue": 8}),
    ("smallint", {"min": "0", "max": "3"}, "longStats", {"lowValue": 0, "highValue": 3}),
    ("double", {"min": "1.5", "max": "2.5"}, "doubleStats", {"lowValue": 1.5, "highValue": 2.5}),
    ("float", {"min": "-0.25", "max": "1.0E10"}, "doubleStats", {"lowValue": -0.25, "highValue": 1e10}),
    (
        "decimal(10,2)",
        {"min": "1.25", "max": "3.50"},
        "decimalStats",
        {"lowValue": decimal(125, 2), "highValue": decimal(350, 2)},
    ),
    (
        "date",
        {"min": "2024-01-02", "max": "1969-12-31"},
        "dateStats",
        {"lowValue": {"daysSinceEpoch": 19724}, "highValue": {"daysSinceEpoch": -1}},
    ),
    # Hive 2/3 and Trino know no timestamp member: counts in longStats, no bounds
    (
        "timestamp",
        {"min": "2024-01-02 03:04:05.000000", "max": "2024-01-02 03:04:05.000000"},
        "longStats",
        {},
    ),
]


@pytest.mark.parametrize(("col_type", "fields", "kind", "bounds"), CASES, ids=[c[0] for c in CASES])
def test_numbers_dates_and_timestamps(col_type: str, fields: dict[str, str], kind: str, bounds: dict) -> None:
    stat = to_hive(column("c", **fields, **COUNTS), "c", col_type)
    assert stat == ColumnStat("c", col_type, kind, {**bounds, "numNulls": 1, "numDVs": 3}), (
        "null counts as one"
    )


def test_strings_binaries_and_booleans() -> None:
    lengths = {"avgLen": "3", "maxLen": "5", **COUNTS}
    for col_type in ("string", "varchar(10)", "char(5)"):
        assert to_hive(column("s", **lengths), "s", col_type) == ColumnStat(
            "s", col_type, "stringStats", {"maxColLen": 5, "avgColLen": 3.0, "numNulls": 1, "numDVs": 3}
        )
    assert to_hive(column("b", **lengths), "b", "binary") == ColumnStat(
        "b", "binary", "binaryStats", {"maxColLen": 5, "avgColLen": 3.0, "numNulls": 1}
    )
    both = column("f", min="false", max="true", nullCount="1", distinctCount="2")
    assert to_hive(both, "f", "boolean", rows=10).data == {"numTrues": -1, "numFalses": -1, "numNulls": 1}
    only_true = column("f", min="true", max="true", nullCount="1", distinctCount="1")
    assert to_hive(only_true, "f", "boolean", rows=10).data == {"numTrues": 9, "numFalses": 0, "numNulls": 1}
    only_false = column("f", min="false", max="false", nullCount="0")
    assert to_hive(only_false, "f", "boolean", rows=4).data == {"numTrues": 0, "numFalses": 4, "numNulls": 0}
    # without Spark's row count the split is unknown
    assert to_hive(only_true, "f", "boolean").data["numTrues"] == -1


def test_what_hive_keeps_no_statistics_of_is_skipped() -> None:
    assert to_hive(column("m", **COUNTS), "m", "map<string,int>") is None
    assert to_hive(column("a", **COUNTS), "a", "array<int>") is None
    assert to_hive(SparkColumn("x", {"nullCount": "1"}), "x", "int") is None, (
        "no version: Spark ignores it too"
    )
    assert to_hive(column("x", min="abc"), "x", "int") is None, "unreadable: skipped, never a failed write"
    missing = to_hive(column("x", min="1"), "x", "int")
    assert missing is not None and missing.data == {"lowValue": 1, "numNulls": -1, "numDVs": -1}


def test_parameters_are_grouped_by_column_whatever_its_case_or_dots() -> None:
    params = {
        f"{P}Amount.version": "2",
        f"{P}Amount.max": "9",
        f"{P}a.b.nullCount": "0",
        f"{P}a.b.version": "2",
        f"{P}x.unknownField": "1",
        "spark.sql.statistics.numRows": "3",
        "numRows": "3",
    }
    found = spark_columns(params)
    assert found == {
        "amount": SparkColumn("Amount", {"version": "2", "max": "9"}),
        "a.b": SparkColumn("a.b", {"nullCount": "0", "version": "2"}),
    }
    assert spark_params(found["amount"], {"version": "2"}) == {f"{P}Amount.version": "2"}
    assert has_spark_stats(params) and not has_spark_stats({"numRows": "3"}) and not has_spark_stats(None)


REVERSE = [
    ("bigint", {"lowValue": -3, "highValue": 40}, {"min": "-3", "max": "40"}),
    ("double", {"lowValue": 0.5, "highValue": 2.0}, {"min": "0.5", "max": "2.0"}),
    (
        "decimal(10,2)",
        {"lowValue": decimal(-5, 2), "highValue": decimal(1000, 2)},
        {"min": "-0.05", "max": "10.00"},
    ),
    (
        "date",
        {"lowValue": {"daysSinceEpoch": 0}, "highValue": {"daysSinceEpoch": 19724}},
        {"min": "1970-01-01", "max": "2024-01-02"},
    ),
]


@pytest.mark.parametrize(("col_type", "bounds", "spark"), REVERSE, ids=[c[0] for c in REVERSE])
def test_hive_statistics_rewrite_sparks_fields(col_type: str, bounds: dict, spark: dict[str, str]) -> None:
    current = column("C", min="0", max="1", avgLen="8", maxLen="8", histogram="abc", **COUNTS)
    kind = hive_kind(col_type)
    assert kind is not None
    stat = ColumnStat("c", col_type, kind, {**bounds, "numNulls": 7, "numDVs": 30})
    expected = {
        "version": "2",
        "avgLen": "8",
        "maxLen": "8",
        "distinctCount": "29",
        "nullCount": "7",
        **spark,
    }
    assert to_spark(stat, current) == expected, "histogram dropped, fixed lengths kept"
    # and back: the rewritten fields translate to the same Hive statistics
    assert to_hive(SparkColumn("C", expected), "c", col_type) == stat


def test_reverse_of_strings_booleans_and_timestamps() -> None:
    text = column("s", avgLen="3", maxLen="5", **COUNTS)
    stat = ColumnStat(
        "s", "string", "stringStats", {"maxColLen": 9, "avgColLen": 4.4, "numNulls": 0, "numDVs": 6}
    )
    assert to_spark(stat, text) == {
        "version": "2",
        "maxLen": "9",
        "avgLen": "4",
        "distinctCount": "6",
        "nullCount": "0",
    }
    flag = column("f", min="false", max="true", **COUNTS)
    trues = ColumnStat("f", "boolean", "booleanStats", {"numTrues": 3, "numFalses": 0, "numNulls": 2})
    assert to_spark(trues, flag) == {"version": "2", "nullCount": "2", "min": "true", "max": "true"}
    unknown = ColumnStat("f", "boolean", "booleanStats", {"numTrues": -1, "numFalses": -1, "numNulls": 2})
    assert to_spark(unknown, flag) == {"version": "2", "nullCount": "2"}, "bounds Hive cannot tell: dropped"
    ts = column("t", min="2024-01-02 03:04:05.000000", max="2024-01-02 03:04:05.000000", avgLen="8", **COUNTS)
    counts_only = ColumnStat("t", "timestamp", "longStats", {"numNulls": 0, "numDVs": 4})
    assert to_spark(counts_only, ts) == {
        "version": "2",
        "avgLen": "8",
        "distinctCount": "4",
        "nullCount": "0",
    }
    hive4 = ColumnStat(
        "t",
        "timestamp",
        "timestampStats",
        {
            "lowValue": {"secondsSinceEpoch": 0},
            "highValue": {"secondsSinceEpoch": 1704164645},
            "numNulls": 0,
            "numDVs": 4,
        },
    )
    assert to_spark(hive4, ts)["max"] == "2024-01-02 03:04:05.000000"
    assert to_spark(hive4, ts)["min"] == "1970-01-01 00:00:00.000000"


def accurate(params: dict[str, str]) -> dict[str, str]:
    return json.loads(params["COLUMN_STATS_ACCURATE"])


def test_row_counts_spark_measured_are_hives_and_leave_with_them() -> None:
    analyzed = with_row_count(
        {}, {"spark.sql.statistics.numRows": "4", "COLUMN_STATS_ACCURATE": '{"COLUMN_STATS":{"a":"true"}}'}
    )
    assert analyzed["numRows"] == "4"
    assert accurate(analyzed) == {"COLUMN_STATS": {"a": "true"}, "BASIC_STATS": "true"}
    inserted = with_row_count(
        analyzed, {"numRows": "4", "COLUMN_STATS_ACCURATE": analyzed["COLUMN_STATS_ACCURATE"]}
    )
    assert inserted["numRows"] == "-1" and "BASIC_STATS" not in accurate(inserted)
    other = with_row_count(analyzed, {"numRows": "12"})
    assert other == {"numRows": "12"}, "a count another writer set is its own"


def test_file_counts_and_row_counts_of_a_client_write() -> None:
    placeholder = {"numRows": "0", "rawDataSize": "0", "COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true"}'}
    added = basic_stats.gathered(None, placeholder, 2, 565)
    assert added == {
        "numRows": "-1",
        "rawDataSize": "-1",
        "numFiles": "2",
        "totalSize": "565",
        "COLUMN_STATS_ACCURATE": "{}",
    }
    empty = basic_stats.gathered(None, placeholder, 0, 0)
    assert empty["numRows"] == "0" and accurate(empty) == {"BASIC_STATS": "true"}, "no files: 0 is right"
    counted = basic_stats.gathered(None, {"numRows": "7"}, 1, 10)
    assert counted["numRows"] == "7", "a writer's own count of a new object stays"
    before = {"numRows": "7", "numFiles": "1", "totalSize": "10"}
    stale = basic_stats.gathered(before, dict(before), 2, 30)
    assert (stale["numRows"], stale["numFiles"], stale["totalSize"]) == ("-1", "2", "30")
    recounted = basic_stats.gathered(before, {**before, "numRows": "9"}, 2, 30)
    assert recounted["numRows"] == "9", "the writer counted the new files"
    same_files = basic_stats.gathered(before, dict(before), 1, 10)
    assert same_files == before
