"""part progress: when the page last reported reading time for a part, what bounds the next report

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07 20:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # existing rows keep NULL: their next report is bounded by the one-report cap alone
    with op.batch_alter_table("part_progress", schema=None) as batch_op:
        batch_op.add_column(sa.Column("time_reported_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("part_progress", schema=None) as batch_op:
        batch_op.drop_column("time_reported_at")
