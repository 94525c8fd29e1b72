"""The voting page in headless Chromium shows a hybrid campaign's selected duels, blind: the
annotator sees the prompt and two answers, never the models or the automatic judge's verdict;
the page waits while no duel is selected and picks up the next one by itself."""

from __future__ import annotations

import pytest
from test_web_browser import api, browser, create, server, wait_for_next_panel  # noqa: F401

pytestmark = pytest.mark.browser

JUDGE = {
    "kind": "hybrid",
    "llm": {"kind": "simulated", "preference": [[0.5, 0.8], [0.2, 0.5]]},
    "human": {"fee_per_vote": 0.25, "guidelines": "Prefer the **correct** answer."},
    "human_rate": 1.0,
}


def test_an_annotator_votes_on_a_hybrid_campaigns_selected_duels(server, api, browser):  # noqa: F811
    cid = create(api, "browser: hybrid", [("alpha-model", 1.0), ("beta-model", 1.0)], judge=JUDGE, delta=0.01)
    token = api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "hyb"}).json()["token"]
    page = browser.new_page(viewport={"width": 1200, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{server}/annotate/{token}")
    # nothing selected yet: the page waits and says why
    page.wait_for_selector("#waiting", timeout=30000)
    assert "waits for a human vote" in page.inner_text("#waiting")
    first = api.post(f"/v1/campaigns/{cid}/duels").json()["id"]  # the admin's duel, judged by the judge
    admin_view = api.get(f"/v1/duels/{first}").json()
    assert admin_view["judge"]["hybrid"]["selected"] and admin_view["status"] == "pending"
    assert wait_for_next_panel(page, None) == "duel"  # the page retried and took it from the pool
    assert page.get_attribute("#panel", "data-duel") == str(first)
    text = page.inner_text("body")
    assert "alpha-model" not in text and "beta-model" not in text  # blind: no model names
    assert "correct" in page.inner_text("body")  # the hybrid judge's human guidelines
    html = page.content()
    assert "judge_choice" not in html and "hybrid" not in html.lower().replace("browser: hybrid", "")
    page.click("#vote-a")
    page.wait_for_selector("#waiting", timeout=30000)  # voted; nothing else selected yet
    voted = api.get(f"/v1/duels/{first}").json()
    assert voted["status"] == "judged" and voted["choice"] == "a" and voted["judged_by"].startswith("annotator:")
    assert voted["cost"] == pytest.approx(2.0 + 0.25)  # the two answers and one human fee
    view = api.get(f"/v1/campaigns/{cid}").json()
    assert view["hybrid"]["human_votes"] == 1 and view["judge_spend"] == pytest.approx(0.25)
    assert errors == []
    page.close()
