"""Throwaway metastore databases on the three backends real metastores run on.

Server URLs come from the environment (defaults: the PostgreSQL and MariaDB servers on the project's
machines); each test gets a database of its own, created here and dropped after.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

if TYPE_CHECKING:
    from hmsrepl.metastore import Metastore

POSTGRES_ADMIN_URL = os.environ.get(
    "HMSREPL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
MYSQL_ADMIN_URL = os.environ.get("HMSREPL_TEST_MYSQL_URL", "mysql+mysqldb://root@127.0.0.1:3306/test")
BACKENDS = ("sqlite", "postgres", "mysql")


@contextmanager
def temporary_database(
    backend: str, tmp_dir: str, *, driver: str | None = None, mysql_collation: str = "utf8mb4_bin"
) -> Iterator[str]:
    """Yield the URL of a new, empty database on ``backend``; drop it afterwards. ``driver``: the DB-API
    driver the URL names instead of the server URL's (``pymysql`` or ``mysqldb`` on MariaDB);
    ``mysql_collation``: the utf8mb4 collation of a MariaDB database, which its tables' text columns take."""
    name = f"hmsrepl_t_{uuid.uuid4().hex[:12]}"
    if backend == "sqlite":
        yield f"sqlite:///{tmp_dir}/{name}.db"
        return
    admin_url = POSTGRES_ADMIN_URL if backend == "postgres" else MYSQL_ADMIN_URL
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if backend == "postgres":
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        else:
            conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE {mysql_collation}"))
    try:
        url = make_url(admin_url).set(database=name)
        if driver is not None:
            url = url.set(drivername=f"{url.get_backend_name()}+{driver}")
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            if backend == "postgres":
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            else:
                conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()


def metastore_on(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Metastore]:
    """For a fixture parametrized by backend name: marks the test with its backend (so ``-m`` selects it)
    and yields a metastore on a throwaway database of that backend, closed afterwards."""
    from hmsrepl.metastore import Metastore
    from tests.conftest import make_config

    if request.param != "sqlite":
        request.applymarker(getattr(pytest.mark, request.param))
    with temporary_database(request.param, str(tmp_path)) as url:
        opened = Metastore.open(make_config(url, tmp_path))
        try:
            yield opened
        finally:
            opened.close()
