"""Disabling or replacing a failing model of a running campaign (service/cycle/model_changes.py,
algorithms/restricted.py): the policy rebuilt on the remaining models from the duels already
recorded, each certificate at the level for the new number of models, the run going on, the log
kept, the replay exact. Through real HTTP (the ASGI app) on SQLite and PostgreSQL, and the policy
itself on seeded instances."""

from __future__ import annotations

import asyncio
import json
import math
import time

import httpx
import numpy as np
import pytest
from conftest import app_client
from service_helpers import all_duels, campaign_body, simulated_judge

from algorithms import make_policy
from algorithms.certificates import product_levels
from algorithms.hybrid import policy_from_state
from algorithms.restricted import restrict

DEAD = "http://127.0.0.1:9/v1"  # nothing listens on the discard port: every call fails at once
KEY_ENV = "MODEL_CHANGES_TEST_KEY"


def dead_client() -> dict:
    return {"kind": "openai", "base_url": DEAD, "model": "x", "api_key_env": KEY_ENV, "max_attempts": 1}


def _run(P: np.ndarray, policy, rng, steps: int) -> list[tuple[int, int, float]]:
    out = []
    for _ in range(steps):
        if policy.should_stop():
            break
        i, j = policy.next_pair()
        s = float(rng.random() < P[i, j])
        policy.record(i, j, s)
        out.append((i, j, s))
    return out


# ---------------------------------------------------------------- the policy
def test_restricted_policy_is_the_same_test_on_the_remaining_models_at_their_level():
    P = np.array([[0.5, 0.7, 0.6, 0.5], [0.3, 0.5, 0.6, 0.5], [0.4, 0.4, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]])
    rng = np.random.default_rng(3)
    full = make_policy("dctas-pc", [1.0, 2.0, 1.0, 1.0], 0.05)
    records = _run(P, full, rng, 400)
    r = restrict(full.to_state(), [1.0, 2.0, 1.0, 1.0], [0, 1, 2], records)
    # the level for three models: log(3 / delta), not log(4 / delta)
    assert math.isclose(r.certificate_log_threshold, math.log(3 / 0.05))
    assert math.isclose(full.certificate_log_threshold, -math.log(product_levels(0.05, 4)[0]))  # the product level
    # the same as a campaign on the three models fed the same outcomes in the same order
    alone = make_policy("dctas-pc", [1.0, 2.0, 1.0], 0.05)
    for i, j, s in records:
        if 3 not in (i, j):
            alone.record(i, j, s)
    assert r.inner.to_state() == alone.to_state()
    # model 3's duels are shown (frozen) and no longer used; a late duel of it is ignored
    n3 = sum(1 for i, j, _ in records if 3 in (i, j))
    assert n3 > 0 and r.counts_matrix()[3].sum() == n3
    before = r.inner.to_state()
    r.record(0, 3, 1.0)
    assert r.inner.to_state() == before
    # never a pair with model 3, even with its duels pending; the state round-trips exactly
    for _ in range(300):
        if r.should_stop():
            break
        i, j = r.next_pair(pending=[(0, 3), (1, 3)])
        assert 3 not in (i, j)
        r.record(i, j, float(rng.random() < P[i, j]))
        assert policy_from_state(r.to_state()).to_state() == r.to_state()
    assert r.should_stop() and r.winner == 0  # 3 tied 0 exactly: only without it can 0 be certified


def test_a_top_k_goal_that_no_longer_fits_is_refused():
    p = make_policy("dctas-pc", [1.0, 1.0, 1.0], 0.1, goal="top_k", k=2)
    with pytest.raises(Exception, match="k"):
        restrict(p.to_state(), [1.0, 1.0, 1.0], [0, 1], [])


def test_disabling_keeps_the_error_rate_at_most_delta_on_the_remaining_models():
    """Seeded: 120 campaigns on an instance whose remaining two models are close (0.56), a model disabled
    after a random number of duels; the named winners must pass the one-sided binomial check at delta."""
    P = np.array([[0.5, 0.56, 0.7], [0.44, 0.5, 0.7], [0.3, 0.3, 0.5]])
    delta, trials, wrong = 0.2, 120, 0
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        full = make_policy("dctas-pc", [1.0, 1.0, 1.0], delta)
        records = _run(P, full, rng, int(rng.integers(0, 60)))
        if full.should_stop():
            wrong += int(full.winner != 0)
            continue
        r = restrict(full.to_state(), [1.0, 1.0, 1.0], [0, 1], records)
        _run(P, r, rng, 20_000)
        wrong += int(r.should_stop() and r.winner != 0)
    # 99.9% quantile of Binomial(120, 0.2) is 39; dctas-pc's errors are far below delta in practice
    assert wrong <= 39, wrong


# ---------------------------------------------------------------- the service, through HTTP
@pytest.fixture
async def api3(db_url, monkeypatch):
    """The app in process; a run pauses after 3 consecutive failed duels."""
    monkeypatch.setenv(KEY_ENV, "k-value")
    async with app_client(db_url, run_max_failures=3) as client:
        yield client


async def _until(api, cid: int, done, seconds: float = 60.0) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        c = (await api.get(f"/v1/campaigns/{cid}")).json()
        if done(c):
            return c
        await asyncio.sleep(0.05)
    raise AssertionError(f"campaign {cid} did not reach the condition: {c['status']}, run {c['run']}")


async def test_a_failing_model_is_disabled_and_the_run_certifies_the_rest(api3):
    P = [[0.5, 0.85, 0.5], [0.15, 0.5, 0.5], [0.5, 0.5, 0.5]]
    clients = [{"kind": "simulated"}, {"kind": "simulated"}, dead_client()]
    body = campaign_body("disable", costs=(1.0, 1.0, 1.0), clients=clients, judge=simulated_judge(P), delta=0.1)
    body["models"][2]["name"] = "broken"
    cid = (await api3.post("/v1/campaigns", json=body)).json()["id"]
    assert (await api3.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 1})).status_code == 202
    paused = await _until(api3, cid, lambda c: not c["run"]["active"] and c["run"]["error"])
    assert paused["status"] == "running" and paused["duels_failed"] >= 3
    page = await api3.get(f"/campaigns/{cid}")  # the dashboard says the run paused and how to go on
    assert 'id="run-paused"' in page.text and f"llmduel campaign disable-model {cid} NAME" in page.text

    r = await api3.post(f"/v1/campaigns/{cid}/models/broken/disable", json={"reason": "provider down"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["change"]["action"] == "disable" and out["change"]["arms"] == [0, 1]
    assert out["run"] is not None  # the paused run restarted
    broken = out["campaign"]["models"][2]
    assert broken["status"] == "disabled" and broken["disabled_reason"] == "provider down"
    assert out["campaign"]["model_changes"][0]["model"] == "broken"

    c = await _until(api3, cid, lambda c: c["status"] != "running")
    assert c["status"] == "certified" and c["winner"] == "m0", c["end_reason"]
    # in words: the winner beat the remaining model; the disabled one is named as out of the verdict
    assert c["verdict"].startswith("m0 beats every other model: it was shown to beat m1 (")
    assert "broken was disabled while the campaign ran: the verdict is about the others." in c["verdict"]
    assert c["not_beaten"] == ["m0"]
    # the yardstick is about the two models compared: c_pc* at their 2 x 2 empirical matrix
    from algorithms import plugin_pc_lower_bound

    sub = [[c["wins"][a][b] for b in (0, 1)] for a in (0, 1)], [[c["counts"][a][b] for b in (0, 1)] for a in (0, 1)]
    assert math.isclose(c["lower_bound_pc"], plugin_pc_lower_bound(*sub, c["policy_costs"][:2], 0.1))
    # the certificate is about two models: each certificate at delta / 2
    ev = c["pc_evidence"]
    assert math.isclose(ev["log_threshold"], math.log(2 / 0.1)) and ev["needed"] == 1
    # the failed duels of "broken" stay in the log; none was judged
    duels = await all_duels(api3, cid)
    with_broken = [d for d in duels if 2 in (d["model_a"], d["model_b"])]
    assert len(with_broken) >= 3 and all(d["status"] in ("failed", "cancelled") for d in with_broken)
    replay = (await api3.get(f"/v1/campaigns/{cid}/replay")).json()
    assert replay["ok"] is True, replay["diff"][:5]
    cert = json.loads((await api3.get(f"/v1/campaigns/{cid}/export")).json()["files"]["certificate.json"])
    assert cert["disabled_models"] == ["broken"] and cert["model_changes"][0]["reason"] == "provider down"
    assert cert["certified_pairs"] == [["m0", "m1"]]
    page = await api3.get(f"/campaigns/{cid}")
    assert page.status_code == 200 and "disabled" in page.text


async def test_replacing_a_model_continues_with_the_new_one_and_replays_exactly(api3):
    clients = [{"kind": "simulated"}, {"kind": "simulated"}, dead_client()]
    body = campaign_body("replace", costs=(1.0, 1.0, 1.0), clients=clients, judge={"kind": "human"}, delta=0.2)
    cid = (await api3.post("/v1/campaigns", json=body)).json()["id"]
    names = ["m0", "m1", "m2"]

    order = ["m0", "m3", "m1", "m2"]  # the annotator's taste: m0 best

    async def vote_once() -> dict:
        d = (await api3.post(f"/v1/campaigns/{cid}/duels")).json()
        if d.get("status") != "pending":
            return d
        choice = "a" if order.index(d["model_a_name"]) < order.index(d["model_b_name"]) else "b"
        v = await api3.post(f"/v1/duels/{d['id']}/vote", json={"choice": choice})
        assert v.status_code == 200, v.text
        return v.json()

    for _ in range(6):  # some duels judged before the change (m2's fail)
        await vote_once()
    new = {"name": "m3", "cost": 1.0, "client": {"kind": "simulated", "seed": 5}}
    r = await api3.post(f"/v1/campaigns/{cid}/models/m2/replace", json={"model": new, "reason": "401"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["change"]["added"] == {"name": "m3", "index": 3} and out["change"]["arms"] == [0, 1, 3]
    models = out["campaign"]["models"]
    assert [m["name"] for m in models] == [*names, "m3"]
    assert models[2]["replaced_by"] == "m3" and models[3]["replaces"] == "m2" and models[3]["status"] == "active"
    seen = set()
    for _ in range(400):
        c = (await api3.get(f"/v1/campaigns/{cid}")).json()
        if c["status"] != "running":
            break
        d = await vote_once()
        if d.get("model_a") is not None:
            seen.add((d["model_a"], d["model_b"]))
    assert c["status"] == "certified" and c["winner"] == "m0", (c["status"], c["t"], c["counts"], c["pending"], d)
    assert all(2 not in p for p in seen) and any(3 in p for p in seen)
    replay = (await api3.get(f"/v1/campaigns/{cid}/replay")).json()
    assert replay["ok"] is True, replay["diff"][:5]


async def test_refusals_are_clear_4xx_and_change_nothing(api3):
    body = campaign_body("refusals", costs=(1.0, 1.0, 1.0), judge=simulated_judge(), delta=0.1)
    cid = (await api3.post("/v1/campaigns", json=body)).json()["id"]
    r = await api3.post(f"/v1/campaigns/{cid}/models/nobody/disable")
    assert r.status_code == 404 and "m0, m1, m2" in r.json()["detail"]
    r = await api3.post(f"/v1/campaigns/{cid}/models/m2/replace", json={"model": {"name": "x", "cost": 1.0}})
    assert r.status_code == 422  # the new model needs a client
    new = {"name": "m1", "cost": 1.0, "client": {"kind": "simulated"}}
    r = await api3.post(f"/v1/campaigns/{cid}/models/m2/replace", json={"model": new})
    assert r.status_code == 409 and "simulated judge" in r.json()["detail"]
    assert (await api3.post(f"/v1/campaigns/{cid}/models/m2/disable")).status_code == 200
    r = await api3.post(f"/v1/campaigns/{cid}/models/m2/disable")
    assert r.status_code == 409 and "already disabled" in r.json()["detail"]
    r = await api3.post(f"/v1/campaigns/{cid}/models/m1/disable")
    assert r.status_code == 409 and "at least two models" in r.json()["detail"]
    c = (await api3.get(f"/v1/campaigns/{cid}")).json()
    assert [m["status"] for m in c["models"]] == ["active", "active", "disabled"] and len(c["model_changes"]) == 1
    for _ in range(6):  # a few duels of the two models left, then the pilot forecast is about them only
        assert (await api3.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
    r = await api3.post(f"/v1/campaigns/{cid}/forecast", json={"trials": 10})
    assert r.status_code == 200 and "for the 2 models still compared (1 disabled)" in r.json()["note"], r.text
    await api3.post(f"/v1/campaigns/{cid}/stop")
    r = await api3.post(f"/v1/campaigns/{cid}/models/m1/disable")
    assert r.status_code == 409 and "has ended" in r.json()["detail"]
    other = campaign_body("dctas", costs=(1.0, 1.0, 1.0), judge=simulated_judge(), algorithm="dctas")
    oid = (await api3.post("/v1/campaigns", json=other)).json()["id"]
    r = await api3.post(f"/v1/campaigns/{oid}/models/m2/disable")
    assert r.status_code == 409 and "dctas-pc" in r.json()["detail"]


# ---------------------------------------------------------------- the Python client and the command line
def test_the_client_posts_the_change_and_the_cli_reads_the_new_model_from_a_file(tmp_path, capsys):
    from service.cli import main
    from service.client import Client

    seen: list[tuple[str, dict]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        import json

        seen.append((request.url.raw_path.decode(), json.loads(request.content or b"{}")))
        return httpx.Response(200, json={"campaign_id": 4, "change": {}, "run": None, "campaign": {}})

    with Client("http://llmduel.test", "k", transport=httpx.MockTransport(handler)) as llm:
        llm.disable_model(4, "gpt 4/o", reason="401")
        llm.replace_model(4, "b", {"name": "c", "client": {"kind": "simulated"}}, resume=False)
    assert seen[0] == ("/v1/campaigns/4/models/gpt%204%2Fo/disable", {"resume": True, "reason": "401"})
    assert seen[1] == (
        "/v1/campaigns/4/models/b/replace",
        {"model": {"name": "c", "client": {"kind": "simulated"}}, "resume": False},
    )
    # campaign show marks the disabled model
    from service.cli.campaign_text import model_lines

    rows = model_lines(
        [{"name": "a", "cost": 1.0}, {"name": "b", "cost": 1.0, "status": "disabled", "replaced_by": "c"}]
    )
    assert rows[1].endswith("-") and rows[2].endswith("disabled (replaced by c)")
    # a replacement file that is not one model: one line, exit 2, nothing sent
    bad = tmp_path / "new.yaml"
    bad.write_text("- name: c\n")
    assert main(["campaign", "replace-model", "4", "b", "--with", str(bad), "--url", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err.strip()
    assert "expected one model" in err and len(err.splitlines()) == 1


async def test_disabling_without_replacement_keeps_positions_and_replays_exactly(api3):
    """Sampling prompts without replacement: the remaining pairs keep their positions in the shared
    permutation, the rebuilt policy runs the without-replacement tests at the level for two models."""
    P = [[0.5, 0.9, 0.5], [0.1, 0.5, 0.5], [0.5, 0.5, 0.5]]
    body = campaign_body("wor", costs=(1.0, 1.0, 1.0), judge=simulated_judge(P), delta=0.2)
    body["prompts"] = [f"Question {n}?" for n in range(40)]
    body.update(prompt_sampling="without_replacement", answers="reuse", verdicts="reuse")
    r = await api3.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(5):
        assert (await api3.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
    r = await api3.post(f"/v1/campaigns/{cid}/models/m2/disable", json={"resume": False})
    assert r.status_code == 200, r.text
    assert (await api3.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
    c = await _until(api3, cid, lambda c: c["status"] != "running" and not c["pending"])
    assert c["status"] == "certified" and c["winner"] == "m0", c["end_reason"]
    assert math.isclose(c["pc_evidence"]["log_threshold"], math.log(2 / 0.2))
    duels = [d for d in await all_duels(api3, cid) if d["status"] == "judged" and 2 not in (d["model_a"], d["model_b"])]
    positions = sorted(d["position"] for d in duels)
    assert positions == list(range(len(positions)))  # one pair, its positions in order, none skipped
    replay = (await api3.get(f"/v1/campaigns/{cid}/replay")).json()
    assert replay["ok"] is True, replay["diff"][:5]
