"""A hybrid campaign end to end (docs/clients-and-judges.md, *Hybrid*): the service (uvicorn) and
the fake provider (uvicorn, the models and the LLM judge) over real HTTP, on SQLite and PostgreSQL.

A background run duels four fake-provider models; the fake provider's judge judges every duel;
the human coin sends about a third of the duels to the annotators' pool; two annotators vote
through the voting page (form posts to ``/annotate/{token}/next`` and ``/vote``, as the page's
script sends them). The humans prefer the model of higher quality 85% of the time. The campaign
certifies the best model; replay is exact through the API and ``llmduel replay``; the ledger
rows (read from the database) hold exactly one human fee per duel a human voted on and none for
any other duel.
"""

from __future__ import annotations

import random
import re
import time

import httpx
import pytest
from conftest import ADMIN_KEY, llmduel_at
from service_helpers import (
    all_duels_sync,
    check_hybrid_ledger,
    fake_provider_body,
    ledger_rows,
    replay_ok,
    wait_campaign_end,
)

from service.db import Database

pytestmark = pytest.mark.slow
FAKE_PROVIDER_ARGS = ("--latency", "0.01")  # the fake provider's options (conftest's fake_provider)

H = {"Authorization": f"Bearer {ADMIN_KEY}"}
JSON_HDR = {"X-Llmduel": "1"}
FEE = 0.02


def _vote_through_the_page(service, client: httpx.Client, cid: int, tokens: list[str], rng: random.Random) -> int:
    """Annotators take the selected duels from the page and vote until none waits; returns votes cast."""
    votes = 0
    for token in tokens:
        with httpx.Client(base_url=service.url, timeout=30) as page:
            while True:
                r = page.post(f"/annotate/{token}/next", headers=JSON_HDR)
                assert r.status_code == 200, r.text
                panel = r.json()
                if panel["state"] != "duel":
                    assert panel["state"] in ("wait", "done"), panel
                    break
                duel_id = panel["duel_id"]
                html = panel["html"]
                admin_view = client.get(f"/v1/duels/{duel_id}").json()
                hybrid = admin_view["judge"]["hybrid"]
                assert hybrid["selected"] and admin_view["status"] == "pending"
                # blind: the page shows neither the models nor the judge's verdict
                for name in (admin_view["model_a_name"], admin_view["model_b_name"]):
                    assert not re.search(rf"\b{name}\b", html), name
                assert "judge_choice" not in html and str(hybrid["coin"]) not in html and "hybrid" not in html
                better = "a" if admin_view["model_a"] > admin_view["model_b"] else "b"
                choice = better if rng.random() < 0.85 else ("b" if better == "a" else "a")
                r = page.post(f"/annotate/{token}/vote", headers=JSON_HDR, data={"duel_id": duel_id, "choice": choice})
                assert r.status_code == 200, r.text
                votes += 1
    return votes


def test_a_hybrid_campaign_certifies_replays_and_pays_humans_only_for_their_votes(service, fake_provider, db_url):
    tag = f"h{time.monotonic_ns()}"  # models unique to this backend's run: the provider is shared
    prompts = [f"Hybrid question {n}: explain topic {n * 7 % 13}." for n in range(40)]
    body = fake_provider_body(fake_provider, tag, prompts, budget=100.0)
    body["judge"] = {"kind": "hybrid", "llm": body["judge"], "human": {"fee_per_vote": FEE}, "human_rate": 0.35}
    body["prompt_sampling"] = "auto"
    rng = random.Random(3)
    with httpx.Client(base_url=service.url, headers=H, timeout=30) as client:
        r = client.post("/v1/campaigns", json=body)
        assert r.status_code == 201, r.text
        created = r.json()
        assert created["algorithm"] == "dctas-pc-hybrid" and created["prompt_sampling"] == "with_replacement"
        cid = created["id"]
        tokens = [
            client.post(f"/v1/campaigns/{cid}/annotators", json={"label": f"p{n}"}).json()["token"] for n in (1, 2)
        ]
        r = client.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 2, "max_duels": 4000})
        assert r.status_code == 202, r.text
        votes, deadline = 0, time.monotonic() + 400
        while time.monotonic() < deadline:
            votes += _vote_through_the_page(service, client, cid, tokens, rng)
            view = client.get(f"/v1/campaigns/{cid}").json()
            if view["status"] != "running":
                break
            time.sleep(0.05)
        view = wait_campaign_end(client, cid)
        assert view["status"] == "certified", view
        assert view["winner"] == "large"
        duels = all_duels_sync(client, cid)
        replay = client.get(f"/v1/campaigns/{cid}/replay").json()
        assert replay["ok"], replay
    db = Database(db_url)
    try:
        humans = check_hybrid_ledger(duels, ledger_rows(db, cid), FEE)
    finally:
        db.dispose()
    assert 0 < humans <= votes
    hv = view["hybrid"]
    assert hv["human_votes"] == humans and hv["human_votes_waiting"] == 0
    judged = [d for d in duels if d["status"] == "judged"]
    assert humans < len(judged)  # the judge carried the other duels
    # every automatic verdict was charged (the fake judge has a price)
    assert all(any(ch["kind"] == "judge" for ch in d["charges"]) for d in judged)
    replay_ok(db_url, cid)
    ag = hv["agreement"]
    print(  # the figures of this run (pytest -s)
        f"hybrid e2e: {len(judged)} judged duels, {humans} human votes (about "
        f"{hv['human_votes_alone_estimate']} for humans alone, estimated), agreement {ag['agreeing']}/"
        f"{ag['decisive_votes']} {ag['interval']}, spend {view['spend']:.4f} USD of which judge {view['judge_spend']:.4f}"
    )


@pytest.mark.parametrize(
    "extra, words",
    [
        ("algorithm: dctas\n", "needs algorithm dctas-pc"),
        ("prompt_sampling: without_replacement\n", "without_replacement is not supported"),
        ("tie_policy: drop\n", "tie_policy half or random"),
    ],
)
def test_campaign_files_with_a_refused_hybrid_exit_2(service, tmp_path, extra, words):
    camp = tmp_path / "camp.yaml"
    camp.write_text(
        "name: hybrid file\nmodels:\n  - {name: a, cost: 1, client: {kind: simulated}}\n"
        "  - {name: b, cost: 1, client: {kind: simulated}}\n"
        "judge: {kind: hybrid, llm: {kind: simulated, preference: [[0.5, 0.6], [0.4, 0.5]]}, human_rate: 0.3}\n"
        "prompts: [one, two]\n" + extra
    )
    r = llmduel_at(service.url, "campaign", "create", str(camp), "--no-run")
    assert r.returncode == 2, r.stdout + r.stderr
    assert words in r.stderr and r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    camp.write_text(camp.read_text().replace(extra, ""))
    r = llmduel_at(service.url, "campaign", "create", str(camp), "--no-run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "algorithm  dctas-pc-hybrid" in r.stdout and "humans     0 votes, human_rate 0.3" in r.stdout


def test_a_hybrid_judge_with_verdict_probabilities_scores_duels_by_the_fake_judges_logprobs(
    service, fake_provider, db_url
):
    """``verdict_probabilities``: the fake provider's judge returns top_logprobs, every automatic verdict's
    score is the probability-weighted label score (never a bare 0, 1/2 or 1 here), the policy records it
    as the judge score, and the replay is exact."""
    tag = f"p{time.monotonic_ns()}"
    prompts = [f"Probability question {n}." for n in range(12)]
    body = fake_provider_body(fake_provider, tag, prompts, budget=100.0)
    llm = {**body["judge"], "verdict_probabilities": True}
    body["judge"] = {"kind": "hybrid", "llm": llm, "human": {"fee_per_vote": FEE}, "human_rate": 0.3}
    body["prompt_sampling"] = "auto"
    with httpx.Client(base_url=service.url, headers=H, timeout=30) as client:
        r = client.post("/v1/campaigns", json=body)
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        assert client.get(f"/v1/campaigns/{cid}").json()["judge"]["llm"]["verdict_probabilities"] is True
        r = client.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 2, "max_duels": 16})
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the run's 16 duels have their verdicts (the campaign keeps running)
            view = client.get(f"/v1/campaigns/{cid}").json()
            # a duel the coin selected (about three in ten) waits for a human vote: it stays pending
            if not view["run"]["active"] and view["pending"] == view["hybrid"]["human_votes_waiting"]:
                break
            time.sleep(0.2)
        assert not view["run"]["active"], view["run"]
        duels = all_duels_sync(client, cid)
        replay = client.get(f"/v1/campaigns/{cid}/replay").json()
        assert replay["ok"], replay
    scored = [d for d in duels if (d.get("judge") or {}).get("hybrid")]
    assert len(scored) >= 16
    for d in scored:
        calls = d["judge"]["calls"]
        assert [c["score_from"] for c in calls] == ["logprobs", "logprobs"], calls
        J = d["judge"]["hybrid"]["judge_score"]
        assert J not in (0.0, 0.5, 1.0) and 0.0 < J < 1.0
    replay_ok(db_url, cid)
