"""Each table's and partition's location lookup key, indexed: an overlap check costs an index range, not a
scan of every stored location (a load creating thousands of tables slowed with each one before).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

from hmsrepl.metastore.locations import location_key
from hmsrepl.metastore.schema import LocationKey

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_BATCH = 1000


def _backfill(table: str, id_column: str) -> None:
    """Keys for the rows already stored, computed as the catalog computes them for new rows."""
    conn = op.get_bind()
    rows = sa.table(table, sa.column(id_column), sa.column("location"), sa.column("location_key"))
    ident = rows.c[id_column]
    stmt = sa.update(rows).where(ident == sa.bindparam("b_id")).values(location_key=sa.bindparam("b_key"))
    last = None
    while True:
        query = sa.select(ident, rows.c.location).where(rows.c.location.is_not(None))
        if last is not None:
            query = query.where(ident > last)
        batch = conn.execute(query.order_by(ident).limit(_BATCH)).all()
        if not batch:
            return
        conn.execute(stmt, [{"b_id": row[0], "b_key": location_key(row[1])} for row in batch])
        last = batch[-1][0]


def upgrade() -> None:
    for table, id_column in (("tbls", "tbl_id"), ("partitions", "part_id")):
        op.add_column(table, sa.Column("location_key", LocationKey, nullable=True))
        _backfill(table, id_column)
        op.create_index(op.f(f"ix_{table}_location_key"), table, ["location_key"])


def downgrade() -> None:
    for table in ("tbls", "partitions"):
        op.drop_index(op.f(f"ix_{table}_location_key"), table_name=table)
        with op.batch_alter_table(table) as batch_op:  # SQLite drops a column by copying the table
            batch_op.drop_column("location_key")
