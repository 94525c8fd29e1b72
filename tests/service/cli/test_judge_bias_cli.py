"""``llmduel campaign show`` and ``export`` against a live server: a judge that always answers [[A]]
gets its judge bias lines and warning, and judge_bias.json is written beside the other files."""

from __future__ import annotations

import json
import os

import httpx
import pytest
from conftest import ADMIN_KEY, llmduel_at

pytestmark = pytest.mark.slow

ALWAYS_A = {"a": "[[A]]", "b": "[[A]]", "tie": "[[A]]"}


@pytest.fixture(scope="module")
def fake_url(fake_provider):
    return fake_provider + "/v1"


def test_show_and_export_carry_the_judge_bias(live_server, fake_url, tmp_path):
    tag = os.urandom(3).hex()
    judge_client = {"kind": "openai", "base_url": fake_url, "model": "judge-a", "params": {"fake_verdicts": ALWAYS_A}}
    body = {
        "name": f"always A {tag}",
        "models": [
            {
                "name": f"m{k}",
                "cost": 0.001,
                "client": {"kind": "openai", "base_url": fake_url, "model": f"{tag}-{k}-q{k + 2}"},
            }
            for k in range(3)
        ],
        "prompts": [f"{tag} question {k}" for k in range(5)],
        "judge": {"kind": "llm", "cost": 0.001, "client": judge_client},
        "seed": 3,
        "prompt_sampling": "with_replacement",
        "verdicts": "fresh",
        "max_duels": 12,
    }
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=60) as api:
        r = api.post("/v1/campaigns", json=body)
        assert r.status_code == 201, r.text
        cid = str(r.json()["id"])
        assert api.post(f"/v1/campaigns/{cid}/run", json={}).status_code == 202
    # watch: the verdict on stdout, the judge bias warning on stderr (the measured case had no hint)
    r = llmduel_at(live_server.url, "campaign", "watch", cid, "--interval", "0.2")
    assert r.returncode == 0 and r.stdout.startswith("not certified: max_duels (12) reached"), (r.stdout, r.stderr)
    assert "llmduel: warning: the judge chose the first position in 100% of its 24 decisive verdicts" in r.stderr
    assert f"(llmduel campaign show {cid})" in r.stderr
    r = llmduel_at(live_server.url, "campaign", "show", cid)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "  judge bias first position 100% of 24 (95% CI 86% to 100%)" in lines
    assert "             orders disagree 100% of 12 (95% CI 76% to 100%)" in lines
    assert any(line.startswith("  warning    the judge chose the first position in 100%") for line in lines)
    shown = json.loads(llmduel_at(live_server.url, "campaign", "show", cid, "--json").stdout)
    assert shown["judge_bias"]["first_position"]["rate"] == 1.0
    r = llmduel_at(live_server.url, "campaign", "export", cid, "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    exported = json.loads((tmp_path / "out" / "judge_bias.json").read_text())
    assert exported == shown["judge_bias"]
