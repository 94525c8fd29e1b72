"""The blind test: an adversarial annotator, using every route its token reaches,
cannot tell which model is behind answer A better than chance.

The annotator of a two-model, human-judged campaign runs 48+ duels, half through
the REST API (next duel, duel view, campaign view, vote) and half through the web
voting page (``/annotate/{token}``: the page, its ``next`` and ``vote`` calls and
their JSON), and for each duel tries every strategy known to have worked:

* ``fields``: a response field names the model behind an answer (``model_a``,
  ``model_a_name``, ...), or a model's name appears in an answer;
* ``seed``: recompute the draw from public values, as the service once drew it
  (``random.Random(f"{seed}:{number}:draw")`` with the campaign's ``seed`` and
  ``n_prompts`` and the duel's ``number``);
* ``stats``: diff the per-model statistics (``wins``, ``counts``, ``evidence``,
  ``leader``) of the campaign view before and after its own vote;
* ``list``: read the campaign's duel list (with other duels' sides and votes).

Its prediction of the side (its own coin when every strategy abstains) is compared
with the truth (from the admin view); a one-sided binomial test must not reject
chance at 1e-4. Before the blinding, the code failed this test with 100% accuracy.
Every annotator-visible body is also searched for the models' names.
"""

from __future__ import annotations

import html as html_lib
import json
import random
import re

import httpx
from conftest import app_client
from scipy.stats import binomtest
from service_helpers import campaign_body
from sqlalchemy import text

NAMES = ("zephyr-alpha-7", "quokka-beta-3")
JSON_HDR = {"X-Llmduel": "1"}
TARGET_DUELS = 48
ALPHA = 1e-4
STAT_KEYS = ("wins", "counts", "evidence", "leader", "leader_index", "stats")


def _old_draw(seed: int, number: int, n_prompts: int) -> bool:
    rng = random.Random(f"{seed}:{number}:draw")
    rng.randrange(n_prompts)
    return rng.random() < 0.5


def _answers_from_html(page: str) -> tuple[str, str]:
    found = dict(
        re.findall(r'<article class="answer card" id="answer-([ab])">.*?<div class="md">(.*?)</div>', page, re.S)
    )
    return html_lib.unescape(found.get("a", "")), html_lib.unescape(found.get("b", ""))


class Adversary:
    """An annotator with a token, trying to learn which model is answer A."""

    def __init__(self, client: httpx.AsyncClient, token: str, cid: int):
        self.c, self.token, self.cid = client, token, cid
        self.seen: list[str] = []  # every body it received
        self.coin = random.Random(12345)
        self.used: dict[str, int] = {"fields": 0, "seed": 0, "stats": 0, "list": 0, "guess": 0}

    async def get(self, url: str, **kw) -> httpx.Response:
        r = await self.c.get(url, **kw)
        self.seen.append(r.text)
        return r

    async def post(self, url: str, **kw) -> httpx.Response:
        r = await self.c.post(url, **kw)
        self.seen.append(r.text)
        return r

    def from_fields(self, view: dict) -> bool | None:
        for key in ("model_a", "model_a_index"):
            if isinstance(view.get(key), int):
                return view[key] == 0
        if view.get("model_a_name") in NAMES:
            return view["model_a_name"] == NAMES[0]
        a, b = str(view.get("answer_a") or ""), str(view.get("answer_b") or "")
        for n, name in enumerate(NAMES):
            if name in a:
                return n == 0
            if name in b:
                return n == 1
        return None

    def from_seed(self, campaign: dict, view: dict) -> bool | None:
        seed, n_prompts, number = campaign.get("seed"), campaign.get("n_prompts"), view.get("number")
        if isinstance(seed, int) and isinstance(n_prompts, int) and isinstance(number, int):
            return _old_draw(seed, number, n_prompts)  # model 0 is the pair's first model (2 models)
        return None

    async def from_list(self, duel_id: int) -> bool | None:
        r = await self.get(f"/v1/campaigns/{self.cid}/duels", params={"limit": 1000})
        if r.status_code != 200:
            return None
        for item in r.json().get("items", []):
            if item.get("id") == duel_id:
                return self.from_fields(item)
        return None

    @staticmethod
    def from_stats(before: dict, after: dict, voted: str) -> bool | None:
        wb, wa = before.get("wins"), after.get("wins")
        if not (isinstance(wb, list) and isinstance(wa, list) and wb and wa):
            return None
        for i in range(2):
            for j in range(2):
                if wa[i][j] > wb[i][j]:  # model i won this vote
                    return (i == 0) == (voted == "a")
        return None

    async def campaign(self) -> dict:
        r = await self.get(f"/v1/campaigns/{self.cid}")
        assert r.status_code == 200, r.text
        return r.json()

    def predict(self, *guesses: tuple[str, bool | None]) -> dict[str, bool]:
        """Each strategy's guess where it has one; ``combined``: the first of them, else a coin."""
        out = {strategy: guess for strategy, guess in guesses if guess is not None}
        for strategy in out:
            self.used[strategy] += 1
        if not out:
            self.used["guess"] += 1
        out["combined"] = next(iter(out.values())) if out else self.coin.random() < 0.5
        return out

    async def api_cycle(self) -> tuple[int, dict[str, bool]] | None:
        r = await self.post(f"/v1/campaigns/{self.cid}/duels")
        assert r.status_code in (200, 201), r.text
        view = r.json()
        r = await self.get(f"/v1/duels/{view['id']}")
        assert r.status_code == 200, r.text
        view = {**view, **r.json()}
        if view["status"] != "pending":
            return None
        before = await self.campaign()
        early = [("fields", self.from_fields(view)), ("seed", self.from_seed(before, view))]
        early.append(("list", await self.from_list(view["id"])))
        voted = "a" if self.coin.random() < 0.5 else "b"
        r = await self.post(f"/v1/duels/{view['id']}/vote", json={"choice": voted})
        assert r.status_code == 200, r.text
        after = await self.campaign()
        return view["id"], self.predict(*early, ("stats", self.from_stats(before, after, voted)))

    async def web_cycle(self) -> tuple[int, dict[str, bool]] | None:
        page = await self.get(f"/annotate/{self.token}")
        assert page.status_code == 200
        r = await self.post(f"/annotate/{self.token}/next", headers=JSON_HDR)
        assert r.status_code == 200, r.text
        data = r.json()
        if data["state"] != "duel":
            return None
        duel_id = int(data["duel_id"])
        a, b = _answers_from_html(data["html"])
        view = {"answer_a": a, "answer_b": b}
        m = re.search(r"duel (\d+)", data["html"])  # a duel number shown on the page
        if m:
            view["number"] = int(m.group(1))
        r = await self.get(f"/v1/duels/{duel_id}")
        view.update(r.json() if r.status_code == 200 else {})
        before = await self.campaign()
        early = [("fields", self.from_fields(view)), ("seed", self.from_seed(before, view))]
        early.append(("list", await self.from_list(duel_id)))
        voted = "a" if self.coin.random() < 0.5 else "b"
        r = await self.post(
            f"/annotate/{self.token}/vote", data={"duel_id": str(duel_id), "choice": voted}, headers=JSON_HDR
        )
        assert r.status_code == 200, r.text
        after = await self.campaign()
        return duel_id, self.predict(*early, ("stats", self.from_stats(before, after, voted)))


async def test_annotator_cannot_predict_sides_better_than_chance(api, db_url):
    clients = [{"kind": "simulated", "failure_rate": 0.1}, {"kind": "simulated"}]
    body = campaign_body(name="blind test", costs=(2.0, 1.0), clients=clients, delta=0.001)
    body["models"][0]["name"], body["models"][1]["name"] = NAMES
    body["prompts"] = [f"Question number {n}: what is {n} squared?" for n in range(10)]
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "hostile"})).json()["token"]

    async with app_client(db_url, headers={"Authorization": f"Bearer {token}"}) as c:
        adv = Adversary(c, token, cid)
        predictions: dict[int, dict[str, bool]] = {}
        for n in range(4 * TARGET_DUELS):
            if len(predictions) >= TARGET_DUELS:
                break
            got = await (adv.api_cycle() if n % 2 == 0 else adv.web_cycle())
            if got is not None and got[0] not in predictions:
                predictions[got[0]] = got[1]
    assert len(predictions) >= TARGET_DUELS, f"only {len(predictions)} duels could be voted on"

    truth = {}
    for duel_id in predictions:
        d = (await api.get(f"/v1/duels/{duel_id}")).json()
        truth[duel_id] = d["model_a"] == 0
    # Each strategy on the duels where it had a guess, and the combined prediction on all.
    lines, worst = [], 1.0
    for strategy in ("combined", "fields", "seed", "stats", "list"):
        tried = [k for k in predictions if strategy in predictions[k]]
        if not tried:
            continue
        hits = sum(predictions[k][strategy] == truth[k] for k in tried)
        p = binomtest(hits, len(tried), 0.5, alternative="greater").pvalue
        worst = min(worst, p)
        lines.append(f"{strategy}: {hits}/{len(tried)} right (p={p:.2g})")
    report = "; ".join(lines) + f"; strategies with a guess: {adv.used}"
    print(report)
    assert worst >= ALPHA, "the annotator can tell the sides: " + report
    # Every strategy abstained: the annotator had nothing to go on.
    assert adv.used["guess"] == len(predictions), report

    # Nothing the annotator received names a model, shows per-model statistics or the draw's inputs.
    received = "\n".join(adv.seen)
    for name in NAMES:
        assert name not in received, f"the model name {name!r} reached the annotator"
    for body in adv.seen:
        try:
            data = json.loads(body)
        except ValueError:
            continue
        for item in data.get("items", [data]) if isinstance(data, dict) else []:
            if isinstance(item, dict):
                leaked = {"seed", "n_prompts", "number", "model_a", "model_b", *STAT_KEYS} & set(item)
                assert not leaked, f"annotator-visible fields {sorted(leaked)} in {sorted(item)}"


async def test_annotators_see_only_their_own_duels_and_votes(api):
    from service.campaigns.views import ANNOTATOR_DUEL_FIELDS

    r = await api.post("/v1/campaigns", json=campaign_body(name="two annotators"))
    cid = r.json()["id"]
    heads = []
    for label in ("one", "two"):
        token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": label})).json()["token"]
        heads.append({"Authorization": f"Bearer {token}"})
    mine = (await api.post(f"/v1/campaigns/{cid}/duels", headers=heads[0])).json()
    assert set(mine) == set(ANNOTATOR_DUEL_FIELDS)
    assert (await api.post(f"/v1/duels/{mine['id']}/vote", json={"choice": "a"}, headers=heads[0])).status_code == 200
    # The other annotator can neither read this duel (nor its vote) nor vote on it.
    assert (await api.get(f"/v1/duels/{mine['id']}", headers=heads[1])).status_code == 404
    theirs = (await api.post(f"/v1/campaigns/{cid}/duels", headers=heads[0])).json()
    r = await api.post(f"/v1/duels/{theirs['id']}/vote", json={"choice": "b"}, headers=heads[1])
    assert r.status_code == 404, r.text
    assert (await api.get(f"/v1/duels/{theirs['id']}")).json()["status"] == "pending"
    # A duel the admin started was handed to no annotator: none may read it or vote on it.
    admins = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
    r = await api.post(f"/v1/duels/{admins['id']}/vote", json={"choice": "b"}, headers=heads[1])
    assert r.status_code == 404, r.text
    assert (await api.get(f"/v1/duels/{admins['id']}", headers=heads[1])).status_code == 404
    theirs_now = (await api.post(f"/v1/campaigns/{cid}/duels", headers=heads[1])).json()
    r = await api.post(f"/v1/duels/{theirs_now['id']}/vote", json={"choice": "b"}, headers=heads[1])
    assert r.status_code == 200 and set(r.json()) == set(ANNOTATOR_DUEL_FIELDS)
    # The annotator's campaign view: name, status, guidelines and the campaign-wide vote count only
    # (no model, cost or per-model statistic).
    view = (await api.get(f"/v1/campaigns/{cid}", headers=heads[1])).json()
    assert view == {
        "id": cid,
        "name": "two annotators",
        "status": "running",
        "judge_kind": "human",
        "guidelines": None,
        "votes_counted": 2,
        "max_duels": None,
    }


async def test_draw_key_is_secret_and_old_campaigns_keep_their_seed_draws(api, monkeypatch):
    from service.campaigns.draws import draw_prompt_and_side

    r = await api.post("/v1/campaigns", json=campaign_body(name="legacy", seed=99))
    cid = r.json()["id"]
    db = api.app.state.db
    with db.engine.begin() as conn:
        key = conn.execute(text("SELECT draw_key FROM campaigns WHERE id = :c"), {"c": cid}).scalar_one()
        assert len(key) == 64 and int(key, 16) >= 0
        # Routes never show the key, not even to the admin.
        for body in [(await api.get(f"/v1/campaigns/{cid}")).text, (await api.get("/v1/campaigns")).text]:
            assert key not in body and "draw_key" not in body
        conn.execute(text("UPDATE campaigns SET draw_key = NULL WHERE id = :c"), {"c": cid})  # as before 0002
    api.app.state.campaigns.cycle.config_cache.clear()
    for _ in range(6):
        d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
        prompt_index = campaign_body()["prompts"].index(d["prompt"])
        expected = draw_prompt_and_side(99, d["number"], 3)
        assert (prompt_index, d["model_a"] == min(d["model_a"], d["model_b"])) == expected
        assert (await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})).status_code == 200
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


def test_keyed_draws_are_balanced_and_depend_on_the_key():
    from service.campaigns.draws import draw_prompt_and_side, new_draw_key, tie_coin

    k1, k2 = new_draw_key(), new_draw_key()
    draws = [draw_prompt_and_side(7, n, 5, k1) for n in range(1, 2001)]
    sides = sum(side for _, side in draws)
    assert binomtest(sides, 2000, 0.5).pvalue > 1e-4
    counts = [sum(p == k for p, _ in draws) for k in range(5)]
    assert min(counts) > 300 and max(counts) < 500
    assert draws != [draw_prompt_and_side(7, n, 5, k2) for n in range(1, 2001)]
    ties = sum(tie_coin(7, n, k1) for n in range(1, 2001))
    assert binomtest(ties, 2000, 0.5).pvalue > 1e-4


def test_migration_0002_keeps_existing_campaigns_with_their_seed_draws(tmp_path):
    import sqlalchemy as sa

    from service.db import upgrade_database

    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade_database(url, "0001")
    engine = sa.create_engine(url)
    row = dict(
        name="before 0002", algorithm="dctas-pc", delta=0.05, tie_policy="drop", status="running",
        models="[]", n_prompts=3, judge='{"kind": "human"}', seed=5, policy_state="{}", counts="{}",
        stats="{}", event_seq=0, spend_nusd=0, judge_spend_nusd=0, duels_created=0, duels_judged=0,
        duels_counted=0, duels_failed=0, run_active=False, run_concurrency=1, webhook_state="none",
        version=0, created_at="2026-01-01 00:00:00", updated_at="2026-01-01 00:00:00",
    )  # fmt: skip
    with engine.begin() as conn:
        conn.execute(
            sa.text(f"INSERT INTO campaigns ({', '.join(row)}) VALUES ({', '.join(':' + k for k in row)})"), row
        )
    upgrade_database(url)
    with engine.connect() as conn:
        got = conn.execute(sa.text("SELECT name, seed, draw_key, max_pending_per_annotator FROM campaigns")).one()
    engine.dispose()
    assert tuple(got) == ("before 0002", 5, None, 1)


async def test_an_admin_started_duel_is_no_annotators(api):
    r = await api.post("/v1/campaigns", json=campaign_body(name="admin duel, two annotators"))
    cid = r.json()["id"]
    heads = []
    for label in ("x", "y"):
        token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": label})).json()["token"]
        heads.append({"Authorization": f"Bearer {token}"})
    admins = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
    for head in heads:  # handed to no annotator: neither reads nor votes on it
        r = await api.post(f"/v1/duels/{admins['id']}/vote", json={"choice": "b"}, headers=head)
        assert r.status_code == 404, r.text
        assert (await api.get(f"/v1/duels/{admins['id']}", headers=head)).status_code == 404
    assert (await api.post(f"/v1/duels/{admins['id']}/vote", json={"choice": "b"})).status_code == 200
    assert (await api.get(f"/v1/duels/{admins['id']}")).json()["choice"] == "b"  # the admin's own vote


async def test_guessing_model_names_and_seed_does_not_recompute_simulated_answers(api):
    """Simulated texts are keyed with the campaign's secret: an annotator who knows (or guesses)
    the model names, the client seed and the prompts cannot recompute them to tell the sides."""
    from service.clients.simulated import simulated_text

    body = campaign_body(name="recompute", costs=(1.0, 1.0), clients=[{"kind": "simulated", "seed": 0}] * 2)
    body["models"][0]["name"], body["models"][1]["name"] = NAMES
    body["prompts"] = [f"Question number {n}: what is {n} cubed?" for n in range(8)]
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "guesser"})).json()["token"]
    head = {"Authorization": f"Bearer {token}"}
    seen, recomputed = 0, 0
    for _ in range(12):
        d = (await api.post(f"/v1/campaigns/{cid}/duels", headers=head)).json()
        if d["status"] != "pending":
            continue
        guesses = {simulated_text(name, d["prompt"], seed) for name in NAMES for seed in (0, 7, body["seed"])}
        recomputed += (d["answer_a"] in guesses) + (d["answer_b"] in guesses)
        seen += 2
        assert (await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"}, headers=head)).status_code == 200
    assert seen >= 16 and recomputed == 0, (seen, recomputed)
