"""job losses: attempts lost to infrastructure, for the instructor's cluster page

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 14:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_losses",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(length=80), nullable=True),
        sa.Column("node", sa.String(length=120), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(length=10), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_losses_job_id_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_losses")),
    )
    op.create_index(op.f("ix_job_losses_job_id"), "job_losses", ["job_id"], unique=False)
    op.create_index(op.f("ix_job_losses_at"), "job_losses", ["at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_job_losses_at"), table_name="job_losses")
    op.drop_index(op.f("ix_job_losses_job_id"), table_name="job_losses")
    op.drop_table("job_losses")
