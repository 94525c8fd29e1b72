"""duels by campaign, status and id: the judged log read in id order, a page at a time

Revision ID: 0035
Revises: 0034
``ix_duels_campaign_status`` (campaign_id, status) becomes ``ix_duels_campaign_status_id``
(campaign_id, status, id): the export, the style fit and the judge bias read a campaign's judged
duels a page at a time in id order (keyset on the id, service/campaigns/export_stream.py). On
PostgreSQL the two-column index found every judged duel of the campaign for each page and sorted
them (a page of 1,000 at 50,000 duels: 80 ms, so the export's 100 pages were O(n^2)); with the id in
the index a page is a range of it. SQLite's indexes end with the rowid (the id) already: the same
plans there. The new index serves every query the old one did.
"""

from typing import Sequence, Union

from alembic import op

revision: str = "0035"
down_revision: Union[str, None] = "0034"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_index("ix_duels_campaign_status_id", "duels", ["campaign_id", "status", "id"])
    op.drop_index("ix_duels_campaign_status", table_name="duels")


def downgrade() -> None:
    op.create_index("ix_duels_campaign_status", "duels", ["campaign_id", "status"])
    op.drop_index("ix_duels_campaign_status_id", table_name="duels")
