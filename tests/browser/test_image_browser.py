"""A human-judged text-to-image campaign voted on in headless Chromium by two annotators (one on a
phone-sized screen): the prompt's image above two image answers, keyboard votes, images under URLs
that name neither a model nor a hash, bytes without metadata; the dashboard's sample duels show the
images to the admin."""

from __future__ import annotations

import base64
import io
import re

import pytest
from PIL import Image
from test_web_browser import (  # noqa: F401
    ARTIFACTS,
    api,
    browser,
    no_horizontal_overflow,
    server,
    sign_in,
    wait_for_next_panel,
)

pytestmark = pytest.mark.browser

HEX64 = re.compile(r"[0-9a-f]{64}")


def _prompt_image() -> str:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (30, 120, 200)).save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def _images(page) -> list[list]:
    page.wait_for_function(
        "() => [...document.querySelectorAll('#panel img')].every(i => i.complete && i.naturalWidth > 0)",
        timeout=30000,
    )
    return page.eval_on_selector_all("#panel img", "els => els.map(e => [e.getAttribute('src'), e.naturalWidth])")


def test_two_annotators_vote_on_images_and_the_dashboard_shows_them(server, api, browser, fake_provider):  # noqa: F811
    models = [
        {
            "name": name,
            "cost": cost,
            "output": "image",
            "client": {
                "kind": "openai",
                "base_url": fake_provider + "/v1",
                "model": model,
                "params": {"size": "48x48"},
            },
        }
        for name, model, cost in (("blurry", "img-blurry-q1", 0.01), ("crisp", "img-crisp-q4", 0.02))
    ]
    prompts = [
        {"id": "p1", "prompt": "Draw this colour as a landscape.", "images": [_prompt_image()]},
        "A kite over the sea.",
        "A cup of tea.",
    ]
    body = {"name": "browser: image duels", "models": models, "prompts": prompts, "judge": {"kind": "human"}}
    r = api.post("/v1/campaigns", json={**body, "delta": 0.2, "seed": 4})
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    links = [api.post(f"/v1/campaigns/{cid}/annotators", json={"label": lb}).json()["url"] for lb in ("ann", "bea")]
    desk = browser.new_page(viewport={"width": 1200, "height": 900})
    phone_ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone = phone_ctx.new_page()
    pages = [(desk, links[0], 1200), (phone, links[1], 390)]
    for page, url, _ in pages:
        assert page.goto(url).status == 200
    last: dict[int, str | None] = {0: None, 1: None}
    saw_prompt_image = False
    for _ in range(40):
        done = 0
        for n, (page, _, width) in enumerate(pages):
            state = wait_for_next_panel(page, last[n])
            if state == "done":
                done += 1
                continue
            duel_id = page.get_attribute("#panel", "data-duel")
            last[n] = duel_id
            shown = _images(page)
            srcs = [s for s, _ in shown]
            assert {s.rsplit("/", 1)[1] for s in srcs} >= {"a", "b"}, srcs
            saw_prompt_image |= any(s.endswith("/p1") for s, _ in shown)
            assert not any(HEX64.search(s) or "img-" in s or "crisp" in s or "blurry" in s for s in srcs), srcs
            body_text = page.inner_text("#panel")
            assert "sha256" not in body_text and "crisp" not in body_text and "blurry" not in body_text
            raw = page.request.get(page.url.split("/annotate/")[0] + srcs[-1]).body()
            assert raw.startswith(b"\x89PNG") and b"tEXt" not in raw and b"model" not in raw
            if width < 500:  # phone: the answers stack and nothing sticks out sideways
                a, b = page.locator("#answer-a").bounding_box(), page.locator("#answer-b").bounding_box()
                assert b["y"] >= a["y"] + a["height"] - 1 and no_horizontal_overflow(page, width)
                page.screenshot(path=str(ARTIFACTS / "image-duel-phone.png"), full_page=True)
            else:
                page.screenshot(path=str(ARTIFACTS / "image-duel-desktop.png"), full_page=True)
            view = api.get(f"/v1/duels/{duel_id}").json()
            page.keyboard.press("1" if view["model_a_name"] == "crisp" else "2")
        if done == len(pages):
            break
    c = api.get(f"/v1/campaigns/{cid}").json()
    assert c["status"] == "certified" and c["winner"] == "crisp", (c["status"], c.get("winner"))
    assert saw_prompt_image
    admin = browser.new_page(viewport={"width": 1280, "height": 900})
    sign_in(admin, server)
    admin.goto(f"{server}/campaigns/{cid}")
    admin.wait_for_function(
        "() => { const i = [...document.querySelectorAll('#image-duels-section img')];"
        " return i.length >= 2 && i.every(e => e.complete && e.naturalWidth > 0); }",
        timeout=30000,
    )
    admin.screenshot(path=str(ARTIFACTS / "image-duels-dashboard.png"), full_page=True)
    for p in (desk, admin):
        p.close()
    phone_ctx.close()
