"""initial schema

Revision ID: 0001
Revises: 
Campaigns, prompts, duels (the log), charges (the ledger) and annotators.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

# BIGINT ids, INTEGER PRIMARY KEY (autoincrementing rowid) on SQLite.
BigId = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


revision: str = '0001'
down_revision: Union[str, None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table('campaigns',
    sa.Column('id', BigId, autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('algorithm', sa.String(length=16), nullable=False),
    sa.Column('delta', sa.Float(), nullable=False),
    sa.Column('tie_policy', sa.String(length=8), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('end_reason', sa.Text(), nullable=True),
    sa.Column('models', sa.JSON(), nullable=False),
    sa.Column('n_prompts', sa.Integer(), nullable=False),
    sa.Column('judge', sa.JSON(), nullable=False),
    sa.Column('budget_nusd', sa.BigInteger(), nullable=True),
    sa.Column('max_duels', sa.Integer(), nullable=True),
    sa.Column('seed', sa.BigInteger(), nullable=False),
    sa.Column('webhook_url', sa.Text(), nullable=True),
    sa.Column('policy_state', sa.JSON(), nullable=False),
    sa.Column('counts', sa.JSON(), nullable=False),
    sa.Column('stats', sa.JSON(), nullable=False),
    sa.Column('leader', sa.Integer(), nullable=True),
    sa.Column('winner', sa.Integer(), nullable=True),
    sa.Column('event_seq', sa.Integer(), nullable=False),
    sa.Column('spend_nusd', sa.BigInteger(), nullable=False),
    sa.Column('judge_spend_nusd', sa.BigInteger(), nullable=False),
    sa.Column('duels_created', sa.Integer(), nullable=False),
    sa.Column('duels_judged', sa.Integer(), nullable=False),
    sa.Column('duels_counted', sa.Integer(), nullable=False),
    sa.Column('duels_failed', sa.Integer(), nullable=False),
    sa.Column('run_active', sa.Boolean(), nullable=False),
    sa.Column('run_remaining', sa.Integer(), nullable=True),
    sa.Column('run_concurrency', sa.Integer(), nullable=False),
    sa.Column('run_error', sa.Text(), nullable=True),
    sa.Column('webhook_state', sa.String(length=12), nullable=False),
    sa.Column('webhook_error', sa.Text(), nullable=True),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_campaigns_status'), ['status'], unique=False)

    op.create_table('annotators',
    sa.Column('id', BigId, autoincrement=True, nullable=False),
    sa.Column('campaign_id', sa.BigInteger(), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('label', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['campaign_id'], ['campaigns.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('token_hash')
    )
    with op.batch_alter_table('annotators', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_annotators_campaign_id'), ['campaign_id'], unique=False)

    op.create_table('duels',
    sa.Column('id', BigId, autoincrement=True, nullable=False),
    sa.Column('campaign_id', sa.BigInteger(), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('model_i', sa.Integer(), nullable=False),
    sa.Column('model_j', sa.Integer(), nullable=False),
    sa.Column('a_is_i', sa.Boolean(), nullable=False),
    sa.Column('prompt_index', sa.Integer(), nullable=False),
    sa.Column('prompt', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=12), nullable=False),
    sa.Column('answer_a', sa.Text(), nullable=True),
    sa.Column('answer_b', sa.Text(), nullable=True),
    sa.Column('completion_a', sa.JSON(), nullable=True),
    sa.Column('completion_b', sa.JSON(), nullable=True),
    sa.Column('choice', sa.String(length=10), nullable=True),
    sa.Column('score', sa.Float(), nullable=True),
    sa.Column('counted', sa.Boolean(), nullable=False),
    sa.Column('judged_by', sa.String(length=40), nullable=True),
    sa.Column('judge_detail', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('cost_nusd', sa.BigInteger(), nullable=False),
    sa.Column('expected_cost_nusd', sa.BigInteger(), nullable=False),
    sa.Column('select_seq', sa.Integer(), nullable=False),
    sa.Column('pending_at_select', sa.JSON(), nullable=False),
    sa.Column('record_seq', sa.Integer(), nullable=True),
    sa.Column('requested_by', sa.String(length=40), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('answered_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('judged_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['campaign_id'], ['campaigns.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('duels', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_duels_campaign_id'), ['campaign_id'], unique=False)
        batch_op.create_index('ix_duels_campaign_status', ['campaign_id', 'status'], unique=False)

    op.create_table('prompts',
    sa.Column('campaign_id', sa.BigInteger(), nullable=False),
    sa.Column('idx', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['campaign_id'], ['campaigns.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('campaign_id', 'idx')
    )
    op.create_table('charges',
    sa.Column('id', BigId, autoincrement=True, nullable=False),
    sa.Column('campaign_id', sa.BigInteger(), nullable=False),
    sa.Column('duel_id', sa.BigInteger(), nullable=False),
    sa.Column('kind', sa.String(length=8), nullable=False),
    sa.Column('model_index', sa.Integer(), nullable=True),
    sa.Column('amount_nusd', sa.BigInteger(), nullable=False),
    sa.Column('detail', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['campaign_id'], ['campaigns.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['duel_id'], ['duels.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('charges', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_charges_campaign_id'), ['campaign_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_charges_duel_id'), ['duel_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('charges', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_charges_duel_id'))
        batch_op.drop_index(batch_op.f('ix_charges_campaign_id'))

    op.drop_table('charges')
    op.drop_table('prompts')
    with op.batch_alter_table('duels', schema=None) as batch_op:
        batch_op.drop_index('ix_duels_campaign_status')
        batch_op.drop_index(batch_op.f('ix_duels_campaign_id'))

    op.drop_table('duels')
    with op.batch_alter_table('annotators', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_annotators_campaign_id'))

    op.drop_table('annotators')
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_campaigns_status'))

    op.drop_table('campaigns')
