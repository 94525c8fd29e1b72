"""webhook events: which a campaign's webhook receives, and the campaign.settled still to write

Revision ID: 0036
Revises: 0035
``campaigns.webhook_events``: the events the campaign's webhook receives, comma-joined
(``campaign.ended``, ``campaign.settled``); NULL, every campaign made before it: ``campaign.ended``
alone, as before. ``campaigns.webhook_settle_due``: an ending of a campaign subscribed to
``campaign.settled`` whose event is not written yet (it is, once the spend is final:
service/campaigns/webhooks.py). False for every existing campaign, so no event is sent for an
ending from before the upgrade.
"""

from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = "0036"
down_revision: Union[str, None] = "0035"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("webhook_events", sa.String(100), nullable=True))
        batch.add_column(sa.Column("webhook_settle_due", sa.Boolean(), nullable=False, server_default=sa.false()))
    # the keeper's every heartbeat looks for the campaigns waiting for their campaign.settled
    op.create_index("ix_campaigns_webhook_settle_due", "campaigns", ["webhook_settle_due"])


def downgrade() -> None:
    op.drop_index("ix_campaigns_webhook_settle_due", table_name="campaigns")
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("webhook_settle_due")
        batch.drop_column("webhook_events")
