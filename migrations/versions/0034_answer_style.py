"""answer style: the style features of a duel's answers, counted when they are stored

Revision ID: 0034
Revises: 0033
``duels.answer_style``: the style features (words, Markdown headers, list items, bold spans) of
answer a then answer b, written with the answers (service/cycle/answers.py), so that the style
fit reads eight numbers a duel instead of both texts (service/campaigns/style.py). Duels stored
before it have none: the fit counts their features from the texts, as before.
"""

from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = "0034"
down_revision: Union[str, None] = "0033"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("duels") as batch:
        batch.add_column(sa.Column("answer_style", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("duels") as batch:
        batch.drop_column("answer_style")
