"""lab reports, bundles, grades and grader assignments

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 09:40:38
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bundles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("lab", sa.String(length=40), nullable=False),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("bundle_dir", sa.String(length=255), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name=op.f("fk_bundles_owner_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bundles")),
    )
    with op.batch_alter_table("bundles", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_bundles_owner_id"), ["owner_id"], unique=False)

    op.create_table(
        "grader_assignments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("lesson_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_grader_assignments_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_grader_assignments")),
        sa.UniqueConstraint("user_id", "lesson_id", name=op.f("uq_grader_assignments_user_id")),
    )
    with op.batch_alter_table("grader_assignments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_grader_assignments_user_id"), ["user_id"], unique=False)

    op.create_table(
        "lab_reports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("lesson_id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("draft", sa.JSON(), nullable=False),
        sa.Column("claimed_by_id", sa.Integer(), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["claimed_by_id"], ["users.id"], name=op.f("fk_lab_reports_claimed_by_id_users"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_lab_reports_owner_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lab_reports")),
        sa.UniqueConstraint("owner_id", "lesson_id", name=op.f("uq_lab_reports_owner_id")),
    )
    with op.batch_alter_table("lab_reports", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lab_reports_claimed_by_id"), ["claimed_by_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_lab_reports_lesson_id"), ["lesson_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_lab_reports_owner_id"), ["owner_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_lab_reports_status"), ["status"], unique=False)

    op.create_table(
        "report_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("report_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("lesson_version", sa.Integer(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("answers", sa.JSON(), nullable=False),
        sa.Column("checks", sa.JSON(), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["report_id"], ["lab_reports.id"], name=op.f("fk_report_versions_report_id_lab_reports"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_report_versions")),
        sa.UniqueConstraint("report_id", "number", name=op.f("uq_report_versions_report_id")),
    )
    with op.batch_alter_table("report_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_report_versions_report_id"), ["report_id"], unique=False)

    op.create_table(
        "grades",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("grader_id", sa.Integer(), nullable=True),
        sa.Column("rubric_version", sa.Integer(), nullable=False),
        sa.Column("rubric_hash", sa.String(length=64), nullable=False),
        sa.Column("scores", sa.JSON(), nullable=False),
        sa.Column("total", sa.Double(), nullable=False),
        sa.Column("max_total", sa.Double(), nullable=False),
        sa.Column("feedback", sa.Text(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["grader_id"], ["users.id"], name=op.f("fk_grades_grader_id_users"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["report_versions.id"],
            name=op.f("fk_grades_version_id_report_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_grades")),
        sa.UniqueConstraint("version_id", "revision", name=op.f("uq_grades_version_id")),
    )
    with op.batch_alter_table("grades", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_grades_version_id"), ["version_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("grades", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_grades_version_id"))

    op.drop_table("grades")
    with op.batch_alter_table("report_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_report_versions_report_id"))

    op.drop_table("report_versions")
    with op.batch_alter_table("lab_reports", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lab_reports_status"))
        batch_op.drop_index(batch_op.f("ix_lab_reports_owner_id"))
        batch_op.drop_index(batch_op.f("ix_lab_reports_lesson_id"))
        batch_op.drop_index(batch_op.f("ix_lab_reports_claimed_by_id"))

    op.drop_table("lab_reports")
    with op.batch_alter_table("grader_assignments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_grader_assignments_user_id"))

    op.drop_table("grader_assignments")
    with op.batch_alter_table("bundles", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_bundles_owner_id"))

    op.drop_table("bundles")
