"""Spark against a metastore, in a process of its own: write a warehouse, or read it back.

    python tests/integration/stock_hms_spark.py write thrift://127.0.0.1:PORT WAREHOUSE PARTITIONS
    python tests/integration/stock_hms_spark.py read thrift://127.0.0.1:PORT WAREHOUSE
    python tests/integration/stock_hms_spark.py mart-setup|mart-change thrift://127.0.0.1:PORT WAREHOUSE

The ``mart-*`` modes are the replication-source workload: a first state, then every kind of change a Spark
job makes (append, overwrite, add/drop partition, rename, drop and re-create).

``STOCK_HMS_SPARK_CONF`` (a JSON object) adds Spark settings, e.g. those of the Hive 3.1.3 client
(``tests.peers.hive31.spark_settings``) for a Hive 4 metastore, which Spark's built-in 2.3 client cannot read.

A process per metastore because one JVM holds one Hive client: the import tests write through the stock Hive
Metastore and read through hmsrepl. Both print one JSON line: per table, its row count and a checksum of its
rows, so the two sides can be compared row for row.
"""

from __future__ import annotations

import json
import os
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


MART_TABLES = ("mart.sales", "mart.dim_v2", "mart.scratch")


def mart_setup(spark) -> None:  # type: ignore[no-untyped-def]
    sql = spark.sql
    sql("CREATE DATABASE mart")
    sql("CREATE TABLE mart.sales (id INT, amount DOUBLE) PARTITIONED BY (day STRING) STORED AS PARQUET")
    sql("INSERT INTO mart.sales VALUES (1, 1.5, 'd1'), (2, 2.5, 'd1'), (3, 3.5, 'd2')")
    sql("CREATE TABLE mart.dim (id INT, name STRING) STORED AS PARQUET")
    sql("INSERT INTO mart.dim VALUES (1, 'one'), (2, 'two')")
    sql("CREATE TABLE mart.scratch (id INT) STORED AS TEXTFILE")
    sql("INSERT INTO mart.scratch VALUES (1)")


def mart_change(spark) -> None:  # type: ignore[no-untyped-def]
    sql = spark.sql
    sql("INSERT INTO mart.sales PARTITION (day='d1') VALUES (4, 4.5)")  # append
    sql("INSERT OVERWRITE TABLE mart.sales PARTITION (day='d2') VALUES (5, 5.5)")  # overwrite
    sql("ALTER TABLE mart.sales ADD PARTITION (day='d3')")
    sql("INSERT INTO mart.sales PARTITION (day='d3') VALUES (6, 6.5)")
    sql("INSERT INTO mart.sales PARTITION (day='d4') VALUES (7, 7.5)")  # a new partition by insert
    sql("ALTER TABLE mart.sales DROP PARTITION (day='d1')")
    sql("INSERT OVERWRITE TABLE mart.dim VALUES (3, 'three')")
    sql("ALTER TABLE mart.dim RENAME TO mart.dim_v2")
    sql("DROP TABLE mart.scratch")
    sql("CREATE TABLE mart.scratch (id INT, note STRING) STORED AS TEXTFILE")
    sql("INSERT INTO mart.scratch VALUES (2, 'again')")


def read(spark, tables: tuple[str, ...] = TABLES) -> dict[str, list[int]]:  # type: ignore[no-untyped-def]
    found = {}
    for table in tables:
        row = spark.sql(f"SELECT count(*), sum(crc32(to_json(struct(*)))) FROM {table}").first()
        found[table] = [int(row[0]), int(row[1] or 0)]
    return found


def main() -> None:
    mode, uri, warehouse = sys.argv[1:4]
    extra = json.loads(os.environ.get("STOCK_HMS_SPARK_CONF") or "{}")
    spark = hive_spark_session(f"stock-hms-{mode}", uri, warehouse, extra_conf=extra)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if mode == "write":
            write(spark, int(sys.argv[4]))
        if mode.startswith("mart-"):
            (mart_setup if mode == "mart-setup" else mart_change)(spark)
            print("RESULT " + json.dumps(read(spark, MART_TABLES if mode == "mart-change" else ())))
            return
        print("RESULT " + json.dumps(read(spark)))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
