"""fair queue, per-learner limits, cancel, and the cluster snapshot

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ranks", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(sa.Column("gpus", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("requested_backend", sa.String(length=20), nullable=False, server_default="auto"))
        batch_op.add_column(sa.Column("node", sa.String(length=120), nullable=True))
        batch_op.add_column(sa.Column("placement", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("gpu_seconds", sa.Double(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_jobs_status_owner_id", ["status", "owner_id", "id"], unique=False)
    op.create_table(
        "queue_limits",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("max_in_flight", sa.Integer(), nullable=True),
        sa.Column("max_per_hour", sa.Integer(), nullable=True),
        sa.Column("max_gpu_seconds_per_day", sa.Integer(), nullable=True),
        sa.Column("updated_by_id", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_queue_limits_user_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["updated_by_id"], ["users.id"], name=op.f("fk_queue_limits_updated_by_id_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_limits")),
        sa.UniqueConstraint("user_id", name=op.f("uq_queue_limits_user_id")),
    )
    op.create_table(
        "cluster_nodes",
        sa.Column("node_id", sa.String(length=64), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("alive", sa.Boolean(), nullable=False),
        sa.Column("resources", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("node_id", name=op.f("pk_cluster_nodes")),
    )


def downgrade() -> None:
    op.drop_table("cluster_nodes")
    op.drop_table("queue_limits")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_status_owner_id")
        for column in ("cancel_requested_at", "gpu_seconds", "placement", "node", "requested_backend", "gpus", "ranks"):
            batch_op.drop_column(column)
