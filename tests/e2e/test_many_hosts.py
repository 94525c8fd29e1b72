"""Two servers of two workers each on one PostgreSQL database (docs/architecture.md, Many hosts).

Annotators vote through both servers in turn on one campaign of 20 models (every duel's policy
is another worker's: the cached policy is behind, and catches up from the duel log), while a
background run of a second campaign goes on on the other server; then every consistency check:
replay (stored state == replayed log, counters, ledger) through each server, counted duels ==
accepted decisive votes, pair counts == 2 x counted, the same view from both servers. The pools
are set small (LLMDUEL_PG_POOL_SIZE, LLMDUEL_PG_POOL_OVERFLOW, LLMDUEL_PG_HOT_POOL_SIZE).
"""

from __future__ import annotations

import concurrent.futures as cf
import time

import httpx
import pytest
from conftest import ADMIN_KEY, start_live_server, stop_live_server
from service_helpers import campaign_body, simulated_judge

pytestmark = pytest.mark.postgres

L = 20
VOTES_EACH = 15
ANNOTATORS = 4
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
POOLS = {"LLMDUEL_PG_POOL_SIZE": "2", "LLMDUEL_PG_POOL_OVERFLOW": "2", "LLMDUEL_PG_HOT_POOL_SIZE": "2"}


@pytest.fixture
def two_hosts(pg_url, tmp_path):
    from service.db import upgrade_database

    upgrade_database(pg_url)
    servers = []
    try:
        for name in ("a", "b"):
            servers.append(start_live_server(pg_url, tmp_path / f"{name}.log", extra_env=POOLS, workers=2))
        yield [s.url for s in servers]
    finally:
        for s in servers:
            stop_live_server(s)


def _annotator(hosts: list[str], cid: int, token: str, k: int) -> int:
    """Plan and vote ``VOTES_EACH`` duels, each request on the next server; returns decisive votes."""
    decisive = 0
    clients = [httpx.Client(base_url=h, headers={"Authorization": f"Bearer {token}"}, timeout=60) for h in hosts]
    try:
        for n in range(VOTES_EACH):
            plan = clients[(n + k) % 2].post(f"/v1/campaigns/{cid}/duels")
            assert plan.status_code == 201, plan.text
            d = plan.json()
            choice = "tie" if n % 7 == 3 else ("a" if (d["id"] + k) % 3 else "b")
            vote = clients[(n + k + 1) % 2].post(f"/v1/duels/{d['id']}/vote", json={"choice": choice})
            assert vote.status_code == 200, vote.text
            decisive += choice != "tie"
    finally:
        for c in clients:
            c.close()
    return decisive


def test_two_servers_of_two_workers_run_one_campaign_consistently(two_hosts):
    a, b = two_hosts
    body = campaign_body(name="two hosts", costs=[1.0 + m / 10 for m in range(L)], delta=1e-6, tie_policy="drop")
    cid = httpx.post(f"{a}/v1/campaigns", json=body, headers=ADMIN, timeout=60).json()["id"]
    P = [[0.5 + 0.2 * (j - i) / L for j in range(L)] for i in range(L)]
    run_body = campaign_body(name="run", costs=[1.0] * L, judge=simulated_judge(P), delta=1e-6, max_duels=60)
    rid = httpx.post(f"{b}/v1/campaigns", json=run_body, headers=ADMIN, timeout=60).json()["id"]
    assert httpx.post(f"{b}/v1/campaigns/{rid}/run", json={"concurrency": 2}, headers=ADMIN).status_code == 202
    tokens = [
        httpx.post(f"{a}/v1/campaigns/{cid}/annotators", json={"label": f"ann{k}"}, headers=ADMIN).json()["token"]
        for k in range(ANNOTATORS)
    ]
    with cf.ThreadPoolExecutor(ANNOTATORS) as pool:
        decisive = sum(pool.map(lambda k: _annotator([a, b], cid, tokens[k], k), range(ANNOTATORS)))
    deadline = time.monotonic() + 120
    while httpx.get(f"{a}/v1/campaigns/{rid}", headers=ADMIN).json()["status"] == "running":
        assert time.monotonic() < deadline, "the background run did not end"
        time.sleep(0.2)
    views = [httpx.get(f"{h}/v1/campaigns/{cid}", params={"pairs": "true"}, headers=ADMIN).json() for h in (a, b)]
    v = views[0]
    assert v["duels"] == ANNOTATORS * VOTES_EACH and v["duels_counted"] == decisive == v["t"]
    assert sum(map(sum, v["counts"])) == 2 * decisive and v["pending"] == 0
    for key in ("counts", "wins", "evidence", "leader", "t", "spend"):
        assert views[1][key] == v[key], key
    for campaign in (cid, rid):
        for h in (a, b):
            rep = httpx.get(f"{h}/v1/campaigns/{campaign}/replay", headers=ADMIN, timeout=120).json()
            assert rep["ok"] is True, rep["diff"]
    assert httpx.get(f"{b}/v1/campaigns/{rid}", headers=ADMIN).json()["duels"] == 60
