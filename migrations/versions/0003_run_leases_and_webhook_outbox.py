"""run leases and the webhook outbox

Revision ID: 0003
Revises: 0002
A background run's owner and lease (campaigns.run_owner, run_lease_expires_at).
Existing rows get NULL: a run that was active is free to be taken over.
The webhook outbox (webhook_events) and each campaign's signing secret
(campaigns.webhook_secret, NULL for existing campaigns: their requests are signed
with an empty key). A campaign whose webhook was pending or stuck in `sending` gets
an outbox event, so it is delivered after the upgrade.
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: Union[str, None] = "0002"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("campaigns", schema=None) as batch_op:
        batch_op.add_column(sa.Column("run_owner", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("run_lease_expires_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("webhook_secret", sa.String(length=100), nullable=True))
    op.create_table(
        "webhook_events",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("campaign_id", sa.BigInteger(), nullable=False),
        sa.Column("event_type", sa.String(length=40), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("state", sa.String(length=12), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claimed_by", sa.String(length=200), nullable=True),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["campaign_id"], ["campaigns.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("webhook_events", schema=None) as batch_op:
        batch_op.create_index("ix_webhook_events_due", ["state", "next_attempt_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_webhook_events_campaign_id"), ["campaign_id"], unique=False)
    # Webhooks that were due (or left `sending` by a crash) go through the outbox.
    op.execute(
        "INSERT INTO webhook_events (id, campaign_id, event_type, url, payload, state, attempts, "
        "next_attempt_at, created_at) "
        "SELECT 'evt_migrated_' || id, id, 'campaign.ended', webhook_url, NULL, 'pending', 0, "
        "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP FROM campaigns "
        "WHERE webhook_url IS NOT NULL AND webhook_state IN ('pending', 'sending')"
    )
    op.execute("UPDATE campaigns SET webhook_state = 'pending' WHERE webhook_state = 'sending'")


def downgrade() -> None:
    with op.batch_alter_table("webhook_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_webhook_events_campaign_id"))
        batch_op.drop_index("ix_webhook_events_due")
    op.drop_table("webhook_events")
    with op.batch_alter_table("campaigns", schema=None) as batch_op:
        batch_op.drop_column("webhook_secret")
        batch_op.drop_column("run_lease_expires_at")
        batch_op.drop_column("run_owner")
