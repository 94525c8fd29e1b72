"""Three annotators vote in headless Chromium from the links the API returned; one is
revoked mid-way and its link is refused; the dashboard names them by label and ranks the
models with an interval around each win rate."""

from __future__ import annotations

import json
import re

import pytest
from test_web_browser import ARTIFACTS, api, browser, create, server, sign_in, wait_for_next_panel  # noqa: F401

pytestmark = pytest.mark.browser


def _vote(page, last: str | None) -> str:
    state = wait_for_next_panel(page, last)
    assert state == "duel", state
    duel = page.get_attribute("#panel", "data-duel")
    page.click("#vote-a")
    return duel


INTERVAL = re.compile(r"^(\d+\.\d)% \u2013 (\d+\.\d)%$")


def _check_ranking(admin, client, cid: int) -> None:
    """The dashboard's ranking table, at the top: every model by name with its win rate against the
    field inside a shown interval, and the duels, win rates and costs of the exported ranking."""
    sections = admin.eval_on_selector_all("section", "els => els.map(e => e.id || e.className)")
    before = sections[: sections.index("ranking-section")]
    assert set(before) <= {"winner", "no-condorcet-winner", "ended"}, sections  # at the top, under the outcome
    exported = {
        r["model"]: r for r in json.loads(client.get(f"/v1/campaigns/{cid}/export").json()["files"]["ranking.json"])
    }
    assert set(exported) == {"m0", "m1", "m2"}
    shown = {}
    for row in admin.locator("#ranking tbody tr").all():
        cells = [c.strip() for c in row.locator("td").all_inner_texts()]
        shown[cells[1]] = cells
    assert set(shown) == set(exported), shown
    ranked = 0
    for model, cells in shown.items():
        want = exported[model]
        assert int(cells[0]) == want["rank"] and int(cells[4]) == want["duels"], (cells, want)
        if want["duels"] == 0:
            continue
        ranked += 1
        rate = float(cells[2].rstrip("%"))
        assert rate == pytest.approx(100 * want["win_rate"], abs=0.05), (cells, want)
        m = INTERVAL.match(cells[3])
        assert m, cells  # e.g. "41.0% – 73.0%"
        low, high = float(m.group(1)), float(m.group(2))
        assert 0 <= low <= rate <= high <= 100 and low < high, cells
        assert float(cells[5]) == pytest.approx(want["cost_per_query"], rel=1e-3), cells
    assert ranked >= 2, shown  # eight votes: at least two models have met others


def test_three_annotators_vote_one_is_revoked_and_the_dashboard_shows_labels(server, api, browser):  # noqa: F811
    cid = create(api, "browser: three annotators", [("m0", 1.0), ("m1", 1.0), ("m2", 1.0)], delta=1e-6)
    links = {}
    for label in ("alice", "bob", "carol"):
        r = api.post(f"/v1/campaigns/{cid}/annotators", json={"label": label})
        assert r.status_code == 201, r.text
        out = r.json()
        assert out["url"] == f"{server}/annotate/{out['token']}"
        links[label] = out
    pages = {}
    last = {}
    for label, out in links.items():
        page = browser.new_page(viewport={"width": 1100, "height": 800})
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        page.errors = errors
        assert page.goto(out["url"]).status == 200
        pages[label] = page
        last[label] = None
    for _ in range(2):
        for label, page in pages.items():
            last[label] = _vote(page, last[label])

    # carol now has a new duel on screen; she is revoked before voting on it
    carol = pages["carol"]
    assert wait_for_next_panel(carol, last["carol"]) == "duel"
    carol_duel = int(carol.get_attribute("#panel", "data-duel"))
    r = api.delete(f"/v1/campaigns/{cid}/annotators/{links['carol']['id']}")
    assert r.status_code == 200 and r.json()["revoked_at"]
    carol.click("#vote-a")
    carol.wait_for_selector(".notice.error.client", timeout=15000)
    assert "no longer valid" in carol.inner_text(".notice.error.client")
    released = api.get(f"/v1/duels/{carol_duel}").json()
    assert released["status"] == "expired" and released["choice"] is None
    response = carol.goto(links["carol"]["url"])
    assert response.status == 403 and "not valid" in carol.inner_text("body")
    carol.screenshot(path=str(ARTIFACTS / "web-annotate-revoked.png"), full_page=True)
    # the others go on
    for label in ("alice", "bob"):
        last[label] = _vote(pages[label], last[label])
    for label in ("alice", "bob"):  # their last votes are stored once the next duel shows
        assert wait_for_next_panel(pages[label], last[label]) == "duel"

    listed = {a["label"]: a for a in api.get(f"/v1/campaigns/{cid}/annotators").json()}
    assert (listed["alice"]["votes"], listed["bob"]["votes"], listed["carol"]["votes"]) == (3, 3, 2)
    assert listed["carol"]["revoked_at"] is not None

    admin = browser.new_page(viewport={"width": 1280, "height": 900})
    sign_in(admin, server)
    admin.goto(f"{server}/campaigns/{cid}")
    admin.wait_for_selector("td.judged-by")
    cells = [c.strip() for c in admin.locator("td.judged-by").all_inner_texts()]
    assert {"alice", "bob", "carol"} <= set(cells), cells
    assert not any(c.startswith("annotator:") for c in cells), cells
    rows = {
        r.locator("td.annotator-label").inner_text().strip(): r.inner_text()
        for r in admin.locator("#annotators-section tr.annotator").all()
    }
    assert set(rows) == {"alice", "bob", "carol"}, rows
    assert "revoked" in rows["carol"] and "active" in rows["alice"] and "active" in rows["bob"]
    admin.screenshot(path=str(ARTIFACTS / "web-dashboard-annotator-labels.png"), full_page=True)
    _check_ranking(admin, api, cid)
    for page in pages.values():
        assert page.errors == [], page.errors
        page.close()
    admin.close()


def test_docs_page_renders_under_its_content_security_policy(server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda exc: violations.append(str(exc)))
    response = page.goto(f"{server}/docs")
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    page.wait_for_selector(".swagger-ui .info .title", timeout=20000)
    assert "llmduel" in page.inner_text(".swagger-ui .info .title")
    assert page.locator(".opblock").count() > 5  # the operations rendered from /openapi.json
    assert violations == [], violations
    page.close()


def test_voting_page_progress_guidelines_skip_and_comment(server, api, browser):  # noqa: F811
    """The page an annotator sees: the campaign's guidelines (Markdown), votes done and
    remaining, a comment saved with the vote, and a skip (keyboard S) that shows another
    duel and is counted per annotator, not as a vote."""
    guidelines = "## How to judge\n\nPrefer the **correct** answer, then the *clearer* one."
    cid = create(
        api,
        "browser: voting page",
        [("v0", 1.0), ("v1", 1.0)],
        judge={"kind": "human", "guidelines": guidelines},
        max_duels=6,
    )
    r = api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "dana"})
    assert r.status_code == 201, r.text
    aid, url = r.json()["id"], r.json()["url"]
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    assert page.goto(url).status == 200
    assert page.inner_text("#guidelines h2") == "How to judge"
    assert page.inner_text("#guidelines strong") == "correct"
    first = _vote_ready(page, None)
    assert page.inner_text("#my-votes") == "0" and page.inner_text("#votes-remaining") == "6"
    page.screenshot(path=str(ARTIFACTS / "web-annotate-guidelines.png"), full_page=True)
    page.fill("#comment", "B ignores the question.")
    page.keyboard.press("Escape")
    page.click("#vote-a")
    second = _vote_ready(page, first)
    assert page.inner_text("#my-votes") == "1" and page.inner_text("#votes-remaining") == "5"
    assert api.get(f"/v1/duels/{first}").json()["comment"] == "B ignores the question."
    page.locator("#prompt").click()  # focus out of the comment box: S is a shortcut again
    page.keyboard.press("s")
    third = _vote_ready(page, second)
    assert "Skipped" in page.inner_text("#notice") and page.inner_text("#my-skips") == "1"
    assert page.inner_text("#my-votes") == "1"  # a skip is not a vote
    page.screenshot(path=str(ARTIFACTS / "web-annotate-skip.png"), full_page=True)
    row = next(a for a in api.get(f"/v1/campaigns/{cid}/annotators").json() if a["id"] == aid)
    assert row["skips"] == 1 and row["votes"] == 1
    assert api.get(f"/v1/duels/{second}").json()["choice"] is None  # skipped: in the pool, not counted
    assert third != second
    assert errors == []
    page.close()


def _vote_ready(page, last: str | None) -> str:
    state = wait_for_next_panel(page, last)
    assert state == "duel", state
    return page.get_attribute("#panel", "data-duel")
