"""annotator skips and vote comments

Revision ID: 0014
Revises: 0012
The duel's ``comment`` (an optional note an annotator leaves with a vote; exported)
and the ``duel_skips`` table: one row per (duel, annotator) skip, so a skipped duel
goes back to the pool and is never handed to the same annotator again, and the
annotator list can count skips.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = '0014'
down_revision: Union[str, None] = '0012'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('duels', schema=None) as batch_op:
        batch_op.add_column(sa.Column('comment', sa.Text(), nullable=True))
    op.create_table(
        'duel_skips',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), primary_key=True, autoincrement=True),
        sa.Column('campaign_id', sa.BigInteger(), sa.ForeignKey('campaigns.id', ondelete='CASCADE'), nullable=False),
        sa.Column('duel_id', sa.BigInteger(), sa.ForeignKey('duels.id', ondelete='CASCADE'), nullable=False),
        sa.Column('annotator', sa.String(length=40), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint('duel_id', 'annotator', name='uq_duel_skips_duel_annotator'),
    )
    op.create_index('ix_duel_skips_campaign_annotator', 'duel_skips', ['campaign_id', 'annotator'])


def downgrade() -> None:
    op.drop_index('ix_duel_skips_campaign_annotator', table_name='duel_skips')
    op.drop_table('duel_skips')
    with op.batch_alter_table('duels', schema=None) as batch_op:
        batch_op.drop_column('comment')
