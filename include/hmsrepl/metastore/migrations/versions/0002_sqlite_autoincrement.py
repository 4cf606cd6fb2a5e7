"""SQLite: never reuse ids of dropped databases, tables, partitions and functions.

Without AUTOINCREMENT SQLite hands out max(id)+1, so dropping the newest table and creating one under the
same name gives it the old id, and readers that compare table ids (the metadata cache, clients holding a
table id) cannot tell the two apart. SQLite cannot alter a table's key, so the tables are rebuilt.
PostgreSQL and MySQL sequences never reuse ids: nothing to do there.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TABLES = ("dbs", "tbls", "partitions", "funcs")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for name in TABLES:
        with op.batch_alter_table(name, recreate="always", table_kwargs={"sqlite_autoincrement": True}):
            pass


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for name in TABLES:
        with op.batch_alter_table(name, recreate="always", table_kwargs={"sqlite_autoincrement": False}):
            pass
