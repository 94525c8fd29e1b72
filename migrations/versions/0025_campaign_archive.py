"""campaign archive: archived_at hides a campaign from the lists

Revision ID: 0025
Revises: 0020
An archived campaign keeps every row (duels, ledger, answers) and stays readable by id;
``GET /v1/campaigns`` and the campaign list page leave it out unless asked for
(``?archived=true``). NULL: not archived.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0025'
down_revision: Union[str, None] = '0020'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.add_column(sa.Column('archived_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.drop_column('archived_at')
