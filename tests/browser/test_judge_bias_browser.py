"""The dashboard's Judge bias section in a real headless Chromium: a judge that always answers [[A]]
shows its 100% first-position rate and the warning; a jury shows each juror's agreement.
Screenshots: artifacts/web-judge-bias.png and artifacts/web-jury-agreement.png (docs/web.md)."""

from __future__ import annotations

import pytest
from test_web_browser import ARTIFACTS, api, browser, server, sign_in  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser

ALWAYS_A = {"a": "[[A]]", "b": "[[A]]", "tie": "[[A]]"}


@pytest.fixture(scope="module")
def fake_url(fake_provider):
    return fake_provider + "/v1"


def _judge(fake_url, model, **params):
    return {
        "kind": "llm",
        "cost": 0.001,
        "client": {"kind": "openai", "base_url": fake_url, "model": model, "params": params},
    }


def _run(api, fake_url, name, judge, n=12) -> int:  # noqa: F811
    body = {
        "name": name,
        "models": [
            {
                "name": f"m{k}",
                "cost": 0.001,
                "client": {"kind": "openai", "base_url": fake_url, "model": f"{name}-{k}-q{k + 2}"},
            }
            for k in range(3)
        ],
        "prompts": [f"{name} question {k}" for k in range(6)],
        "judge": judge,
        "seed": 5,
        "tie_policy": "drop",
        "prompt_sampling": "with_replacement",
        "verdicts": "fresh",
    }
    r = api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(n):
        r = api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201 and r.json()["status"] == "judged", r.text
    return cid


def test_dashboard_shows_judge_bias_and_jury_agreement(server, api, browser, fake_url):  # noqa: F811
    biased = _run(api, fake_url, "bias-always-a", _judge(fake_url, "judge-always-a", fake_verdicts=ALWAYS_A))
    jury = {
        "kind": "jury",
        "judges": [
            _judge(fake_url, "judge-one"),
            _judge(fake_url, "judge-two"),
            _judge(fake_url, "judge-biased", fake_verdicts=ALWAYS_A),
        ],
    }
    panel = _run(api, fake_url, "bias-jury", jury)
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    sign_in(page, server)

    page.goto(f"{server}/campaigns/{biased}")
    section = page.locator("#judge-bias-section")
    section.wait_for()
    warning = page.locator("#judge-bias-warnings li").first.inner_text()
    assert "first position in 100% of its 24 decisive verdicts" in warning
    row = page.locator('#judge-bias tr[data-measure="first_position"]').inner_text()
    assert "100.0%" in row and "24" in row
    assert "100.0%" in page.locator('#judge-bias tr[data-measure="order_disagreement"]').inner_text()
    section.screenshot(path=str(ARTIFACTS / "web-judge-bias.png"))

    page.goto(f"{server}/campaigns/{panel}")
    table = page.locator("#jury-agreement")
    table.wait_for()
    rows = {r.split("\t")[0]: r for r in table.locator("tbody tr").all_inner_texts()}
    assert set(rows) == {"judge-one", "judge-two", "judge-biased"}
    assert "100.0%" in rows["judge-one"] and "0.0%" in rows["judge-biased"]
    page.locator("#judge-bias-section").screenshot(path=str(ARTIFACTS / "web-jury-agreement.png"))
    page.close()
