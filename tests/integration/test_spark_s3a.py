"""Spark writes a warehouse on S3 through S3A and our metastore, and the replica verifies equal.

Spark runs as users run it on S3: pyspark with ``hadoop-aws`` and the AWS SDK bundle fetched from Maven
Central (``tests/peers/s3a.py``), the README's writer settings and its S3A settings, against a real
S3-protocol server process (moto) with a versioned bucket. The source metastore is a server process whose
warehouse and cmroot are in that bucket; the replica's are in another. Between the bootstrap and the
incremental dump Spark overwrites a partition (and appends to the other), so the incremental load has to
replay both; ``verify`` compares every file's checksum, and the replica's Parquet rows are read back from its
bucket and compared with what Spark reads from the source.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.config import MetastoreConfig
from tests.peers import maven, s3a
from tests.s3server import S3Server, create_bucket, new_bucket_name
from tests.servers import metastore_server
from tests.spark_store_replication import spark_writes_and_the_replica_follows

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def s3a_jars() -> Path:
    """The pinned hadoop-aws set, fetched once into var/peers (skipped only when Maven Central is unreachable)."""
    if not s3a.JARS.is_cached() and not maven.central_reachable():
        pytest.skip("Maven Central is unreachable and hadoop-aws is not cached in var/peers")
    return maven.fetch(s3a.JARS).jars


def test_spark_writes_s3_through_s3a_and_the_replica_verifies_equal(
    s3a_jars: Path, s3_env: S3Server, s3_client: Any, tmp_path: Path
) -> None:
    src_bucket = create_bucket(s3_client, new_bucket_name("spark-src"), versioned=True)
    dst_bucket = create_bucket(s3_client, new_bucket_name("spark-dst"), versioned=True)
    settings = {
        "spark.jars": s3a.spark_jars(s3a_jars),
        **s3a.s3a_settings(
            s3_env.endpoint_url, os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
        ),
    }
    spark_warehouse = f"s3a://{src_bucket}/warehouse"  # as Spark users spell it
    source_config = MetastoreConfig(
        db_url=f"sqlite:///{tmp_path}/source.db",
        warehouse=spark_warehouse,
        cmroot=f"s3://{src_bucket}/cmroot",
    )
    target_config = MetastoreConfig(
        db_url=f"sqlite:///{tmp_path}/replica.db",
        warehouse=f"s3://{dst_bucket}/warehouse",
        cmroot=f"s3://{dst_bucket}/cmroot",
    )
    with metastore_server(
        tmp_path / "source",
        source_config.db_url,
        HMSREPL_WAREHOUSE=source_config.warehouse,
        HMSREPL_CMROOT=source_config.cmroot,
    ) as server:
        d1 = spark_writes_and_the_replica_follows(
            server, spark_warehouse, settings, source_config, target_config, str(tmp_path / "dumps")
        )
    assert d1.startswith(f"s3://{dst_bucket}/warehouse/")
