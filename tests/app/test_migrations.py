from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from app.core import migrate
from app.core.db import make_engine
from app.core.models import Base

pytestmark = pytest.mark.both_backends  # migrations are DDL in each dialect


def test_upgrade_downgrade_upgrade(db_url):
    migrate.upgrade(db_url)
    engine = make_engine(db_url)
    assert {"users", "user_roles", "jobs"} <= set(inspect(engine).get_table_names())
    migrate.downgrade(db_url, "base")
    assert "jobs" not in inspect(engine).get_table_names()
    migrate.upgrade(db_url)
    engine.dispose()


def test_models_match_migrations(db_url):
    """A model change without its migration fails here rather than in production."""
    migrate.upgrade(db_url)
    engine = make_engine(db_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    engine.dispose()
    assert diff == []


def test_constraint_names_follow_convention(db_url):
    migrate.upgrade(db_url)
    engine = make_engine(db_url)
    fks = inspect(engine).get_foreign_keys("jobs")
    engine.dispose()
    assert [fk["name"] for fk in fks] == ["fk_jobs_owner_id_users"]


def _rows(conn, sql: str, **params) -> list[tuple]:
    return [tuple(r) for r in conn.execute(text(sql), params)]


def test_the_move_to_classes_keeps_everything_and_puts_it_in_one_class(db_url):
    """A server from before classes, with data in it: after 0013 every learner, grader and instructor is that in the
    class "default", its grader assignments, holds and LMS courses are the class's, an operator's instructor keeps
    their powers as admin and author and an LMS-made one does not, and downgrading gives the old roles back."""
    migrate.upgrade(db_url, "0012")
    engine = make_engine(db_url)
    now = datetime.now(UTC)
    with engine.begin() as conn:
        for uid, email in (
            (1, "ann@x.org"),
            (2, "ivy@x.org"),
            (3, "gus@x.org"),
            (4, "lms-ian@x.org"),
            (5, "tia@x.org"),
        ):
            conn.execute(
                text(
                    "INSERT INTO users (id, email, display_name, password_hash, created_at) VALUES (:i, :e, :e, 'h', :t)"
                ),
                {"i": uid, "e": email, "t": now},
            )
        for uid, role in (
            (1, "learner"),
            (2, "instructor"),
            (2, "learner"),
            (3, "grader"),
            (4, "instructor"),
            (5, "learner"),
        ):
            conn.execute(text("INSERT INTO user_roles (user_id, role) VALUES (:u, :r)"), {"u": uid, "r": role})
        conn.execute(
            text("INSERT INTO grader_assignments (user_id, lesson_id, created_at) VALUES (3, 'les-1', :t)"), {"t": now}
        )
        conn.execute(
            text("INSERT INTO grade_holds (lesson_id, held_by_id, created_at) VALUES ('les-1', 2, :t)"), {"t": now}
        )
        conn.execute(
            text(
                "INSERT INTO lti_platforms (id, name, issuer, client_id, auth_login_url, auth_token_url, key_set_url, "
                "created_at) VALUES (1, 'LMS', 'https://lms.x', 'c1', 'https://lms.x/a', 'https://lms.x/t', "
                "'https://lms.x/k', :t)"
            ),
            {"t": now},
        )
        for uid, sub in ((4, "s-ian"), (5, "s-tia")):
            conn.execute(
                text("INSERT INTO lti_identities (platform_id, sub, user_id, created_at) VALUES (1, :s, :u, :t)"),
                {"s": sub, "u": uid, "t": now},
            )
        conn.execute(
            text(
                "INSERT INTO lti_links (platform_id, deployment_id, resource_link_id, context_id, context_title, "
                "target, ags_scopes, updated_at) VALUES (1, 'd', 'r1', 'ctx-1', 'Course one', 'lab:les-1', '[]', :t)"
            ),
            {"t": now},
        )
    engine.dispose()

    migrate.upgrade(db_url)
    engine = make_engine(db_url)
    with engine.connect() as conn:
        ((cid, open_reg),) = _rows(conn, "SELECT id, open_registration FROM classes WHERE slug = 'default'")
        assert open_reg
        members = dict(_rows(conn, "SELECT user_id, role FROM class_members WHERE class_id = :c", c=cid))
        assert members == {1: "learner", 2: "instructor", 3: "grader", 4: "instructor", 5: "learner"}
        site = sorted(_rows(conn, "SELECT user_id, role FROM user_roles"))
        assert site == [(2, "admin"), (2, "author")]  # the LMS-made instructor (4) keeps the class role only
        assert _rows(conn, "SELECT class_id, user_id, lesson_id FROM grader_assignments") == [(cid, 3, "les-1")]
        assert _rows(conn, "SELECT class_id, lesson_id FROM grade_holds") == [(cid, "les-1")]
        ((ctx_id, ctx_class),) = _rows(conn, "SELECT id, class_id FROM lti_contexts WHERE context_id = 'ctx-1'")
        assert ctx_class == cid
        assert _rows(conn, "SELECT lti_context_id FROM lti_links") == [(ctx_id,)]
        # one LMS course on the platform: everyone it launched was in it
        assert sorted(_rows(conn, "SELECT user_id, role FROM lti_context_members")) == [
            (4, "instructor"),
            (5, "learner"),
        ]
        assert _rows(conn, "SELECT action, via FROM lti_audit") == [("registered", "migration")]
    engine.dispose()

    migrate.downgrade(db_url, "0012")
    engine = make_engine(db_url)
    with engine.connect() as conn:
        roles = sorted(_rows(conn, "SELECT user_id, role FROM user_roles"))
        assert roles == [(1, "learner"), (2, "instructor"), (2, "learner"), (3, "grader"), (3, "learner"),
                         (4, "instructor"), (4, "learner"), (5, "learner")]  # fmt: skip
        assert _rows(conn, "SELECT user_id, lesson_id FROM grader_assignments") == [(3, "les-1")]
    engine.dispose()
