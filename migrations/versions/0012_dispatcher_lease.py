"""dispatcher_lease: the one active Ray dispatcher; dispatchers_seen: each dispatcher's latest cycle

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 03:45:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    lease = op.create_table(
        "dispatcher_lease",
        sa.Column("name", sa.String(length=20), nullable=False),
        sa.Column("holder", sa.String(length=120), nullable=True),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_dispatcher_lease")),
    )
    # the row every dispatcher competes for with a conditional UPDATE (app/services/cluster/dispatch_lease.py)
    op.bulk_insert(lease, [{"name": "ray"}])
    op.create_table(
        "dispatchers_seen",
        sa.Column("id", sa.String(length=120), nullable=False),
        sa.Column("role", sa.String(length=10), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dispatchers_seen")),
    )
    with op.batch_alter_table("dispatchers_seen", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dispatchers_seen_seen_at"), ["seen_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("dispatchers_seen", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dispatchers_seen_seen_at"))
    op.drop_table("dispatchers_seen")
    op.drop_table("dispatcher_lease")
