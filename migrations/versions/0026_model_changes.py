"""model changes: the models disabled or replaced in a running campaign

Revision ID: 0026
Revises: 0029
``campaigns.model_changes``: one entry per change, in order, each with the policy call
(``seq``) at which it took effect, so a replay rebuilds the policy at the same point
(service/campaigns/model_changes.py). NULL: no model was ever disabled.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0026'
down_revision: Union[str, None] = '0029'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.add_column(sa.Column('model_changes', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.drop_column('model_changes')
