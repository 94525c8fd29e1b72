"""Resuming a paused or failed background run, and the server's check of the API keys a campaign names.

In process through the API (SQLite and PostgreSQL), then the issue's story end to end with the command
line against live servers and the fake provider: the key only in the CLI's shell (create refused), a
wrong key on the server (the run pauses), a server with the right key and run take-over on (the paused
run stays paused), ``llmduel campaign resume`` to a verdict.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time

import pytest
from conftest import (
    app_client,
    llmduel_at,
    start_fake_provider,
    start_live_server,
    start_together,
    stop_live_server,
    stop_process,
)
from service_helpers import campaign_body, simulated_judge

DEAD = "http://127.0.0.1:9/v1"  # nothing listens on the discard port: every call fails at once


def polling(seconds: float = 90.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        yield


def dead_client(key_env: str | None) -> dict:
    return {"kind": "openai", "base_url": DEAD, "model": "x", "api_key_env": key_env, "max_attempts": 1}


@pytest.fixture
async def api3(db_url):
    """The app in process with a run that pauses after 3 consecutive failed duels."""
    async with app_client(db_url, run_max_failures=3) as client:
        yield client


async def _total(api) -> int:
    return (await api.get("/v1/campaigns", params={"limit": 1})).json()["total"]


async def test_create_names_the_key_variables_the_server_lacks_and_stores_nothing(api3, monkeypatch):
    secret = "sk-present-secret-value-0123456789"
    monkeypatch.setenv("RESUME_PRESENT_KEY", secret)
    monkeypatch.delenv("RESUME_MISSING_KEY", raising=False)
    monkeypatch.delenv("RESUME_MISSING_JUDGE_KEY", raising=False)
    judge = {"kind": "llm", "cost": 0.1, "client": dead_client("RESUME_MISSING_JUDGE_KEY")}
    clients = [dead_client("RESUME_MISSING_KEY"), dead_client("RESUME_PRESENT_KEY"), {"kind": "simulated"}]
    before = await _total(api3)
    r = await api3.post("/v1/campaigns", json=campaign_body(clients=clients, judge=judge))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "RESUME_MISSING_JUDGE_KEY, RESUME_MISSING_KEY" in detail
    assert "RESUME_PRESENT_KEY" not in detail and secret not in r.text
    assert await _total(api3) == before
    # an empty value counts as missing; with every key set the same body is accepted
    monkeypatch.setenv("RESUME_MISSING_KEY", "")
    r = await api3.post("/v1/campaigns", json=campaign_body(clients=clients, judge=judge))
    assert r.status_code == 422 and "RESUME_MISSING_KEY" in r.json()["detail"]
    monkeypatch.setenv("RESUME_MISSING_KEY", "k1-value")
    monkeypatch.setenv("RESUME_MISSING_JUDGE_KEY", "k2-value")
    r = await api3.post("/v1/campaigns", json=campaign_body(clients=clients, judge=judge))
    assert r.status_code == 201, r.text
    # the run refuses too once the server lost a key (before any duel is started)
    monkeypatch.delenv("RESUME_MISSING_JUDGE_KEY")
    cid = r.json()["id"]
    r = await api3.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 1})
    assert r.status_code == 422 and "RESUME_MISSING_JUDGE_KEY" in r.json()["detail"]
    c = (await api3.get(f"/v1/campaigns/{cid}")).json()
    assert c["duels"] == 0 and c["duels_failed"] == 0 and c["run"]["active"] is False


async def _paused(api, cid: int) -> dict:
    for _ in polling():
        c = (await api.get(f"/v1/campaigns/{cid}")).json()
        if not c["run"]["active"] and c["run"]["error"]:
            return c
        await asyncio.sleep(0.05)
    raise AssertionError("the run did not pause")


async def test_resume_restarts_a_paused_run_with_its_limits(api3, monkeypatch):
    monkeypatch.setenv("RESUME_RUN_KEY", "k-value")
    body = campaign_body(clients=[dead_client("RESUME_RUN_KEY")] * 3, judge=simulated_judge())
    cid = (await api3.post("/v1/campaigns", json=body)).json()["id"]
    r = await api3.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 2, "max_duels": 40})
    assert r.status_code == 202, r.text
    c = await _paused(api3, cid)
    assert "paused after" in c["run"]["error"] and c["duels_failed"] >= 3
    remaining = c["run"]["remaining"]
    assert remaining == 40 - c["duels_failed"]

    monkeypatch.delenv("RESUME_RUN_KEY")
    r = await api3.post(f"/v1/campaigns/{cid}/resume")
    assert r.status_code == 422 and "RESUME_RUN_KEY" in r.json()["detail"], r.text
    assert (await api3.get(f"/v1/campaigns/{cid}")).json()["duels_failed"] == c["duels_failed"]

    monkeypatch.setenv("RESUME_RUN_KEY", "k-value")
    r = await api3.post(f"/v1/campaigns/{cid}/resume")
    assert r.status_code == 202, r.text
    out = r.json()
    assert out["run"]["active"] is True and out["run"]["concurrency"] == 2 and out["run"]["remaining"] == remaining
    assert "paused after" in out["previous_error"]
    again = await api3.post(f"/v1/campaigns/{cid}/resume")  # active (or paused again, then it resumes)
    assert again.status_code in (202, 409)
    if again.status_code == 409:
        assert "is active" in again.json()["detail"]
    c = await _paused(api3, cid)  # it ran: more failed duels, paused again
    assert c["duels_failed"] >= 6 and c["run"]["remaining"] < remaining
    # a concurrency in the body overrides the run's own
    r = await api3.post(f"/v1/campaigns/{cid}/resume", json={"concurrency": 1})
    assert r.status_code == 202 and r.json()["run"]["concurrency"] == 1
    assert (await api3.post(f"/v1/campaigns/{cid}/resume", json={"concurrency": 0})).status_code == 422
    assert (await api3.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
    r = await api3.post(f"/v1/campaigns/{cid}/resume")
    assert r.status_code == 409 and "has ended" in r.json()["detail"]
    assert (await api3.post("/v1/campaigns/999999999/resume")).status_code == 404


async def test_resume_refusals_name_what_to_do_instead(api3):
    human = (await api3.post("/v1/campaigns", json=campaign_body())).json()["id"]
    r = await api3.post(f"/v1/campaigns/{human}/resume")
    assert r.status_code == 409 and "human" in r.json()["detail"]

    capped = (await api3.post("/v1/campaigns", json=campaign_body(judge=simulated_judge(), max_duels=4))).json()["id"]
    assert (await api3.post(f"/v1/campaigns/{capped}/run")).status_code == 202
    for _ in polling():
        c = (await api3.get(f"/v1/campaigns/{capped}")).json()
        if c["status"] != "running" and not c["run"]["active"]:
            break
        await asyncio.sleep(0.05)
    r = await api3.post(f"/v1/campaigns/{capped}/resume")
    assert r.status_code == 409 and "llmduel campaign continue" in r.json()["detail"], r.text

    run_cap = (await api3.post("/v1/campaigns", json=campaign_body(judge=simulated_judge()))).json()["id"]
    assert (await api3.post(f"/v1/campaigns/{run_cap}/run", json={"max_duels": 2})).status_code == 202
    for _ in polling():
        c = (await api3.get(f"/v1/campaigns/{run_cap}")).json()
        if not c["run"]["active"]:
            break
        await asyncio.sleep(0.05)
    if c["status"] == "running":  # not certified in 2 duels: the run used its own max_duels
        r = await api3.post(f"/v1/campaigns/{run_cap}/resume")
        assert r.status_code == 409 and "POST /v1/campaigns/{id}/run" in r.json()["detail"]


# ---------------------------------------------------------------- the command line against live servers
@pytest.fixture(scope="module")
def keyless_server(db_url, tmp_path_factory):
    """One server (a single worker) per backend for this file's command-line tests, without the keys
    the campaign files name: the human campaign's, and the first step of the resume story."""
    server = start_live_server(db_url, tmp_path_factory.mktemp("keyless") / "server.log", unset_env=("RESUME_E2E_KEY",))
    yield server
    stop_live_server(server)


def _campaign_file(tmp_path, fake_url: str) -> str:
    client = "{kind: openai, base_url: '" + fake_url + "/v1', model: %s, api_key_env: RESUME_E2E_KEY, max_attempts: 1}"
    prompts = "".join(f"  - 'Question {n}: explain topic {n}.'\n" for n in range(12))
    path = tmp_path / "campaign.yaml"
    path.write_text(
        "name: resume e2e\nseed: 3\nbudget: 1000\n"
        "models:\n"
        f"  - {{name: small, cost: 1, client: {client % 'small-q1'}}}\n"
        f"  - {{name: large, cost: 2, client: {client % 'large-q4'}}}\n"
        f"  - {{name: mid, cost: 1, client: {client % 'mid-q2'}}}\n"
        f"judge: {{kind: llm, cost: 0.1, client: {client % 'judge'}}}\n"
        f"prompts:\n{prompts}"
        "run: {concurrency: 2}\n"
    )
    return str(path)


def test_cli_resume_after_the_right_key_reaches_the_server(keyless_server, db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("RESUME_E2E_PROVIDER_KEY", "right-key-0123456789")
    monkeypatch.delenv("RESUME_E2E_KEY", raising=False)
    # The provider, the server with the wrong key and the one with the right key start at once (the test waits
    # for one process start, not three): the right-key server, with LLMDUEL_RESUME_RUNS on, is up while the
    # wrong-key server's run pauses and after that server stops, as a server restarted with the right key is.
    right_env = {
        "RESUME_E2E_KEY": "right-key-0123456789",
        "LLMDUEL_RESUME_RUNS": "1",
        "LLMDUEL_RUN_HEARTBEAT_SECONDS": "0.2",
        "LLMDUEL_RUN_LEASE_SECONDS": "1",
    }
    wrong_env = {"RESUME_E2E_KEY": "wrong-key-x", "LLMDUEL_RUN_MAX_FAILURES": "3"}
    (fake_url, fake), wrong, right = start_together(
        functools.partial(start_fake_provider, tmp_path / "fake.log", "--api-key-env", "RESUME_E2E_PROVIDER_KEY"),
        functools.partial(start_live_server, db_url, tmp_path / "s2.log", extra_env=wrong_env),
        functools.partial(start_live_server, db_url, tmp_path / "s3.log", extra_env=right_env),
    )
    camp = _campaign_file(tmp_path, fake_url)
    servers = [wrong, right]
    try:
        # 1. the key exported only in the CLI's shell: the server refuses before anything is stored
        s = keyless_server
        r = llmduel_at(s.url, "campaign", "create", camp, env={"RESUME_E2E_KEY": "right-key-0123456789"})
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "HTTP 422" in r.stderr and "RESUME_E2E_KEY" in r.stderr and "right-key" not in r.stderr
        assert "resume e2e" not in llmduel_at(s.url, "campaign", "list").stdout

        # 2. a wrong key on the server: every call gets 401 and the run pauses
        s = wrong
        r = llmduel_at(s.url, "campaign", "create", camp, "--json")
        assert r.returncode == 0, r.stderr
        cid = json.loads(r.stdout)["id"]
        r = llmduel_at(s.url, "campaign", "watch", str(cid), "--interval", "0.2")
        paused = time.monotonic()
        assert r.returncode == 1 and "paused after 3 consecutive failed duels" in r.stderr, r.stderr
        assert f"fix the cause, then: llmduel campaign resume {cid}" in r.stderr
        shown = llmduel_at(s.url, "campaign", "show", str(cid)).stdout
        assert "error: run paused after 3" in shown and f"llmduel campaign resume {cid})" in shown
        stop_live_server(servers.pop(0))

        # 3. the right key and LLMDUEL_RESUME_RUNS on: a paused run is not taken over, however many of the
        # server's heartbeats (each looks for runs to take over) came since it paused
        s = right
        time.sleep(max(0.0, paused + 1.5 - time.monotonic()))  # at least 1.5 s (7 heartbeats); mostly past
        view = json.loads(llmduel_at(s.url, "campaign", "show", str(cid), "--json").stdout)
        assert view["run"]["active"] is False and view["duels"] == 0 and "paused" in view["run"]["error"]

        r = llmduel_at(s.url, "campaign", "resume", str(cid))
        assert r.returncode == 0, r.stderr
        assert f"campaign {cid}: resumed the background run (concurrency 2)" in r.stdout
        assert "it had stopped: run paused after 3" in r.stdout
        r = llmduel_at(s.url, "campaign", "watch", str(cid), "--interval", "0.2")
        assert r.returncode == 0 and r.stdout.strip().splitlines()[-1].startswith("certified: large"), r.stdout
        r = llmduel_at(s.url, "campaign", "resume", str(cid))
        assert r.returncode == 2 and "has ended (status certified)" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    finally:
        for s in servers:
            stop_live_server(s)
        stop_process(fake)


def test_human_judged_create_prints_the_annotator_command(keyless_server, tmp_path):
    path = tmp_path / "human.yaml"
    path.write_text(
        "name: human resume\nmodels:\n  - {name: a, cost: 1, client: {kind: simulated}}\n  - {name: b, cost: 1, client: {kind: simulated}}\n"
        "judge: {kind: human}\nprompts: [Say hi., Say bye.]\n"
    )
    r = llmduel_at(keyless_server.url, "campaign", "create", str(path))
    assert r.returncode == 0, r.stderr
    cid = next(line.split()[1].rstrip(":") for line in r.stdout.splitlines() if line.startswith("campaign "))
    assert f"llmduel annotator add {cid} --label NAME" in r.stdout and "POST" not in r.stdout
    r = llmduel_at(keyless_server.url, "campaign", "resume", cid)
    assert r.returncode == 2 and "human" in r.stderr
