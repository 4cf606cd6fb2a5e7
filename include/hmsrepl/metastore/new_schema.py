"""A new metastore database gets today's schema in one step: the model's tables, the sequences' first rows,
and Alembic's record of the newest revision.

Replaying every migration on an empty database rebuilds tables SQLite cannot alter in place and loads each
revision's script: some 0.15 s of CPU a database, paid by every metastore a test, a benchmark or a new
deployment creates. The result is the same schema (``tests/integration/test_schema_migrations.py`` builds a
database both ways on each backend and compares tables, columns, keys, indexes and rows); a database that
holds any table at all (an older metastore, or another application's tables) is migrated as before.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from sqlalchemy import insert, inspect

from hmsrepl.metastore.database import alembic_config, make_engine
from hmsrepl.metastore.schema import lock_sequence, metadata, notification_sequence, txn_sequence

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

#: The rows the migrations seed: the single sequence rows every writer locks (ids start at 1, as Hive's do).
SEEDED_ROWS = (
    (notification_sequence, {"id": 1, "next_event_id": 1}),
    (txn_sequence, {"id": 1, "next_txn_id": 1}),
    (lock_sequence, {"id": 1, "next_lock_id": 1}),
)


def create_if_empty(db_url: str) -> bool:
    """Create the current schema, seeded and stamped with the head revision, in one transaction, when the
    database holds no table; False (nothing done) otherwise."""
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            if inspect(conn).get_table_names():
                return False
            metadata.create_all(conn)
            for table, row in SEEDED_ROWS:
                conn.execute(insert(table).values(**row))
            MigrationContext.configure(conn).stamp(migration_scripts(), "head")
        return True
    finally:
        engine.dispose()


@functools.cache
def migration_scripts() -> ScriptDirectory:
    """The migration scripts, read once a process: Alembic loads every revision's file to find the head, which
    was a third of a new database's CPU when read for each one (their location is the same for any URL)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://"))
