"""Several images per call (an image model's ``params.n``) end to end on the fake provider, on SQLite
and PostgreSQL: one call of K images is charged once (price per image x K, within its reserved bound),
its further images are stored as spares of that model for that prompt, and later duels take them,
each image in one duel only, before buying a new call (service/campaigns/spares.py)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime as dt
import re

import pytest
from service_helpers import all_duels, campaign_body

from service import cycle
from service.campaigns import spares, store_keys
from service.clients.config import call_cost_bound
from service.models import to_nusd

BASE = "http://fake.test/v1"
NAME = re.compile(r"\[image sha256:([0-9a-f]{64})\]")
JUDGE = {"kind": "llm", "client": {"kind": "openai", "base_url": BASE, "model": "fake-judge"}, "cost": 0.001}


def _model(name: str, model: str, cost: float, n: int | None = 3) -> dict:
    params: dict = {"size": "32x32"}
    if n is not None:
        params["n"] = n
    return {
        "name": name,
        "cost": cost,
        "output": "image",
        "client": {"kind": "openai", "base_url": BASE, "model": model, "params": params},
    }


def _body(tag: str, **extra) -> dict:
    body = {
        "name": f"images per call {tag}",
        "models": [_model("painter", f"{tag}-paint-q4", 0.04), _model("sketchy", f"{tag}-sketch-q1", 0.02)],
        "prompts": ["A lighthouse at dusk."],
        "judge": JUDGE,
        "answers": "fresh",
        "seed": 5,
        "delta": 0.01,
        "budget": 10.0,
    }
    body.update(extra)
    return body


def _calls(fake, tag: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for q in fake.state.provider.requests:
        if q.get("kind") == "image" and q["model"].startswith(f"{tag}-"):
            out.setdefault(q["model"], []).append(q)
    return out


async def test_one_call_of_three_images_serves_three_duels_and_is_charged_once(api, fake):
    r = await api.post("/v1/campaigns", json=_body("three"))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(3):
        d = await api.post(f"/v1/campaigns/{cid}/duels")
        assert d.status_code == 201 and d.json()["status"] == "judged", d.text
    calls = _calls(fake, "three")
    assert sorted(calls) == ["three-paint-q4", "three-sketch-q1"]
    assert all(len(c) == 1 and c[0]["n"] == 3 for c in calls.values()), calls  # one call each, three images

    duels = sorted(await all_duels(api, cid), key=lambda d: d["id"])
    assert [d["status"] for d in duels] == ["judged"] * 3
    for idx, name in enumerate(("painter", "sketchy")):
        shown = [d["answer_a"] if d["model_a_name"] == name else d["answer_b"] for d in duels]
        hashes = [NAME.fullmatch(t).group(1) for t in shown]
        assert len(set(hashes)) == 3  # three different images, each shown in one duel (without replacement)
        charges = [ch for d in duels for ch in d["charges"] if ch["kind"] == "model" and ch["model_index"] == idx]
        paid = [ch for ch in charges if ch["amount"]]
        cost = 0.04 if name == "painter" else 0.02
        assert len(paid) == 1 and paid[0]["amount"] == pytest.approx(3 * cost)  # the call, once, per image x 3
        reused = [ch for ch in charges if not ch["amount"]]
        assert len(reused) == 2 and all(ch["reused"] and ch["reuses_charge_id"] == paid[0]["id"] for ch in reused)
    # the images shown are the ones the provider drew in its one call, stored content-addressed
    from service.fake_images import read_marker
    from service.images.store import get_image

    with api.app.state.db.read() as s:
        for name, model in (("painter", "three-paint-q4"), ("sketchy", "three-sketch-q1")):
            shown = [d["answer_a"] if d["model_a_name"] == name else d["answer_b"] for d in duels]
            markers = {read_marker(bytes(get_image(s, NAME.fullmatch(t).group(1)).data)) for t in shown}
            assert markers == {f"<<fake:{m}>>" for m in calls[model][0]["markers"]}
    c = (await api.get(f"/v1/campaigns/{cid}")).json()
    judged = sum(ch["amount"] for d in duels for ch in d["charges"] if ch["kind"] != "model")
    assert c["spend"] == pytest.approx(3 * 0.04 + 3 * 0.02 + judged, abs=1e-9)

    # the fourth duel finds no spare left: one new call per model
    d = await api.post(f"/v1/campaigns/{cid}/duels")
    assert d.status_code == 201 and d.json()["status"] == "judged", d.text
    assert all(len(c) == 2 for c in _calls(fake, "three").values())
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_the_budget_bound_of_a_call_covers_its_images(api, fake):
    """A duel reserves each image model's call at its price per image times n, before the call."""
    model = _model("painter", "bound-paint-q4", 0.04)
    assert call_cost_bound(model["client"], 0.04, 10) == pytest.approx(0.12)
    assert call_cost_bound(_model("p", "x", 0.04, n=None)["client"], 0.04, 10) == pytest.approx(0.04)
    # two models of 3 images: 0.18 USD before the judge; a budget of 0.15 holds three images of each at
    # one image a call but not one duel here, so the campaign ends without calling a model
    r = await api.post("/v1/campaigns", json=_body("bound", budget=0.15))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    d = await api.post(f"/v1/campaigns/{cid}/duels")
    assert d.status_code != 201 and "budget" in d.text, d.text
    assert _calls(fake, "bound") == {}
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["spend"] == 0
    # with room for the bound the duel runs, and its charges stay within what was reserved
    r = await api.post("/v1/campaigns", json=_body("bound2", budget=0.2))
    cid = r.json()["id"]
    d = await api.post(f"/v1/campaigns/{cid}/duels")
    assert d.status_code == 201 and d.json()["status"] == "judged", d.text
    c = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert c["spend"] <= 0.2 and c["spend"] >= 0.18


@pytest.mark.parametrize(
    "change,reason",
    [
        ({"answers": "reuse"}, "needs answers: fresh"),
        ({"models": [_model("a", "x-q1", 0.01, n=11), _model("b", "y-q1", 0.01)]}, "from 1 to 10"),
        ({"models": [_model("a", "x-q1", 0.01, n=0), _model("b", "y-q1", 0.01)]}, "from 1 to 10"),
        ({"models": [_model("a", "x-q1", 0.01, n=True), _model("b", "y-q1", 0.01)]}, "from 1 to 10"),
    ],
)
async def test_bad_image_counts_are_422(api, change, reason):
    r = await api.post("/v1/campaigns", json=_body("bad", **change))
    assert r.status_code == 422 and reason in r.text, r.text


async def test_n_stays_refused_on_text_models_and_gemini_image_models(api):
    text = campaign_body(costs=(0.01, 0.01), judge={"kind": "human"}, answers="fresh")
    text["models"][0]["client"] = {"kind": "openai", "base_url": BASE, "model": "x", "params": {"n": 2}}
    r = await api.post("/v1/campaigns", json=text)
    assert r.status_code == 422 and "params.n" in r.text and "set by the client" in r.text, r.text
    gemini = {"kind": "gemini", "model": "gemini-2.5-flash-image", "params": {"n": 2}}
    body = _body("gem")
    body["models"][0] = {"name": "g", "cost": 0.03, "output": "image", "client": gemini}
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422 and "need an openai client" in r.text, r.text


async def _duel_rows(api, tag: str, count: int, expires_in: dt.timedelta) -> list[int]:
    """``count`` duels in flight (status ``calling``) of a new campaign, expiring ``expires_in`` from now."""
    from service.models import Duel, utcnow

    cid = (await api.post("/v1/campaigns", json=_body(tag))).json()["id"]
    now = utcnow()
    with api.app.state.db.write() as s:
        rows = [
            Duel(
                campaign_id=cid,
                number=k + 1,
                model_i=0,
                model_j=1,
                a_is_i=True,
                prompt_index=0,
                prompt="A lighthouse at dusk.",
                status="calling",
                select_seq=k + 1,
                pending_at_select=[],
                created_at=now,
                expires_at=now + expires_in,
            )
            for k in range(count)
        ]
        s.add_all(rows)
        s.flush()
        return [int(r.id) for r in rows]


async def test_two_duels_never_take_the_same_spare(api):
    """take_spare is one conditional UPDATE: concurrent takers get distinct rows, then None."""
    db = api.app.state.db
    model = _model("m", "race-q1", 0.01)
    with db.write() as s:
        assert spares.keep(s, model, "p", [f"[image sha256:{k:064x}]" for k in range(4)], charge_id=None) == 4
    mkey, phash = spares.spare_keys(model, "p")
    duels = await _duel_rows(api, "race", 9, dt.timedelta(hours=1))
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda d: spares.take_spare(db, mkey, phash, d), duels[:8]))
    taken = [g for g in got if g is not None]
    assert len(taken) == 4 and len({g.id for g in taken}) == 4 and all(g.spare for g in taken)
    taker = duels[got.index(taken[0])]
    # a failed duel gives its spare back, only its own; a ready answer of the store is never one of them
    with db.write() as s:
        assert spares.give_back(s, [taken[0].id], duels[8]) == 0
        assert spares.give_back(s, [taken[0].id], taker) == 1
    again = spares.take_spare(db, mkey, phash, duels[8])
    assert again is not None and again.id == taken[0].id and again.text == taken[0].text
    assert spares.take_spare(db, mkey, phash, duels[8]) is None  # live takers keep theirs
    assert store_keys.model_key(model) == mkey and to_nusd(0.0) == 0


async def test_the_spares_of_a_duel_that_died_before_storing_its_answers_are_given_back(api, fake, monkeypatch):
    """The process dies between the take and the answers transaction: once that duel's expiry has
    passed, the next duel of that model and prompt takes its spare back instead of buying a call, so
    every paid image is shown in one duel (on SQLite and PostgreSQL)."""
    from sqlalchemy import update

    from service.models import Duel, StoredAnswer

    cid = (await api.post("/v1/campaigns", json=_body("dies"))).json()["id"]
    d = await api.post(f"/v1/campaigns/{cid}/duels")
    assert d.status_code == 201 and d.json()["status"] == "judged", d.text
    svc = api.app.state.campaigns.cycle

    def died(plan, results):
        raise RuntimeError("the process died before the answers transaction")

    async def died_on_loop(svc, plan, results):
        died(plan, results)

    monkeypatch.setattr(svc, "store_answers_tx", died)  # either driver (asyncpg: an admin's duel on PostgreSQL)
    monkeypatch.setattr(cycle, "store_answers_async", died_on_loop)
    r = await api.post(f"/v1/campaigns/{cid}/duels")  # the request sees the death (no answers stored)
    assert r.status_code >= 500, r.text
    monkeypatch.undo()
    db = api.app.state.db
    with db.read() as s:
        dead_duel = {d.id for d in s.query(Duel).filter(Duel.campaign_id == cid, Duel.status == "calling")}
        dead = s.query(StoredAnswer).filter(StoredAnswer.status == "spent", StoredAnswer.taken_by.in_(dead_duel)).all()
        assert len(dead) == 2 and len(dead_duel) == 1  # one spare of each model, held by the dead duel
        held, keys = {r.id for r in dead}, {(r.model_key, r.prompt_hash) for r in dead}
    # while the dead duel could still store its answers (before its expiry and the grace), nobody takes them
    for key in keys:
        with db.write() as s:
            assert spares.recover(s, *key, dt.datetime.now(dt.timezone.utc)) == 0
    with db.write() as s:  # time passes: the dead duel's expiry and the grace are over
        s.execute(
            update(Duel)
            .where(Duel.id.in_(dead_duel))
            .values(expires_at=dt.datetime.now(dt.timezone.utc) - spares.RECOVER_GRACE - dt.timedelta(seconds=1))
        )
    for _ in range(2):
        d = await api.post(f"/v1/campaigns/{cid}/duels")
        assert d.status_code == 201 and d.json()["status"] == "judged", d.text
    assert all(len(c) == 1 for c in _calls(fake, "dies").values())  # the paid images served three duels
    duels = [d for d in await all_duels(api, cid) if d["status"] == "judged"]
    assert len(duels) == 3
    for name in ("painter", "sketchy"):
        shown = [d["answer_a"] if d["model_a_name"] == name else d["answer_b"] for d in duels]
        assert len(set(shown)) == 3  # each image in one duel
    with db.read() as s:
        rows = s.query(StoredAnswer).filter(StoredAnswer.id.in_(held)).all()
        assert all(r.status == "spent" and r.taken_by is None for r in rows)  # shown by the later duels


async def test_a_failed_duel_keeps_its_images_for_later_duels_of_any_campaign(api, fake):
    """The other model failed: nobody saw the paid call's images, so all three stay spares (a spare
    taken by a failed duel is given back), and another campaign with the same model takes them."""
    broken = _model("broken", "spares-fault-500-q2", 0.02)
    broken["client"]["max_attempts"] = 1
    first = _body("spares", models=[_model("painter", "spares-paint-q4", 0.04), broken])
    r = await api.post("/v1/campaigns", json=first)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(2):
        d = await api.post(f"/v1/campaigns/{cid}/duels")
        assert d.status_code == 201 and d.json()["status"] == "failed", d.text
    assert len(_calls(fake, "spares")["spares-paint-q4"]) == 1  # the second duel took a spare, then gave it back
    paying = [
        ch
        for d in await all_duels(api, cid)
        for ch in d["charges"]
        if ch["kind"] == "model" and ch["model_index"] == 0 and ch["amount"]
    ]
    assert len(paying) == 1 and paying[0]["amount"] == pytest.approx(0.12)

    second = _body(
        "spares2", models=[_model("painter", "spares-paint-q4", 0.04), _model("other", "spares-mid-q2", 0.02)]
    )
    r = await api.post("/v1/campaigns", json=second)
    cid2 = r.json()["id"]
    for _ in range(3):
        d = await api.post(f"/v1/campaigns/{cid2}/duels")
        assert d.status_code == 201 and d.json()["status"] == "judged", d.text
    assert len(_calls(fake, "spares")["spares-paint-q4"]) == 1  # all three duels drew the first campaign's images
    duels = await all_duels(api, cid2)
    reused = [ch for d in duels for ch in d["charges"] if ch["kind"] == "model" and ch["model_index"] == 0]
    assert len(reused) == 3 and all(ch["amount"] == 0 and ch["reuses_charge_id"] == paying[0]["id"] for ch in reused)
    shown = {d["answer_a"] if d["model_a_name"] == "painter" else d["answer_b"] for d in duels}
    assert len(shown) == 3
    assert (await api.get(f"/v1/campaigns/{cid2}/replay")).json()["ok"] is True


async def test_the_images_client_asks_for_n_reads_at_most_n_and_charges_per_image():
    import base64
    import io
    import json as jsonlib

    import httpx
    import respx
    from PIL import Image

    from service.clients import build_client, parse_client_config
    from service.clients.config import images_per_call

    def png(v: int) -> str:
        out = io.BytesIO()
        Image.new("RGB", (8, 8), (v, v, v)).save(out, format="PNG")
        return base64.b64encode(out.getvalue()).decode()

    raw = {"kind": "openai", "base_url": "http://img.test/v1", "model": "gpt-image-1", "params": {"n": 3}}
    with pytest.raises(ValueError, match="params.n"):
        parse_client_config(raw)  # a text client refuses n
    cfg = parse_client_config(raw, output="image")
    assert cfg.params["n"] == 3 and images_per_call(raw) == 3
    assert images_per_call({"kind": "gemini", "params": {"n": 3}}) == 1
    client = build_client(cfg, model_name="m", fixed_cost=0.04, output="image")
    bodies = []

    def reply(request):
        bodies.append(jsonlib.loads(request.content))
        return httpx.Response(200, json={"data": [{"b64_json": png(v)} for v in (1, 2, 3, 4)]})  # one too many

    with respx.mock() as mock:
        mock.post("http://img.test/v1/images/generations").mock(side_effect=reply)
        res = await client.complete("A fox.")
    await client.aclose()
    assert bodies == [{"model": "gpt-image-1", "prompt": "A fox.", "n": 3}]
    assert len(res.more_images) == 2 and res.image is not None
    assert res.cost == pytest.approx(0.12)  # three images at the price per image, not the fourth
    names = [res.text] + [name for name, _ in res.more_images]
    assert len(set(names)) == 3 and all(NAME.fullmatch(t) for t in names)


async def test_an_image_of_several_the_checks_refuse_is_charged_and_dropped():
    """The provider made and billed every image it returned: a refused one (bad base64 here) is charged
    with the others and never shown; the call fails only when no image is usable."""
    import base64
    import io

    import httpx
    import respx
    from PIL import Image

    from service.clients import build_client, parse_client_config
    from service.clients.base import ClientError

    def png(v: int) -> str:
        out = io.BytesIO()
        Image.new("RGB", (8, 8), (v, v, v)).save(out, format="PNG")
        return base64.b64encode(out.getvalue()).decode()

    raw = {"kind": "openai", "base_url": "http://img.test/v1", "model": "gpt-image-1", "params": {"n": 3}}
    client = build_client(parse_client_config(raw, output="image"), model_name="m", fixed_cost=0.04, output="image")
    replies = [
        {"data": [{"b64_json": "not base64!"}, {"b64_json": png(5)}, {"b64_json": png(6)}]},
        {"data": [{"b64_json": "not base64!"}, {"b64_json": ""}]},
    ]
    with respx.mock() as mock:
        mock.post("http://img.test/v1/images/generations").mock(
            side_effect=[httpx.Response(200, json=r) for r in replies]
        )
        res = await client.complete("A fox.")
        assert res.cost == pytest.approx(0.12)  # three images made, three charged
        assert res.image is not None and len(res.more_images) == 1  # the refused one is dropped
        assert NAME.fullmatch(res.text) and NAME.fullmatch(res.more_images[0][0])
        with pytest.raises(ClientError, match="base64"):
            await client.complete("A fox.")  # nothing usable: a failed call, as for one image
    await client.aclose()


def _priced(name: str, model: str, n: int = 3, max_tokens: int = 1000, **client) -> dict:
    """An image model priced per token (``price`` and ``params.max_tokens`` per image, no cap)."""
    m = _model(name, model, 0.01, n=n)
    m["client"]["params"]["max_tokens"] = max_tokens
    m["client"]["price"] = {"input_per_1m": 5.0, "output_per_1m": 40.0}
    m["client"].update(client)
    return m


def test_the_bound_covers_n_images_in_every_pricing_form():
    """Per image, per token (the output-token limit is per image) and with a cap per image: n times one image."""
    for extra in ({}, {"max_cost_per_query": 0.07}):
        one = call_cost_bound(_priced("p", "x", n=1, **extra)["client"], 0.01, 40)
        three = call_cost_bound(_priced("p", "x", n=3, **extra)["client"], 0.01, 40)
        assert one is not None and one > 0.01 and three == pytest.approx(3 * one)
    assert call_cost_bound(_priced("p", "x", n=3, max_cost_per_query=0.07)["client"], 0.01, 40) == pytest.approx(0.21)
    one_image_tokens = ((40 + 256) * 5.0 + 1000 * 40.0) / 1e6
    assert call_cost_bound(_priced("p", "x")["client"], 0.01, 40) == pytest.approx(3 * one_image_tokens)


async def test_a_call_of_three_images_priced_per_token_is_charged_in_full_within_its_bound():
    """A legit n=3 call reporting three images' worth of output tokens (more than one image's limit) is
    charged its per-token cost in full: within the n-image bound, no provider fault."""
    import base64
    import io

    import httpx
    import respx
    from PIL import Image

    from service.clients import build_client, parse_client_config
    from service.money.bounds import model_bound_nusd
    from service.money.ledger import model_charge

    def png(v: int) -> str:
        out = io.BytesIO()
        Image.new("RGB", (8, 8), (v, v, v)).save(out, format="PNG")
        return base64.b64encode(out.getvalue()).decode()

    model = _priced("painter", "gpt-image-1")
    model["client"]["base_url"] = "http://img.test/v1"
    prompt = "A fox."
    cfg = parse_client_config(model["client"], output="image")
    client = build_client(cfg, model_name="painter", fixed_cost=0.01, output="image")
    usage = {"input_tokens": 30, "output_tokens": 2900}  # three images of up to 1000 tokens each
    with respx.mock() as mock:
        mock.post("http://img.test/v1/images/generations").mock(
            return_value=httpx.Response(200, json={"data": [{"b64_json": png(v)} for v in (1, 2, 3)], "usage": usage})
        )
        res = await client.complete(prompt)
    await client.aclose()
    assert len(res.more_images) == 2 and res.output_tokens == 2900
    cost = (30 * 5.0 + 2900 * 40.0) / 1e6
    assert res.cost == pytest.approx(cost)
    stored_model = {**model, "client": cfg.model_dump(mode="json")}
    bound = model_bound_nusd(stored_model, prompt)
    one = model_bound_nusd(
        {**stored_model, "client": {**stored_model["client"], "params": {"max_tokens": 1000}}}, prompt
    )
    assert one is not None and bound is not None and one < to_nusd(cost) <= bound  # above one image's bound
    charge = model_charge(stored_model, prompt, res)
    assert charge.fault is None and charge.amount_nusd == to_nusd(cost) and charge.amount_nusd <= bound
    # more than n images' worth of output tokens is still the provider's fault
    over = model_charge(stored_model, prompt, dataclasses.replace(res, output_tokens=3001))
    assert over.fault is not None and "per image x 3 images" in over.fault


async def test_the_budget_check_reserves_the_n_image_bound_of_a_per_token_price(api, fake):
    """A budget that holds one image's per-token bound of each model but not three images' is refused before
    any call; with room for the n-image bounds the duel runs."""
    from service.money.bounds import model_bound_nusd

    models = [_priced("painter", "ptok-paint-q4"), _priced("sketchy", "ptok-sketch-q1")]
    for m in models:
        m["client"]["base_url"] = BASE
    three = sum(model_bound_nusd(m, "A lighthouse at dusk.") for m in models) / 1e9
    assert three == pytest.approx(3 * 2 * ((21 + 256) * 5.0 + 1000 * 40.0) / 1e6, rel=1e-6)
    r = await api.post("/v1/campaigns", json=_body("ptok", models=models, budget=round(three * 0.6, 6)))
    assert r.status_code == 201, r.text
    d = await api.post(f"/v1/campaigns/{r.json()['id']}/duels")
    assert d.status_code != 201 and "budget" in d.text, d.text
    assert _calls(fake, "ptok") == {}
    r = await api.post("/v1/campaigns", json=_body("ptok2", models=models, budget=round(three + 0.01, 6)))
    d = await api.post(f"/v1/campaigns/{r.json()['id']}/duels")
    assert d.status_code == 201 and d.json()["status"] == "judged", d.text
    assert all(len(c) == 1 and c[0]["n"] == 3 for c in _calls(fake, "ptok2").values())
