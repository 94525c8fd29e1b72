"""prompt sampling without replacement

Revision ID: 0010
Revises: 0009
The campaign's ``prompt_sampling`` (existing campaigns keep ``with_replacement``)
and the duel's ``position`` in its pair's sequence (NULL for duels drawn with
replacement).
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = '0010'
down_revision: Union[str, None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('prompt_sampling', sa.String(length=20), server_default='with_replacement', nullable=False)
        )
    with op.batch_alter_table('duels', schema=None) as batch_op:
        batch_op.add_column(sa.Column('position', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('duels', schema=None) as batch_op:
        batch_op.drop_column('position')
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.drop_column('prompt_sampling')
