import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

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
