"""Building SparkSessions the product's way (local by default, any master by configuration)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def local_spark_session(
    app_name: str, *, master: str | None = None, extra_conf: dict[str, str] | None = None
) -> SparkSession:
    """A SparkSession bound to loopback with a small footprint suited to 2-core machines and CI."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers must run the driver's interpreter (its virtualenv has pyarrow, pandas and hmsrepl); by
    # default Spark starts whatever 'python3' is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or os.environ.get("HMSREPL_SPARK_MASTER", "local[2]"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


# Route every insert through the metastore: with Spark's default datasource write path an INSERT into an
# existing partition or unpartitioned table never calls the metastore, so no event (and no file list)
# would be recorded. With these, Spark's Hive client calls add_partition / alter_partition / alter_table
# and fire_listener_event, and the metastore captures files and checksums itself.
HIVE_WRITER_SETTINGS: dict[str, str] = {
    "spark.sql.hive.convertInsertingPartitionedTable": "false",
    "spark.sql.hive.convertInsertingUnpartitionedTable": "false",
    "spark.sql.hive.convertMetastoreParquet": "false",
    "spark.sql.hive.convertMetastoreOrc": "false",
    "spark.hadoop.hive.metastore.dml.events": "true",
    "spark.hadoop.hive.exec.dynamic.partition.mode": "nonstrict",
    # Overwritten files go to Hadoop trash instead of being deleted; the metastore adopts them into cmroot.
    "spark.hadoop.fs.trash.interval": "1440",
}


def hive_spark_session(
    app_name: str,
    metastore_uri: str,
    warehouse: str,
    *,
    master: str | None = None,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """A SparkSession whose catalog is the hmsrepl metastore at ``metastore_uri`` (thrift://host:port)."""
    conf = {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.hive.metastore.uris": metastore_uri,
        "spark.sql.warehouse.dir": warehouse,
        "spark.hadoop.hive.metastore.warehouse.dir": warehouse,
        **HIVE_WRITER_SETTINGS,
        **(extra_conf or {}),
    }
    return local_spark_session(app_name, master=master, extra_conf=conf)
