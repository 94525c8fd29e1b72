"""Sampling prompts without replacement, end to end: the service (uvicorn) and the fake provider
(uvicorn) over real HTTP, on SQLite and PostgreSQL (docs/reuse.md, "In the service").

Four fake-provider models, 50 prompts, an LLM judge in both orders, delta = 0.05, the
default settings (``prompt_sampling: auto`` resolves to without_replacement, tie policy
half), a background run with concurrent duels. From the duel log and the fake provider's
own request log: the campaign certifies the best model; each pair's counted duels have
positions 0, 1, 2, ... in the order they were counted and use prompt ``perm[q]`` of one
permutation shared by all pairs (recomputed here from the campaign's secret key, read from
the database); no pair is judged twice on a prompt; every (model, prompt) answer and every
judgement is requested at most once; replay is exact.
"""

from __future__ import annotations

import collections
import time

import httpx
import pytest
from conftest import ADMIN_KEY
from service_helpers import all_duels_sync, fake_provider_body, provider_requests, replay_ok, wait_campaign_end

from service.campaigns.sampling import prompt_permutation
from service.db import Database
from service.models import Campaign

pytestmark = pytest.mark.slow
FAKE_PROVIDER_ARGS = ("--latency", "0.02")  # the fake provider's options (conftest's fake_provider)

H = {"Authorization": f"Bearer {ADMIN_KEY}"}


def _permutation(db_url: str, cid: int) -> list[int]:
    db = Database(db_url)
    try:
        with db.read() as s:
            c = s.get(Campaign, cid)
            return prompt_permutation(c.draw_key, c.n_prompts)
    finally:
        db.dispose()


def test_a_wor_campaign_certifies_with_one_shared_order_and_pays_each_answer_once(service, fake_provider, db_url):
    tag = f"w{time.monotonic_ns()}"  # models unique to this backend's run: the provider is shared
    prompts = [f"WOR question {n}: explain topic {n * 7 % 13}." for n in range(50)]
    body = fake_provider_body(fake_provider, tag, prompts)
    del body["prompt_sampling"]  # the default: auto
    before = len(provider_requests(fake_provider))
    with httpx.Client(base_url=service.url, headers=H, timeout=30) as client:
        r = client.post("/v1/campaigns", json=body)
        assert r.status_code == 201, r.text
        created = r.json()
        assert created["prompt_sampling"] == "without_replacement" and created["tie_policy"] == "half"
        cid = created["id"]
        r = client.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 4, "max_duels": 3000})
        assert r.status_code == 202, r.text
        view = wait_campaign_end(client, cid)
        duels = all_duels_sync(client, cid)
        assert view["status"] == "certified", view
        assert view["winner"] == "large"
        assert view["population"] == 50
        replay = client.get(f"/v1/campaigns/{cid}/replay").json()
        assert replay["ok"], replay
    reqs = [r for r in provider_requests(fake_provider)[before:] if r["model"].startswith(tag + "-")]

    perm = _permutation(db_url, cid)
    names = [m["name"] for m in view["models"]]
    counted = [d for d in duels if d["record_seq"] is not None]
    assert len(counted) == view["duels_counted"] == view["t"]
    by_pair: dict[tuple[int, int], list[dict]] = collections.defaultdict(list)
    for d in counted:
        by_pair[tuple(sorted((d["model_a"], d["model_b"])))].append(d)
    for pair, rows in by_pair.items():
        rows.sort(key=lambda d: d["record_seq"])
        # pair k's q-th counted duel has position q and prompt perm[q]: one shared order, no repeats
        assert [d["position"] for d in rows] == list(range(len(rows))), pair
        assert [d["prompt"] for d in rows] == [prompts[perm[q]] for q in range(len(rows))], pair
        assert len(rows) <= 50
    judged_pairs = collections.Counter(
        (tuple(sorted((d["model_a"], d["model_b"]))), d["prompt"]) for d in duels if d["status"] == "judged"
    )
    assert max(judged_pairs.values()) == 1  # each (pair, prompt) judged at most once

    # every (model, prompt) answer and every (question, first, second) judgement requested at most once
    answers = collections.Counter((r["model"], r["prompt"]) for r in reqs if r["kind"] == "answer")
    verdicts = collections.Counter((r["question"], r["first"], r["second"]) for r in reqs if r["kind"] == "judge")
    assert answers and max(answers.values()) == 1, answers.most_common(3)
    assert verdicts and max(verdicts.values()) == 1, verdicts.most_common(3)
    # every duel (counted, held, failed or cancelled) used the prompt of its position
    assert all(d["position"] is not None and d["prompt"] == prompts[perm[d["position"]]] for d in duels)
    for n, name in enumerate(names):  # a model was asked only the prompts of its own pairs' positions
        model = body["models"][n]["client"]["model"]
        asked = {p for (m, p) in answers if m == model}
        assert asked <= {d["prompt"] for d in duels if n in (d["model_a"], d["model_b"])}, name
    replay_ok(db_url, cid)
