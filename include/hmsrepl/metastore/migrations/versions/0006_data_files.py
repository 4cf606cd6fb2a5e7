"""Each table's and partition's recorded data files (event format 2: writes log only what changed).

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "data_files",
        sa.Column("tbl_id", sa.BigInteger(), nullable=False),
        sa.Column("part_id", sa.BigInteger(), nullable=False),
        sa.Column("rel_path", sa.String(length=700), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mtime_ns", sa.BigInteger(), nullable=False),
        sa.Column("checksum", sa.String(length=64), nullable=False),
        sa.Column("version_id", sa.String(length=1024), nullable=True),
        sa.PrimaryKeyConstraint("tbl_id", "part_id", "rel_path", name=op.f("pk_data_files")),
    )


def downgrade() -> None:
    op.drop_table("data_files")
