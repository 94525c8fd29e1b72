"""Concurrent requests against a real uvicorn process (2 worker processes), on
SQLite and PostgreSQL: votes are counted exactly once, duplicates refused, and
the stored state equals the replayed log."""

from __future__ import annotations

import random
import threading
from collections import Counter

import httpx
import pytest
from conftest import ADMIN_KEY
from service_helpers import campaign_body

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


@pytest.fixture(scope="module")
def server(live_server):
    return live_server


def fire_together(requests: list[tuple[str, str, dict | None, dict]]) -> list[httpx.Response]:
    """Send every request (method, url, json body, headers) from its own thread,
    all released at the same instant, each on its own connection."""
    barrier = threading.Barrier(len(requests))
    results: list = [None] * len(requests)
    limits = httpx.Limits(max_connections=len(requests), max_keepalive_connections=0)
    with httpx.Client(timeout=60, limits=limits) as client:

        def worker(n: int, method: str, url: str, body: dict | None, headers: dict) -> None:
            barrier.wait()
            try:
                results[n] = client.request(method, url, json=body, headers=headers)
            except httpx.HTTPError as exc:  # recorded, asserted on below
                results[n] = exc

        threads = [threading.Thread(target=worker, args=(n, *req)) for n, req in enumerate(requests)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    errors = [r for r in results if not isinstance(r, httpx.Response)]
    assert not errors, errors
    return results


def test_50_simultaneous_votes_with_duplicates(server):
    url = server.url
    with httpx.Client(base_url=url, headers=ADMIN, timeout=60) as api:
        r = api.post("/v1/campaigns", json=campaign_body(name="concurrent votes", tie_policy="half", delta=0.001))
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        token = api.post(f"/v1/campaigns/{cid}/annotators", json={}).json()["token"]
        duels = []
        for _ in range(35):
            r = api.post(f"/v1/campaigns/{cid}/duels")
            assert r.status_code == 201, r.text
            duels.append(r.json()["id"])
        assert api.get(f"/v1/campaigns/{cid}").json()["pending"] == 35

    rng = random.Random(3)
    votes = [(d, rng.choice(["a", "b", "tie", "both_bad"])) for d in duels]
    votes += [(d, rng.choice(["a", "b"])) for d in rng.sample(duels, 10)]  # a second, different vote
    votes += [(d, c) for d, c in rng.sample(votes[:35], 5)]  # the same vote twice
    rng.shuffle(votes)
    assert len(votes) == 50
    # The admin's duels take the admin's votes only: an annotator's vote on one is a 404 (annotators vote
    # on the duels handed to them, tests/service/campaigns/test_annotation_integrity.py), and never lands.
    annotator = {"Authorization": f"Bearer {token}"}
    barrier_results = fire_together(
        [("POST", f"{url}/v1/duels/{d}/vote", {"choice": c}, ADMIN) for d, c in votes]
        + [("POST", f"{url}/v1/duels/{d}/vote", {"choice": "a"}, annotator) for d in duels[:10]]
    )
    assert Counter(r.status_code for r in barrier_results[50:]) == {404: 10}
    barrier_results = barrier_results[:50]
    assert len(barrier_results) == 50

    by_status = Counter(r.status_code for r in barrier_results)
    assert by_status == {200: 35, 409: 15}, by_status
    accepted = {}
    for r in barrier_results:
        if r.status_code == 200:
            body = r.json()
            assert body["id"] not in accepted, "a duel accepted two votes"
            accepted[body["id"]] = body["choice"]
        else:
            assert "already has a verdict" in r.json()["detail"]
    assert set(accepted) == set(duels)

    with httpx.Client(base_url=url, headers=ADMIN, timeout=60) as api:
        view = api.get(f"/v1/campaigns/{cid}").json()
        assert view["status"] == "running"
        assert view["duels"] == 35 and view["duels_counted"] == 35 and view["t"] == 35
        assert view["pending"] == 0
        assert sum(map(sum, view["counts"])) == 2 * 35
        total_wins = sum(map(sum, view["wins"]))
        assert total_wins == pytest.approx(35.0)  # each counted duel hands out exactly one win
        log = api.get(f"/v1/campaigns/{cid}/duels", params={"limit": 100}).json()["items"]
        assert {d["id"]: d["choice"] for d in log} == accepted
        assert all(d["counted"] for d in log)
        rep = api.get(f"/v1/campaigns/{cid}/replay").json()
        assert rep["ok"] is True, rep["diff"]


def test_simultaneous_next_duel_requests_count_each_other_as_pending(server):
    url = server.url
    with httpx.Client(base_url=url, headers=ADMIN, timeout=60) as api:
        cid = api.post("/v1/campaigns", json=campaign_body(name="concurrent duels", algorithm="dctas")).json()["id"]
    results = fire_together([("POST", f"{url}/v1/campaigns/{cid}/duels", None, ADMIN)] * 20)
    assert [r.status_code for r in results] == [201] * 20
    numbers = sorted(r.json()["number"] for r in results)
    assert numbers == list(range(1, 21))
    pairs = Counter(tuple(sorted((r.json()["model_a"], r.json()["model_b"]))) for r in results)
    # In-flight duels count as pulled: the policy spreads them over the pairs.
    assert len(pairs) == 3 and max(pairs.values()) - min(pairs.values()) <= 2, pairs
    with httpx.Client(base_url=url, headers=ADMIN, timeout=60) as api:
        assert api.get(f"/v1/campaigns/{cid}").json()["pending"] == 20
        # Replaying checks every selection against the pending pairs of its time.
        assert api.get(f"/v1/campaigns/{cid}/replay").json()["ok"] is True
        # Now vote on all of them at once, and ask for more duels at the same time.
        reqs = [("POST", f"{url}/v1/duels/{r.json()['id']}/vote", {"choice": "a"}, ADMIN) for r in results]
        reqs += [("POST", f"{url}/v1/campaigns/{cid}/duels", None, ADMIN)] * 10
    results = fire_together(reqs)
    assert Counter(r.status_code for r in results) == {200: 20, 201: 10}
    with httpx.Client(base_url=url, headers=ADMIN, timeout=60) as api:
        view = api.get(f"/v1/campaigns/{cid}").json()
        assert view["duels"] == 20 and view["pending"] == 10 and view["duels_created"] == 30
        assert api.get(f"/v1/campaigns/{cid}/replay").json()["ok"] is True


def test_http_errors_over_a_real_socket(server):
    with httpx.Client(base_url=server.url, timeout=30) as anon:
        r = anon.post("/v1/campaigns", json=campaign_body())
        assert r.status_code == 401 and r.json()["detail"]
        r = anon.post("/v1/campaigns", content=b"{oops", headers={**ADMIN, "Content-Type": "application/json"})
        assert r.status_code == 422 and "detail" in r.json()
        r = anon.get("/v1/campaigns/123456789", headers=ADMIN)
        assert r.status_code == 404 and r.json()["detail"]
        big = b'{"name": "' + b"x" * (33 * 1024 * 1024) + b'"}'
        r = anon.post("/v1/campaigns", content=big, headers={**ADMIN, "Content-Type": "application/json"})
        assert r.status_code == 413 and r.json()["detail"]
        assert anon.get("/healthz").json() == {"status": "ok", "database": "ok"}
