"""The training job of the tests' Spark class archive: what the tests' Spark does, once, so its classes are kept.

    spark-submit tests/peers/spark_archive_training.py thrift://127.0.0.1:PORT WAREHOUSE

A Hive-enabled session on a real metastore server: a database, partitioned and unpartitioned Hive tables in
Parquet and ORC written through the metastore, inserts, an overwrite, statistics, queries with a join and an
aggregate, DataFrame files written and read, and the drops. Classes it never loads are parsed as usual.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "include")]

from hmsrepl.spark_session import hive_spark_session  # noqa: E402

STATEMENTS = (
    "CREATE DATABASE training",
    "CREATE TABLE training.events (id BIGINT, name STRING) PARTITIONED BY (ds STRING) STORED AS PARQUET",
    "INSERT INTO training.events PARTITION (ds='2026-01-01') VALUES (1, 'a'), (2, 'b')",
    "INSERT INTO training.events PARTITION (ds) SELECT id + 10, name, '2026-01-02' FROM training.events",
    "INSERT OVERWRITE TABLE training.events PARTITION (ds='2026-01-01') VALUES (3, 'c')",
    "CREATE TABLE training.names (id BIGINT, label STRING) STORED AS ORC",
    "INSERT INTO training.names SELECT id, upper(name) FROM training.events",
    "ANALYZE TABLE training.names COMPUTE STATISTICS",
    "ANALYZE TABLE training.events PARTITION (ds) COMPUTE STATISTICS",
    "SHOW PARTITIONS training.events",
    "DESCRIBE FORMATTED training.events",
    "SELECT e.ds, count(*), max(n.label) FROM training.events e JOIN training.names n ON e.id = n.id GROUP BY e.ds",
    "ALTER TABLE training.events DROP PARTITION (ds='2026-01-02')",
    "DROP TABLE training.names",
    "DROP TABLE training.events",
    "DROP DATABASE training",
)


def main(metastore_uri: str, warehouse: str) -> None:
    spark = hive_spark_session("spark-class-archive-training", metastore_uri, warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    for statement in STATEMENTS:
        spark.sql(statement).collect()
    frame = spark.range(1000).selectExpr("id", "id % 7 AS bucket", "cast(id AS STRING) AS text")
    files = Path(warehouse) / "frames"
    frame.write.partitionBy("bucket").parquet(str(files / "parquet"))
    frame.write.orc(str(files / "orc"))
    spark.read.parquet(str(files / "parquet")).groupBy("bucket").count().collect()
    spark.read.orc(str(files / "orc")).where("id > 10").toPandas()
    spark.createDataFrame([(1, "a")], ["id", "name"]).collect()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
