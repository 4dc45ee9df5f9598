"""lti: registered LMS platforms and deployments, LTI identities, launch state, links, tickets, scores sent

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 23:17:22
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "lti_states",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("value", sa.JSON(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_lti_states")),
    )
    with op.batch_alter_table("lti_states", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_states_expires_at"), ["expires_at"], unique=False)

    op.create_table(
        "lti_platforms",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=80), nullable=False),
        sa.Column("issuer", sa.String(length=255), nullable=False),
        sa.Column("client_id", sa.String(length=255), nullable=False),
        sa.Column("auth_login_url", sa.String(length=500), nullable=False),
        sa.Column("auth_token_url", sa.String(length=500), nullable=False),
        sa.Column("key_set_url", sa.String(length=500), nullable=False),
        sa.Column("auth_audience", sa.String(length=500), nullable=True),
        sa.Column("created_by_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["created_by_id"], ["users.id"], name=op.f("fk_lti_platforms_created_by_id_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_platforms")),
        sa.UniqueConstraint("issuer", "client_id", name=op.f("uq_lti_platforms_issuer")),
    )
    op.create_table(
        "lti_tickets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=500), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_lti_tickets_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_tickets")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_lti_tickets_token_hash")),
    )
    op.create_table(
        "lti_deployments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("deployment_id", sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"],
            ["lti_platforms.id"],
            name=op.f("fk_lti_deployments_platform_id_lti_platforms"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_deployments")),
        sa.UniqueConstraint("platform_id", "deployment_id", name=op.f("uq_lti_deployments_platform_id")),
    )
    with op.batch_alter_table("lti_deployments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_deployments_platform_id"), ["platform_id"], unique=False)

    op.create_table(
        "lti_identities",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("sub", sa.String(length=255), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"],
            ["lti_platforms.id"],
            name=op.f("fk_lti_identities_platform_id_lti_platforms"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_lti_identities_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_identities")),
        sa.UniqueConstraint("platform_id", "sub", name=op.f("uq_lti_identities_platform_id")),
    )
    with op.batch_alter_table("lti_identities", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_identities_platform_id"), ["platform_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_lti_identities_user_id"), ["user_id"], unique=False)

    op.create_table(
        "lti_links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("deployment_id", sa.String(length=255), nullable=False),
        sa.Column("resource_link_id", sa.String(length=255), nullable=False),
        sa.Column("context_id", sa.String(length=255), nullable=False),
        sa.Column("context_title", sa.String(length=255), nullable=False),
        sa.Column("target", sa.String(length=80), nullable=False),
        sa.Column("memberships_url", sa.String(length=500), nullable=True),
        sa.Column("lineitem_url", sa.String(length=500), nullable=True),
        sa.Column("lineitems_url", sa.String(length=500), nullable=True),
        sa.Column("ags_scopes", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"],
            ["lti_platforms.id"],
            name=op.f("fk_lti_links_platform_id_lti_platforms"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_links")),
        sa.UniqueConstraint("platform_id", "resource_link_id", name=op.f("uq_lti_links_platform_id")),
    )
    with op.batch_alter_table("lti_links", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_links_platform_id"), ["platform_id"], unique=False)

    op.create_table(
        "lti_scores_sent",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("link_id", sa.Integer(), nullable=False),
        sa.Column("grade_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["grade_id"], ["grades.id"], name=op.f("fk_lti_scores_sent_grade_id_grades"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["link_id"], ["lti_links.id"], name=op.f("fk_lti_scores_sent_link_id_lti_links"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_lti_scores_sent_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_scores_sent")),
        sa.UniqueConstraint("link_id", "grade_id", name=op.f("uq_lti_scores_sent_link_id")),
    )
    with op.batch_alter_table("lti_scores_sent", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_scores_sent_link_id"), ["link_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("lti_scores_sent", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_scores_sent_link_id"))

    op.drop_table("lti_scores_sent")
    with op.batch_alter_table("lti_links", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_links_platform_id"))

    op.drop_table("lti_links")
    with op.batch_alter_table("lti_identities", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_identities_user_id"))
        batch_op.drop_index(batch_op.f("ix_lti_identities_platform_id"))

    op.drop_table("lti_identities")
    with op.batch_alter_table("lti_deployments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_deployments_platform_id"))

    op.drop_table("lti_deployments")
    op.drop_table("lti_tickets")
    op.drop_table("lti_platforms")
    with op.batch_alter_table("lti_states", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_states_expires_at"))

    op.drop_table("lti_states")
