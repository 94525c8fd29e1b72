"""dashboard logins

Revision ID: 0004
Revises: 0003
One row per sign-in through the /login form (cookie hash, admin-key id, expiry, revocation).
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision: str = "0004"
down_revision: Union[str, None] = "0003"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "dashboard_logins",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    with op.batch_alter_table("dashboard_logins", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_dashboard_logins_expires_at"), ["expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("dashboard_logins", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dashboard_logins_expires_at"))
    op.drop_table("dashboard_logins")
