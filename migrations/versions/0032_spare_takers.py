"""spare takers: the duel that took a spare image, until its answers are stored

Revision ID: 0032
Revises: 0031
``answer_store.taken_by`` (service/campaigns/spares.py): the duel that took a spare image of a
call of several (status ``spent``), cleared by that duel's answers transaction. A spare whose
duel never stored its answers (its process died between the take and the store) and whose
expiry has passed is a spare again, so no paid image is lost.
"""

from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = "0032"
down_revision: Union[str, None] = "0031"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("answer_store") as batch:
        batch.add_column(sa.Column("taken_by", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("answer_store") as batch:
        batch.drop_column("taken_by")
