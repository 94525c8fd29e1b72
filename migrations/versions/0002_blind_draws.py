"""blind draws and per-annotator limit

Revision ID: 0002
Revises: 0001
Adds campaigns.draw_key (the secret HMAC key of the prompt, side and tie draws;
NULL for existing campaigns, which keep their seed draws) and
campaigns.max_pending_per_annotator (duels an annotator may hold in flight; 1 for
existing campaigns).
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: Union[str, None] = "0001"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("draw_key", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("max_pending_per_annotator", sa.Integer(), nullable=False, server_default="1"))


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("max_pending_per_annotator")
        batch.drop_column("draw_key")
