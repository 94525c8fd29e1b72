"""End to end through the REST API alone: simulated models and judge on the
paper's synthetic instance (costs (4, 1, 1)) run to certification.

The seed is fixed so the run is deterministic (same draws, same duels); seed 69
certifies after about 900 duels at delta = 0.1 (a typical seed needs about
1,900), which keeps the test short. How often DCTAS certifies the wrong arm is
the simulator's business (tests/algorithms/test_simulator.py), not this test's. On
PostgreSQL this test runs with ``synchronous_commit=off`` (durability of the
last commits on a database crash, irrelevant here) to save ~3 ms of fsync per
transaction; every other PostgreSQL test uses the default.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from conftest import app_client
from service_helpers import all_duels, campaign_body, simulated_judge

pytestmark = pytest.mark.slow

SEED = 69


@contextlib.asynccontextmanager
async def client_for(url: str):
    async with app_client(url, pg_synchronous_commit="off") as client:
        yield client


@pytest.fixture
async def api(db_url):
    async with client_for(db_url) as client:
        yield client


async def _run_to_end(api, cid: int, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = (await api.get(f"/v1/campaigns/{cid}")).json()
        if view["status"] != "running" or not view["run"]["active"]:
            return view
        await asyncio.sleep(0.2)
    raise AssertionError(f"campaign {cid} still running after {timeout}s: {view}")


def _check_ledger(view: dict, duels: list[dict]) -> None:
    """Spend is the sum of the duels' charges; each duel's cost the sum of its own."""
    assert len(duels) == view["duels_created"]
    for d in duels:
        assert d["cost"] == pytest.approx(sum(ch["amount"] for ch in d["charges"]))
        assert d["cost"] == pytest.approx(4.0 + 1.0 if 0 in (d["model_a"], d["model_b"]) else 2.0)
    assert view["spend"] == pytest.approx(sum(d["cost"] for d in duels), rel=1e-12)


async def test_capped_run_keeps_ledger_and_log(api):
    """The REST flow on each backend, capped at 150 duels (the full run to
    certification, ~900 duels, runs once, on SQLite, below)."""
    body = campaign_body(
        name="e2e capped", judge=simulated_judge(), delta=0.1, seed=SEED, algorithm="dctas"
    )  # dctas: not done in 150
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    assert (await api.post(f"/v1/campaigns/{cid}/run", json={"max_duels": 150})).status_code == 202
    view = await _run_to_end(api, cid)
    assert view["status"] == "running" and view["duels"] == 150 and view["pending"] == 0
    _check_ledger(view, await all_duels(api, cid))
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True
    # The run can be resumed where it stopped.
    assert (await api.post(f"/v1/campaigns/{cid}/run", json={"max_duels": 10})).status_code == 202
    view = await _run_to_end(api, cid)
    assert view["duels"] == 160
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


@pytest.fixture
async def sqlite_api(sqlite_url):
    from service.db import upgrade_database

    upgrade_database(sqlite_url)
    async with client_for(sqlite_url) as client:
        yield client


async def test_synthetic_campaign_certifies_the_best_model(sqlite_api, sqlite_url, monkeypatch, capsys):
    api = sqlite_api
    body = campaign_body(
        name="e2e synthetic", judge=simulated_judge(), delta=0.1, seed=SEED, algorithm="dctas"
    )  # its GLR test
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    r = await api.post(f"/v1/campaigns/{cid}/run")
    assert r.status_code == 202, r.text

    deadline = time.monotonic() + 240
    view = r.json()
    while time.monotonic() < deadline:
        view = (await api.get(f"/v1/campaigns/{cid}")).json()
        if view["status"] != "running" and not view["run"]["active"]:  # ended, its last duels recorded
            break
        await asyncio.sleep(0.2)
    assert view["status"] == "certified", view
    assert view["winner"] == "m0" and view["winner_index"] == 0  # arm 1 of the paper is the Condorcet winner
    assert view["Z"] > view["beta"]
    assert view["pending"] == 0 and view["run"]["active"] is False
    assert view["duels"] == view["t"] == view["duels_counted"] > 0
    assert sum(map(sum, view["counts"])) == 2 * view["duels"]
    assert view["lower_bound"] is not None and view["lower_bound"] > 0

    duels = await all_duels(api, cid)
    assert all(d["status"] == "judged" for d in duels)
    _check_ledger(view, duels)

    # Ended: no more duels.
    assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 409

    # Replay, through the API and through the CLI.
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep == {"campaign_id": cid, "ok": True, "events": 2 * len(duels), "diff": []}
    from service.cli import main

    monkeypatch.setenv("DATABASE_URL", sqlite_url)
    assert main(["replay", str(cid)]) == 0
    assert "equals the replayed log" in capsys.readouterr().out
