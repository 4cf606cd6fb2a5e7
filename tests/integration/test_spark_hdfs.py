"""Spark writes a warehouse on HDFS through our metastore, and a replica on HDFS verifies equal.

Spark talks ``hdfs://`` with the Hadoop client pyspark ships (3.5.0, the MiniDFSCluster's version) and the
README's writer settings (Hadoop trash on); the metastore is a server process whose warehouse, cmroot and
trash root are on the cluster and which reads them through WebHDFS. Between the bootstrap and the
incremental dump Spark overwrites a partition (its Hive client moves the old files to the HDFS trash, which
the metastore adopts into cmroot) and appends to the other; ``verify`` compares every file's checksum and the
replica's rows are read back from HDFS.
"""

from __future__ import annotations

import getpass
from pathlib import Path

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from hmsrepl.storage import filesystem_for
from tests.integration.test_spark_s3a import opened, replica_rows, spark_sql
from tests.peers.hdfs import MiniDfs
from tests.servers import metastore_server

pytestmark = pytest.mark.spark


def test_spark_writes_an_hdfs_warehouse_and_the_replica_verifies_equal(
    hdfs_env: MiniDfs, hdfs_root: str, tmp_path: Path
) -> None:
    spark_warehouse = f"{hdfs_root}/src/warehouse"
    source_config = MetastoreConfig(
        db_url=f"sqlite:///{tmp_path}/source.db",
        warehouse=spark_warehouse,
        cmroot=f"{hdfs_root}/src/cmroot",
        trash_root=f"{hdfs_env.namenode}/user/{getpass.getuser()}/.Trash",
    )
    target_config = MetastoreConfig(
        db_url=f"sqlite:///{tmp_path}/replica.db",
        warehouse=f"{hdfs_root}/dst/warehouse",
        cmroot=f"{hdfs_root}/dst/cmroot",
        trash_root="",
    )
    with metastore_server(
        tmp_path / "source",
        source_config.db_url,
        HMSREPL_WAREHOUSE=source_config.warehouse,
        HMSREPL_CMROOT=source_config.cmroot,
        HMSREPL_TRASH_ROOT=source_config.trash_root,
    ) as server:
        spark_sql(
            server,
            spark_warehouse,
            {},
            "CREATE DATABASE shop",
            "CREATE TABLE shop.orders (id INT, item STRING) PARTITIONED BY (day STRING) STORED AS PARQUET",
            "INSERT INTO shop.orders VALUES (1, 'a', 'd1'), (2, 'b', 'd1'), (3, 'c', 'd2')",
            "INSERT INTO shop.orders PARTITION (day = 'd2') VALUES (4, 'd')",
        )
        with opened(source_config) as source, opened(target_config) as target:
            location = source.catalog.get_table("shop", "orders").sd.location
            assert location == f"{spark_warehouse}/shop.db/orders"
            engine = ReplicationEngine(f"{hdfs_root}/src/repl", source, target)
            bootstrap = engine.execute("REPL DUMP shop")
            engine.execute(f"REPL LOAD shop_dr FROM '{bootstrap.dump_dir}'")
            assert verify(source, "shop", target, "shop_dr") == []
            assert replica_rows(target, "shop_dr", "orders") == [
                [1, "a", "d1"],
                [2, "b", "d1"],
                [3, "c", "d2"],
                [4, "d", "d2"],
            ]

        [_, _, read_back] = spark_sql(
            server,
            spark_warehouse,
            {},
            "INSERT OVERWRITE TABLE shop.orders PARTITION (day = 'd1') VALUES (10, 'x')",
            "INSERT INTO shop.orders PARTITION (day = 'd2') VALUES (5, 'e')",
            "SELECT id, item, day FROM shop.orders ORDER BY id",
        )
        assert read_back == [[3, "c", "d2"], [4, "d", "d2"], [5, "e", "d2"], [10, "x", "d1"]]
        trash_fs = filesystem_for(source_config.trash_root)
        assert list(trash_fs.list_files(f"{source_config.trash_root}/Current")) == [], "trash not adopted"
        recycled = list(trash_fs.list_files(source_config.cmroot))
        assert recycled and all("_crc32c-" in status.uri for status in recycled), "d1's files were not kept"

        with opened(source_config) as source, opened(target_config) as target:
            engine = ReplicationEngine(f"{hdfs_root}/src/repl", source, target)
            incremental = engine.execute(f"REPL DUMP shop FROM {bootstrap.last_event_id}")
            engine.execute(f"REPL LOAD shop_dr FROM '{incremental.dump_dir}'")
            assert verify(source, "shop", target, "shop_dr") == []
            assert repl_status(target, "shop_dr") == source.get_current_notification_event_id()
            assert replica_rows(target, "shop_dr", "orders") == sorted(read_back)
            d1 = target.catalog.get_partition("shop_dr", "orders", ["d1"]).sd.location
            assert d1.startswith(f"{hdfs_root}/dst/warehouse/")
