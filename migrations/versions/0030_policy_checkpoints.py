"""policy checkpoints: the event the stored policy state is at, and the duel log's order indexes

Revision ID: 0030
Revises: 0026
``campaigns.state_seq``: the ``event_seq`` at which ``policy_state``, ``counts`` and ``stats``
were written (the state is written every few records, service/campaigns/policy_log.py; the
policy at ``event_seq`` is that state plus the duels' selections and records after it).
Existing campaigns wrote their state with every policy call: their state is at ``event_seq``.
The two indexes read a campaign's log after a sequence number.
"""

from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = "0030"
down_revision: Union[str, None] = "0026"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("state_seq", sa.Integer(), nullable=False, server_default="0"))
    op.execute("UPDATE campaigns SET state_seq = event_seq")
    op.create_index("ix_duels_campaign_select_seq", "duels", ["campaign_id", "select_seq"])
    op.create_index("ix_duels_campaign_record_seq", "duels", ["campaign_id", "record_seq"])


def downgrade() -> None:
    op.drop_index("ix_duels_campaign_record_seq", table_name="duels")
    op.drop_index("ix_duels_campaign_select_seq", table_name="duels")
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("state_seq")
