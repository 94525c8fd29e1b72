"""Every file in examples/ reads through the campaign-file loader into a valid campaign body, and every
example that needs no network (the fake provider, simulated, human with scripted votes) runs to a verdict
against a live server, through the command line as the examples' README tells."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import httpx
import pytest
from conftest import ADMIN_KEY, REPO, llmduel_at

from service.campaign_files import read_campaign_file
from service.schemas import CampaignCreate

pytestmark = pytest.mark.slow

EXAMPLES = REPO / "examples"
FAKE_URL = "http://127.0.0.1:9000/v1"  # what the examples say: `llmduel fake-provider --port 9000`
OFFLINE = {"fake-provider.yaml", "simulated.yaml", "human.yaml", "vision.yaml", "text-to-image.yaml"}
CAMPAIGN_FILES = sorted(p.name for p in EXAMPLES.glob("*.yaml"))


def _clients(body: dict) -> list[dict]:
    out = [m["client"] for m in body["models"]]
    if isinstance(body["judge"].get("client"), dict):
        out.append(body["judge"]["client"])
    return out


def needs_network(body: dict) -> bool:
    return any(c.get("kind") != "simulated" and c.get("base_url") != FAKE_URL for c in _clients(body))


def test_the_examples_are_all_here():
    assert set(CAMPAIGN_FILES) >= OFFLINE | {
        "openai-compatible.yaml",
        "openai.yaml",
        "anthropic.yaml",
        "gemini.yaml",
    }
    questions = [json.loads(line) for line in (EXAMPLES / "question.jsonl").read_text().splitlines()]
    assert len(questions) >= 20 and len({q["question_id"] for q in questions}) == len(questions)
    assert all(q["category"] and q["turns"] and all(t["content"] for t in q["turns"]) for q in questions)
    assert any(len(q["turns"]) == 2 for q in questions)
    readme = (EXAMPLES / "README.md").read_text()
    for name in CAMPAIGN_FILES:
        assert name in readme, f"examples/README.md does not mention {name}"


@pytest.mark.parametrize("name", CAMPAIGN_FILES)
def test_every_example_reads_into_a_valid_campaign(name):
    body = read_campaign_file(str(EXAMPLES / name))
    run = body.pop("run", None)
    assert run is None or set(run) <= {"concurrency", "max_duels"}
    campaign = CampaignCreate.model_validate(body)  # prices of models without a cost are found, too
    assert len(campaign.prompts) == 20 and all(m.cost > 0 for m in campaign.models)
    assert needs_network(body) is (name not in OFFLINE)


# ---------------------------------------------------------------- running the offline ones
@pytest.fixture
def examples_here(tmp_path, fake_provider) -> Path:
    """A copy of examples/ whose fake-provider address is this test's fake provider.

    Each copy gets a fixed ``seed`` (an example without one draws a fresh seed, so the test's
    verdict would be wrong with probability up to the example's delta: a test must not fail by
    chance)."""
    out = tmp_path / "examples"
    shutil.copytree(EXAMPLES, out)
    for path in out.glob("*.yaml"):
        text = path.read_text().replace(FAKE_URL, fake_provider + "/v1")
        if not any(line.startswith("seed:") for line in text.splitlines()):
            text += "\nseed: 3\n"
        path.write_text(text)
    return out


def created_id(stdout: str) -> int:
    first = stdout.splitlines()[0]  # "campaign 7: example - ..."
    assert first.startswith("campaign "), stdout
    return int(first.split()[1].rstrip(":"))


@pytest.mark.parametrize(
    "name, winner",
    [
        ("fake-provider.yaml", "large"),
        ("simulated.yaml", "expensive"),
        ("vision.yaml", "large"),
        ("text-to-image.yaml", "painter"),
    ],
)
def test_automatic_examples_run_to_a_verdict(service, examples_here, tmp_path, name, winner):
    r = llmduel_at(service.url, "campaign", "create", str(examples_here / name))
    assert r.returncode == 0, r.stderr
    cid = created_id(r.stdout)
    assert f"watch it:  llmduel campaign watch {cid}" in r.stdout
    r = llmduel_at(service.url, "campaign", "watch", str(cid), "--interval", "0.3")
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith(f"certified: {winner} beats every other model: it was shown to beat "), r.stdout
    assert first.endswith("(error probability at most 0.05)."), r.stdout
    r = llmduel_at(service.url, "campaign", "export", str(cid), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    battles = [json.loads(x) for x in (tmp_path / "out" / "battles.jsonl").read_text().splitlines()]
    prefix = {"vision.yaml": "v", "text-to-image.yaml": "t"}.get(name, "ex")  # v01 ... v20, t01 ... t20
    assert battles and {b["question_id"] for b in battles} <= {f"{prefix}{n:02d}" for n in range(1, 21)}
    if name == "text-to-image.yaml":  # the images the battle log names, written beside it
        named = {b[f"image_{side}"] for b in battles for side in "ab"}
        assert {p.name for p in (tmp_path / "out" / "images").iterdir()} == {f"{h}.png" for h in named}


def test_human_example_runs_to_a_verdict_with_scripted_votes(service, examples_here):
    r = llmduel_at(service.url, "campaign", "create", str(examples_here / "human.yaml"))
    assert r.returncode == 0, r.stderr
    cid = created_id(r.stdout)
    assert f"llmduel annotator add {cid} --label NAME" in r.stdout
    r = llmduel_at(service.url, "annotator", "add", str(cid), "--label", "alice", "--json")
    assert r.returncode == 0, r.stderr
    token = json.loads(r.stdout)["token"]
    annotator = httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    admin = httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)
    deadline = time.monotonic() + 300
    with annotator, admin:
        while time.monotonic() < deadline:
            d = annotator.post(f"/v1/campaigns/{cid}/duels")
            if d.status_code == 409:  # the campaign ended
                break
            assert d.status_code in (200, 201), d.text
            duel = d.json()
            assert "model_a" not in duel  # blinded
            who = admin.get(f"/v1/duels/{duel['id']}").json()
            choice = "a" if who["model_a_name"] == "concise" else "b"  # alice always prefers "concise"
            v = annotator.post(f"/v1/duels/{duel['id']}/vote", json={"choice": choice})
            assert v.status_code in (200, 409), v.text
    r = llmduel_at(service.url, "campaign", "watch", str(cid), "--interval", "0.3")
    assert r.returncode == 0 and r.stdout.splitlines()[0].startswith("certified: concise beats"), r.stdout
