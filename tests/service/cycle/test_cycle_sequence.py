"""The vote cycle has one plan sequence, one answers sequence and one verdict sequence
(service/cycle/plan.py, answers.py, verdict.py), whatever the caller, the case and the driver.

Structure: no module outside the sequences' package inserts a duel or plans one, and
the ORM transactions they replaced do not come back. Behaviour, through the REST API on
SQLite and PostgreSQL: a verdict that ends the campaign cancels the other duels in flight
(with the cancellation's own status and message, never the campaign's status); a
background run, the admin and an annotator all plan through :func:`decide_plan`; an
automatic verdict and a vote both go through :func:`decide_verdict`.
"""

from __future__ import annotations

import asyncio
import re

from conftest import REPO
from service_helpers import campaign_body, simulated_judge

from service import cycle
from service.campaigns.endings import CANCELLED_ERROR

SERVICE = REPO / "service"


def _sources(exclude: str) -> dict[str, str]:
    return {
        str(p.relative_to(SERVICE.parent)): p.read_text()
        for p in SERVICE.rglob("*.py")
        if not str(p.relative_to(SERVICE)).startswith(exclude)
    }


def test_only_the_plan_sequence_inserts_a_duel():
    pattern = re.compile(r"insert\(\s*Duel\b|\bDuel\(\s*\*\*|=\s*Duel\(")
    offenders = [path for path, text in _sources("cycle").items() if pattern.search(text)]
    assert offenders == [], offenders
    # and the sequence does: the Core statement both drivers use
    assert re.search(r"INSERT_DUEL = insert\(Duel", (SERVICE / "cycle" / "sync_driver.py").read_text())


def test_the_replaced_orm_transactions_stay_gone():
    gone = ("plan_tx.py", "verdict_tx.py")
    assert not [p for p in (SERVICE / "campaigns").iterdir() if p.name in gone]
    callers = [
        path
        for path, text in _sources("cycle").items()
        if re.search(r"\bdef (plan_duel_tx|_plan_locked|_record_vote_tx)\b|\bdecide_vote\b", text)
    ]
    assert callers == [], callers
    # the answers are a sequence on a driver too (answers.decide_answers): no ORM transaction of the cycle's
    stages = ("orchestration", "plan", "answers", "verdict", "sync_driver", "pg_driver")
    texts = {name: (SERVICE / "cycle" / f"{name}.py").read_text() for name in stages}
    orm = [name for name, text in texts.items() if re.search(r"\.lock_campaign\(|\bs\.get\(Duel\b", text)]
    assert orm == [] and "async def decide_answers(" in (SERVICE / "cycle" / "answers.py").read_text(), orm


async def test_the_verdict_that_ends_the_campaign_cancels_the_duels_in_flight(api):
    """A duel in flight when a vote certifies becomes ``cancelled`` with the cancellation's
    message (the campaign's end status once leaked into it through a shared bound name)."""
    body = campaign_body(name="cancel in flight", costs=[1.0, 1.0], delta=0.5)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    current = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
    for _ in range(200):
        spare = await api.post(f"/v1/campaigns/{cid}/duels")  # a second duel, left in flight
        assert spare.status_code == 201, spare.text
        spare = spare.json()
        winner = "a" if current["model_a"] == 0 else "b"
        r = await api.post(f"/v1/duels/{current['id']}/vote", json={"choice": winner})
        assert r.status_code == 200, r.text
        if r.json()["campaign_status"] != "running":
            break
        current = spare
    else:  # pragma: no cover - delta 0.5 certifies within a few votes
        raise AssertionError("the campaign never ended")
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "certified" and view["winner_index"] == 0
    left = (await api.get(f"/v1/duels/{spare['id']}")).json()
    assert left["status"] == "cancelled", left
    assert left["error"] == CANCELLED_ERROR
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_every_caller_plans_and_records_through_the_one_sequence(api, monkeypatch):
    """A background run's duels, the admin's and an annotator's, automatic verdicts and votes:
    every plan enters ``decide_plan`` and every verdict ``decide_verdict`` (on either driver)."""
    from service.cycle import pg_driver, plan, sync_driver, verdict

    seen = {"plan": [], "verdict": []}

    def spy(kind, fn):
        async def wrapper(svc, tx, *args, **kwargs):
            seen[kind].append(type(tx).__name__)
            return await fn(svc, tx, *args, **kwargs)

        return wrapper

    for module in (sync_driver, pg_driver):
        monkeypatch.setattr(module, "decide_plan", spy("plan", plan.decide_plan))
        monkeypatch.setattr(module, "decide_verdict", spy("verdict", verdict.decide_verdict))
    # an automatic judge: a background run of 3 duels, then one admin duel
    auto = (await api.post("/v1/campaigns", json=campaign_body(name="auto", judge=simulated_judge()))).json()["id"]
    assert (await api.post(f"/v1/campaigns/{auto}/run", json={"max_duels": 3, "concurrency": 1})).status_code == 202
    for _ in range(200):
        run = (await api.get(f"/v1/campaigns/{auto}")).json()["run"]
        if not run or not run.get("active"):
            break
        await asyncio.sleep(0.05)
    assert (await api.get(f"/v1/campaigns/{auto}")).json()["duels"] == 3
    assert (await api.post(f"/v1/campaigns/{auto}/duels")).status_code in (200, 201)
    on_loop = api.app.state.campaigns.cycle._on_loop and cycle.ENABLED
    # the run's 3 plans (and the refusal once its max_duels is used), then the admin's (asyncpg on PostgreSQL)
    assert len(seen["plan"]) >= 4 and seen["plan"][-1] == ("PgTx" if on_loop else "SyncTx"), seen
    assert set(seen["plan"][:-1]) == {"SyncTx"}, seen  # a background run: the SQLAlchemy driver
    assert seen["verdict"] == ["SyncTx"] * 4, seen  # automatic verdicts: the SQLAlchemy driver
    # a human judge: an annotator's duel and vote
    human = (await api.post("/v1/campaigns", json=campaign_body(name="human"))).json()["id"]
    token = (await api.post(f"/v1/campaigns/{human}/annotators", json={"label": "ann"})).json()["token"]
    ann = {"Authorization": f"Bearer {token}"}
    d = (await api.post(f"/v1/campaigns/{human}/duels", headers=ann)).json()
    assert (await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"}, headers=ann)).status_code == 200
    assert seen["plan"][-1] == seen["verdict"][-1] == ("PgTx" if on_loop else "SyncTx")
