"""Each recorded listing's byte total beside its file count, kept per diff: Hive's numFiles and totalSize of
a client write are read from it instead of counting the object's files (NULL until first summed).

Revision ID: 0012_statscost
Revises: 0011_compact39
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_statscost"
down_revision = "0011_compact39"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("data_listings", sa.Column("total_size", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("data_listings") as batch_op:  # SQLite drops a column by copying the table
        batch_op.drop_column("total_size")
