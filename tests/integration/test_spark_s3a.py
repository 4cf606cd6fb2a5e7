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

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from hmsrepl.storage import filesystem_for
from tests.peers import maven, s3a
from tests.s3server import S3Server, create_bucket, new_bucket_name
from tests.servers import REPO, RunningMetastore, metastore_server

pytestmark = pytest.mark.spark

SPARK_STATEMENTS = REPO / "tests" / "integration" / "spark_statements.py"
RESULT_PREFIX = "RESULT "


@pytest.fixture(scope="module")
def s3a_jars() -> Path:
    """The pinned hadoop-aws set, fetched once into var/peers (skipped only when Maven Central is unreachable)."""
    if not s3a.JARS.is_cached() and not maven.central_reachable():
        pytest.skip("Maven Central is unreachable and hadoop-aws is not cached in var/peers")
    return maven.fetch(s3a.JARS).jars


def spark_sql(
    server: RunningMetastore, warehouse: str, settings: dict[str, str], *statements: str
) -> list[list[list[Any]]]:
    """Run ``statements`` in a Spark process of their own on ``server``; each one's rows."""
    done = subprocess.run(
        [sys.executable, str(SPARK_STATEMENTS), server.uri, warehouse, json.dumps(settings), *statements],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return [
        json.loads(line[len(RESULT_PREFIX) :])
        for line in done.stdout.splitlines()
        if line.startswith(RESULT_PREFIX)
    ]


@contextmanager
def opened(config: MetastoreConfig) -> Iterator[Metastore]:
    store = Metastore.open(config)
    try:
        yield store
    finally:
        store.close()


def replica_rows(store: Metastore, db: str, table: str) -> list[list[Any]]:
    """The replica's rows, read from the Parquet files in its bucket (id, item, day), sorted by id."""
    rows = []
    for name in store.catalog.get_partition_names(db, table):
        day = name.split("=", 1)[1]
        location = store.catalog.get_partition(db, table, [day]).sd.location
        fs = filesystem_for(location)
        for entry in fs.list_files(location):
            base = entry.uri.rsplit("/", 1)[-1]
            if not base or base.startswith((".", "_")):
                continue  # a directory marker, a commit marker
            with fs.open_read(entry.uri) as stream:
                data = pq.read_table(io.BytesIO(stream.read()))
            ids, items = data["id"].to_pylist(), data["item"].to_pylist()
            rows += [[i, item, day] for i, item in zip(ids, items, strict=True)]
    return sorted(rows)


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
        spark_sql(
            server,
            spark_warehouse,
            settings,
            "CREATE DATABASE shop",
            "CREATE TABLE shop.orders (id INT, item STRING) PARTITIONED BY (day STRING) STORED AS PARQUET",
            "INSERT INTO shop.orders VALUES (1, 'a', 'd1'), (2, 'b', 'd1'), (3, 'c', 'd2')",
            "INSERT INTO shop.orders PARTITION (day = 'd2') VALUES (4, 'd')",
        )
        with opened(source_config) as source, opened(target_config) as target:
            location = source.catalog.get_table("shop", "orders").sd.location
            assert location == f"{spark_warehouse}/shop.db/orders"
            engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
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
            settings,
            "INSERT OVERWRITE TABLE shop.orders PARTITION (day = 'd1') VALUES (10, 'x')",
            "INSERT INTO shop.orders PARTITION (day = 'd2') VALUES (5, 'e')",
            "SELECT id, item, day FROM shop.orders ORDER BY id",
        )
        assert read_back == [[3, "c", "d2"], [4, "d", "d2"], [5, "e", "d2"], [10, "x", "d1"]]

        with opened(source_config) as source, opened(target_config) as target:
            engine = ReplicationEngine(str(tmp_path / "dumps"), source, target)
            incremental = engine.execute(f"REPL DUMP shop FROM {bootstrap.last_event_id}")
            engine.execute(f"REPL LOAD shop_dr FROM '{incremental.dump_dir}'")
            assert verify(source, "shop", target, "shop_dr") == []
            assert repl_status(target, "shop_dr") == source.get_current_notification_event_id()
            assert replica_rows(target, "shop_dr", "orders") == sorted(read_back)
            d1 = target.catalog.get_partition("shop_dr", "orders", ["d1"]).sd.location
            assert d1.startswith(f"s3://{dst_bucket}/warehouse/")
