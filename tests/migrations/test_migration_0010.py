"""Migration 0010 (prompt sampling): campaigns and duels stored before it keep drawing with replacement."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from alembic import command

from service.db import alembic_config, upgrade_database


def test_existing_campaigns_keep_with_replacement_and_their_duels_have_no_position(fresh_url):
    upgrade_database(fresh_url, "0008")
    engine = sa.create_engine(fresh_url)
    now = dt.datetime(2026, 1, 1)
    with engine.begin() as conn:
        meta = sa.MetaData()
        meta.reflect(conn, only=["campaigns", "duels"])
        campaigns, duels = meta.tables["campaigns"], meta.tables["duels"]
        assert "prompt_sampling" not in campaigns.c and "position" not in duels.c
        values = {c.name: None for c in campaigns.c if c.name != "id"}
        values.update(
            name="old", algorithm="dctas-pc", delta=0.1, tie_policy="half", status="running", models=[],
            n_prompts=2, judge={"kind": "llm"}, seed=1, policy_state={}, counts={}, stats={}, event_seq=1,
            spend_nusd=0, judge_spend_nusd=0, duels_created=1, duels_judged=0, duels_counted=0, duels_failed=0,
            run_active=False, run_concurrency=1, webhook_state="none", version=0, created_at=now, updated_at=now,
            max_pending_per_annotator=1, answers="reuse", verdicts="reuse",
        )  # fmt: skip
        cid = conn.execute(campaigns.insert().values(**values)).inserted_primary_key[0]
        conn.execute(
            duels.insert().values(
                campaign_id=cid,
                number=1,
                model_i=0,
                model_j=1,
                a_is_i=True,
                prompt_index=1,
                prompt="p",
                status="calling",
                counted=False,
                cost_nusd=0,
                expected_cost_nusd=0,
                select_seq=1,
                pending_at_select=[],
                created_at=now,
                expires_at=now,
            )  # fmt: skip
        )
    engine.dispose()
    upgrade_database(fresh_url, "0010")
    engine = sa.create_engine(fresh_url)
    with engine.connect() as conn:
        sampling = conn.execute(sa.text("SELECT prompt_sampling FROM campaigns")).scalar_one()
        position = conn.execute(sa.text("SELECT position FROM duels")).scalar_one()
    engine.dispose()
    assert sampling == "with_replacement"
    assert position is None
    command.downgrade(alembic_config(fresh_url), "0008")  # and back down
    engine = sa.create_engine(fresh_url)
    with engine.connect() as conn:
        assert "prompt_sampling" not in {c["name"] for c in sa.inspect(conn).get_columns("campaigns")}
    engine.dispose()
