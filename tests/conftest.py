"""Fixtures shared by every test: metastores on real databases, and one SparkSession per run."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from tests.backends import BACKENDS, temporary_database
from tests.file_order import file_seconds, hand_out_order
from tests.peers.spark_class_archive import (
    BASE_OPTIONS,
    JVM_HOME,
    spark_jvm_options,
    start_spark_archive_build,
)

# One definition of the session's KDC for every test directory: a session fixture imported into two modules is
# two fixtures, two KDCs in one worker, and the second one's KRB5_CONFIG would send the first one's clients to
# a realm with other keys ("Decrypt integrity check failed").
from tests.security.kdc import kdc  # noqa: F401 - a fixture
from tests.servers import RunningMetastore, metastore_server

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Every Spark JVM a test starts (sessions, the apps' spark-submit, the DAGs' tasks) compiles with the quick
# compiler alone, as the test peers do, and maps its classes from the run's class archive once it exists
# (tests/peers/spark_class_archive.py). A session's start and first jobs: 25.6 -> 14.3 CPU seconds with the
# quick compiler, 11.6 with the archive too. Options set by the caller are kept.
_OWN_SPARK_OPTIONS = spark_jvm_options()
CALLER_SPARK_OPTIONS = os.environ.get("SPARK_SUBMIT_OPTS", BASE_OPTIONS) not in (
    BASE_OPTIONS,
    _OWN_SPARK_OPTIONS,
)
os.environ.setdefault("SPARK_SUBMIT_OPTS", _OWN_SPARK_OPTIONS)
# The tests' metastores adopt trashed files from the trash of the tests' Spark JVMs, not the user's ~/.Trash
# (spark_class_archive.JVM_HOME says why); JVMs started with the caller's options trash into the user's home.
if not CALLER_SPARK_OPTIONS:
    JVM_HOME.mkdir(parents=True, exist_ok=True)
    os.environ["HMSREPL_TRASH_ROOT"] = str(JVM_HOME / ".Trash")
# Loads retire replaced directories at once in tests (production waits for readers: 60 s by default).
os.environ.setdefault("HMSREPL_REPL_RETIRE_GRACE_SECONDS", "0")
# py4j logs at INFO from finalisers run at interpreter exit, after pytest closed the captured streams.
logging.getLogger("py4j").setLevel(logging.WARNING)
pytest.register_assert_rewrite("tests.s3server", "tests.hdfscluster")
pytest_plugins = ["tests.s3server", "tests.hdfscluster"]  # S3-protocol server, MiniDFSCluster


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Run the test once per metastore backend (SQLite, PostgreSQL, MySQL/MariaDB)."""
    if request.param in ("postgres", "mysql"):
        request.applymarker(getattr(pytest.mark, request.param))
    return request.param


@pytest.fixture
def db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A new database on the backend: on PostgreSQL it already holds the metastore's schema (tests/backends.py
    says why)."""
    with temporary_database(backend, str(tmp_path)) as url:
        yield url


@pytest.fixture
def empty_db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A new database without any table, on every backend: for tests of migrations."""
    with temporary_database(backend, str(tmp_path), empty=True) as url:
        yield url


def make_config(db_url: str, root: Path, **overrides: object) -> MetastoreConfig:
    return MetastoreConfig(
        db_url=db_url,
        warehouse=str(root / "warehouse"),
        cmroot=str(root / "cmroot"),
        **overrides,
    )


@contextmanager
def metastore_on(backend: str, tmp_path: Path, **database: Any) -> Iterator[Metastore]:
    """A metastore on a new database of ``backend`` made with ``temporary_database``'s options ``database``
    (a driver, a collation), closed and dropped afterwards."""
    with temporary_database(backend, str(tmp_path), **database) as url:
        store = Metastore.open(make_config(url, tmp_path))
        try:
            yield store
        finally:
            store.close()


@pytest.fixture
def metastore(db_url: str, tmp_path: Path) -> Iterator[Metastore]:
    """A metastore with its schema migrated, warehouse and cmroot in the test's temporary directory."""
    store = Metastore.open(make_config(db_url, tmp_path))
    yield store
    store.close()


@pytest.fixture
def sqlite_metastore(tmp_path: Path) -> Iterator[Metastore]:
    """The embedded default: a SQLite file, for tests whose subject is not the database backend."""
    store = Metastore.open(make_config(f"sqlite:///{tmp_path}/metastore.db", tmp_path))
    yield store
    store.close()


@pytest.fixture(scope="session")
def session_metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningMetastore]:
    """One metastore server process for the run, on SQLite: the catalog of the shared SparkSession."""
    root = tmp_path_factory.mktemp("session-metastore")
    with metastore_server(root, f"sqlite:///{root}/metastore.db") as server:
        yield server


@pytest.fixture(scope="session")
def spark(session_metastore: RunningMetastore) -> Iterator[object]:
    """One Hive-enabled SparkSession for the whole run (starting one costs ~10 s), using our metastore.

    Tests that use it create databases with unique names, so they do not see each other's objects.
    """
    from hmsrepl.spark_session import hive_spark_session

    session = hive_spark_session("hmsrepl-tests", session_metastore.uri, session_metastore.warehouse)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def session_store(session_metastore: RunningMetastore) -> Iterator[Metastore]:
    """In-process access to the session metastore's database (same DB the server uses)."""
    store = Metastore(session_metastore.config)
    yield store
    store.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files run longest first (tests/file_order.py says why and from what); a run with Spark tests starts
    building the Spark class archive unless it exists (beside the tests, not before them), and hands out files
    that start no JVM first while it builds. A stable sort: every file keeps its own tests' order."""
    starts_jvm = {
        item.path for item in items if item.get_closest_marker("spark") or item.get_closest_marker("trino")
    }
    seconds = {path: file_seconds(path, path in starts_jvm) for path in {item.path for item in items}}
    building = (
        not CALLER_SPARK_OPTIONS
        and any(item.get_closest_marker("spark") for item in items)
        and start_spark_archive_build()
    )
    rank = {
        path: index
        for index, path in enumerate(hand_out_order(seconds, starts_jvm, archive_building=building))
    }
    items.sort(key=lambda item: rank[item.path])


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the test's fixtures start a JVM: the Spark class archive from the moment another worker built it."""
    if not CALLER_SPARK_OPTIONS:
        os.environ["SPARK_SUBMIT_OPTS"] = spark_jvm_options()
