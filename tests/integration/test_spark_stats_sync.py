"""Spark's statistics parameters and Hive's column statistics stay consistent through the Thrift calls.

The table parameters are those Spark 4's ``ANALYZE TABLE ... COMPUTE STATISTICS FOR COLUMNS`` writes through
its Hive client; Trino, Impala and Hive read ``get_table_statistics_req``. The calls go through the
metastore's Thrift handler in-process (the Spark test over the wire: ``test_spark_statistics``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.metastore.model import Database, FieldSchema, Table
from hmsrepl.metastore.payloads import ColumnStat
from hmsrepl.thrift import convert
from hmsrepl.thrift.handler import MetastoreHandler
from hmsrepl.thrift.idl import hms
from hmsrepl.thrift.statistics import stat_from_thrift
from tests.helpers import make_partition, make_table, settle, write_file

P = "spark.sql.statistics.colStats."
COLUMNS = [("a", "int"), ("b", "string"), ("e", "decimal(10,2)"), ("f", "boolean"), ("h", "timestamp")]
# What Spark wrote for two rows (1, 'x', 1.25, true, ts) and (2, NULL, 3.50, false, NULL), histogram aside.
ANALYZED = {
    "spark.sql.statistics.numRows": "2",
    "spark.sql.statistics.totalSize": "3129",
    **{f"{P}a.{k}": v for k, v in {"version": "2", "min": "1", "max": "2", "nullCount": "0"}.items()},
    **{
        f"{P}a.{k}": v
        for k, v in {"distinctCount": "2", "avgLen": "4", "maxLen": "4", "histogram": "H"}.items()
    },
    **{f"{P}b.{k}": v for k, v in {"version": "2", "distinctCount": "1", "nullCount": "1"}.items()},
    **{f"{P}b.{k}": v for k, v in {"avgLen": "1", "maxLen": "1"}.items()},
    **{f"{P}e.{k}": v for k, v in {"version": "2", "min": "1.25", "max": "3.50", "nullCount": "0"}.items()},
    **{f"{P}e.{k}": v for k, v in {"distinctCount": "2", "avgLen": "8", "maxLen": "8"}.items()},
    **{f"{P}f.{k}": v for k, v in {"version": "2", "min": "false", "max": "true", "nullCount": "0"}.items()},
    **{f"{P}f.{k}": v for k, v in {"distinctCount": "2", "avgLen": "1", "maxLen": "1"}.items()},
    **{
        f"{P}h.{k}": v
        for k, v in {"version": "2", "min": "2024-01-02 03:04:05.000000", "nullCount": "1"}.items()
    },
    **{f"{P}h.{k}": v for k, v in {"max": "2024-01-02 03:04:05.000000", "distinctCount": "1"}.items()},
}
EXPECTED = [
    ColumnStat("a", "int", "longStats", {"lowValue": 1, "highValue": 2, "numNulls": 0, "numDVs": 2}),
    # Hive's NDV counts null as a value: Spark's distinctCount + 1 where there are nulls
    ColumnStat("b", "string", "stringStats", {"maxColLen": 1, "avgColLen": 1.0, "numNulls": 1, "numDVs": 2}),
    ColumnStat(
        "e",
        "decimal(10,2)",
        "decimalStats",
        {
            "lowValue": {"scale": 2, "unscaled": "fQ=="},
            "highValue": {"scale": 2, "unscaled": "AV4="},
            "numNulls": 0,
            "numDVs": 2,
        },
    ),
    ColumnStat("f", "boolean", "booleanStats", {"numTrues": -1, "numFalses": -1, "numNulls": 0}),
    ColumnStat("h", "timestamp", "longStats", {"numNulls": 1, "numDVs": 2}),
]


def spark_table(db: str, name: str, **params: str) -> Table:
    table = make_table(db, name, **params)
    cols = [FieldSchema(name=n, type=t) for n, t in COLUMNS]
    return table.model_copy(update={"sd": table.sd.model_copy(update={"cols": cols})})


def read_stats(handler: Any, db: str, table: str, cols: list[str] | None = None) -> list[ColumnStat]:
    request = hms.TableStatsRequest(dbName=db, tblName=table, colNames=cols or [c for c, _ in COLUMNS])
    return [stat_from_thrift(obj) for obj in handler.get_table_statistics_req(request).tableStats]


def spark_fields(params: dict[str, str], col: str) -> dict[str, str]:
    prefix = f"{P}{col}."
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}


def alter(handler: Any, store: Metastore, db: str, name: str, params: dict[str, str]) -> Table:
    table = store.catalog.get_table(db, name)
    handler.alter_table(db, name, convert.table_to_thrift(table.model_copy(update={"parameters": params})))
    return store.catalog.get_table(db, name)


def test_sparks_analyze_is_read_as_hive_statistics_and_its_insert_drops_them(metastore: Metastore) -> None:
    handler = MetastoreHandler(metastore)
    metastore.catalog.create_database(Database(name="s"))
    handler.create_table(convert.table_to_thrift(spark_table("s", "t")))
    location = metastore.catalog.get_table("s", "t").sd.location
    write_file(location, "part-0.parquet", b"x" * 100)
    settle()
    before = metastore.get_current_notification_event_id()
    table = alter(handler, metastore, "s", "t", {**ANALYZED, "COLUMN_STATS_ACCURATE": "{}"})

    assert read_stats(handler, "s", "t") == EXPECTED
    assert table.parameters["numRows"] == "2", "Spark's row count is Hive's"
    assert json.loads(table.parameters["COLUMN_STATS_ACCURATE"]) == {"BASIC_STATS": "true"}
    assert (table.parameters["numFiles"], table.parameters["totalSize"]) == ("1", "100")
    kinds = [e.event_type for e in metastore.get_next_notification(before)]
    assert kinds == ["ALTER_TABLE", "UPDATE_TABLE_COLUMN_STAT"], "one commit, replicated as statistics"

    # Spark's INSERT drops its statistics parameters: the Hive statistics they became go with them.
    write_file(location, "part-1.parquet", b"y" * 50)
    settle()
    kept = {k: v for k, v in table.parameters.items() if not k.startswith("spark.sql.statistics.")}
    table = alter(handler, metastore, "s", "t", kept)
    assert read_stats(handler, "s", "t") == []
    assert (table.parameters["numRows"], table.parameters["numFiles"], table.parameters["totalSize"]) == (
        "-1",
        "2",
        "150",
    ), "the count Spark dropped is unknown now, not 2"
    assert "BASIC_STATS" not in json.loads(table.parameters["COLUMN_STATS_ACCURATE"])


def test_hive_statistics_written_by_a_client_rewrite_or_remove_sparks(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    handler = MetastoreHandler(store)
    store.catalog.create_database(Database(name="s"))
    handler.create_table(convert.table_to_thrift(spark_table("s", "t", **ANALYZED)))
    assert read_stats(handler, "s", "t") == EXPECTED, "a table created with Spark's statistics"

    trino = hms.ColumnStatistics(
        statsDesc=hms.ColumnStatisticsDesc(isTblLevel=True, dbName="s", tableName="t"),
        statsObj=[
            hms.ColumnStatisticsObj(
                colName="a",
                colType="int",
                statsData=hms.ColumnStatisticsData(
                    longStats=hms.LongColumnStatsData(lowValue=-5, highValue=90, numNulls=3, numDVs=40)
                ),
            )
        ],
    )
    handler.update_table_column_statistics(trino)
    params = store.catalog.get_table("s", "t").parameters
    assert spark_fields(params, "a") == {
        "version": "2",
        "min": "-5",
        "max": "90",
        "nullCount": "3",
        "distinctCount": "39",  # Hive's 40 count null as one
        "avgLen": "4",
        "maxLen": "4",
    }, "Spark's fields follow; its histogram described the old data and is gone"
    assert spark_fields(params, "b") == spark_fields(ANALYZED, "b"), "other columns untouched"

    handler.delete_table_column_statistics("s", "t", "b")
    params = store.catalog.get_table("s", "t").parameters
    assert spark_fields(params, "b") == {}, "deleted in Hive: Spark does not plan with them either"
    assert spark_fields(params, "e") == spark_fields(ANALYZED, "e")

    # Statistics another writer put in place stay when Spark drops its parameters.
    other = ColumnStat("e", "decimal(10,2)", "decimalStats", {"numNulls": 9, "numDVs": 9})
    store.stats.update("s", "t", [other])
    kept = {k: v for k, v in params.items() if not k.startswith("spark.sql.statistics.")}
    alter(handler, store, "s", "t", kept)
    assert read_stats(handler, "s", "t") == [other]


def test_partition_counts_after_a_spark_write(sqlite_metastore: Metastore) -> None:
    store = sqlite_metastore
    handler = MetastoreHandler(store)
    store.catalog.create_database(Database(name="s"))
    table = store.catalog.create_table(make_table("s", "p", partition_keys=("day",)))
    location = f"{table.sd.location}/day=d1"
    write_file(location, "part-0.parquet", b"x" * 300)
    write_file(location, "_SUCCESS", b"")
    settle()
    # Spark's Hive client adds a new partition with Hive's placeholder counts.
    placeholder = {"numRows": "0", "rawDataSize": "0", "COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true"}'}
    part = make_partition(table, "d1").model_copy(update={"parameters": placeholder})
    handler.add_partition(convert.partition_to_thrift(part))
    params = store.catalog.get_partition("s", "p", ["d1"]).parameters
    assert (params["numRows"], params["numFiles"], params["totalSize"]) == ("-1", "1", "300")
    assert json.loads(params["COLUMN_STATS_ACCURATE"]) == {}, "the row count is unknown, not 0"

    write_file(location, "part-1.parquet", b"y" * 45)
    settle()
    current = store.catalog.get_partition("s", "p", ["d1"])
    handler.alter_partition("s", "p", convert.partition_to_thrift(current))
    params = store.catalog.get_partition("s", "p", ["d1"]).parameters
    assert (params["numRows"], params["numFiles"], params["totalSize"]) == ("-1", "2", "345")

    # ANALYZE TABLE p PARTITION (day='d1') COMPUTE STATISTICS: Spark's count becomes Hive's.
    counted = {**params, "spark.sql.statistics.numRows": "4", "spark.sql.statistics.totalSize": "345"}
    handler.alter_partition(
        "s", "p", convert.partition_to_thrift(current.model_copy(update={"parameters": counted}))
    )
    params = store.catalog.get_partition("s", "p", ["d1"]).parameters
    assert params["numRows"] == "4" and json.loads(params["COLUMN_STATS_ACCURATE"]) == {"BASIC_STATS": "true"}


@pytest.mark.parametrize("params", [{"spark.sql.statistics.colStats.zz.version": "2"}, {}])
def test_writes_without_usable_spark_statistics_store_none(sqlite_metastore: Metastore, params: dict) -> None:
    handler = MetastoreHandler(sqlite_metastore)
    sqlite_metastore.catalog.create_database(Database(name="s"))
    handler.create_table(convert.table_to_thrift(spark_table("s", "t", **params)))
    assert read_stats(handler, "s", "t") == []
    assert sqlite_metastore.catalog.get_table("s", "t").parameters.get("numFiles") == "0"
