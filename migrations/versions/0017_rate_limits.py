"""provider rate limits shared across workers

Revision ID: 0017
Revises: 0014
``rate_limit_keys`` (one row per credential: the lock every worker takes, and the
provider's last Retry-After) and ``rate_limit_events`` (the requests of the last
minute with their tokens), service/ratelimits.py.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = '0017'
down_revision: Union[str, None] = '0014'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        'rate_limit_keys',
        sa.Column('key', sa.String(length=64), primary_key=True),
        sa.Column('blocked_until', sa.Float(), server_default='0', nullable=False),
    )
    op.create_table(
        'rate_limit_events',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), primary_key=True, autoincrement=True),
        sa.Column('key', sa.String(length=64), nullable=False),
        sa.Column('at', sa.Float(), nullable=False),
        sa.Column('tokens', sa.BigInteger(), nullable=False),
    )
    op.create_index('ix_rate_limit_events_key_at', 'rate_limit_events', ['key', 'at'])


def downgrade() -> None:
    op.drop_index('ix_rate_limit_events_key_at', table_name='rate_limit_events')
    op.drop_table('rate_limit_events')
    op.drop_table('rate_limit_keys')
