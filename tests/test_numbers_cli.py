"""What ``llmduel campaign ...`` says about a campaign, through the command line against a live
server (issue 22): a refused combination is one line with exit code 2 naming the reason; ``show``
and ``watch`` report the evidence of the rule that decides and the verdict in plain words."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ADMIN_KEY, REPO


def llmduel(server, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LLMDUEL_URL=server.url, LLMDUEL_API_KEY=ADMIN_KEY)
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def write_file(tmp_path, **fields) -> str:
    body = {
        "name": "cli numbers",
        "models": [{"name": n, "cost": 1.0, "client": {"kind": "simulated"}} for n in ("alpha", "beta")],
        "prompts": ["one", "two", "three"],
        "judge": {"kind": "simulated", "preference": [[0.5, 0.5], [0.5, 0.5]]},
        "seed": 3,
        **fields,
    }
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(body))
    return str(path)


def test_a_tie_coin_without_replacement_is_refused_with_exit_2_and_the_reason(live_server, tmp_path):
    path = write_file(tmp_path, prompt_sampling="without_replacement", tie_policy="random")
    p = llmduel(live_server, "campaign", "create", path, "--no-run")
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "HTTP 422" in lines[0] and "needs tie_policy half, got random" in lines[0]
    assert "certify the coin" in lines[0]
    # nothing was created
    listing = llmduel(live_server, "campaign", "list", "--json")
    assert all(c["name"] != "cli numbers" for c in json.loads(listing.stdout)["items"])
