"""Compactions of insert-only tables: what the initiator queued, what a worker compacted, what was cleaned.

Revision ID: 0011_compact39
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_compact39"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "compaction_queue",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("db_name", sa.String(length=128), nullable=False),
        sa.Column("tbl_name", sa.String(length=256), nullable=False),
        sa.Column("part_name", sa.String(length=700), nullable=True),
        sa.Column("type", sa.String(length=8), nullable=False),
        sa.Column("state", sa.String(length=24), nullable=False),
        sa.Column("highest_write_id", sa.BigInteger(), nullable=True),
        sa.Column("txn_id", sa.BigInteger(), nullable=True),
        sa.Column("next_txn_id", sa.BigInteger(), nullable=True),
        sa.Column("base_dir", sa.String(length=700), nullable=True),
        sa.Column("worker", sa.String(length=128), nullable=True),
        sa.Column("enqueued_at", sa.BigInteger(), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=True),
        sa.Column("ended_at", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_compaction_queue")),
    )
    op.create_index(op.f("ix_compaction_queue_state"), "compaction_queue", ["state"])


def downgrade() -> None:
    op.drop_index(op.f("ix_compaction_queue_state"), table_name="compaction_queue")
    op.drop_table("compaction_queue")
