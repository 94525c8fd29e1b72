"""Migration 0033 (policy checkpoint rows): a campaign's policy state, counts and statistics move out of
its row and back, unchanged, and the campaign replays and continues after the upgrade."""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import command
from conftest import app_client
from service_helpers import campaign_body, simulated_judge

from service.db import alembic_config, upgrade_database

P = [[0.5, 0.7, 0.8], [0.3, 0.5, 0.6], [0.2, 0.4, 0.5]]


def _decoded(value):
    return value if isinstance(value, dict) else json.loads(value)


async def test_the_policy_state_moves_to_its_own_row_and_back(fresh_url):
    upgrade_database(fresh_url)
    async with app_client(fresh_url) as api:
        body = campaign_body(name="moved", costs=(1.0, 1.0, 1.0), judge=simulated_judge(P), delta=1e-6)
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        for _ in range(12):
            assert (await api.post(f"/v1/campaigns/{cid}/duels")).json()["status"] == "judged"
    engine = sa.create_engine(fresh_url)
    columns = "policy_state, counts, stats"
    with engine.connect() as conn:
        stored = conn.execute(sa.text(f"SELECT {columns} FROM policy_checkpoints WHERE campaign_id = {cid}")).one()
        names = {c["name"] for c in sa.inspect(conn).get_columns("campaigns")}
    assert not names & {"policy_state", "counts", "stats"}
    assert _decoded(stored.policy_state)["N"] and _decoded(stored.counts)["N"]

    command.downgrade(alembic_config(fresh_url), "0032")
    with engine.connect() as conn:
        back = conn.execute(sa.text(f"SELECT {columns} FROM campaigns WHERE id = {cid}")).one()
        assert not sa.inspect(conn).has_table("policy_checkpoints")
    assert [_decoded(x) for x in back] == [_decoded(x) for x in stored]

    upgrade_database(fresh_url)
    with engine.connect() as conn:
        again = conn.execute(sa.text(f"SELECT {columns} FROM policy_checkpoints WHERE campaign_id = {cid}")).one()
    engine.dispose()
    assert [_decoded(x) for x in again] == [_decoded(x) for x in stored]
    async with app_client(fresh_url) as api:
        assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True
        assert (await api.post(f"/v1/campaigns/{cid}/duels")).json()["status"] == "judged"
        assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True
