"""Locks (Hive's HIVE_LOCKS and NEXT_LOCK_ID) and table/partition column statistics.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

LONG_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "hive_locks",
        sa.Column("lock_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("component", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("txn_id", sa.BigInteger(), nullable=False),
        sa.Column("db_name", sa.String(length=128), nullable=False),
        sa.Column("tbl_name", sa.String(length=256), nullable=True),
        sa.Column("part_name", sa.String(length=700), nullable=True),
        sa.Column("state", sa.String(length=1), nullable=False),
        sa.Column("lock_type", sa.String(length=1), nullable=False),
        sa.Column("operation", sa.String(length=16), nullable=True),
        sa.Column("last_heartbeat", sa.BigInteger(), nullable=False),
        sa.Column("acquired_at", sa.BigInteger(), nullable=True),
        sa.Column("user_name", sa.String(length=128), nullable=False),
        sa.Column("host_name", sa.String(length=128), nullable=False),
        sa.Column("agent_info", sa.String(length=256), nullable=True),
        sa.Column("heartbeat_count", sa.Integer(), nullable=False),
        sa.Column("blocked_by", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("lock_id", "component", name=op.f("pk_hive_locks")),
    )
    op.create_index(op.f("ix_hive_locks_db_name_tbl_name"), "hive_locks", ["db_name", "tbl_name"])
    op.create_index(op.f("ix_hive_locks_txn_id"), "hive_locks", ["txn_id"])
    lock_sequence = op.create_table(
        "lock_sequence",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("next_lock_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lock_sequence")),
    )
    op.bulk_insert(lock_sequence, [{"id": 1, "next_lock_id": 1}])
    op.create_table(
        "column_stats",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("tbl_id", sa.BigInteger(), nullable=False),
        sa.Column("part_id", sa.BigInteger(), nullable=True),
        sa.Column("part_key", sa.BigInteger(), nullable=False),
        sa.Column("col_name", sa.String(length=128), nullable=False),
        sa.Column("col_type", sa.String(length=128), nullable=False),
        sa.Column("engine", sa.String(length=32), nullable=False),
        sa.Column("stats", LONG_TEXT, nullable=False),
        sa.Column("last_analyzed", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tbl_id"], ["tbls.tbl_id"], name=op.f("fk_column_stats_tbl_id_tbls"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["part_id"],
            ["partitions.part_id"],
            name=op.f("fk_column_stats_part_id_partitions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_column_stats")),
        sa.UniqueConstraint(
            "tbl_id",
            "part_key",
            "col_name",
            "engine",
            name=op.f("uq_column_stats_tbl_id_part_key_col_name_engine"),
        ),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_column_stats_part_id"), "column_stats", ["part_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_column_stats_part_id"), table_name="column_stats")
    op.drop_table("column_stats")
    op.drop_table("lock_sequence")
    op.drop_index(op.f("ix_hive_locks_txn_id"), table_name="hive_locks")
    op.drop_index(op.f("ix_hive_locks_db_name_tbl_name"), table_name="hive_locks")
    op.drop_table("hive_locks")
