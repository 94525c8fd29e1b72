"""Image models (``output: image``) in a batch campaign, on SQLite and PostgreSQL against the fake provider's
batch routes: their requests go out in batches on the images endpoint (``/v1/images/generations``, which
OpenAI's Batch API takes), each once, charged per image; the vision judge's verdicts in batches too; the
round certifies the best image model."""

from __future__ import annotations

import re
import uuid
from collections import Counter

from conftest import app_client
from service_helpers import all_duels, batches_of, first_pregen_round, wait_for_campaign

NAME = re.compile(r"\[image sha256:([0-9a-f]{64})\]")
COSTS = {0: 0.02, 1: 0.04, 2: 0.03}  # USD per image, by model index


def _spec(base: str, tag: str) -> dict:
    def model(name: str, model: str, cost: float, size: str = "64x64") -> dict:
        client = {"kind": "openai", "base_url": base, "model": model, "params": {"size": size}}
        return {"name": name, "cost": cost, "output": "image", "client": client}

    return {
        "name": f"images in batches {tag}",
        "models": [
            model("sketchy", f"{tag}-sketch-q1", COSTS[0], "48x48"),
            model("painter", f"{tag}-paint-q4", COSTS[1]),
            model("middling", f"{tag}-mid-q2", COSTS[2]),
        ],
        "prompts": ["A lighthouse at dusk.", "A red bicycle.", "A bowl of lemons.", "A fox in snow."],
        "judge": {
            "kind": "llm",
            "client": {
                "kind": "openai",
                "base_url": base,
                "model": f"{tag}-judge",
                "params": {"max_tokens": 64},
                "price": {"input_per_1m": 2, "output_per_1m": 2},
                "batch_price": {"input_per_1m": 1, "output_per_1m": 1},
            },
            "cost": 0.001,
        },
        "answers": "reuse",
        "seed": 3,
        "delta": 0.1,
        "budget": 100.0,
        "batch": {"round_size": 4, "poll_seconds": 0.02},
    }


async def test_a_batch_campaign_of_image_models_sends_their_requests_in_batches_and_certifies(db_url, batch_fake):
    from service.images.store import get_image

    base, provider_app = batch_fake
    tag = uuid.uuid4().hex[:6]
    async with app_client(db_url, base_url="http://t") as api:
        app = api.app
        r = await api.post("/v1/campaigns", json=_spec(base, tag))
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        assert (await api.post(f"/v1/campaigns/{cid}/run", json={})).status_code == 202
        runs = app.state.campaigns.runs
        view = await wait_for_campaign(api, cid, lambda v: not runs.run_active_here(cid), timeout=120)
        assert view["status"] == "certified" and view["winner"] == "painter", view["run"]
        assert view["batch"]["rounds"] >= 1
        asked = [q for q in provider_app.state.provider.requests if q["model"].startswith(tag)]
        images = [q for q in asked if q.get("kind") == "image"]
        # every image and every verdict was asked for in a batch, each image once (answers: reuse)
        assert images and all("batch" in q for q in asked)
        assert max(Counter((q["model"], q["prompt"]) for q in images).values()) == 1
        endpoints = {b["id"]: b["endpoint"] for b in batches_of(provider_app, f"llmduel-{cid}-")}
        assert {endpoints[q["batch"]] for q in images} == {"/v1/images/generations"}
        assert {endpoints[q["batch"]] for q in asked if q.get("kind") == "judge"} == {"/v1/chat/completions"}
        duels = await all_duels(api, cid)
        judged = [d for d in duels if d["status"] == "judged"]
        assert judged and all(NAME.fullmatch(d["answer_a"]) and NAME.fullmatch(d["answer_b"]) for d in judged)
        with app.state.db.read() as s:  # the batch's images are in the image store, under their names
            assert all(get_image(s, NAME.fullmatch(d["answer_a"]).group(1)) is not None for d in judged)
        # each image is charged once, its model's price per image (no per-image batch price is known)
        paid = [ch for d in duels for ch in d["charges"] if ch["kind"] == "model" and not ch["reused"]]
        assert len(paid) == len(images)
        assert {(ch["model_index"], ch["amount"]) for ch in paid} <= set(COSTS.items())


async def test_a_human_campaigns_image_answers_are_pre_generated_in_batches_and_stored(db_url, batch_fake):
    """A human campaign of image models with ``batch``: the images pre-generated for its annotators go out in
    batches on the images endpoint, each once; their bytes are in the image store under the stored answers'
    names, so the next duels show them without calling a model."""

    from sqlalchemy import select

    from service.images.store import get_image
    from service.models import StoredAnswer

    base, provider_app = batch_fake
    tag = uuid.uuid4().hex[:6]
    async with app_client(db_url, base_url="http://t") as api:
        app = api.app
        spec = {**_spec(base, tag), "judge": {"kind": "human"}, "batch": {"round_size": 4, "poll_seconds": 0.02}}
        r = await api.post("/v1/campaigns", json=spec)
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        duel, who, rows = await first_pregen_round(api, app, cid)
        assert {(j["phase"], j["status"]) for j in rows} == {("pregen", "collected")}
        asked = [q for q in provider_app.state.provider.requests if q["model"].startswith(tag)]
        batched = [q for q in asked if "batch" in q]
        assert batched and all(q["kind"] == "image" for q in asked)
        assert max(Counter((q["model"], q["prompt"]) for q in asked).values()) == 1
        endpoints = {b["id"]: b["endpoint"] for b in batches_of(provider_app, f"llmduel-{cid}-")}
        assert {endpoints[q["batch"]] for q in batched} == {"/v1/images/generations"}
        with app.state.db.read() as s:
            texts = s.scalars(select(StoredAnswer.text).where(StoredAnswer.status == "ready")).all()
            names = [m.group(1) for t in texts if (m := NAME.fullmatch(t or ""))]
            assert len(names) >= len(batched)
            assert all(get_image(s, h) is not None for h in names)
        vote = await api.post(f"/v1/duels/{duel['id']}/vote", headers=who, json={"choice": "a"})
        assert vote.status_code == 200, vote.text
        nxt = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
        assert nxt.status_code == 201, nxt.text
        direct = [q for q in provider_app.state.provider.requests if q["model"].startswith(tag) and "batch" not in q]
        assert len(direct) == 2  # the first duel's own images only
