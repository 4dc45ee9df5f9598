"""part progress: the lesson version a learner last opened each part under, for the "updated since" notice

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 20:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # existing rows keep NULL: the version they were read under is not known, so they never lead to a notice
    with op.batch_alter_table("part_progress", schema=None) as batch_op:
        batch_op.add_column(sa.Column("version_seen", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("part_progress", schema=None) as batch_op:
        batch_op.drop_column("version_seen")
