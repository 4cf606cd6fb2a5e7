"""Alembic environment: migrations run online against the URL the metastore was configured with."""

from typing import Any

from alembic import context

from hmsrepl.metastore.database import make_engine
from hmsrepl.metastore.schema import metadata

config = context.config
connectable = config.attributes.get("connection")
if connectable is None:
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("the Alembic configuration names no sqlalchemy.url and passes no connection")
    engine = make_engine(url)
    with engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            # Rebuilding a table (SQLite's only way to change one) drops it; with foreign keys enforced that
            # would fail for referenced tables. The pragma works only outside a transaction: set it raw.
            driver: Any = connection.connection.driver_connection  # sqlite3.Connection
            driver.execute("PRAGMA foreign_keys=OFF")
        context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()
else:
    context.configure(connection=connectable, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
