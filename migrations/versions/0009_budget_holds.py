"""budget holds: the budget reserved by pre-generation calls

Revision ID: 0009
Revises: 0008
A pre-generated answer's call reserves its cost bound against the campaign's
budget before it is made (a ``budget_holds`` row, deleted when the answer is
stored and charged or the call fails, and no longer counted after
``expires_at``), as a duel reserves its bound in ``duels.expected_cost_nusd``.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

BigId = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')

revision: str = '0009'
down_revision: Union[str, None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table('budget_holds',
    sa.Column('id', BigId, autoincrement=True, nullable=False),
    sa.Column('campaign_id', sa.BigInteger(), nullable=False),
    sa.Column('amount_nusd', sa.BigInteger(), nullable=False),
    sa.Column('purpose', sa.String(length=16), nullable=False),
    sa.Column('model_index', sa.Integer(), nullable=True),
    sa.Column('key', sa.String(length=64), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['campaign_id'], ['campaigns.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('budget_holds', schema=None) as batch_op:
        batch_op.create_index('ix_budget_holds_campaign_expires', ['campaign_id', 'expires_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('budget_holds', schema=None) as batch_op:
        batch_op.drop_index('ix_budget_holds_campaign_expires')
    op.drop_table('budget_holds')
