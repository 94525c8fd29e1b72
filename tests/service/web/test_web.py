"""The web pages over httpx on the ASGI app (no browser): status codes, access
rule, escaping, friendly 404s, the annotator flow without JavaScript, the
evidence replay, and the SVG/Markdown helpers."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest
from conftest import app_client

from service.config import Settings
from service.db import upgrade_database

KEY = "web-test-admin-key-0123456789"
ADMIN = {"Authorization": f"Bearer {KEY}"}
JSON_HDR = {"X-Llmduel": "1"}
PAYLOAD = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'
STRONG_P = [[0.5, 1.0, 1.0], [0.0, 0.5, 0.8], [0.0, 0.2, 0.5]]  # m0 always wins: certifies fast


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def web_db(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('webdb') / 'web.db'}"
    upgrade_database(url)
    return url


@pytest.fixture
async def app(web_db, monkeypatch):
    monkeypatch.delenv("LLMDUEL_WEB_AUTH", raising=False)
    async with app_client(web_db, api_key=KEY, headers=None) as anon:
        yield anon.app


def client(app, base_url: str = "http://testserver", client_addr=("203.0.113.9", 5000), **kw) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=client_addr)
    return httpx.AsyncClient(transport=transport, base_url=base_url, **kw)


def body(name="web campaign", models=None, judge=None, **extra) -> dict:
    models = models or [("m0", 4.0), ("m1", 1.0), ("m2", 1.0)]
    out = {
        "name": name,
        "models": [{"name": n, "cost": c, "client": {"kind": "simulated"}} for n, c in models],
        "prompts": ["Say hello.", "Explain **duels** in one line.", "Why is the sky blue?"],
        "judge": judge or {"kind": "human"},
        "seed": 11,
    }
    out.update(extra)
    return out


async def create(c: httpx.AsyncClient, **kw) -> dict:
    r = await c.post("/v1/campaigns", json=body(**kw), headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()


async def token_for(c: httpx.AsyncClient, cid: int) -> str:
    r = await c.post(f"/v1/campaigns/{cid}/annotators", json={"label": "web"}, headers=ADMIN)
    assert r.status_code == 201, r.text
    return r.json()["token"]


async def run_to_end(c: httpx.AsyncClient, cid: int, timeout: float = 30.0) -> dict:
    r = await c.post(f"/v1/campaigns/{cid}/run", json={}, headers=ADMIN)
    assert r.status_code == 202, r.text
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        view = (await c.get(f"/v1/campaigns/{cid}", headers=ADMIN)).json()
        if view["status"] != "running" and view["pending"] == 0:
            return view
        assert asyncio.get_running_loop().time() < deadline, view
        await asyncio.sleep(0.1)


def stored_state(svc, cid: int) -> dict:
    from service.campaigns import policy_log

    with svc.db.read() as s:
        return policy_log.stored_state(s, cid)


# ---------------------------------------------------------------- helpers (no app)
def test_markdown_never_emits_markup_from_the_text():
    from service.web.markdown import render_markdown

    html = str(
        render_markdown(
            f"Hello {PAYLOAD}\n\n<div onclick=x()>raw</div>\n\n[x](javascript:alert(1)) "
            "![t](http://example.com/t.png) [ok](https://example.com)"
        )
    )
    assert "<script" not in html and "<img" not in html and "<div" not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert not re.search(r"<[^>]+\son\w+=", html)  # no event-handler attribute on any tag
    assert 'href="javascript' not in html
    assert '<a href="https://example.com" rel="noopener noreferrer nofollow">ok</a>' in html
    rendered = str(render_markdown("**bold** and `x < y`\n\n```\n<b>code</b>\n```"))
    assert "<strong>bold</strong>" in rendered and "<code>x &lt; y</code>" in rendered
    assert "&lt;b&gt;code&lt;/b&gt;" in rendered


def test_plots_are_svg_with_escaped_labels():
    from service.web import plots

    names = ["a<b>", "m1", "m2"]
    hm = str(plots.heatmap(names, [[0, 3, 1], [1, 0, 2], [2, 0, 0]], [[0, 4, 3], [4, 0, 2], [3, 2, 0]]))
    assert hm.startswith("<svg") and hm.endswith("</svg>")
    assert len(re.findall(r'<rect class="cell" data-i', hm)) == 6
    assert 'data-i="0" data-j="1" data-wins="3" data-count="4"' in hm
    assert "a&lt;b&gt;" in hm and "a<b>" not in hm
    lines = str(
        plots.line_chart(
            [{"label": "x<y", "color": "#000", "points": [(0, 0), (1, 2), (2, 3)]}],
            title="t",
            x_label="t",
            y_label="y",
            vline=(2, "certified"),
        )
    )
    assert 'data-points="3"' in lines and "x&lt;y" in lines and 'class="vline"' in lines
    assert 'data-empty="1"' in str(plots.line_chart([], title="t", x_label="x", y_label="y"))
    bars = str(
        plots.pair_bars(
            [
                {"label": "#0 vs #1", "count": 5, "share": 0.5, "oracle": 0.25},
                {"label": "#0 vs #2", "count": 5, "share": 0.5, "oracle": None},
            ],
            title="p",
        )
    )
    assert bars.count('class="bar actual"') == 2 and bars.count('class="bar oracle"') == 1
    gauge = str(plots.spend_gauge(5.0, 10.0, 2.0))
    assert 'class="budget" data-value="10"' in gauge and 'class="lower-bound" data-value="2"' in gauge
    assert plots.nice_ticks(0, 1) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


# ---------------------------------------------------------------- access rule
async def test_dashboards_need_the_admin_key_from_afar(app):
    async with client(app) as c:
        r = await c.get("/")
        assert r.status_code == 401 and 'name="key"' in r.text and "text/html" in r.headers["content-type"]
        assert (await c.get("/", headers=ADMIN)).status_code == 200
        assert (await c.get("/", headers={"Authorization": "Bearer wrong"})).status_code == 401
        # the key is never taken from an address (it would reach access logs and history)
        assert (await c.get("/?key=" + KEY)).status_code == 401
        r = await c.post("/login", data={"key": KEY, "next": "/?offset=0"})
        assert r.status_code == 303 and r.headers["location"] == "/?offset=0"
        cookie = r.headers["set-cookie"]
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower() and KEY not in cookie
        assert "max-age=43200" in cookie.lower()  # LLMDUEL_LOGIN_HOURS=12
        r = await c.get("/")  # the cookie jar now holds the dashboard cookie
        assert r.status_code == 200 and "<h1>Campaigns</h1>" in r.text
        await c.post("/logout")
        c.cookies.clear()
        assert (await c.get("/")).status_code == 401
        r = await c.post("/login", data={"key": "nope", "next": "/"})
        assert r.status_code == 401 and "not the admin key" in r.text
        r = await c.post("/login", data={"key": KEY, "next": "//evil.example/x"})
        assert r.status_code == 303 and r.headers["location"] == "/"
        assert (await c.get("/")).status_code == 200
        live = await c.get("/live/campaigns")
        assert live.status_code == 200 and live.headers["x-llmduel-version"]
        assert (await c.get("/live/campaigns", params={"v": live.headers["x-llmduel-version"]})).status_code == 204


async def test_local_rule_for_the_demo_and_when_configured(app):
    def configure(**changes):  # what LLMDUEL_WEB_AUTH / --demo set at start (Settings.web_auth, Settings.demo)
        app.state.settings = app.state.settings.replace(**changes)

    async with client(app, base_url="http://127.0.0.1:8000", client_addr=("127.0.0.1", 50000)) as c:
        assert (await c.get("/")).status_code == 401  # default: the key, even from this machine
        configure(web_auth="local")
        assert (await c.get("/")).status_code == 200
        assert (await c.get("/", headers={"X-Forwarded-For": "198.51.100.7"})).status_code == 401
        configure(web_auth=None, demo=True)  # llmduel serve --demo
        assert (await c.get("/")).status_code == 200
        configure(web_auth="key")
        assert (await c.get("/")).status_code == 401
    configure(web_auth=None)
    async with client(app) as c:  # the demo rule is still local-only
        assert (await c.get("/")).status_code == 401
    configure(web_auth="open")
    async with client(app) as c:
        assert (await c.get("/")).status_code == 200


def test_unknown_web_auth_is_refused_at_start(monkeypatch):
    from service.config import SettingsError

    monkeypatch.setenv("LLMDUEL_WEB_AUTH", "bogus")
    with pytest.raises(SettingsError, match="LLMDUEL_WEB_AUTH"):
        Settings.from_env()


# ---------------------------------------------------------------- pages
async def test_pages_escape_names_and_send_security_headers(app):
    async with client(app, headers=ADMIN) as c:
        camp = await create(c, name="<b>bold</b> campaign", models=[(PAYLOAD, 1.0), ("plain", 1.0)])
        r = await c.get("/")
        assert r.status_code == 200
        assert "&lt;b&gt;bold&lt;/b&gt; campaign" in r.text and "<b>bold</b>" not in r.text
        r = await c.get(f"/campaigns/{camp['id']}")
        assert r.status_code == 200
        assert "<script>window.__pwned" not in r.text and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in r.text
        assert "<img src=x" not in r.text
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert (await c.get("/static/style.css")).status_code == 200
        assert (await c.get("/static/annotate.js")).status_code == 200


async def test_unknown_campaign_gives_friendly_404_and_unknown_token_403(app):
    async with client(app, headers=ADMIN) as c:
        for path in ("/campaigns/987654321", "/campaigns/abc", "/campaigns/0", "/campaigns/99999999999999999999"):
            r = await c.get(path)
            assert r.status_code == 404, path
            assert "text/html" in r.headers["content-type"] and "<h1>Not found</h1>" in r.text
        assert (await c.get("/campaigns/987654321/live")).status_code == 404
        for token in ("ann_doesnotexist", "x" * 300, KEY):
            r = await c.get(f"/annotate/{token}")
            assert r.status_code == 403 and "This annotator link is not valid" in r.text
        r = await c.post("/annotate/ann_nope/vote", data={"duel_id": "1", "choice": "a"}, headers=JSON_HDR)
        assert r.status_code == 403 and r.json()["state"] == "invalid"


async def test_certified_dashboard_replay_plots_winner_and_oracle(app, monkeypatch):
    from service.web import series as series_mod

    monkeypatch.setattr(series_mod, "MAX_POINTS", 8)  # few checkpoints: the stride must double
    MAX_POINTS = series_mod.MAX_POINTS
    async with client(app, headers=ADMIN) as c:
        camp = await create(
            c, name="strong", judge={"kind": "simulated", "preference": STRONG_P}, delta=0.2, budget=10_000.0
        )
        svc, cid = app.state.campaigns.cycle, camp["id"]
        # First 10 duels, then the replay of the log reproduces the stored policy state exactly.
        assert (await c.post(f"/v1/campaigns/{cid}/run", json={"max_duels": 10})).status_code == 202
        for _ in range(400):
            v = (await c.get(f"/v1/campaigns/{cid}")).json()
            if not v["run"]["active"] and v["pending"] == 0:
                break
            await asyncio.sleep(0.05)
        cache = series_mod.SeriesCache()
        state = await asyncio.to_thread(stored_state, svc, cid)
        points, policy = await asyncio.to_thread(cache.series, svc.db, cid, state)
        assert 0 < policy.t <= 10 and policy.to_state() == state
        view = await run_to_end(c, cid)
        assert view["status"] == "certified" and view["winner"] == "m0"
        points, policy = await asyncio.to_thread(cache.series, svc.db, cid, state)  # incremental
        assert policy.to_state() == await asyncio.to_thread(stored_state, svc, cid)
        ts = [p.t for p in points]
        assert ts == sorted(ts) and ts[0] == 0 and ts[-1] == view["t"] and len(points) <= MAX_POINTS + 1
        assert points[-1].Z == pytest.approx(view["Z"]) and points[-1].beta == pytest.approx(view["beta"])
        r = await c.get(f"/campaigns/{camp['id']}")
        assert r.status_code == 200
        html = r.text
        assert 'id="winner"' in html and "Certified winner: <strong>m0</strong>" in html
        # Evidence: one line per challenger plus the threshold, each with at least two checkpoints.
        paths = re.findall(r'<path class="series" data-key="([^"]+)" data-label="[^"]*" data-points="(\d+)"', html)
        assert sorted(k for k, _ in paths) == ["model-1", "model-2", "threshold"]
        assert all(2 <= int(n) <= MAX_POINTS + 1 for _, n in paths)
        assert 'class="vline"' in html and f"certified at t={view['t']}" in html
        # Heatmap: the counts of the cells are the campaign's counts.
        cells = re.findall(r'data-i="(\d)" data-j="(\d)" data-wins="[^"]*" data-count="(\d+)"', html)
        assert len(cells) == 6
        assert all(int(n) == view["counts"][int(i)][int(j)] for i, j, n in cells)
        # Pulls per pair beside the oracle allocation (the estimate has a Condorcet winner here).
        pairs = re.findall(
            r'<g class="pair" data-label="([^"]+)" data-count="(\d+)" data-share="[^"]+" '
            r'data-oracle="([^"]*)"',
            html,
        )
        assert [p[0] for p in pairs] == ["m0 vs m1", "m0 vs m2", "m1 vs m2"]
        assert sum(int(p[1]) for p in pairs) == view["t"]
        assert all(p[2] for p in pairs) and abs(sum(float(p[2]) for p in pairs) - 1) < 1e-6
        assert 'class="lower-bound"' in html and 'class="budget"' in html
        assert html.count('<tr class="duel status-') == min(12, view["duels_created"])
        # The live fragment: 204 while nothing changes, the dashboard's HTML otherwise.
        live = await c.get(f"/campaigns/{camp['id']}/live", params={"v": "-1"})
        assert live.status_code == 200 and live.headers["x-llmduel-running"] == "0"
        assert "plot-heatmap" in live.text and "<html" not in live.text
        again = await c.get(f"/campaigns/{camp['id']}/live", params={"v": live.headers["x-llmduel-version"]})
        assert again.status_code == 204
        async with client(app) as anon:
            assert (await anon.get(f"/campaigns/{camp['id']}/live")).status_code == 401
            assert (await anon.get(f"/campaigns/{camp['id']}")).status_code == 401


async def test_dashboard_without_condorcet_winner_says_so(app):
    async with client(app, headers=ADMIN) as c:
        camp = await create(c, name="cyclic", max_duels=3)
        cid = camp["id"]
        # Three human votes, one per pair, forming a cycle: 0 > 1, 1 > 2, 2 > 0.
        for _ in range(3):
            d = (await c.post(f"/v1/campaigns/{cid}/duels", headers=ADMIN)).json()
            winner = {(0, 1): 0, (1, 2): 1, (0, 2): 2}[tuple(sorted((d["model_a"], d["model_b"])))]
            r = await c.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a" if d["model_a"] == winner else "b"})
            assert r.status_code == 200, r.text
        html = (await c.get(f"/campaigns/{cid}")).text
        view = (await c.get(f"/v1/campaigns/{cid}")).json()
        assert view["t"] == 3 and view["lower_bound"] is None
        assert 'id="no-oracle"' in html and "no Condorcet winner" in html
        assert 'data-oracle=""' in html and 'class="bar oracle"' not in html


# ---------------------------------------------------------------- annotators
async def test_annotator_flow_without_javascript(app):
    async with client(app, headers=ADMIN) as c:
        camp = await create(c, name="no-js")
        cid = camp["id"]
        token = await token_for(c, cid)
    async with client(app) as a:  # no admin header: only the link
        r = await a.get(f"/annotate/{token}")
        assert r.status_code == 200 and 'data-state="loading"' in r.text and "<noscript>" in r.text
        assert r.headers["referrer-policy"] == "no-referrer" and r.headers["cache-control"] == "no-store"
        async with client(app, headers=ADMIN) as c:
            assert (await c.get(f"/v1/campaigns/{cid}")).json()["duels_created"] == 0  # a GET creates no duel
        r = await a.post(f"/annotate/{token}/next")
        assert r.status_code == 303 and r.headers["location"] == f"/annotate/{token}"
        page = (await a.get(f"/annotate/{token}")).text
        assert 'data-state="duel"' in page and 'id="answer-a"' in page and 'id="answer-b"' in page
        duel_id = int(re.search(r'name="duel_id" value="(\d+)"', page).group(1))
        assert "<strong>duels</strong>" in page or "Say hello." in page or "sky" in page
        # Reloading shows the same open duel rather than starting another.
        assert f'value="{duel_id}"' in (await a.get(f"/annotate/{token}")).text
        r = await a.post(f"/annotate/{token}/vote", data={"duel_id": str(duel_id), "choice": "a"})
        assert r.status_code == 303
        async with client(app, headers=ADMIN) as c:
            d = (await c.get(f"/v1/duels/{duel_id}")).json()
            assert d["status"] == "judged" and d["choice"] == "a" and d["judged_by"].startswith("annotator:")
        # JSON mode: voting again on the same duel is refused and the next duel comes anyway.
        r = await a.post(f"/annotate/{token}/vote", data={"duel_id": str(duel_id), "choice": "b"}, headers=JSON_HDR)
        data = r.json()
        assert r.status_code == 200 and data["state"] == "duel" and data["duel_id"] != duel_id
        assert "not counted" in data["html"] and "already has a verdict" in data["html"]
        r = await a.post(f"/annotate/{token}/vote", data={"duel_id": "x", "choice": "maybe"}, headers=JSON_HDR)
        assert "could not be read" in r.json()["html"]
        r = await a.post(f"/annotate/{token}/vote", data={"duel_id": "1", "choice": "maybe"})
        assert r.status_code == 422 and "text/html" in r.headers["content-type"]


async def test_annotator_answers_are_escaped(app):
    async with client(app, headers=ADMIN) as c:
        # Answers no longer carry model names; the prompt goes through the same rendering.
        camp = await create(c, name="xss", models=[(PAYLOAD, 1.0), ("honest", 1.0)], prompts=[f"Say {PAYLOAD}"])
        token = await token_for(c, camp["id"])
    async with client(app) as a:
        data = (await a.post(f"/annotate/{token}/next", headers=JSON_HDR)).json()
        assert data["state"] == "duel"
        html = data["html"]
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
        assert "<script" not in html and "<img" not in html
        assert not re.search(r"<[^>]+\son\w+=", html)


async def test_annotator_pages_for_automatic_and_finished_campaigns(app):
    async with client(app, headers=ADMIN) as c:
        auto = await create(c, name="auto", judge={"kind": "simulated", "preference": STRONG_P})
        auto_token = await token_for(c, auto["id"])
        human = await create(c, name="to stop")
        token = await token_for(c, human["id"])
        assert (await c.post(f"/v1/campaigns/{human['id']}/stop", headers=ADMIN)).status_code == 200
    async with client(app) as a:
        r = await a.get(f"/annotate/{auto_token}")
        assert r.status_code == 200 and 'data-state="automatic"' in r.text
        assert (await a.post(f"/annotate/{auto_token}/next", headers=JSON_HDR)).json()["state"] == "automatic"
        r = await a.get(f"/annotate/{token}")
        assert r.status_code == 200 and 'id="end"' in r.text and "This campaign is finished" in r.text
        assert "It has ended." in r.text and "stopped by the admin" not in r.text  # no end reason: admin-only
        assert (await a.post(f"/annotate/{token}/next", headers=JSON_HDR)).json()["state"] == "done"


def test_oracle_section_limits_pairs_and_explains_missing_winner():
    from service.web.data import MAX_PAIR_ROWS, oracle_section

    L = 10  # 45 pairs: only the busiest are drawn
    names = [f"m{i}" for i in range(L)]
    N = [[0 if i == j else 4 for j in range(L)] for i in range(L)]
    W = [[0.0 if i == j else (3.0 if i < j else 1.0) for j in range(L)] for i in range(L)]  # m0 best
    view = {
        "models": [{"name": n, "cost": 1.0 + i} for i, n in enumerate(names)],
        "counts": N,
        "wins": W,
        "t": 4 * L * (L - 1) // 2,
    }
    out = oracle_section(view)
    assert out["oracle_winner"] == "m0" and out["reason"] is None
    assert out["n_pairs"] == 45 and out["n_shown"] == MAX_PAIR_ROWS
    assert str(out["plot"]).count('<g class="pair"') == MAX_PAIR_ROWS
    cyc = {
        "models": view["models"][:3],
        "t": 3,
        "counts": [[0, 1, 1], [1, 0, 1], [1, 1, 0]],
        "wins": [[0, 1, 0], [0, 0, 1], [1, 0, 0]],
    }
    out = oracle_section(cyc)
    assert out["oracle"] is None and "no Condorcet winner" in out["reason"]


async def test_annotator_sees_a_retry_panel_when_the_models_fail(app):
    async with client(app, headers=ADMIN) as c:
        r = await c.post(
            "/v1/campaigns",
            headers=ADMIN,
            json={
                **body(name="failing"),
                "models": [
                    {"name": "down", "cost": 1.0, "client": {"kind": "simulated", "failure_rate": 1.0}},
                    {"name": "up", "cost": 1.0, "client": {"kind": "simulated"}},
                ],
            },
        )
        assert r.status_code == 201, r.text
        token = await token_for(c, r.json()["id"])
    async with client(app) as a:
        data = (await a.post(f"/annotate/{token}/next", headers=JSON_HDR)).json()
        assert data["state"] == "failed" and 'id="failed"' in data["html"]
        assert "simulated failure" not in data["html"]  # no model details for annotators
        assert f'action="/annotate/{token}/next"' in data["html"]


def test_the_page_templates_are_compiled_before_the_first_request(monkeypatch):
    """The app compiles every page template at start (service.web.warm): the first dashboard a process serves
    compiles none."""
    from service.web import routes

    routes._env.cache.clear()
    routes.warm_templates()

    def compile_again(*args, **kwargs):
        raise AssertionError("a template was compiled after warm_templates")

    monkeypatch.setattr(routes._env, "compile", compile_again)
    for name in ("campaign.html", "_dashboard.html", "base.html", "index.html", "annotate.html", "login.html"):
        routes._env.get_template(name)


def test_page_templates_are_kept_compiled_for_the_next_process(tmp_path, monkeypatch):
    """The bytecode cache: a second environment on the same directory loads every page compiled (it never
    compiles), and where no cache directory can be made the pages are compiled in memory."""
    import jinja2

    from service.web import routes

    first = routes._env.overlay(bytecode_cache=jinja2.FileSystemBytecodeCache(str(tmp_path)))
    names = first.list_templates(extensions=["html"])
    for name in names:
        first.get_template(name)
    assert len(list(tmp_path.iterdir())) == len(names) > 0

    second = routes._env.overlay(bytecode_cache=jinja2.FileSystemBytecodeCache(str(tmp_path)))

    def compiled(*args, **kwargs):
        raise AssertionError("a template was compiled although its bytecode was cached")

    monkeypatch.setattr(second, "compile", compiled)
    for name in names:
        assert second.get_template(name).render is not None

    def no_dir(*args, **kwargs):
        raise RuntimeError("the cache directory is owned by another user")

    monkeypatch.setattr(jinja2, "FileSystemBytecodeCache", no_dir)
    assert routes._bytecode_cache() is None
