"""A batch campaign whose prompts carry images, on SQLite and PostgreSQL against the fake provider's
batch routes: the models' batch requests carry the prompts' images, and the vision judge's batch
requests carry their blind copies (no metadata) in OpenAI's content parts, as call by call."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import time

from conftest import app_client
from PIL import Image, PngImagePlugin
from service_helpers import all_duels, batch_body, batches_of, wait_for_campaign


def _png(n: int) -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("Author", f"camera {n}")  # metadata the judge must not receive
    out = io.BytesIO()
    Image.new("RGB", (24 + n, 16), (10 * n % 256, 80, 200)).save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def _image_parts(line_body: dict) -> list[bytes]:
    out = []
    for m in line_body.get("messages") or []:
        content = m.get("content")
        for p in content if isinstance(content, list) else []:
            if p.get("type") == "image_url":
                url = p["image_url"]["url"]
                assert url.startswith("data:image/png;base64,")
                out.append(base64.b64decode(url.partition(",")[2]))
    return out


async def test_a_batch_campaigns_vision_judge_sees_the_prompts_images(db_url, batch_fake):

    base, provider_app = batch_fake
    images = [_png(n) for n in range(12)]
    prompts = [
        {
            "id": f"q{n}",
            "prompt": f"What is in picture {n}?",
            "images": ["data:image/png;base64," + base64.b64encode(raw).decode()],
        }
        for n, raw in enumerate(images)
    ]
    async with app_client(db_url, base_url="http://t") as api:
        app = api.app
        spec = batch_body(base, "vision in batches", {"round_size": 4, "poll_seconds": 0.02}, prompts=prompts)
        r = await api.post("/v1/campaigns", json=spec)
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        judge_model = spec["judge"]["client"]["model"]
        assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 1})).status_code == 202
        runs = app.state.campaigns.runs
        deadline = time.monotonic() + 120
        view = await wait_for_campaign(api, cid, lambda v: not runs.run_active_here(cid), timeout=120)
        assert time.monotonic() < deadline
        assert view["status"] in ("certified", "undecidable"), (view["status"], view["run"])
        duels = await all_duels(api, cid)
        judged = [d for d in duels if d["status"] == "judged"]
        assert len(judged) >= 4

        # every request went out in a batch; the judge's lines carry the question's image as its blind copy
        by_hash = {hashlib.sha256(raw).hexdigest(): raw for raw in images}
        judge_lines, model_lines = [], []
        for b in batches_of(provider_app, f"llmduel-{cid}-"):
            for line in provider_app.state.batches.contents[b["input_file_id"]].decode().splitlines():
                line_body = json.loads(line)["body"]  # (the provider outlives a database: ids repeat)
                if line_body["model"] == judge_model:
                    judge_lines.append(line_body)
                elif line_body["model"] in {m["name"] for m in spec["models"]}:
                    model_lines.append(line_body)
        assert judge_lines and model_lines
        for line_body in model_lines:  # the models read the prompt's image as stored
            parts = _image_parts(line_body)
            assert len(parts) == 1 and hashlib.sha256(parts[0]).hexdigest() in by_hash
        for line_body in judge_lines:
            parts = _image_parts(line_body)
            assert len(parts) == 1, line_body["messages"]
            text = json.dumps(line_body["messages"])
            assert "[image 1]" in text and "sha256" not in text
            blind = parts[0]
            assert b"tEXt" not in blind and b"camera" not in blind
            originals = [
                raw
                for raw in images
                if Image.open(io.BytesIO(raw)).convert("RGB").tobytes() == Image.open(io.BytesIO(blind)).tobytes()
            ]
            assert len(originals) == 1  # the pixels of one prompt's image
        sent = [e for e in provider_app.state.provider.requests if e["model"] == judge_model and "batch" in e]
        assert sent and all(e["first"] and e["second"] for e in sent)  # the judge read both answers
        assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_a_batch_campaigns_judge_sees_image_answers_or_creation_says_why_not(db_url, batch_fake):
    """Image answers in a batch campaign: the judge's batch lines carry both answers' blind copies."""

    base, provider_app = batch_fake
    spec = batch_body(
        base, "images in batches", {"round_size": 4, "poll_seconds": 0.02}, answers="fresh", verdicts="fresh"
    )
    tag = spec["models"][0]["client"]["model"].split("-")[0]
    spec["models"] = [
        {
            "name": f"{tag}-img-q{q}",
            "cost": 0.01 * q,
            "output": "image",
            "client": {"kind": "openai", "base_url": base, "model": f"{tag}-img-q{q}", "params": {"size": "32x32"}},
        }
        for q in (1, 4)
    ]
    spec["prompts"] = [f"A drawing of thing {n}." for n in range(6)]
    spec["budget"] = 5.0
    # a judge call's bound capped (else the bound of its input, two answers of up to MAX_ANSWER_BYTES and
    # their images, is more than this budget, and no duel can reserve it)
    spec["judge"]["client"]["max_cost_per_query"] = 0.01
    async with app_client(db_url, base_url="http://t") as api:
        app = api.app
        r = await api.post("/v1/campaigns", json=spec)
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 1})).status_code == 202
        runs = app.state.campaigns.runs
        view = await wait_for_campaign(api, cid, lambda v: not runs.run_active_here(cid), timeout=120)
        duels = await all_duels(api, cid)
        judged = [d for d in duels if d["status"] == "judged"]
        assert judged, (view["status"], view["run"], [(d["status"], d["error"]) for d in duels])
        judge_model = spec["judge"]["client"]["model"]
        lines = [
            json.loads(line)["body"]
            for b in batches_of(provider_app, f"llmduel-{cid}-")
            for line in provider_app.state.batches.contents[b["input_file_id"]].decode().splitlines()
        ]
        judge_lines = [x for x in lines if x["model"] == judge_model]
        assert judge_lines
        for line_body in judge_lines:  # answer A's image and answer B's, as blind copies
            parts = _image_parts(line_body)
            assert len(parts) == 2 and all(b"tEXt" not in p for p in parts)
