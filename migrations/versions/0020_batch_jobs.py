"""batch campaigns: the campaign's batch settings and the batches its rounds sent

Revision ID: 0020
Revises: 0017
``campaigns.batch`` (JSON, null for a campaign called one call at a time) and ``batch_jobs``
(one row per batch sent to a provider, written before it is sent: service/campaigns/batch_jobs.py).
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = '0020'
down_revision: Union[str, None] = '0017'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

BigId = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    with op.batch_alter_table('campaigns') as batch_op:
        batch_op.add_column(sa.Column('batch', sa.JSON(), nullable=True))
    op.create_table(
        'batch_jobs',
        sa.Column('id', BigId, primary_key=True, autoincrement=True),
        sa.Column('campaign_id', BigId, sa.ForeignKey('campaigns.id', ondelete='CASCADE'), nullable=False),
        sa.Column('round', sa.Integer(), nullable=False),
        sa.Column('phase', sa.String(length=12), nullable=False),
        sa.Column('key', sa.String(length=100), nullable=False),
        sa.Column('client', sa.JSON(), nullable=False),
        sa.Column('provider_batch_id', sa.String(length=300), nullable=True),
        sa.Column('status', sa.String(length=12), nullable=False),
        sa.Column('requests', sa.JSON(), nullable=False),
        sa.Column('owner', sa.String(length=200), nullable=True),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint('key'),
    )
    op.create_index('ix_batch_jobs_campaign_id', 'batch_jobs', ['campaign_id'])


def downgrade() -> None:
    op.drop_index('ix_batch_jobs_campaign_id', table_name='batch_jobs')
    op.drop_table('batch_jobs')
    with op.batch_alter_table('campaigns') as batch_op:
        batch_op.drop_column('batch')
