"""classes: course instances with their members and staff; LMS courses mapped to them; an audit of LTI changes

Everything that was the whole site's moves into one class, "default", so nothing is lost or hidden: every
learner is its learner, every grader its grader, every instructor its instructor, grader assignments and grade
holds are its own, and every LMS course launched so far maps to it. The site-wide roles learner, instructor
and grader go; what remains site-wide is `admin` (an operator) and `author` (edits lessons). An instructor an
operator made (no LMS identity) keeps every power the role had, as admin and author; one an LMS launch made
keeps its class role only, since an LMS must never hold a say over the whole server.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05 09:00:00
"""

import secrets
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

DEFAULT_SLUG = "default"
RANK = {"learner": 1, "grader": 2, "instructor": 3}  # one role per person and class: the strongest they held


def _tables() -> None:
    op.create_table(
        "classes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(length=40), nullable=False),
        sa.Column("title", sa.String(length=120), nullable=False),
        sa.Column("term", sa.String(length=60), nullable=False),
        sa.Column("lesson_ids", sa.JSON(), nullable=True),
        sa.Column("invite_code", sa.String(length=40), nullable=False),
        sa.Column("open_registration", sa.Boolean(), nullable=False),
        sa.Column("created_by_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["created_by_id"], ["users.id"], name=op.f("fk_classes_created_by_id_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_classes")),
        sa.UniqueConstraint("invite_code", name=op.f("uq_classes_invite_code")),
        sa.UniqueConstraint("slug", name=op.f("uq_classes_slug")),
    )
    op.create_table(
        "class_members",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("class_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=12), nullable=False),
        sa.Column("via", sa.String(length=10), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("left_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["class_id"], ["classes.id"], name=op.f("fk_class_members_class_id_classes"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_class_members_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_class_members")),
        sa.UniqueConstraint("class_id", "user_id", name=op.f("uq_class_members_class_id")),
    )
    with op.batch_alter_table("class_members", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_class_members_class_id"), ["class_id"], unique=False)
        batch_op.create_index("ix_class_members_user_id_role", ["user_id", "role"], unique=False)
    op.create_table(
        "lti_contexts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("context_id", sa.String(length=255), nullable=False),
        sa.Column("title", sa.String(length=255), nullable=False),
        sa.Column("class_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["class_id"], ["classes.id"], name=op.f("fk_lti_contexts_class_id_classes"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["platform_id"],
            ["lti_platforms.id"],
            name=op.f("fk_lti_contexts_platform_id_lti_platforms"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_contexts")),
        sa.UniqueConstraint("platform_id", "context_id", name=op.f("uq_lti_contexts_platform_id")),
    )
    with op.batch_alter_table("lti_contexts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_contexts_class_id"), ["class_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_lti_contexts_platform_id"), ["platform_id"], unique=False)
    op.create_table(
        "lti_context_members",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("lti_context_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=12), nullable=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("left_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["lti_context_id"],
            ["lti_contexts.id"],
            name=op.f("fk_lti_context_members_lti_context_id_lti_contexts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_lti_context_members_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_context_members")),
        sa.UniqueConstraint("lti_context_id", "user_id", name=op.f("uq_lti_context_members_lti_context_id")),
    )
    with op.batch_alter_table("lti_context_members", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_context_members_lti_context_id"), ["lti_context_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_lti_context_members_user_id"), ["user_id"], unique=False)
    op.create_table(
        "lti_audit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=True),
        sa.Column("issuer", sa.String(length=255), nullable=False),
        sa.Column("client_id", sa.String(length=255), nullable=False),
        sa.Column("by_id", sa.Integer(), nullable=True),
        sa.Column("by_email", sa.String(length=254), nullable=False),
        sa.Column("via", sa.String(length=10), nullable=False),
        sa.Column("before", sa.JSON(), nullable=False),
        sa.Column("after", sa.JSON(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["by_id"], ["users.id"], name=op.f("fk_lti_audit_by_id_users"), ondelete="SET NULL"),
        sa.ForeignKeyConstraint(
            ["platform_id"],
            ["lti_platforms.id"],
            name=op.f("fk_lti_audit_platform_id_lti_platforms"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_audit")),
    )
    with op.batch_alter_table("lti_audit", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_audit_at"), ["at"], unique=False)


def _class_columns() -> None:
    """class_id on grader assignments, grade holds and LTI links, filled with the default class afterwards."""
    with op.batch_alter_table("grader_assignments", schema=None) as batch_op:
        batch_op.add_column(sa.Column("class_id", sa.Integer(), nullable=True))
    with op.batch_alter_table("grade_holds", schema=None) as batch_op:
        batch_op.add_column(sa.Column("class_id", sa.Integer(), nullable=True))
    with op.batch_alter_table("lti_links", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lti_context_id", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_lti_links_lti_context_id"), ["lti_context_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_lti_links_lti_context_id_lti_contexts"),
            "lti_contexts",
            ["lti_context_id"],
            ["id"],
            ondelete="CASCADE",
        )


def _scope_to_class() -> None:
    with op.batch_alter_table("grader_assignments", schema=None) as batch_op:
        batch_op.alter_column("class_id", existing_type=sa.Integer(), nullable=False)
        batch_op.drop_constraint("uq_grader_assignments_user_id", type_="unique")
        batch_op.create_unique_constraint(
            batch_op.f("uq_grader_assignments_class_id"), ["class_id", "user_id", "lesson_id"]
        )
        batch_op.create_index(batch_op.f("ix_grader_assignments_class_id"), ["class_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_grader_assignments_class_id_classes"), "classes", ["class_id"], ["id"], ondelete="CASCADE"
        )
    with op.batch_alter_table("grade_holds", schema=None) as batch_op:
        batch_op.alter_column("class_id", existing_type=sa.Integer(), nullable=False)
        batch_op.drop_constraint("uq_grade_holds_lesson_id", type_="unique")
        batch_op.create_unique_constraint(batch_op.f("uq_grade_holds_class_id"), ["class_id", "lesson_id"])
        batch_op.create_index(batch_op.f("ix_grade_holds_class_id"), ["class_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_grade_holds_class_id_classes"), "classes", ["class_id"], ["id"], ondelete="CASCADE"
        )


def _move_data() -> None:
    conn = op.get_bind()
    now = datetime.now(UTC)
    classes = sa.table(
        "classes",
        sa.column("id", sa.Integer),
        sa.column("slug", sa.String),
        sa.column("title", sa.String),
        sa.column("term", sa.String),
        sa.column("invite_code", sa.String),
        sa.column("open_registration", sa.Boolean),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    conn.execute(
        classes.insert().values(
            slug=DEFAULT_SLUG,
            title="Default class",
            term="",  # lesson_ids left NULL: the class offers every lesson, as the site did
            # as app/services/classes/registry.py makes them: lowercase, no look-alike characters
            invite_code="".join(secrets.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(10)),
            open_registration=True,  # registering went on joining "the class": it still does
            created_at=now,
        )
    )
    class_id = conn.execute(sa.text("SELECT id FROM classes WHERE slug = :s"), {"s": DEFAULT_SLUG}).scalar_one()

    held: dict[int, str] = {}
    for user_id, role in conn.execute(sa.text("SELECT user_id, role FROM user_roles")):
        if role in RANK and RANK[role] > RANK.get(held.get(user_id, ""), 0):
            held[user_id] = role
    members = sa.table(
        "class_members",
        sa.column("class_id", sa.Integer),
        sa.column("user_id", sa.Integer),
        sa.column("role", sa.String),
        sa.column("via", sa.String),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    if held:
        conn.execute(
            members.insert(),
            [
                {"class_id": class_id, "user_id": uid, "role": role, "via": "migration", "created_at": now}
                for uid, role in sorted(held.items())
            ],
        )
    from_lms = {uid for (uid,) in conn.execute(sa.text("SELECT DISTINCT user_id FROM lti_identities"))}
    operators = sorted(uid for uid, role in held.items() if role == "instructor" and uid not in from_lms)
    site_roles = sa.table("user_roles", sa.column("user_id", sa.Integer), sa.column("role", sa.String))
    conn.execute(sa.text("DELETE FROM user_roles WHERE role IN ('learner', 'instructor', 'grader')"))
    if operators:
        conn.execute(
            site_roles.insert(), [{"user_id": uid, "role": r} for uid in operators for r in ("admin", "author")]
        )

    conn.execute(sa.text("UPDATE grader_assignments SET class_id = :c"), {"c": class_id})
    conn.execute(sa.text("UPDATE grade_holds SET class_id = :c"), {"c": class_id})

    contexts = sa.table(
        "lti_contexts",
        sa.column("platform_id", sa.Integer),
        sa.column("context_id", sa.String),
        sa.column("title", sa.String),
        sa.column("class_id", sa.Integer),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    seen: dict[tuple[int, str], str] = {}
    for platform_id, context_id, title in conn.execute(
        sa.text("SELECT platform_id, context_id, context_title FROM lti_links ORDER BY id")
    ):
        seen.setdefault((platform_id, context_id or ""), title or "")
    for (platform_id, context_id), title in seen.items():
        conn.execute(
            contexts.insert().values(
                platform_id=platform_id, context_id=context_id, title=title, class_id=class_id, created_at=now
            )
        )
    conn.execute(
        sa.text(
            "UPDATE lti_links SET lti_context_id = (SELECT c.id FROM lti_contexts c WHERE c.platform_id = "
            "lti_links.platform_id AND c.context_id = lti_links.context_id)"
        )
    )
    # Whom a link's grades may go to is who the LMS said is in its course. Where a platform has launched from one
    # course only, everyone it launched was in that course; where it has several, nobody is known until the next
    # launch or roster sync (docs/lti.md says to sync each link's roster once after upgrading).
    per_platform: dict[int, list[int]] = {}
    for ctx_id, platform_id in conn.execute(sa.text("SELECT id, platform_id FROM lti_contexts")):
        per_platform.setdefault(platform_id, []).append(ctx_id)
    ctx_members = sa.table(
        "lti_context_members",
        sa.column("lti_context_id", sa.Integer),
        sa.column("user_id", sa.Integer),
        sa.column("role", sa.String),
        sa.column("seen_at", sa.DateTime(timezone=True)),
    )
    for platform_id, ctx_ids in per_platform.items():
        if len(ctx_ids) != 1:
            continue
        users = conn.execute(sa.text("SELECT user_id FROM lti_identities WHERE platform_id = :p"), {"p": platform_id})
        rows = [
            {"lti_context_id": ctx_ids[0], "user_id": uid, "role": held.get(uid), "seen_at": now} for (uid,) in users
        ]
        if rows:
            conn.execute(ctx_members.insert(), rows)

    audit = sa.table(
        "lti_audit",
        sa.column("at", sa.DateTime(timezone=True)),
        sa.column("action", sa.String),
        sa.column("platform_id", sa.Integer),
        sa.column("issuer", sa.String),
        sa.column("client_id", sa.String),
        sa.column("by_email", sa.String),
        sa.column("via", sa.String),
        sa.column("before", sa.JSON),
        sa.column("after", sa.JSON),
        sa.column("note", sa.Text),
    )
    for row in conn.execute(
        sa.text(
            "SELECT id, name, issuer, client_id, auth_login_url, auth_token_url, key_set_url, auth_audience "
            "FROM lti_platforms ORDER BY id"
        )
    ).mappings():
        conn.execute(
            audit.insert().values(
                at=now,
                action="registered",
                platform_id=row["id"],
                issuer=row["issuer"],
                client_id=row["client_id"],
                by_email="",
                via="migration",
                before={},
                after={k: row[k] for k in ("name", "auth_login_url", "auth_token_url", "key_set_url", "auth_audience")},
                note="the registration as it stood when classes came in (changes before then were not recorded)",
            )
        )


def upgrade() -> None:
    _tables()
    _class_columns()
    _move_data()
    _scope_to_class()


def downgrade() -> None:
    conn = op.get_bind()
    # Back to site-wide roles: each person's strongest role in any class; an admin or author was an instructor.
    strongest: dict[int, str] = {}
    for uid, role in conn.execute(sa.text("SELECT user_id, role FROM class_members WHERE left_at IS NULL")):
        if RANK[role] > RANK.get(strongest.get(uid, ""), 0):
            strongest[uid] = role
    for (uid,) in conn.execute(sa.text("SELECT DISTINCT user_id FROM user_roles WHERE role IN ('admin', 'author')")):
        strongest[uid] = "instructor"
    conn.execute(sa.text("DELETE FROM user_roles"))
    site_roles = sa.table("user_roles", sa.column("user_id", sa.Integer), sa.column("role", sa.String))
    rows = [{"user_id": uid, "role": role} for uid, role in sorted(strongest.items())]
    rows += [{"user_id": uid, "role": "learner"} for uid, role in sorted(strongest.items()) if role != "learner"]
    if rows:
        conn.execute(site_roles.insert(), rows)
    # one row per (grader, lesson) and per held lesson, as before classes
    conn.execute(
        sa.text(
            "DELETE FROM grader_assignments WHERE id NOT IN (SELECT MIN(id) FROM grader_assignments "
            "GROUP BY user_id, lesson_id)"
        )
    )
    conn.execute(
        sa.text("DELETE FROM grade_holds WHERE id NOT IN (SELECT MIN(id) FROM grade_holds GROUP BY lesson_id)")
    )
    with op.batch_alter_table("grade_holds", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_grade_holds_class_id_classes"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_grade_holds_class_id"))
        batch_op.drop_constraint(batch_op.f("uq_grade_holds_class_id"), type_="unique")
        batch_op.create_unique_constraint("uq_grade_holds_lesson_id", ["lesson_id"])
        batch_op.drop_column("class_id")
    with op.batch_alter_table("grader_assignments", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_grader_assignments_class_id_classes"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_grader_assignments_class_id"))
        batch_op.drop_constraint(batch_op.f("uq_grader_assignments_class_id"), type_="unique")
        batch_op.create_unique_constraint("uq_grader_assignments_user_id", ["user_id", "lesson_id"])
        batch_op.drop_column("class_id")
    with op.batch_alter_table("lti_links", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_lti_links_lti_context_id_lti_contexts"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_lti_links_lti_context_id"))
        batch_op.drop_column("lti_context_id")
    with op.batch_alter_table("lti_audit", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_audit_at"))
    op.drop_table("lti_audit")
    with op.batch_alter_table("lti_context_members", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_context_members_user_id"))
        batch_op.drop_index(batch_op.f("ix_lti_context_members_lti_context_id"))
    op.drop_table("lti_context_members")
    with op.batch_alter_table("lti_contexts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_contexts_platform_id"))
        batch_op.drop_index(batch_op.f("ix_lti_contexts_class_id"))
    op.drop_table("lti_contexts")
    with op.batch_alter_table("class_members", schema=None) as batch_op:
        batch_op.drop_index("ix_class_members_user_id_role")
        batch_op.drop_index(batch_op.f("ix_class_members_class_id"))
    op.drop_table("class_members")
    op.drop_table("classes")
