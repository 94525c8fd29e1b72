"""A vision campaign's budget covers its images: the bound of a call counts its prompt's images by
the provider's published rule, so a provider that bills image tokens never takes the spend past the
budget (and no call reports more than its bound)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import math
import time

import httpx
import pytest
import respx
from PIL import Image
from service_helpers import campaign_body, simulated_judge

from service.images.tokens import (
    anthropic_image_tokens,
    gemini_image_tokens,
    image_input_tokens,
    openai_image_tokens,
    worst_image_tokens,
)
from service.money.bounds import model_bound_nusd

PRICE = {"input_per_1m": 2.5, "output_per_1m": 10.0}
MAX_TOKENS = 40


def _png(size: tuple[int, int], color=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def _url(raw: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def _gpt4o_tokens(width: int, height: int) -> int:
    """What OpenAI bills gpt-4o for one high-detail image (the published tile rule), as the mock does."""
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def _billing_provider(calls: list[float]):
    """An OpenAI-compatible provider that bills the text and every image of the request."""

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        tokens = 0
        for m in body["messages"]:
            parts = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
            for p in parts:
                if p["type"] == "text":
                    tokens += len(p["text"].encode()) // 4 + 1
                else:
                    raw = base64.b64decode(p["image_url"]["url"].partition(",")[2])
                    tokens += _gpt4o_tokens(*Image.open(io.BytesIO(raw)).size)
        out = MAX_TOKENS
        calls.append((tokens * PRICE["input_per_1m"] + out * PRICE["output_per_1m"]) / 1e6)
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"role": "assistant", "content": "a picture of red"}}],
                "usage": {"prompt_tokens": tokens, "completion_tokens": out},
            },
        )

    return answer


def test_published_rules():
    """The per-image rules at the providers' own worked examples."""
    assert _gpt4o_tokens(1024, 1024) == 765 and _gpt4o_tokens(2048, 4096) == 1105  # OpenAI's examples
    assert openai_image_tokens("gpt-4o", 1024, 1024) >= 765
    assert openai_image_tokens("gpt-4o-mini", 1024, 1024) == 2833 + 5667 * 4
    assert openai_image_tokens("gpt-4.1-nano", 1024, 1024) >= math.ceil(2.46 * 1024)
    assert anthropic_image_tokens(1000, 1000) == 1334 and anthropic_image_tokens(8000, 2000) == 4784
    assert gemini_image_tokens(384, 384) == 1120 and gemini_image_tokens(3072, 3072) == 258 * 16
    for kind, model in (("openai", "gpt-4o"), ("openai", "gpt-4o-mini"), ("anthropic", "c"), ("gemini", "g")):
        client = {"kind": kind, "model": model}
        worst = worst_image_tokens(client)
        for size in ((8192, 2048), (4096, 4096), (2048, 769), (769, 8192), (1, 8192), (300, 300)):
            assert image_input_tokens(client, *size) <= worst, (kind, size)
    assert image_input_tokens({"kind": "simulated"}, 4096, 4096) == 0


def test_bound_counts_each_image_of_the_prompt():
    model = {"name": "m", "cost": 0.001, "client": {"kind": "openai", "model": "gpt-4o", "price": PRICE}}
    model["client"]["params"] = {"max_tokens": MAX_TOKENS}
    text = model_bound_nusd(model, "Describe.")
    one = model_bound_nusd({**model, "image_tokens": 1000}, "Describe.\n[image sha256:ab]")
    two = model_bound_nusd({**model, "image_tokens": 1000}, "Describe.\n[image sha256:ab]\n[image sha256:cd]")
    assert text is not None and one is not None and two is not None
    assert two - one >= 1000 * 2.5 and one - text >= 1000 * 2.5  # nano-USD: 1000 tokens at 2.5 USD / 1M
    legacy = model_bound_nusd(model, "Describe.\n[image sha256:ab]")  # a row stored without image_tokens
    assert legacy is not None and legacy - text >= worst_image_tokens(model["client"]) * 2.5


@pytest.mark.parametrize("concurrent", [False, True], ids=["one-by-one", "run-concurrency-4"])
async def test_vision_campaign_never_spends_past_a_tight_budget(api, concurrent):
    """Each call is billed its images by the provider; the campaign ends for its budget, with its
    spend and the provider's own bill within it and no call above its bound."""
    budget = 0.06
    client = {
        "kind": "openai",
        "base_url": "http://provider.test/v1",
        "model": "gpt-4o",
        "price": PRICE,
        "params": {"max_tokens": MAX_TOKENS},
    }
    prompts = [
        {"prompt": "What colour is this?", "images": [_url(_png((1024, 1024)))]},
        {"prompt": "Compare them.", "images": [_url(_png((2048, 768))), _url(_png((600, 400), (0, 0, 255)))]},
    ]
    body = campaign_body(
        costs=(0.002, 0.002, 0.002),
        clients=[client] * 3,
        judge=simulated_judge(),
        prompts=prompts,
        budget=budget,
        answers="fresh",
    )
    bills: list[float] = []
    with respx.mock(assert_all_called=False) as mock:
        mock.post("http://provider.test/v1/chat/completions").mock(side_effect=_billing_provider(bills))
        r = await api.post("/v1/campaigns", json=body)
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        if concurrent:  # a background run with four duels in flight at once
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 4})).status_code == 202
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                c = (await api.get(f"/v1/campaigns/{cid}")).json()
                if c["status"] != "running" and c["pending"] == 0:
                    break
                await asyncio.sleep(0.05)
        else:
            for _ in range(200):
                d = await api.post(f"/v1/campaigns/{cid}/duels")
                if d.status_code != 201:
                    break
    c = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert c["status"] == "budget_exhausted", (c["status"], c.get("end_reason"))
    assert len(bills) >= 4  # the budget paid for several duels
    assert c["spend"] <= budget and sum(bills) <= budget + 1e-9, (c["spend"], sum(bills))
    assert c["spend"] == pytest.approx(sum(bills), abs=1e-8)  # charged what the provider billed, no fault


async def test_a_derived_cost_counts_the_prompts_images(api):
    """The policy's expected cost per query of a priced model includes its mean image tokens per prompt."""
    client = {"kind": "openai", "base_url": "http://provider.test/v1", "price": PRICE, "params": {"max_tokens": 10}}
    prompts = [{"prompt": "What is this?", "images": [_url(_png((1024, 1024)))]}, "No image here."]
    models = [
        {"name": name, "client": {**client, "model": model}, "expected_output_tokens": 10}
        for name, model in (("big", "gpt-4o"), ("mini", "gpt-4o-mini"))
    ]
    r = await api.post(
        "/v1/campaigns", json={"name": "derived", "models": models, "prompts": prompts, "judge": {"kind": "human"}}
    )
    assert r.status_code == 201, r.text
    shown = {m["name"]: m for m in r.json()["models"]}
    text_only = len("What is this?") / 2 / 4 + len("No image here.") / 2 / 4  # the mean prompt characters / 4
    assert shown["big"]["expected_input_tokens"] >= text_only + openai_image_tokens("gpt-4o", 1024, 1024) / 2 - 1
    assert shown["mini"]["expected_input_tokens"] >= text_only + (2833 + 5667 * 4) / 2 - 1
    assert shown["mini"]["cost"] > shown["big"]["cost"]  # same price here; gpt-4o-mini counts far more tokens
