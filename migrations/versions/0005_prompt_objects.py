"""prompt objects: question id, category, user turns and reference answer on each prompt

Revision ID: 0005
Revises: 0004
Existing prompts keep their text; the new columns are NULL for them (a plain string prompt).
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: Union[str, None] = "0004"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table("prompts") as batch:
        batch.add_column(sa.Column("qid", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("category", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("turns", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("reference", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("prompts") as batch:
        batch.drop_column("reference")
        batch.drop_column("turns")
        batch.drop_column("category")
        batch.drop_column("qid")
