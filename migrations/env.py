"""Alembic environment: the URL comes from the app's settings (or the caller's config)."""

from alembic import context

from app.core.models import Base

config = context.config
url = config.get_main_option("sqlalchemy.url")
if not url:
    from app.core.config import Settings

    url = Settings.from_env().db_url


def run_migrations() -> None:
    from app.core.db import make_engine

    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run(connectable)
        return
    engine = make_engine(url)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


def _run(conn) -> None:
    context.configure(
        connection=conn,
        target_metadata=Base.metadata,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies the table
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
