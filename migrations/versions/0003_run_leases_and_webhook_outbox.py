"""run leases and the webhook outbox

Revision ID: 0003
Revises: 0001
A background run's owner and lease (campaigns.run_owner, run_lease_expires_at).
Existing rows get NULL: a run that was active is free to be taken over.
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: Union[str, None] = "0001"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("campaigns", schema=None) as batch_op:
        batch_op.add_column(sa.Column("run_owner", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("run_lease_expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("campaigns", schema=None) as batch_op:
        batch_op.drop_column("run_lease_expires_at")
        batch_op.drop_column("run_owner")
