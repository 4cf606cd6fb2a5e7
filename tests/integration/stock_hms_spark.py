"""Spark against a metastore, in a process of its own: write a warehouse, or read it back.

    python tests/integration/stock_hms_spark.py write thrift://127.0.0.1:PORT WAREHOUSE PARTITIONS
    python tests/integration/stock_hms_spark.py read thrift://127.0.0.1:PORT WAREHOUSE

A process per metastore because one JVM holds one Hive client: the import tests write through the stock Hive
Metastore and read through hmsrepl. Both print one JSON line: per table, its row count and a checksum of its
rows, so the two sides can be compared row for row.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "include")]

from hmsrepl.spark_session import hive_spark_session  # noqa: E402

TABLES = ("shop.orders", "shop.customers", "crm.notes")


def write(spark, partitions: int) -> None:  # type: ignore[no-untyped-def]
    sql = spark.sql
    sql("CREATE DATABASE shop")
    sql("CREATE DATABASE crm")
    sql("CREATE TABLE shop.orders (id BIGINT, item STRING) PARTITIONED BY (day STRING) STORED AS PARQUET")
    location = spark.sql("DESCRIBE FORMATTED shop.orders").where("col_name = 'Location'").first()[1]
    frame = spark.range(partitions * 3).selectExpr(
        "id",
        "concat('item-', id) AS item",
        f"concat('d', lpad(cast(id % {partitions} AS STRING), 5, '0')) AS day",
    )
    frame.write.mode("overwrite").partitionBy("day").parquet(location)
    sql("MSCK REPAIR TABLE shop.orders")  # one add_partitions call per batch, as teams adopt existing data
    sql("CREATE TABLE shop.customers (id INT, name STRING) STORED AS PARQUET")
    sql("INSERT INTO shop.customers VALUES (1, 'ada'), (2, 'grace'), (3, 'barbara')")
    sql("CREATE TABLE crm.notes (id INT, note STRING) STORED AS TEXTFILE")
    sql("INSERT INTO crm.notes VALUES (1, 'first'), (2, 'second: with a colon')")
    sql("CREATE FUNCTION shop.shout AS 'org.apache.hadoop.hive.ql.udf.generic.GenericUDFUpper'")


def read(spark) -> dict[str, list[int]]:  # type: ignore[no-untyped-def]
    found = {}
    for table in TABLES:
        row = spark.sql(f"SELECT count(*), sum(crc32(to_json(struct(*)))) FROM {table}").first()
        found[table] = [int(row[0]), int(row[1] or 0)]
    return found


def main() -> None:
    mode, uri, warehouse = sys.argv[1:4]
    spark = hive_spark_session(f"stock-hms-{mode}", uri, warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if mode == "write":
            write(spark, int(sys.argv[4]))
        print("RESULT " + json.dumps(read(spark)))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
