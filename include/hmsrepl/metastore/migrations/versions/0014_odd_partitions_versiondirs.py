"""Each table's count of odd partitions counted again under its new rule: a partition is odd when it is not at
its level (as many segments below its table as it has keys; ``metastore.placement``), no longer when it is
elsewhere than ``<table>/<name>``. A replica's version directories (``<table>/<name>.hmsrepl-vN``) are at
their level, so its sibling checks become equality look-ups.

Revision ID: 0014_versiondirs
Revises: 0013_siblings
"""

import sqlalchemy as sa
from alembic import op

from hmsrepl.metastore.placement import RECOUNT_ALL

revision = "0014_versiondirs"
down_revision = "0013_siblings"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.get_bind().execute(RECOUNT_ALL)  # one scan of the stored partitions, counted as the catalog counts


def downgrade() -> None:
    # The earlier rule's counts are not kept: unknown, every sibling check queries until it is counted again.
    op.get_bind().execute(sa.text("UPDATE tbls SET odd_partitions = NULL"))
