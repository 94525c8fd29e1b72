"""annotator request buckets: each annotator's request limit, shared by every process

Revision ID: 0031
Revises: 0030
``annotator_request_buckets`` (service/api/annotator_limits.py): one row per annotator, the
tokens left in its bucket and when (seconds since the epoch on the database's clock), so
``LLMDUEL_ANNOTATOR_REQUESTS_PER_MINUTE`` holds across worker processes and hosts.
"""

from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = "0031"
down_revision: Union[str, None] = "0030"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "annotator_request_buckets",
        sa.Column(
            "annotator_id",
            sa.BigInteger(),
            sa.ForeignKey("annotators.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("annotator_request_buckets")
