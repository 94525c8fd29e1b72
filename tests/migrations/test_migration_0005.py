"""Migration 0005 (prompt objects): prompts stored before it keep their text and read as plain prompts."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from service.db import upgrade_database


def test_existing_prompts_survive_the_upgrade(fresh_url):
    upgrade_database(fresh_url, "0001")
    engine = sa.create_engine(fresh_url)
    now = dt.datetime(2026, 1, 1)
    with engine.begin() as conn:
        meta = sa.MetaData()
        meta.reflect(conn, only=["campaigns", "prompts"])
        campaigns, prompts = meta.tables["campaigns"], meta.tables["prompts"]
        assert "qid" not in prompts.c
        values = {c.name: None for c in campaigns.c if c.name != "id"}
        values.update(
            name="old", algorithm="dctas", delta=0.1, tie_policy="drop", status="running", models=[], n_prompts=2,
            judge={"kind": "human"}, seed=1, policy_state={}, counts={}, stats={}, event_seq=0, spend_nusd=0,
            judge_spend_nusd=0, duels_created=0, duels_judged=0, duels_counted=0, duels_failed=0,
            run_active=False, run_concurrency=1, webhook_state="none", version=0, created_at=now, updated_at=now,
        )  # fmt: skip
        cid = conn.execute(campaigns.insert().values(**values)).inserted_primary_key[0]
        conn.execute(
            prompts.insert(),
            [{"campaign_id": cid, "idx": 0, "text": "old one"}, {"campaign_id": cid, "idx": 1, "text": "old two"}],
        )
    engine.dispose()
    upgrade_database(fresh_url, "0005")
    engine = sa.create_engine(fresh_url)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT idx, text, qid, category, turns, reference FROM prompts ORDER BY idx")
        ).all()
    engine.dispose()
    assert [tuple(r) for r in rows] == [(0, "old one", None, None, None, None), (1, "old two", None, None, None, None)]
