"""Fixtures shared by every test: metastores on real databases, and one SparkSession per run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.config import MetastoreConfig
from hmsrepl.metastore import Metastore
from tests.backends import BACKENDS, temporary_database

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Run the test once per metastore backend (SQLite, PostgreSQL, MySQL/MariaDB)."""
    if request.param in ("postgres", "mysql"):
        request.applymarker(getattr(pytest.mark, request.param))
    return request.param


@pytest.fixture
def db_url(backend: str, tmp_path: Path) -> Iterator[str]:
    with temporary_database(backend, str(tmp_path)) as url:
        yield url


def make_config(db_url: str, root: Path, **overrides: object) -> MetastoreConfig:
    return MetastoreConfig(
        db_url=db_url,
        warehouse=str(root / "warehouse"),
        cmroot=str(root / "cmroot"),
        **overrides,
    )


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
def spark() -> Iterator[object]:
    """One local SparkSession for the whole run (starting one costs ~10 s)."""
    from hmsrepl.spark_session import local_spark_session

    session = local_spark_session("hmsrepl-tests")
    yield session
    session.stop()
