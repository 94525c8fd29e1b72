"""answer and verdict stores (pay once)

Revision ID: 0008
Revises: 0006
The answer store and the verdict store shared by every campaign, the campaign's
``answers`` / ``verdicts`` settings (existing campaigns keep ``fresh``), the
ledger's ``reuses_charge_id`` (and ``duel_id`` NULL for answers pre-generated
for annotators) and the duel log's ``costs_at_select``.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

BigId = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')

revision: str = '0008'
down_revision: Union[str, None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table('answer_store',
    sa.Column('id', BigId, autoincrement=True, nullable=False),
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('model_key', sa.String(length=64), nullable=False),
    sa.Column('prompt_hash', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=12), nullable=False),
    sa.Column('text', sa.Text(), nullable=True),
    sa.Column('input_tokens', sa.Integer(), nullable=True),
    sa.Column('output_tokens', sa.Integer(), nullable=True),
    sa.Column('cost_nusd', sa.BigInteger(), nullable=False),
    sa.Column('charge_id', sa.BigInteger(), nullable=True),
    sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('key'),
    )
    with op.batch_alter_table('answer_store', schema=None) as batch_op:
        batch_op.create_index('ix_answer_store_model_prompt', ['model_key', 'prompt_hash'], unique=False)

    op.create_table('verdict_store',
    sa.Column('id', BigId, autoincrement=True, nullable=False),
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('judge_key', sa.String(length=64), nullable=False),
    sa.Column('prompt_hash', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=12), nullable=False),
    sa.Column('choice', sa.String(length=10), nullable=True),
    sa.Column('detail', sa.JSON(), nullable=True),
    sa.Column('cost_nusd', sa.BigInteger(), nullable=False),
    sa.Column('charge_id', sa.BigInteger(), nullable=True),
    sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('key'),
    )
    with op.batch_alter_table('verdict_store', schema=None) as batch_op:
        batch_op.create_index('ix_verdict_store_judge_prompt', ['judge_key', 'prompt_hash'], unique=False)

    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.add_column(sa.Column('answers', sa.String(length=8), server_default='fresh', nullable=False))
        batch_op.add_column(sa.Column('verdicts', sa.String(length=8), server_default='fresh', nullable=False))
    with op.batch_alter_table('charges', schema=None) as batch_op:
        batch_op.add_column(sa.Column('reuses_charge_id', sa.BigInteger(), nullable=True))
        batch_op.alter_column('duel_id', existing_type=sa.BigInteger(), nullable=True)
    with op.batch_alter_table('duels', schema=None) as batch_op:
        batch_op.add_column(sa.Column('costs_at_select', sa.JSON(), nullable=True))


def downgrade() -> None:
    op.execute("DELETE FROM charges WHERE duel_id IS NULL")  # pre-generation charges have no duel
    with op.batch_alter_table('duels', schema=None) as batch_op:
        batch_op.drop_column('costs_at_select')
    with op.batch_alter_table('charges', schema=None) as batch_op:
        batch_op.drop_column('reuses_charge_id')
        batch_op.alter_column('duel_id', existing_type=sa.BigInteger(), nullable=False)
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.drop_column('verdicts')
        batch_op.drop_column('answers')
    with op.batch_alter_table('verdict_store', schema=None) as batch_op:
        batch_op.drop_index('ix_verdict_store_judge_prompt')
    op.drop_table('verdict_store')
    with op.batch_alter_table('answer_store', schema=None) as batch_op:
        batch_op.drop_index('ix_answer_store_model_prompt')
    op.drop_table('answer_store')
