"""images: the content-addressed image store and the images of a prompt's turns

Revision ID: 0021
Revises: 0025
``images`` (one row per sha256: the bytes, their blind copy, media type and size,
service/images/store.py) and ``prompts.images`` (the sha256 of each user turn's images).
"""

from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = "0021"
down_revision: Union[str, None] = "0025"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "images",
        sa.Column("sha256", sa.String(length=64), primary_key=True),
        sa.Column("media_type", sa.String(length=20), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("height", sa.Integer(), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("blind", sa.LargeBinary(), nullable=False),
        sa.Column("blind_media_type", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("prompts") as batch:
        batch.add_column(sa.Column("images", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("prompts") as batch:
        batch.drop_column("images")
    op.drop_table("images")
