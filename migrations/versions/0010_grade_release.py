"""grade release: when a saved grade became visible to its learner, and which lessons hold grades until released

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 23:15:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("grades", schema=None) as batch_op:
        batch_op.add_column(sa.Column("released_at", sa.DateTime(timezone=True), nullable=True))
    # every grade saved before holding existed was shown to its learner when it was saved
    op.execute("UPDATE grades SET released_at = created_at")
    op.create_table(
        "grade_holds",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("lesson_id", sa.String(length=64), nullable=False),
        sa.Column("held_by_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["held_by_id"], ["users.id"], name=op.f("fk_grade_holds_held_by_id_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_grade_holds")),
        sa.UniqueConstraint("lesson_id", name=op.f("uq_grade_holds_lesson_id")),
    )


def downgrade() -> None:
    op.drop_table("grade_holds")
    with op.batch_alter_table("grades", schema=None) as batch_op:
        batch_op.drop_column("released_at")
