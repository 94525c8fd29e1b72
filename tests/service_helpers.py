"""Helpers shared by the service tests (not fixtures: plain functions)."""

from __future__ import annotations

from algorithms.instance import SYNTHETIC_PREFERENCE

SYNTHETIC_P = SYNTHETIC_PREFERENCE.tolist()


def campaign_body(
    name: str = "test campaign",
    costs=(4.0, 1.0, 1.0),
    judge: dict | None = None,
    clients: list[dict] | None = None,
    **extra,
) -> dict:
    """A campaign on the paper's synthetic instance with simulated models."""
    models = [
        {"name": f"m{n}", "cost": c, "client": (clients[n] if clients else {"kind": "simulated"})}
        for n, c in enumerate(costs)
    ]
    body = {
        "name": name,
        "models": models,
        "prompts": ["Say hello.", "Explain duels.", "Why is the sky blue?"],
        "judge": judge if judge is not None else {"kind": "human"},
        "seed": 7,
    }
    body.update(extra)
    return body


def simulated_judge(P=SYNTHETIC_P, **extra) -> dict:
    return {"kind": "simulated", "preference": P, **extra}


async def all_duels(api, cid: int) -> list[dict]:
    """Every duel of a campaign through the paginated audit log, oldest first."""
    items, offset = [], 0
    while offset is not None:
        page = (await api.get(f"/v1/campaigns/{cid}/duels", params={"limit": 1000, "offset": offset})).json()
        items += page["items"]
        offset = page["next_offset"]
    return items


def all_duels_sync(client, cid: int) -> list[dict]:
    """Every duel of a campaign through the paginated audit log, with a blocking ``httpx.Client``."""
    items, offset = [], 0
    while offset is not None:
        page = client.get(f"/v1/campaigns/{cid}/duels", params={"limit": 500, "offset": offset}).json()
        items += page["items"]
        offset = page["next_offset"]
    return items


def skew_clock(
    monkeypatch, seconds: float, modules=("service.campaigns.leases", "service.campaigns.lifecycle")
) -> None:
    """A worker whose clock runs ``seconds`` ahead (negative: behind): ``utcnow`` as the named
    modules see it is shifted (the hostile clock-skew mode of the lease tests)."""
    import datetime as dt
    import importlib

    from service.models import utcnow

    for name in modules:
        monkeypatch.setattr(importlib.import_module(name), "utcnow", lambda: utcnow() + dt.timedelta(seconds=seconds))


async def first_pregen_round(api, app, cid: int, timeout: float = 30.0) -> tuple[dict, dict, list[dict]]:
    """A human batch campaign's first pre-generation round: an annotator asks for its first duel,
    then the round's batches are waited for until none is still being gathered. Returns (the first
    duel, the annotator's headers, the campaign's batch job rows)."""
    import asyncio
    import time

    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "ann"})).json()["token"]
    who = {"Authorization": f"Bearer {token}"}
    first = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
    assert first.status_code == 201, first.text
    pregen, jobs = app.state.campaigns.pregen, app.state.campaigns.runs.batch_jobs
    deadline = time.monotonic() + timeout
    while cid in pregen.busy or not jobs.jobs_tx(cid):
        assert time.monotonic() < deadline, "no pre-generation batch"
        await asyncio.sleep(0.02)
    return first.json(), who, jobs.jobs_tx(cid)
