"""storage quota: stored bytes per uploaded bundle, and per-learner limits on stored uploads

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# app/services/jobs/limits.py DEFAULTS: rows made before the quota existed get it, rather than NULL ("no limit"),
# so an upgrade never lifts a limit nobody chose to lift.
DEFAULT_STORED_MIB = 200
DEFAULT_STORED_BUNDLES = 50


def upgrade() -> None:
    with op.batch_alter_table("bundles", schema=None) as batch_op:
        batch_op.add_column(sa.Column("stored_bytes", sa.BigInteger(), nullable=False, server_default="0"))
    # What an earlier upload takes on disk is not known here (the data dir is the app's setting, not the
    # migration's); its compressed size is the closest figure in the database, and never more than it stores.
    op.execute("UPDATE bundles SET stored_bytes = size_bytes")
    with op.batch_alter_table("queue_limits", schema=None) as batch_op:
        batch_op.add_column(sa.Column("max_stored_mib", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("max_stored_bundles", sa.Integer(), nullable=True))
    op.execute(
        f"UPDATE queue_limits SET max_stored_mib = {DEFAULT_STORED_MIB}, max_stored_bundles = {DEFAULT_STORED_BUNDLES}"
    )


def downgrade() -> None:
    with op.batch_alter_table("queue_limits", schema=None) as batch_op:
        batch_op.drop_column("max_stored_bundles")
        batch_op.drop_column("max_stored_mib")
    with op.batch_alter_table("bundles", schema=None) as batch_op:
        batch_op.drop_column("stored_bytes")
