"""Each database's location and managed location lookup keys, indexed: a create checks its location against
the databases around it by index instead of reading every database's document (a warehouse holds hundreds).

Revision ID: 0015_dbkeys
Revises: 0014_versiondirs
"""

import sqlalchemy as sa
from alembic import op

from hmsrepl.formats.json_text import loads
from hmsrepl.metastore.locations import location_key
from hmsrepl.metastore.schema import LocationKey

revision = "0015_dbkeys"
down_revision = "0014_versiondirs"
branch_labels = None
depends_on = None

_KEYS = ("location_key", "managed_location_key")


def _backfill() -> None:
    """Keys for the databases already stored, computed from their documents as the catalog computes them."""
    conn = op.get_bind()
    rows = sa.table("dbs", sa.column("db_id"), sa.column("doc"), *(sa.column(key) for key in _KEYS))
    stmt = (
        sa.update(rows)
        .where(rows.c.db_id == sa.bindparam("b_id"))
        .values(location_key=sa.bindparam("b_key"), managed_location_key=sa.bindparam("b_managed"))
    )
    values = []
    for db_id, doc in conn.execute(sa.select(rows.c.db_id, rows.c.doc)):
        stored = loads(doc)
        values.append(
            {
                "b_id": db_id,
                "b_key": location_key(stored.get("location_uri")),
                "b_managed": location_key(stored.get("managed_location_uri")),
            }
        )
    if values:
        conn.execute(stmt, values)


def upgrade() -> None:
    for key in _KEYS:
        op.add_column("dbs", sa.Column(key, LocationKey, nullable=True))
    _backfill()
    for key in _KEYS:
        op.create_index(op.f(f"ix_dbs_{key}"), "dbs", [key])


def downgrade() -> None:
    for key in _KEYS:
        op.drop_index(op.f(f"ix_dbs_{key}"), table_name="dbs")
    with op.batch_alter_table("dbs") as batch_op:  # SQLite drops a column by copying the table
        for key in _KEYS:
            batch_op.drop_column(key)
