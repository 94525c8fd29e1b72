"""Over its request limit, an annotator voting in headless Chromium sees the page's message
(a 429 from the vote's form post, with ``Retry-After``) instead of a bare status, and nothing
of its vote is counted. The page, its ``next`` and ``vote`` posts count against one limit."""

from __future__ import annotations

import httpx
import pytest
from conftest import start_live_server, stop_live_server
from test_web_browser import ADMIN, KEY, browser, create, wait_for_next_panel  # noqa: F401

pytestmark = pytest.mark.browser

LIMIT = 4


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("limitserver")
    live = start_live_server(
        f"sqlite:///{tmp / 'web.db'}",
        tmp / "server.log",
        extra_env={"LLMDUEL_API_KEY": KEY, "LLMDUEL_ANNOTATOR_REQUESTS_PER_MINUTE": str(LIMIT)},
    )
    yield live.url
    stop_live_server(live)


def test_an_annotator_over_its_limit_sees_the_message(limited_server, browser):  # noqa: F811
    with httpx.Client(base_url=limited_server, headers=ADMIN, timeout=30) as api:
        cid = create(api, "browser: request limit", [("m0", 1.0), ("m1", 1.0), ("m2", 1.0)], delta=1e-6)
        out = api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "x"}).json()
        page = browser.new_page(viewport={"width": 1100, "height": 800})
        try:
            assert page.goto(out["url"]).status == 200  # 1: the page
            last = None
            assert wait_for_next_panel(page, last) == "duel"  # 2: its script's "next"
            for _ in range(LIMIT - 2):  # 3, 4: votes, each answered with the next duel
                last = page.get_attribute("#panel", "data-duel")
                page.click("#vote-a")
                assert wait_for_next_panel(page, last) == "duel"
            page.click("#vote-a")  # 5: over the limit
            page.wait_for_selector(".notice.error.client", timeout=30000)
            text = page.inner_text(".notice.error.client")
            assert "Too many requests" in text and "wait" in text, text
            assert page.get_attribute("#panel", "data-state") == "duel"  # the duel stays, to vote again later
            votes = api.get(f"/v1/campaigns/{cid}").json()["t"]
            assert votes == LIMIT - 2, votes  # the refused vote was not counted
        finally:
            page.close()
