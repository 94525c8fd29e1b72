"""What ``llmduel campaign ...`` says about a campaign, through the command line against a live
server (issue 22): a refused combination is one line with exit code 2 naming the reason; ``show``
and ``watch`` report the evidence of the rule that decides and the verdict in plain words."""

from __future__ import annotations

import json

from conftest import llmduel_at


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
    p = llmduel_at(live_server.url, "campaign", "create", path, "--no-run")
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "HTTP 422" in lines[0] and "needs tie_policy half, got random" in lines[0]
    assert "certify the coin" in lines[0]
    # nothing was created
    listing = llmduel_at(live_server.url, "campaign", "list", "--json")
    assert all(c["name"] != "cli numbers" for c in json.loads(listing.stdout)["items"])


def test_show_and_watch_report_the_certificates_that_decide_dctas_pc(live_server, tmp_path):
    path = write_file(
        tmp_path,
        name="cli certificates",
        models=[{"name": n, "cost": c, "client": {"kind": "simulated"}} for n, c in (("large", 4), ("small", 1))],
        judge={"kind": "simulated", "preference": [[0.5, 0.9], [0.1, 0.5]]},
    )
    created = llmduel_at(live_server.url, "campaign", "create", path, "--json")
    assert created.returncode == 0, created.stderr
    cid = str(json.loads(created.stdout)["id"])
    watched = llmduel_at(live_server.url, "campaign", "watch", cid, "--interval", "0.2")
    assert watched.returncode == 0, watched.stderr
    last = watched.stdout.strip().splitlines()[0]
    assert last == (
        "certified: large beats every other model: it was shown to beat small (error probability at most 0.05)."
    )
    assert "certified 1/1 pairs" in watched.stderr and "evidence" not in watched.stderr
    assert "cost units" in watched.stderr
    shown = llmduel_at(live_server.url, "campaign", "show", cid)
    assert shown.returncode == 0, shown.stderr
    assert "evidence   large: 1 of 1 pairs certified (betting test" in shown.stdout
    assert "small beaten by large:" in shown.stdout and "certified" in shown.stdout
    assert "shown      large beats small" in shown.stdout and "GLR" not in shown.stdout
    as_json = json.loads(llmduel_at(live_server.url, "campaign", "show", cid, "--json").stdout)
    assert as_json["pc_evidence"]["certified"] == 1 and as_json["pc_evidence"]["needed"] == 1
    assert as_json["certificate_graph"] == [{"winner": "large", "loser": "small", "exact": False}]
