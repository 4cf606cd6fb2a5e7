"""Fixtures of the replication tests: a SQLite source, a replica on each backend, and the engine between them.

A module that needs other metastores (ACID sources on each backend, SQLite replicas for subprocesses)
defines its own ``source``/``target``/``engine``, which take precedence over these.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hmsrepl.metastore import Metastore
from hmsrepl.replication.engine import ReplicationEngine
from tests.backends import temporary_database
from tests.helpers import open_replica, open_sqlite_source


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Metastore]:
    store = open_sqlite_source(tmp_path)
    yield store
    store.close()


@pytest.fixture
def target(backend: str, tmp_path: Path) -> Iterator[Metastore]:
    """The replica's metastore, on each backend."""
    with temporary_database(backend, str(tmp_path)) as url:
        store = open_replica(url, tmp_path)
        yield store
        store.close()


@pytest.fixture
def engine(source: Metastore, target: Metastore, tmp_path: Path) -> ReplicationEngine:
    return ReplicationEngine(str(tmp_path / "dumps"), source, target)
