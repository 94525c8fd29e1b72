"""``llmduel annotator add|list|revoke`` against a real server (two workers, SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
from conftest import ADMIN_KEY, REPO
from service_helpers import campaign_body

from service.auth import REVOCATION_SECONDS


def llmduel(*args: str, key: str | None = ADMIN_KEY) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("LLMDUEL_API_KEY", "LLMDUEL_URL")}
    if key is not None:
        env["LLMDUEL_API_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )


def test_annotator_cli_add_list_revoke(live_server):
    url = live_server.url
    admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)
    cid = admin.post("/v1/campaigns", json=campaign_body("cli annotators")).json()["id"]

    p = llmduel("annotator", "add", str(cid), "--label", "alice", "--json", "--url", url)
    assert p.returncode == 0, p.stderr
    alice = json.loads(p.stdout)
    assert alice["label"] == "alice" and alice["url"].endswith(f"/annotate/{alice['token']}")
    assert alice["url"].startswith("http://")
    p = llmduel("annotator", "add", str(cid), "--url", url)
    assert p.returncode == 0, p.stderr
    assert "voting link" in p.stdout and "/annotate/ann_" in p.stdout.splitlines()[-1]

    # alice votes once through the API with her token
    who = {"Authorization": f"Bearer {alice['token']}"}
    duel = admin.post(f"/v1/campaigns/{cid}/duels", headers=who).json()
    assert admin.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "a"}, headers=who).status_code == 200

    p = llmduel("annotator", "list", str(cid), "--url", url)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["id", "label", "votes", "skips", "agreement", "shared", "state"]
    row = next(line.split() for line in lines[1:] if line.split()[1] == "alice")
    assert row[2:] == ["1", "0", "-", "0", "active"]
    p = llmduel("annotator", "list", str(cid), "--json", "--url", url)
    listed = json.loads(p.stdout)
    assert [a["label"] for a in listed] == ["alice", None] and alice["token"] not in p.stdout

    p = llmduel("annotator", "revoke", str(cid), str(alice["id"]), "--url", url)
    assert p.returncode == 0, p.stderr
    assert "revoked" in p.stdout
    time.sleep(REVOCATION_SECONDS + 0.5)  # the other worker's revocation watch
    for _ in range(6):  # fresh connections reach both workers
        with httpx.Client(base_url=url, headers=who) as c:
            assert c.get(f"/v1/campaigns/{cid}").status_code == 401
            assert c.get(f"/annotate/{alice['token']}", headers={"Authorization": ""}).status_code == 403
    listed = json.loads(llmduel("annotator", "list", str(cid), "--json", "--url", url).stdout)
    assert listed[0]["revoked_at"] is not None

    # every error is one line, exit 2
    for args, needle in [
        (("annotator", "list", "987654321", "--url", url), "HTTP 404"),
        (("annotator", "revoke", str(cid), "987654321", "--url", url), "HTTP 404"),
        (("annotator", "add", "abc", "--url", url), "CAMPAIGN_ID must be an integer"),
        (("annotator", "list", str(cid), "--url", "http://127.0.0.1:1"), "cannot reach"),
        (("annotator", "list", str(2**70), "--url", url), "CAMPAIGN_ID must be between"),
    ]:
        p = llmduel(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and needle in p.stderr, (args, p.stderr)
        assert "Traceback" not in p.stderr
    p = llmduel("annotator", "list", str(cid), "--url", url, key="wrong-key")
    assert p.returncode == 2 and "HTTP 401" in p.stderr and "wrong-key" not in p.stderr
    admin.close()
