"""lesson drafts: the next version of a lesson, saved in the editor and seen by staff only until published

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-08 09:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lesson_drafts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("lesson_id", sa.String(length=64), nullable=False),
        sa.Column("base_version", sa.Integer(), nullable=True),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("author_id", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["author_id"], ["users.id"], name=op.f("fk_lesson_drafts_author_id_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lesson_drafts")),
        sa.UniqueConstraint("lesson_id", name=op.f("uq_lesson_drafts_lesson_id")),
    )


def downgrade() -> None:
    op.drop_table("lesson_drafts")
