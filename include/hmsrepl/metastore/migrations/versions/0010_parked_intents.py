"""When a file intent was found to be one that can never succeed (a path the file system refuses): kept for the
operator, no longer retried by housekeeping.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("file_intents", sa.Column("parked_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("file_intents") as batch_op:  # SQLite drops a column by copying the table
        batch_op.drop_column("parked_at")
