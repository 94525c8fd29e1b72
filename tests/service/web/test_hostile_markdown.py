"""A model's degenerate answer (a Markdown bomb: a megabyte of ``[`` or of ``#`` lines) is
rendered on the voting page in bounded time and size, off the event loop: ``/healthz``
answers while the page renders. The bombs come from the fake provider's ``bomb-*``
models over real HTTP. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import start_fake_provider, stop_process

from service.web.markdown import MARKDOWN_MAX_CHARS, SHOWN_MAX_CHARS, render_markdown

BOMBS = {"brackets": "[" * 1_000_000, "headings": "#\n" * 500_000}


@pytest.mark.parametrize("kind", sorted(BOMBS))
def test_a_megabyte_bomb_renders_in_bounded_time_and_size(kind):
    text = BOMBS[kind]
    start = time.thread_time()
    html = render_markdown(text)
    cpu = time.thread_time() - start
    assert cpu < 3.0, f"{cpu:.1f} s of CPU for one answer"
    assert len(html) < 2 * SHOWN_MAX_CHARS
    assert f"{len(text) - SHOWN_MAX_CHARS:,} more characters not shown" in html


def test_the_rest_is_escaped_plain_text():
    text = "**bold**\n" * (MARKDOWN_MAX_CHARS // 9 + 10) + "<script>alert(1)</script>"
    html = render_markdown(text)
    assert "<strong>bold</strong>" in html  # the head is Markdown
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '<pre class="md-rest">' in html and "more characters not shown" not in html


@pytest.fixture(scope="module")
def bomb_provider(tmp_path_factory):
    url, proc = start_fake_provider(tmp_path_factory.mktemp("fake") / "fake.log", "--bomb-chars", "1000000")
    yield url
    stop_process(proc)


async def test_voting_page_with_bombs_does_not_block_the_event_loop(api, bomb_provider):
    models = [
        {
            "name": name,
            "cost": 0.001,
            "client": {"kind": "openai", "base_url": bomb_provider + "/v1", "model": model, "timeout_s": 60},
        }
        for name, model in (("a", "x-bomb-brackets"), ("b", "y-bomb-headings"))
    ]
    body = {"name": "bombs", "models": models, "prompts": ["Say hello."], "judge": {"kind": "human"}, "seed": 3}
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "ann"})).json()["token"]
    who = {"Authorization": f"Bearer {token}"}
    r = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
    assert r.status_code == 201, r.text
    assert len(r.json()["answer_a"]) > 900_000  # the bomb was stored whole

    slowest = 0.0
    done = asyncio.Event()

    async def probe():
        nonlocal slowest
        while not done.is_set():
            t0 = time.monotonic()
            assert (await api.get("/healthz")).status_code == 200
            slowest = max(slowest, time.monotonic() - t0)
            await asyncio.sleep(0.01)

    prober = asyncio.create_task(probe())
    t0 = time.monotonic()
    for _ in range(3):
        page = await api.get(f"/annotate/{token}")
        assert page.status_code == 200
        panel = await api.post(f"/annotate/{token}/next", headers={"X-Llmduel": "1"})
        assert panel.status_code == 200 and panel.json()["state"] == "duel"
    elapsed = time.monotonic() - t0
    done.set()
    await prober
    assert "more characters not shown" in page.text and len(page.text) < 1_000_000
    assert elapsed < 30.0, f"six renders took {elapsed:.1f} s"
    assert slowest < 1.5, f"/healthz waited {slowest:.1f} s while the page rendered"
