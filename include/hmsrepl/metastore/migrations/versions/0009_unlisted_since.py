"""When a write a client declared (an INSERT naming its files) last changed a listing no listing has checked
since: what the listing reconciliation takes, oldest first.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("data_listings", sa.Column("unlisted_since", sa.BigInteger(), nullable=True))
    op.create_index(op.f("ix_data_listings_unlisted_since"), "data_listings", ["unlisted_since"])


def downgrade() -> None:
    op.drop_index(op.f("ix_data_listings_unlisted_since"), table_name="data_listings")
    with op.batch_alter_table("data_listings") as batch_op:  # SQLite drops a column by copying the table
        batch_op.drop_column("unlisted_since")
