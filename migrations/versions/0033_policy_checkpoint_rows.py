"""policy checkpoint rows: the policy state, counts and statistics out of the campaign row

Revision ID: 0033
Revises: 0032
``policy_checkpoints``: one row per campaign with its ``policy_state``, ``counts`` and ``stats``
(the checkpoint at ``campaigns.state_seq``, service/campaigns/policy_log.py), moved out of
``campaigns``. They are O(L^2) JSON (half a megabyte at 128 models) written every few records,
while the campaign row is updated two or three times per duel: on SQLite an update rewrites the
whole row, so every duel copied them. Existing campaigns keep their values.
"""

from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = "0033"
down_revision: Union[str, None] = "0032"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

_MOVED = ("policy_state", "counts", "stats")


def upgrade() -> None:
    op.create_table(
        "policy_checkpoints",
        sa.Column(
            "campaign_id",
            sa.BigInteger(),
            sa.ForeignKey("campaigns.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("policy_state", sa.JSON(), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("stats", sa.JSON(), nullable=False),
    )
    op.execute(
        "INSERT INTO policy_checkpoints (campaign_id, policy_state, counts, stats) "
        "SELECT id, policy_state, counts, stats FROM campaigns"
    )
    with op.batch_alter_table("campaigns") as batch:
        for name in _MOVED:
            batch.drop_column(name)


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        for name in _MOVED:
            batch.add_column(sa.Column(name, sa.JSON(), nullable=True))
    for name in _MOVED:
        op.execute(
            f"UPDATE campaigns SET {name} = "
            f"(SELECT p.{name} FROM policy_checkpoints p WHERE p.campaign_id = campaigns.id)"
        )
    with op.batch_alter_table("campaigns") as batch:
        for name in _MOVED:
            batch.alter_column(name, existing_type=sa.JSON(), nullable=False)
    op.drop_table("policy_checkpoints")
