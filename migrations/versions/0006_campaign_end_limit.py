"""campaign end_limit: which limit (budget or max_duels) ended a campaign

Revision ID: 0006
Revises: 0005
A campaign that ended on its budget or its duel cap can be continued after the
limit is raised (PATCH /v1/campaigns/{id}); ``end_limit`` records that limit
("budget" or "max_duels"), NULL for every other ending and for running campaigns.
Existing ended rows are filled in from their status and end_reason.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0006'
down_revision: Union[str, None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.add_column(sa.Column('end_limit', sa.String(length=12), nullable=True))
    campaigns = sa.table(
        'campaigns',
        sa.column('status', sa.String),
        sa.column('end_reason', sa.Text),
        sa.column('end_limit', sa.String),
    )
    op.execute(campaigns.update().where(campaigns.c.status == 'budget_exhausted').values(end_limit='budget'))
    op.execute(
        campaigns.update()
        .where(campaigns.c.status == 'stopped', campaigns.c.end_reason.like('max_duels (%) reached'))
        .values(end_limit='max_duels')
    )


def downgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.drop_column('end_limit')
