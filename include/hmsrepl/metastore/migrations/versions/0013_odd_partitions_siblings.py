"""Each table's count of partitions that are not at their default place (``metastore.placement``): with none,
adding partitions at their default places needs no look-up of the stored ones for the sibling check.

Revision ID: 0013_siblings
Revises: 0012_statscost
"""

import sqlalchemy as sa
from alembic import op

from hmsrepl.metastore.placement import RECOUNT_ALL

revision = "0013_siblings"
down_revision = "0012_statscost"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tbls", sa.Column("odd_partitions", sa.BigInteger(), nullable=True))
    op.get_bind().execute(RECOUNT_ALL)  # one scan of the stored partitions, counted as the catalog counts


def downgrade() -> None:
    with op.batch_alter_table("tbls") as batch_op:  # SQLite drops a column by copying the table
        batch_op.drop_column("odd_partitions")
