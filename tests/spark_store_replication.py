"""Spark writes a warehouse through our metastore on some store, and a replica verifies equal: the scenario
the store tests share.

Spark runs in a process of its own against a metastore server; between the bootstrap and the incremental dump
it overwrites a partition and appends to the other, so the incremental load replays both. ``verify`` compares
every file's checksum, and the replica's Parquet rows are read back from its store and compared with what Spark
reads from the source.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow.parquet as pq

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from hmsrepl.replication.load import repl_status
from hmsrepl.replication.verify import verify
from hmsrepl.storage import filesystem_for
from tests.servers import REPO, RunningMetastore

SPARK_STATEMENTS = REPO / "tests" / "integration" / "spark_statements.py"
RESULT_PREFIX = "RESULT "


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


FIRST_ROWS = [[1, "a", "d1"], [2, "b", "d1"], [3, "c", "d2"], [4, "d", "d2"]]


def spark_writes_and_the_replica_follows(
    server: RunningMetastore,
    spark_warehouse: str,
    settings: dict[str, str],
    source_config: MetastoreConfig,
    target_config: MetastoreConfig,
    dump_root: str,
    after_overwrite: Callable[[], None] = lambda: None,
) -> str:
    """Spark creates ``shop.orders`` and inserts; bootstrap into ``shop_dr``; Spark overwrites ``d1`` and
    appends to ``d2`` (``after_overwrite`` checks what the store did with the old files); incremental. The
    replica equals the source after each load, rows included. The replica's ``d1`` location."""
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
        engine = ReplicationEngine(dump_root, source, target)
        bootstrap = engine.execute("REPL DUMP shop")
        engine.execute(f"REPL LOAD shop_dr FROM '{bootstrap.dump_dir}'")
        assert verify(source, "shop", target, "shop_dr") == []
        assert replica_rows(target, "shop_dr", "orders") == FIRST_ROWS

    [_, _, read_back] = spark_sql(
        server,
        spark_warehouse,
        settings,
        "INSERT OVERWRITE TABLE shop.orders PARTITION (day = 'd1') VALUES (10, 'x')",
        "INSERT INTO shop.orders PARTITION (day = 'd2') VALUES (5, 'e')",
        "SELECT id, item, day FROM shop.orders ORDER BY id",
    )
    assert read_back == [[3, "c", "d2"], [4, "d", "d2"], [5, "e", "d2"], [10, "x", "d1"]]
    after_overwrite()

    with opened(source_config) as source, opened(target_config) as target:
        engine = ReplicationEngine(dump_root, source, target)
        incremental = engine.execute(f"REPL DUMP shop FROM {bootstrap.last_event_id}")
        engine.execute(f"REPL LOAD shop_dr FROM '{incremental.dump_dir}'")
        assert verify(source, "shop", target, "shop_dr") == []
        assert repl_status(target, "shop_dr") == source.get_current_notification_event_id()
        assert replica_rows(target, "shop_dr", "orders") == sorted(read_back)
        return target.catalog.get_partition("shop_dr", "orders", ["d1"]).sd.location
