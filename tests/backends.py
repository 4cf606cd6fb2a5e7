"""Throwaway metastore databases on the three backends real metastores run on.

Server URLs come from the environment (defaults: the PostgreSQL and MariaDB servers on the project's
machines); each test gets a database of its own, created here and dropped after.

On PostgreSQL a new database is a copy of a template holding the metastore's current schema as
``Metastore.open`` creates it on an empty database (the tables, the seeded sequence rows, Alembic's stamp): a
copy and an open took 0.19 s where an open that creates the schema took 0.43 s, for each of the hundreds of
metastores the suite opens there. The template is made once per server and schema: its name carries a digest
of the schema's DDL, so a changed model gets a template of its own. Tests of migrations ask for an empty
database (``empty=True``).
"""

from __future__ import annotations

import functools
import hashlib
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


def schema_digest() -> str:
    """A digest of the metastore schema's DDL on PostgreSQL and of its Alembic revision."""
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.schema import CreateIndex, CreateTable

    from hmsrepl.metastore.database import SCHEMA_HEAD
    from hmsrepl.metastore.schema import metadata

    dialect = postgresql.dialect()
    digest = hashlib.sha256(SCHEMA_HEAD.encode())
    for table in metadata.sorted_tables:
        digest.update(str(CreateTable(table).compile(dialect=dialect)).encode())
        for index in sorted(table.indexes, key=lambda index: str(index.name)):
            digest.update(str(CreateIndex(index).compile(dialect=dialect)).encode())
    return digest.hexdigest()[:12]


@functools.cache
def postgres_schema_template(admin_url: str) -> str:
    """The name of the server's template database holding the current schema, made unless it exists.

    Made under a name of its own and renamed when complete (a crash leaves no half-made template under the
    final name), with an advisory lock held so that workers starting together make it once."""
    from hmsrepl.metastore.new_schema import create_if_empty

    template = f"hmsrepl_template_{schema_digest()}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(hashtext(:name))"), {"name": template})
            try:
                found = conn.execute(
                    text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": template}
                ).first()
                if found is None:
                    building = f"hmsrepl_building_{uuid.uuid4().hex[:12]}"
                    conn.execute(text(f'CREATE DATABASE "{building}"'))
                    create_if_empty(
                        make_url(admin_url).set(database=building).render_as_string(hide_password=False)
                    )
                    conn.execute(text(f'ALTER DATABASE "{building}" RENAME TO "{template}"'))
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(hashtext(:name))"), {"name": template})
    finally:
        admin.dispose()
    return template


@contextmanager
def temporary_database(
    backend: str,
    tmp_dir: str,
    *,
    driver: str | None = None,
    mysql_collation: str = "utf8mb4_bin",
    empty: bool = False,
) -> Iterator[str]:
    """Yield the URL of a new database on ``backend``; drop it afterwards. On PostgreSQL it holds the
    metastore's current schema unless ``empty`` (the module's docstring says why); elsewhere it is empty.
    ``driver``: the DB-API driver the URL names instead of the server URL's (``pymysql`` or ``mysqldb`` on
    MariaDB); ``mysql_collation``: the utf8mb4 collation of a MariaDB database, which its tables' text
    columns take."""
    name = f"hmsrepl_t_{uuid.uuid4().hex[:12]}"
    if backend == "sqlite":
        yield f"sqlite:///{tmp_dir}/{name}.db"
        return
    admin_url = POSTGRES_ADMIN_URL if backend == "postgres" else MYSQL_ADMIN_URL
    template = None if empty or backend != "postgres" else postgres_schema_template(admin_url)
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if backend == "postgres":
            conn.execute(text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
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
