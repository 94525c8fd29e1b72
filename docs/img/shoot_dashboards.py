"""Screenshots of three dashboards (certified, undecidable, no Condorcet winner) in headless Chromium.

Usage: python docs/img/shoot_dashboards.py OUT_DIR (a fake provider and a server on free 127.0.0.1 ports,
a throwaway SQLite file in OUT_DIR; Chromium at /usr/bin/chromium through playwright).
"""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[2]
OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/shots")
KEY = "shots-admin-key-0123456789abcdef"


def port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(url):
    for _ in range(300):
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(url)


fp = port()
fake = subprocess.Popen(
    [sys.executable, "-m", "service.cli", "fake-provider", "--host", "127.0.0.1", "--port", str(fp)],
    cwd=REPO,
    stdout=open(OUT / "fake.log", "wb"),
    stderr=subprocess.STDOUT,
)
sp = port()
db = OUT / "shots.db"
if db.exists():
    db.unlink()
env = dict(os.environ, DATABASE_URL=f"sqlite:///{db}", LLMDUEL_API_KEY=KEY, LLMDUEL_RESUME_RUNS="0")
env.pop("LLMDUEL_WEB_AUTH", None)
srv = subprocess.Popen(
    [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "service.app:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(sp),
        "--log-level",
        "warning",
    ],
    cwd=REPO,
    env=env,
    stdout=open(OUT / "server.log", "wb"),
    stderr=subprocess.STDOUT,
)
url = f"http://127.0.0.1:{sp}"
try:
    wait(f"http://127.0.0.1:{fp}/health")
    wait(url + "/healthz")
    api = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    sim = lambda n, c: {"name": n, "cost": c, "client": {"kind": "simulated"}}
    prompts = [f"Question {n}: explain topic {n}." for n in range(40)]
    certified = {
        "name": "certified: clear winner",
        "models": [sim("large", 4.0), sim("medium", 2.0), sim("small", 1.0)],
        "prompts": prompts,
        "seed": 3,
        "judge": {"kind": "simulated", "preference": [[0.5, 0.8, 0.85], [0.2, 0.5, 0.6], [0.15, 0.4, 0.5]]},
    }
    cycle = {
        "name": "no winner: a preference cycle",
        "models": [sim("alpha", 3.0), sim("beta", 1.0), sim("gamma", 2.0)],
        "prompts": prompts,
        "seed": 4,
        "judge": {"kind": "simulated", "preference": [[0.5, 0.9, 0.1], [0.1, 0.5, 0.9], [0.9, 0.1, 0.5]]},
    }
    base = f"http://127.0.0.1:{fp}/v1"
    oa = lambda m: {"kind": "openai", "base_url": base, "model": m}
    tie = {
        "name": "undecidable: a tie at the top",
        "models": [
            {"name": "model-x", "cost": 0.002, "client": oa("x-q4")},
            {"name": "model-y", "cost": 0.001, "client": oa("y-q4")},
            {"name": "model-z", "cost": 0.0015, "client": oa("z-q1")},
        ],
        "prompts": prompts[:12],
        "seed": 5,
        "judge": {"kind": "llm", "client": oa("fake-judge"), "cost": 0.0},
    }
    ids = {}
    for key, body in (("certified", certified), ("undecidable", tie), ("no-winner", cycle)):
        c = api.post("/v1/campaigns", json=body)
        c.raise_for_status()
        cid = c.json()["id"]
        api.post(f"/v1/campaigns/{cid}/run").raise_for_status()
        ids[key] = cid
    for key, cid in ids.items():
        for _ in range(600):
            v = api.get(f"/v1/campaigns/{cid}").json()
            if v["status"] != "running" and v["pending"] == 0 and not v["run"]["active"]:
                break
            time.sleep(0.3)
        print(key, cid, v["status"], v["verdict"])
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True)
        page = b.new_page(viewport={"width": 1200, "height": 900})
        page.goto(url + "/")
        page.fill("#key", KEY)
        page.click("#login button[type=submit]")
        page.wait_for_url(url + "/")
        page.screenshot(path=str(OUT / "list.png"))
        for key, cid in ids.items():
            page.goto(f"{url}/campaigns/{cid}")
            page.wait_for_selector("#evidence-section")
            page.screenshot(path=str(OUT / f"{key}-full.png"), full_page=True)
            # the verdict box, the KPI tiles and the evidence chart: the part the issue is about
            box = page.locator("section.card").first
            box.screenshot(path=str(OUT / f"{key}-verdict.png"))
            page.locator("#evidence-section").screenshot(path=str(OUT / f"{key}-evidence.png"))
            page.locator("section.kpis").screenshot(path=str(OUT / f"{key}-kpis.png"))
        b.close()
finally:
    srv.terminate()
    fake.terminate()
    srv.wait(10)
    fake.wait(10)
