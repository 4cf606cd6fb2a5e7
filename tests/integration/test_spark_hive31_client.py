"""Spark with the Hive 3.1.3 metastore client (not its built-in 2.3) runs the Spark catalog tests unchanged.

The client's jars come from Maven Central (``tests/peers/hive31.py``, cached under ``var/peers/``); Spark runs
in a child process (``tests/peers/remote_spark.py``) against a metastore server of this module's own. The
Spark catalog tests then assert, as they do for the built-in client, the rows read back and the metastore's
own state: tables, partitions, the files on disk and every notification event with its file changes.
Finally, the server's log shows that it answered every call this client made.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from tests.integration import test_spark_catalog as catalog_tests
from tests.peers import hive31
from tests.peers.remote_spark import RemoteSpark, remote_spark
from tests.servers import RunningMetastore, metastore_server

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def hive31_jars() -> Path:
    if not hive31.is_cached() and not hive31.central_reachable():
        pytest.skip(
            "Maven Central (repo.maven.apache.org:443) is unreachable and var/peers holds no Hive 3.1.3 client: "
            "run 'python -m tests.peers.hive31' where it is reachable"
        )
    return hive31.fetch().jars


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningMetastore]:
    root = tmp_path_factory.mktemp("hive31-metastore")
    with metastore_server(root, f"sqlite:///{root}/metastore.db") as running:
        yield running


@pytest.fixture(scope="module")
def store(server: RunningMetastore) -> Iterator[Metastore]:
    opened = Metastore(server.config)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def spark31(
    server: RunningMetastore, hive31_jars: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RemoteSpark]:
    root = tmp_path_factory.mktemp("hive31-spark")
    with remote_spark(server.uri, server.warehouse, hive31.spark_settings(hive31_jars), root) as spark:
        yield spark


def unserved_calls(server: RunningMetastore) -> list[str]:
    """Log lines of calls the server did not answer as asked: unknown methods and internal errors."""
    lines = server.log_path.read_text(errors="replace").splitlines()
    return [line for line in lines if "does not serve" in line or "internal error" in line]


def test_spark_loaded_the_hive_31_client(spark31: RemoteSpark) -> None:
    assert spark31.ready["hive_client"] == hive31.HIVE_VERSION
    db = f"probe_{uuid.uuid4().hex[:8]}"
    spark31.sql(f"CREATE DATABASE {db}")
    assert db in [r.namespace for r in spark31.sql("SHOW DATABASES").collect()]
    spark31.sql(f"DROP DATABASE {db}")


def test_spark_sql_workload_through_the_metastore(
    spark31: RemoteSpark, store: Metastore, server: RunningMetastore
) -> None:
    catalog_tests.test_spark_sql_workload_through_the_metastore(spark31, store)
    assert unserved_calls(server) == []


def test_spark_functions_live_in_the_metastore(
    spark31: RemoteSpark, store: Metastore, server: RunningMetastore
) -> None:
    catalog_tests.test_spark_functions_live_in_the_metastore(spark31, store)
    assert unserved_calls(server) == []


def test_spark_reports_missing_objects_clearly(spark31: RemoteSpark, server: RunningMetastore) -> None:
    catalog_tests.test_spark_reports_missing_objects_clearly(spark31)
    assert unserved_calls(server) == []
