"""The web pages in a real headless Chromium (Playwright) against a real uvicorn
process on a free 127.0.0.1 port with a temporary SQLite database.

Screenshots are kept under artifacts/ (git-ignored). These tests are skipped
only when /usr/bin/chromium (or the playwright package) is missing and CI is
not set; under CI they fail instead.
"""

from __future__ import annotations

import os

import httpx
import pytest
from conftest import BROWSER_KEY, REPO, skip_unless_ci, wait_until

pytestmark = pytest.mark.browser

ARTIFACTS = REPO / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
KEY = BROWSER_KEY
ADMIN = {"Authorization": f"Bearer {KEY}"}
PAYLOAD = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'
STRONG_P = [[0.5, 1.0, 1.0], [0.0, 0.5, 0.8], [0.0, 0.2, 0.5]]
PROMPTS = ["Say hello.", "Explain **duels** in one line.", "Why is the sky blue?"]


def _unavailable(reason: str):
    skip_unless_ci("browser tests need headless Chromium", reason)


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        _unavailable(f"{CHROMIUM} is missing (Debian package chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"the playwright package is not importable ({exc})")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def server(browser_server):
    """The browser tests' server (conftest.browser_server: one per session, shared by the browser files)."""
    return browser_server


@pytest.fixture(scope="module")
def api(server):
    with httpx.Client(base_url=server, headers=ADMIN, timeout=30) as c:
        yield c


def create(api, name, models, judge=None, **extra) -> int:
    body = {
        "name": name,
        "models": [{"name": n, "cost": c, "client": {"kind": "simulated"}} for n, c in models],
        "prompts": PROMPTS,
        "judge": judge or {"kind": "human"},
        "seed": 5,
        **extra,
    }
    r = api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def run_to_end(api, cid: int, timeout: float) -> dict:
    """Start the campaign's background run and wait until it is no longer running; its view then."""
    assert api.post(f"/v1/campaigns/{cid}/run", json={}).status_code == 202

    def ended():
        view = api.get(f"/v1/campaigns/{cid}").json()
        return view if view["status"] != "running" else None

    return wait_until(ended, timeout, f"campaign {cid}'s run to end", every=0.2)


def annotator_token(api, cid: int) -> str:
    r = api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "browser"})
    assert r.status_code == 201, r.text
    return r.json()["token"]


def wait_for_next_panel(page, last_duel: str | None) -> str:
    """Wait until the panel shows a duel other than ``last_duel``, or the end screen; returns the state."""
    page.wait_for_function(
        """(last) => { const p = document.getElementById('panel');
                       if (!p || p.classList.contains('busy')) return false;
                       const s = p.dataset.state;
                       return s === 'done' || (s === 'duel' && p.dataset.duel !== last); }""",
        arg=last_duel,
        timeout=45000,  # generous: CI machines are shared and busy
    )
    return page.get_attribute("#panel", "data-state")


def sign_in(page, server: str) -> None:
    """Open the dashboards the way an admin does: the login form once, then the cookie."""
    page.goto(f"{server}/")
    page.fill("#key", KEY)
    page.click("#login button[type=submit]")
    page.wait_for_url(f"{server}/")
    assert page.locator("h1", has_text="Campaigns").count() == 1


def no_horizontal_overflow(page, width: int) -> bool:
    """Nothing sticks out sideways (mobile Chromium would widen the layout viewport to fit it)."""
    return page.evaluate("(w) => document.documentElement.scrollWidth <= w && window.innerWidth <= w", width)


# ---------------------------------------------------------------- tests
def test_annotator_votes_through_a_campaign_until_it_is_certified(server, api, browser):
    cid = create(api, "browser: human duel, delta 0.2", [("good", 1.0), ("weak", 1.0)], delta=0.2)
    token = annotator_token(api, cid)
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{server}/annotate/{token}")
    last = None
    cast = {"tie": 0, "both_bad": 0, "good": 0}
    for n in range(80):
        state = wait_for_next_panel(page, last)
        if state == "done":
            break
        last = page.get_attribute("#panel", "data-duel")
        a_text, b_text = page.inner_text("#answer-a"), page.inner_text("#answer-b")
        assert "good" not in a_text + b_text and "weak" not in a_text + b_text  # blind: no model names
        good_is_a = api.get(f"/v1/duels/{last}").json()["model_a_name"] == "good"  # the admin knows
        if n == 0:
            page.screenshot(path=str(ARTIFACTS / "web-annotate-desktop.png"), full_page=True)
            # A and B look alike: no colour singles out a side.
            for a_sel, b_sel in (("#vote-a", "#vote-b"), ("#answer-a .tag", "#answer-b .tag")):
                style = "e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).color]"
                assert page.eval_on_selector(a_sel, style) == page.eval_on_selector(b_sel, style)
            page.keyboard.press("t")  # a tie: not counted under tie_policy=drop
            cast["tie"] += 1
        elif n == 1:
            assert "saved: a tie" in page.inner_text("#notice")
            page.click("#vote-both-bad")
            cast["both_bad"] += 1
        elif n % 3 == 0:
            page.keyboard.press("1" if good_is_a else "2")
            cast["good"] += 1
        elif n % 3 == 1:
            page.keyboard.press("a" if good_is_a else "b")
            cast["good"] += 1
        else:
            page.click("#vote-a" if good_is_a else "#vote-b")
            cast["good"] += 1
    else:
        pytest.fail(f"the campaign was not certified after 80 votes: {api.get(f'/v1/campaigns/{cid}').json()}")
    end = page.locator("#end")
    assert end.is_visible() and "This campaign is finished" in end.inner_text()
    assert "winner was certified" in end.inner_text() and "good" not in end.inner_text()
    total = sum(cast.values())
    assert page.inner_text("#vote-count") == str(total)
    page.screenshot(path=str(ARTIFACTS / "web-annotate-end.png"), full_page=True)
    view = api.get(f"/v1/campaigns/{cid}").json()
    assert view["status"] == "certified" and view["winner"] == "good"
    assert view["duels"] == total and view["duels_counted"] == cast["good"]
    assert errors == []
    page.close()


def test_dashboard_renders_its_plots(server, api, browser):
    cid = create(
        api,
        "browser: simulated judge",
        [("m0", 4.0), ("m1", 1.0), ("m2", 1.0)],
        judge={"kind": "simulated", "preference": STRONG_P},
        delta=0.2,
        budget=10_000.0,
    )
    view = run_to_end(api, cid, timeout=30)
    assert view["status"] == "certified"
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    response = page.goto(f"{server}/campaigns/{cid}")
    assert response.status == 401 and page.locator("#login input[name=key]").count() == 1
    page.fill("#key", KEY)
    page.click("#login button[type=submit]")
    page.wait_for_url(f"{server}/campaigns/{cid}")
    assert "Certified winner" in page.inner_text("#winner") and "m0" in page.inner_text("#winner")
    lines = page.locator("svg.plot-lines path.series")
    assert lines.count() == 3  # two challengers and the threshold
    assert sorted(lines.nth(i).get_attribute("data-key") for i in range(3)) == ["model-1", "model-2", "threshold"]
    assert page.locator("svg.plot-lines g.vline").count() == 1
    box = page.locator("svg.plot-lines").bounding_box()
    assert box and box["width"] > 500 and box["height"] > 150
    cells = page.locator("svg.plot-heatmap rect.cell[data-count]")
    assert cells.count() == 6
    counted = sum(int(cells.nth(k).get_attribute("data-count")) for k in range(6))
    assert counted == 2 * view["t"]
    assert page.locator("svg.plot-pairs g.pair").count() == 3
    assert page.locator("svg.plot-pairs rect.bar.oracle").count() == 3
    assert page.locator("svg.plot-spend g.lower-bound").count() == 1
    assert page.locator("table.duels tr.duel").count() == min(12, view["duels_created"])
    # the models table: expected cost (configured here) beside the observed mean charge of the calls
    models = page.locator("#models-section table.models")
    assert "observed" in models.locator("thead").inner_text().lower()
    first = models.locator("tbody tr").first.inner_text()
    assert "configured" in first and f"{view['models'][0]['calls']} calls" in first
    assert page.locator("#cost-warnings").count() == 0  # simulated models charge exactly their cost
    page.screenshot(path=str(ARTIFACTS / "web-dashboard.png"), full_page=True)
    page.goto(f"{server}/")
    row = page.locator(f'tr.campaign[data-id="{cid}"]')
    assert (
        "certified" in row.inner_text() and row.locator("svg.plot-progress").get_attribute("data-fraction") == "1.0000"
    )
    page.screenshot(path=str(ARTIFACTS / "web-index.png"), full_page=True)
    page.close()


def test_dashboard_updates_while_the_campaign_runs(server, api, browser):
    cid = create(api, "browser: live", [("x0", 1.0), ("x1", 1.0), ("x2", 1.0)])
    page = browser.new_page(viewport={"width": 1100, "height": 800})
    sign_in(page, server)
    page.goto(f"{server}/campaigns/{cid}")
    assert page.inner_text("#duels").strip() == "0"
    assert page.get_attribute("#dashboard", "data-running") == "1"
    duel = api.post(f"/v1/campaigns/{cid}/duels").json()
    assert api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "a"}).status_code == 200
    page.wait_for_function("() => document.querySelector('#duels').textContent.trim() === '1'", timeout=45000)
    i, j = sorted((duel["model_a"], duel["model_b"]))
    assert page.get_attribute(f'svg.plot-heatmap rect.cell[data-i="{i}"][data-j="{j}"]', "data-count") == "1"
    assert api.post(f"/v1/campaigns/{cid}/stop").status_code == 200
    page.wait_for_function("() => document.querySelector('#dashboard').dataset.running === '0'", timeout=45000)
    assert "stopped" in page.inner_text("#status")
    page.close()


def test_model_answer_with_script_is_shown_as_text(server, api, browser):
    # Answers no longer carry model names: the payload comes in the prompt, rendered the same way.
    cid = create(api, "hostile " + PAYLOAD, [(PAYLOAD, 1.0), ("honest", 1.0)], prompts=[f"Say {PAYLOAD}"])
    token = annotator_token(api, cid)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{server}/annotate/{token}")
    wait_for_next_panel(page, None)
    answers = page.inner_text("#prompt")
    assert "<script>window.__pwned=1</script>" in answers  # visible as text
    assert '<img src=x onerror="window.__pwned=1">' in answers
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    assert page.locator("#panel script, #panel img, #panel [onerror]").count() == 0
    page.screenshot(path=str(ARTIFACTS / "web-annotate-script-as-text.png"), full_page=True)
    shown = page.get_attribute("#panel", "data-duel")  # read before voting: the next panel can be quick
    page.keyboard.press("x")  # both bad; the next duel loads and is still inert
    state = wait_for_next_panel(page, shown)
    assert state == "duel" and page.evaluate("() => typeof window.__pwned") == "undefined"
    sign_in(page, server)
    for path in (f"/campaigns/{cid}", "/"):  # campaign and model names on the dashboards are inert too
        page.goto(server + path)
        assert page.inner_text("main").count(PAYLOAD) >= (2 if path != "/" else 1)
        assert page.evaluate("() => typeof window.__pwned") == "undefined"
        assert page.locator("main script, main img").count() == 0
    page.close()


def test_phone_sized_screens(server, api, browser):
    cid = create(api, "browser: phone", [("p0", 1.0), ("p1", 1.0)])
    token = annotator_token(api, cid)
    ctx = browser.new_context(
        viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True, has_touch=True
    )
    page = ctx.new_page()
    page.goto(f"{server}/annotate/{token}")
    wait_for_next_panel(page, None)
    a = page.locator("#answer-a").bounding_box()
    b = page.locator("#answer-b").bounding_box()
    assert b["y"] >= a["y"] + a["height"] - 1, (a, b)  # stacked, not side by side
    assert a["width"] > 300 and b["width"] > 300
    assert no_horizontal_overflow(page, 390)
    for sel in ("#vote-a", "#vote-b", "#vote-tie", "#vote-both-bad"):  # the sticky bar stays on screen
        box = page.locator(sel).bounding_box()
        assert box and box["y"] + box["height"] <= 844 + 1 and box["height"] >= 40, (sel, box)
    page.screenshot(path=str(ARTIFACTS / "web-annotate-phone.png"), full_page=True)
    shown = page.get_attribute("#panel", "data-duel")
    page.tap("#vote-a")
    state = wait_for_next_panel(page, shown)
    assert state == "duel" and "saved" in page.inner_text("#notice")
    sign_in(page, server)
    page.goto(f"{server}/campaigns/{cid}")
    assert page.locator("svg.plot-heatmap").is_visible()
    assert no_horizontal_overflow(page, 390)
    page.screenshot(path=str(ARTIFACTS / "web-dashboard-phone.png"), full_page=True)
    ctx.close()


def test_ranking_by_category_section(server, api, browser):
    prompts = [
        {"id": "q1", "prompt": "Say hello.", "category": "greetings"},
        {"id": "q2", "prompt": "Explain duels.", "category": "explain"},
        {"id": "q3", "prompt": "Why is the sky blue?", "category": PAYLOAD},
    ]
    body = {
        "name": "browser: categories",
        "models": [{"name": n, "cost": 1.0, "client": {"kind": "simulated"}} for n in ("c0", "c1", "c2")],
        "prompts": prompts,
        "judge": {"kind": "simulated", "preference": STRONG_P},
        "seed": 5,
        "delta": 0.2,
    }
    r = api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    run_to_end(api, cid, timeout=30)
    exported = api.get(f"/v1/campaigns/{cid}/export").json()["files"]["ranking_by_category.csv"]
    in_export = sorted({line.split(",")[0] for line in exported.splitlines()[1:]})
    assert len(in_export) >= 2, exported  # (a category no counted duel drew is left out)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    sign_in(page, server)
    page.goto(f"{server}/campaigns/{cid}")
    section = page.locator("#category-ranking-section")
    assert section.is_visible()
    names = [h.split(" (")[0] for h in section.locator("h3.category-name").all_inner_texts()]
    assert set(names) <= {"greetings", "explain", PAYLOAD} and names == sorted(names)  # the payload shown as text
    assert len(names) == len(in_export) and page.evaluate("window.__pwned") is None
    tables = section.locator("table.category-ranking")
    assert tables.count() == len(names)
    for k in range(len(names)):
        rows = [[c.strip() for c in r.locator("td").all_inner_texts()] for r in tables.nth(k).locator("tbody tr").all()]
        assert [r[0] for r in rows] == ["1", "2", "3"] and sorted(r[1] for r in rows) == ["c0", "c1", "c2"]
        assert rows[0][1] in exported
    section.screenshot(path=str(ARTIFACTS / "web-ranking-by-category.png"))
    page.close()


def _cut_text(page) -> list[str]:
    """Elements whose text is clipped (an ellipsis, or hidden overflow narrower than the text)."""
    return page.evaluate(
        """() => [...document.querySelectorAll('body *')].filter(e => {
                 const s = getComputedStyle(e);
                 if (s.display === 'none' || !e.childElementCount === false && e.children.length) return false;
                 const clipped = s.textOverflow === 'ellipsis' || s.overflow === 'hidden' || s.overflowX === 'hidden';
                 return clipped && e.scrollWidth > e.clientWidth + 1 && (e.innerText || '').trim().length > 0;
               }).map(e => e.tagName + '.' + e.className + ': ' + (e.innerText || '').slice(0, 40))"""
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_long_model_names_are_never_cut_and_pages_fit(server, api, browser, width):
    names = [
        "anthropic/claude-sonnet-4-5-20250929-thinking",
        "openai/gpt-4.1-mini-2025-04-14-long-context",
        "google/gemini-2.5-flash-preview-09-2025",
        "meta-llama/Llama-3.3-70B-Instruct-Turbo",
    ]
    judge = {
        "kind": "simulated",
        "preference": [[0.5, 0.7, 0.7, 0.7], [0.3, 0.5, 0.5, 0.5], [0.3, 0.5, 0.5, 0.5], [0.3, 0.5, 0.5, 0.5]],
    }
    cid = create(api, f"browser: long names {width}", [(n, 1.0) for n in names], judge=judge, max_duels=30)
    for _ in range(30):
        if api.post(f"/v1/campaigns/{cid}/duels").status_code != 201:
            break
    mobile = width < 600
    ctx = browser.new_context(viewport={"width": width, "height": 900}, is_mobile=mobile, has_touch=mobile)
    page = ctx.new_page()
    sign_in(page, server)
    for path in ("/", f"/campaigns/{cid}"):
        page.goto(f"{server}{path}")
        assert no_horizontal_overflow(page, width), path  # wide tables scroll inside their own box
        assert _cut_text(page) == [], path
        if not mobile:  # at 1,280 px every table fits without scrolling
            wide = page.evaluate(
                "() => [...document.querySelectorAll('.table-wrap')].filter(e => e.scrollWidth > e.clientWidth + 1)"
                ".map(e => e.querySelector('table') && e.querySelector('table').className)"
            )
            assert wide == [], (path, wide)
    # plain words first, the statistics one click away
    stats = page.locator("#kpis details.stats, .kpi details.stats").first
    assert stats.count() == 1 and not stats.locator("span.sub").is_visible()
    stats.locator("summary").click()
    shown = stats.inner_text()
    assert stats.locator("span.sub").is_visible() and ("log(1/4" in shown or "needs a Condorcet winner" in shown)
    # every name is written in full in the matrix and the allocation chart
    for svg in ("svg.plot-heatmap", "svg.plot-pairs"):
        text = page.locator(svg).first.text_content() or ""
        for n in names:
            assert n in text, (svg, n)
        assert "\u2026" not in text, svg
    page.screenshot(path=str(ARTIFACTS / f"web-dashboard-long-names-{width}.png"), full_page=True)
    ctx.close()


def test_certified_leaderboard_section(server, api, browser):
    """A ranking campaign's dashboard lists its certified tiers, names shown as text; the section fits at
    1,280 and 390 px."""
    names = ("b0", PAYLOAD, "b2")
    cid = create(
        api,
        "browser: leaderboard",
        [(n, 1.0) for n in names],
        judge={"kind": "simulated", "preference": STRONG_P},
        goal="ranking",
        delta=0.2,
    )
    view = run_to_end(api, cid, timeout=60)
    assert view["status"] == "certified" and view["ranking"] == [[n] for n in names]
    for width in (1280, 390):
        page = browser.new_page(viewport={"width": width, "height": 900})
        sign_in(page, server)
        page.goto(f"{server}/campaigns/{cid}")
        section = page.locator("#leaderboard-section")
        assert section.is_visible() and section.locator("h2").inner_text() == "Certified ranking"
        assert [t.strip() for t in section.locator("#leaderboard li").all_inner_texts()] == list(names)
        assert page.locator("#ended").count() == 0 and page.evaluate("window.__pwned") is None
        # the section itself fits (the winner's heading and the ranking table are other sections)
        wide = page.evaluate(
            "(w) => [...document.querySelectorAll('#leaderboard-section *')]"
            ".filter(e => e.getBoundingClientRect().right > w + 1).map(e => e.tagName)",
            width,
        )
        assert wide == [], wide
        page.close()


def test_style_controlled_verdict_beside_the_raw_one(server, api, browser):
    """The dashboard names the leader as judged and with style held fixed (the figures of GET /style), the
    two rankings one click away; the section fits at 1,280 and 390 px."""
    cid = create(
        api,
        "browser: style",
        [("s0", 1.0), ("s1", 1.0), ("s2", 1.0)],
        judge={"kind": "simulated", "preference": STRONG_P},
    )
    run_to_end(api, cid, timeout=60)
    style = api.get(f"/v1/campaigns/{cid}/style").json()
    assert style["leader_controlled"] is not None, style  # enough duels for a fit
    for width in (1280, 390):
        mobile = width < 600
        ctx = browser.new_context(viewport={"width": width, "height": 900}, is_mobile=mobile, has_touch=mobile)
        page = ctx.new_page()
        sign_in(page, server)
        page.goto(f"{server}/campaigns/{cid}")
        verdict = page.locator("#style-verdict")
        assert verdict.is_visible()
        text = verdict.inner_text()
        assert style["leader_raw"] in text and style["leader_controlled"] in text and "held fixed" in text
        table = page.locator("#style-ranking")
        assert not table.is_visible()  # one click away
        page.locator("#style-details summary").click()
        assert table.is_visible()
        rows = [[c.strip() for c in r.locator("td").all_inner_texts()] for r in table.locator("tbody tr").all()]
        assert [r[1] for r in rows] == [x["model"] for x in style["raw"]]
        assert [r[3] for r in rows] == [x["model"] for x in style["controlled"]]
        assert no_horizontal_overflow(page, width)
        page.locator("#style-section").screenshot(path=str(ARTIFACTS / f"web-style-{width}.png"))
        ctx.close()
