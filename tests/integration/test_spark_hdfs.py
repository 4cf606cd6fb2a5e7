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
from hmsrepl.storage import filesystem_for
from tests.peers.hdfs import MiniDfs
from tests.servers import metastore_server
from tests.spark_store_replication import spark_writes_and_the_replica_follows

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

    def trash_adopted() -> None:
        trash_fs = filesystem_for(source_config.trash_root)
        assert list(trash_fs.list_files(f"{source_config.trash_root}/Current")) == [], "trash not adopted"
        recycled = list(trash_fs.list_files(source_config.cmroot))
        assert recycled and all("_crc32c-" in status.uri for status in recycled), "d1's files were not kept"

    with metastore_server(
        tmp_path / "source",
        source_config.db_url,
        HMSREPL_WAREHOUSE=source_config.warehouse,
        HMSREPL_CMROOT=source_config.cmroot,
        HMSREPL_TRASH_ROOT=source_config.trash_root,
    ) as server:
        d1 = spark_writes_and_the_replica_follows(
            server,
            spark_warehouse,
            {},
            source_config,
            target_config,
            f"{hdfs_root}/src/repl",
            after_overwrite=trash_adopted,
        )
    assert d1.startswith(f"{hdfs_root}/dst/warehouse/")
