"""Replication bookkeeping on targets: the source-to-target txn map and the replication metrics.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

LONG_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "repl_txn_map",
        sa.Column("replica_db", sa.String(length=128), nullable=False),
        sa.Column("src_txn_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("target_txn_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("replica_db", "src_txn_id", name=op.f("pk_repl_txn_map")),
    )
    op.create_table(
        "repl_metrics",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("policy", sa.String(length=256), nullable=False),
        sa.Column("dump_id", sa.String(length=256), nullable=False),
        sa.Column("operation", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("from_event_id", sa.BigInteger(), nullable=True),
        sa.Column("to_event_id", sa.BigInteger(), nullable=True),
        sa.Column("last_event_id", sa.BigInteger(), nullable=True),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("tables", sa.BigInteger(), nullable=False),
        sa.Column("partitions", sa.BigInteger(), nullable=False),
        sa.Column("files", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("stages", LONG_TEXT, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", LONG_TEXT, nullable=True),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("finished_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_repl_metrics")),
    )
    with op.batch_alter_table("repl_metrics", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_repl_metrics_policy_id"), ["policy", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("repl_metrics", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_repl_metrics_policy_id"))
    op.drop_table("repl_metrics")
    op.drop_table("repl_txn_map")
