"""Each recorded listing's file count and digest, updated by every write's diff (event format 2).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "data_listings",
        sa.Column("tbl_id", sa.BigInteger(), nullable=False),
        sa.Column("part_id", sa.BigInteger(), nullable=False),
        sa.Column("file_count", sa.BigInteger(), nullable=False),
        sa.Column("digest", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("tbl_id", "part_id", name=op.f("pk_data_listings")),
    )


def downgrade() -> None:
    op.drop_table("data_listings")
