"""REST API through httpx on the ASGI app, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import ADMIN_KEY, app_client
from service_helpers import campaign_body, simulated_judge


def polling(seconds: float = 90.0):
    """Iterations of a poll loop, bounded in time (the machine may be busy), not in count."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        yield


async def create(api, **kw) -> dict:
    r = await api.post("/v1/campaigns", json=campaign_body(**kw))
    assert r.status_code == 201, r.text
    return r.json()


async def annotator(api, campaign_id: int) -> dict:
    r = await api.post(f"/v1/campaigns/{campaign_id}/annotators", json={"label": "alice"})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


# ---------------------------------------------------------------- create and read
async def test_create_and_get_campaign(api):
    c = await create(api, budget=100.0, max_duels=50, tie_policy="half", delta=0.1)
    assert c["status"] == "running"
    assert c["winner"] is None and c["leader"] is None
    assert c["spend"] == 0 and c["duels"] == 0 and c["pending"] == 0
    assert c["counts"] == [[0, 0, 0]] * 3
    assert c["budget"] == 100.0 and c["remaining_budget"] == 100.0
    assert c["tie_policy"] == "half" and c["delta"] == 0.1 and c["algorithm"] == "dctas-pc"
    # the default does not assume a Condorcet winner; the paper's algorithms say that they do
    assert c["assumes_condorcet_winner"] is False and c["condorcet_note"] is None and c["judge_cost"] == 0.0
    assert [m["name"] for m in c["models"]] == ["m0", "m1", "m2"]
    assert c["n_prompts"] == 3
    r = await api.get(f"/v1/campaigns/{c['id']}")
    assert r.status_code == 200 and r.json()["id"] == c["id"]
    r = await api.get("/v1/campaigns", params={"limit": 500})
    assert r.status_code == 200
    assert c["id"] in [x["id"] for x in r.json()["items"]]


async def test_openapi_and_docs(api):
    r = await api.get("/openapi.json")
    assert r.status_code == 200
    paths = r.json()["paths"]
    for p in (
        "/v1/campaigns",
        "/v1/campaigns/{campaign_id}/duels",
        "/v1/duels/{duel_id}/vote",
        "/v1/campaigns/{campaign_id}/run",
        "/v1/campaigns/{campaign_id}/stop",
        "/v1/campaigns/{campaign_id}/annotators",
    ):
        assert p in paths
    r = await api.get("/docs")
    assert r.status_code == 200 and "swagger" in r.text.lower()


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "patch",
    [
        {"name": ""},
        {"name": "a\x00b"},
        {"delta": 0},
        {"delta": 1.5},
        {"algorithm": "ucb"},
        {"tie_policy": "coin"},
        {"budget": -1},
        {"max_duels": 0},
        {"prompts": []},
        {"prompts": ["ok", 3]},
        {"models": [{"name": "m0", "cost": 1, "client": {"kind": "simulated"}}]},
        {"models": [{"name": "x", "cost": 1, "client": {"kind": "simulated"}}] * 2},
        {
            "models": [
                {"name": "a", "cost": 0, "client": {"kind": "simulated"}},
                {"name": "b", "cost": 1, "client": {"kind": "simulated"}},
            ]
        },
        {
            "models": [
                {"name": "a", "cost": 1, "client": {"kind": "warp"}},
                {"name": "b", "cost": 1, "client": {"kind": "simulated"}},
            ]
        },
        {"judge": {"kind": "oracle"}},
        {"judge": {"kind": "simulated", "preference": [[0.5, 0.6], [0.4, 0.5]]}},
        {"webhook_url": "ftp://example.com/x"},
        {"unknown_field": 1},
    ],
)
async def test_bad_campaign_bodies_are_422_with_a_message(api, patch):
    body = campaign_body()
    body.update(patch)
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail and all("msg" in e for e in detail)


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[]", b'{"name": NaN}', b"\xff\xfe", b'"just a string"'],
)
async def test_malformed_json_is_422(api, content):
    r = await api.post("/v1/campaigns", content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == 422
    assert "detail" in r.json()


async def test_nan_cost_is_refused(api):
    body = json.dumps(campaign_body()).replace('"cost": 4.0', '"cost": NaN')
    r = await api.post("/v1/campaigns", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422


@pytest.mark.parametrize(
    "path",
    [
        "/v1/campaigns/0",
        "/v1/campaigns/-3",
        "/v1/campaigns/abc",
        "/v1/campaigns/99999999999999999999999",
        "/v1/duels/0/vote",
    ],
)
async def test_bad_ids_are_422(api, path):
    r = await (api.get(path) if not path.endswith("vote") else api.post(path, json={"choice": "a"}))
    assert r.status_code == 422
    assert "detail" in r.json()


async def test_missing_things_are_404_json(api):
    for r in (
        await api.get("/v1/campaigns/987654321"),
        await api.post("/v1/duels/987654321/vote", json={"choice": "a"}),
        await api.get("/v1/nothing-here"),
    ):
        assert r.status_code == 404
        assert isinstance(r.json()["detail"], str)


# ---------------------------------------------------------------- auth
async def test_auth_is_required_and_checked(api, db_url):
    c = await create(api)
    cid = c["id"]
    bad = [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {ADMIN_KEY}"}, {"Authorization": "Bearer "}]
    async with app_client(db_url, headers=None) as anon:
        for headers in bad:
            for method, path, body in [
                ("POST", "/v1/campaigns", campaign_body()),
                ("GET", "/v1/campaigns", None),
                ("GET", f"/v1/campaigns/{cid}", None),
                ("POST", f"/v1/campaigns/{cid}/duels", None),
                ("POST", f"/v1/campaigns/{cid}/stop", None),
                ("POST", f"/v1/campaigns/{cid}/run", None),
                ("POST", f"/v1/campaigns/{cid}/annotators", None),
                ("POST", "/v1/duels/1/vote", {"choice": "a"}),
            ]:
                r = await anon.request(method, path, json=body, headers=headers)
                assert r.status_code == 401, (headers, method, path, r.text)
                assert r.headers.get("www-authenticate") == "Bearer"


async def test_annotator_tokens_are_scoped_to_their_campaign(api):
    c1 = await create(api, name="one")
    c2 = await create(api, name="two")
    tok1 = await annotator(api, c1["id"])
    r = await api.post(f"/v1/campaigns/{c2['id']}/duels")
    assert r.status_code == 201
    other_duel = r.json()["id"]
    # Admin-only routes.
    assert (await api.post("/v1/campaigns", json=campaign_body(), headers=tok1)).status_code == 403
    assert (await api.get("/v1/campaigns", headers=tok1)).status_code == 403
    assert (await api.post(f"/v1/campaigns/{c1['id']}/stop", headers=tok1)).status_code == 403
    assert (await api.post(f"/v1/campaigns/{c1['id']}/annotators", headers=tok1)).status_code == 403
    assert (await api.get(f"/v1/campaigns/{c1['id']}/duels", headers=tok1)).status_code == 403
    # Another campaign: no reading, no duel, no vote.
    assert (await api.get(f"/v1/campaigns/{c2['id']}", headers=tok1)).status_code == 403
    assert (await api.post(f"/v1/campaigns/{c2['id']}/duels", headers=tok1)).status_code == 403
    # Another campaign's duel: 404, as for an id that does not exist (probing ids tells nothing).
    assert (await api.get(f"/v1/duels/{other_duel}", headers=tok1)).status_code == 404
    r = await api.post(f"/v1/duels/{other_duel}/vote", json={"choice": "a"}, headers=tok1)
    assert r.status_code == 404
    assert (await api.get(f"/v1/duels/{other_duel}")).json()["status"] == "pending"
    # Its own campaign: read, get a duel, vote; model identities stay hidden.
    assert (await api.get(f"/v1/campaigns/{c1['id']}", headers=tok1)).status_code == 200
    r = await api.post(f"/v1/campaigns/{c1['id']}/duels", headers=tok1)
    assert r.status_code == 201, r.text
    duel = r.json()
    assert "model_a" not in duel and "model_a_name" not in duel and duel["answer_a"]
    r = await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "b"}, headers=tok1)
    assert r.status_code == 200, r.text
    assert r.json()["choice"] == "b" and "model_b" not in r.json() and "counted" not in r.json()
    admin_view = (await api.get(f"/v1/duels/{duel['id']}")).json()
    assert admin_view["counted"] is True
    assert admin_view["judged_by"].startswith("annotator:")
    assert admin_view["model_b"] in (0, 1, 2)


async def test_annotators_cannot_drive_automatic_campaigns(api):
    c = await create(api, judge=simulated_judge())
    tok = await annotator(api, c["id"])
    r = await api.post(f"/v1/campaigns/{c['id']}/duels", headers=tok)
    assert r.status_code == 403


async def test_provider_key_values_are_never_stored_or_returned(api, monkeypatch):
    monkeypatch.setenv("MY_PROVIDER_KEY", "sk-very-secret-value")
    client = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "x", "api_key_env": "MY_PROVIDER_KEY"}
    body = campaign_body(clients=[client, {"kind": "simulated"}, {"kind": "simulated"}])
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    assert "sk-very-secret-value" not in r.text
    assert r.json()["models"][0]["client"]["api_key_env"] == "MY_PROVIDER_KEY"
    body["models"][0]["client"] = dict(client, api_key="sk-inline")
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422 and "sk-inline" not in r.text


# ---------------------------------------------------------------- duels and votes
async def test_vote_flow_duplicates_and_views(api):
    c = await create(api)
    cid = c["id"]
    r = await api.post(f"/v1/campaigns/{cid}/duels")
    assert r.status_code == 201, r.text
    duel = r.json()
    assert duel["status"] == "pending" and duel["answer_a"] and duel["answer_b"]
    assert duel["prompt"] in campaign_body()["prompts"]
    assert {duel["model_a"], duel["model_b"]} <= {0, 1, 2} and duel["model_a"] != duel["model_b"]
    assert r.headers["server-timing"].startswith("select;dur=")
    assert (await api.get(f"/v1/campaigns/{cid}")).json()["pending"] == 1

    r = await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "a"})
    assert r.status_code == 200, r.text
    voted = r.json()
    assert voted["status"] == "judged" and voted["choice"] == "a" and voted["counted"] is True
    winner, loser = duel["model_a"], duel["model_b"]
    r = await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "b"})
    assert r.status_code == 409 and "already" in r.json()["detail"]
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["duels"] == 1 and view["pending"] == 0 and view["t"] == 1
    assert view["counts"][winner][loser] == 1 and view["wins"][winner][loser] == 1.0
    assert view["wins"][loser][winner] == 0.0
    assert view["spend"] == pytest.approx(5.0 if 0 in (winner, loser) else 2.0)

    r = await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "maybe"})
    assert r.status_code == 422

    log = (await api.get(f"/v1/campaigns/{cid}/duels")).json()
    assert log["total"] == 1
    item = log["items"][0]
    assert item["choice"] == "a" and item["judged_by"] == "admin"
    assert sum(ch["amount"] for ch in item["charges"]) == pytest.approx(item["cost"])
    assert {ch["model_index"] for ch in item["charges"]} == {winner, loser}


async def test_tie_policies(api):
    results = {}
    for policy in ("drop", "half", "random"):
        c = await create(api, tie_policy=policy)
        duel = (await api.post(f"/v1/campaigns/{c['id']}/duels")).json()
        r = await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "tie"})
        assert r.status_code == 200
        view = (await api.get(f"/v1/campaigns/{c['id']}")).json()
        admin_duel = (await api.get(f"/v1/duels/{duel['id']}")).json()
        results[policy] = (view, admin_duel)
    view, d = results["drop"]
    assert view["duels"] == 1 and view["duels_counted"] == 0 and view["t"] == 0 and d["counted"] is False
    view, d = results["half"]
    assert view["duels_counted"] == 1 and d["score"] == 0.5
    i, j = sorted((d["model_a"], d["model_b"]))
    assert view["wins"][i][j] == 0.5 and view["wins"][j][i] == 0.5
    view, d = results["random"]
    assert view["duels_counted"] == 1 and d["score"] in (0.0, 1.0)


async def test_stop_ends_campaign_and_refuses_more(api):
    c = await create(api)
    cid = c["id"]
    duel = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
    r = await api.post(f"/v1/campaigns/{cid}/stop")
    assert r.status_code == 200 and r.json()["status"] == "stopped"
    assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 409
    r = await api.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "a"})
    assert r.status_code == 409
    assert (await api.get(f"/v1/duels/{duel['id']}")).json()["status"] == "cancelled"
    assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 409
    assert (await api.post(f"/v1/campaigns/{cid}/run")).status_code == 409


async def test_max_duels_ends_the_campaign(api):
    c = await create(api, max_duels=2)
    cid = c["id"]
    d1 = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
    d2 = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
    r = await api.post(f"/v1/campaigns/{cid}/duels")
    assert r.status_code == 409  # two in flight already reach the cap
    for d in (d1, d2):
        assert (await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "b"})).status_code == 200
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "stopped" and "max_duels" in view["end_reason"]
    assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 409


async def test_run_requires_automatic_judge(api):
    c = await create(api)
    r = await api.post(f"/v1/campaigns/{c['id']}/run")
    assert r.status_code == 409 and "automatic judge" in r.json()["detail"]


async def test_run_with_cap_and_audit_log_pagination(api):
    c = await create(api, judge=simulated_judge())
    cid = c["id"]
    r = await api.post(f"/v1/campaigns/{cid}/run", json={"max_duels": 12})
    assert r.status_code == 202 and r.json()["run"]["remaining"] == 12
    for _ in polling():
        view = (await api.get(f"/v1/campaigns/{cid}")).json()
        if not view["run"]["active"]:
            break
        await asyncio.sleep(0.05)
    assert view["run"]["active"] is False and view["status"] == "running"
    assert view["duels"] == 12 and view["pending"] == 0
    seen = []
    offset = 0
    while offset is not None:
        page = (await api.get(f"/v1/campaigns/{cid}/duels", params={"limit": 5, "offset": offset})).json()
        assert page["total"] == 12 and len(page["items"]) <= 5
        seen += [d["number"] for d in page["items"]]
        offset = page["next_offset"]
    assert seen == list(range(1, 13))
    page = (await api.get(f"/v1/campaigns/{cid}/duels", params={"status": "judged", "limit": 1})).json()
    assert page["total"] == 12
    assert (await api.get(f"/v1/campaigns/{cid}/duels", params={"limit": 0})).status_code == 422
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_failed_model_calls_fail_the_duel_and_charge_what_was_spent(api):
    clients = [{"kind": "simulated", "failure_rate": 1.0}, {"kind": "simulated"}, {"kind": "simulated"}]
    c = await create(api, costs=(1.0, 1.0, 1.0), clients=clients)
    cid = c["id"]
    statuses = []
    for _ in range(6):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201, r.text
        d = r.json()
        statuses.append(d["status"])
        if 0 in (d["model_a"], d["model_b"]):
            assert d["status"] == "failed" and "simulated failure" in d["error"]
            assert d["cost"] == pytest.approx(1.0)  # only the model that answered
        else:
            assert d["status"] == "pending"
            await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})
    assert "failed" in statuses
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["pending"] == 0  # failed duels free their pair
    assert view["duels_failed"] == statuses.count("failed")
    log = (await api.get(f"/v1/campaigns/{cid}/duels")).json()["items"]
    assert view["spend"] == pytest.approx(sum(d["cost"] for d in log))
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


async def test_budget_is_never_overrun_by_more_than_one_duel(api):
    c = await create(api, judge=simulated_judge(), budget=23.0)
    cid = c["id"]
    await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 3})
    for _ in polling():
        view = (await api.get(f"/v1/campaigns/{cid}")).json()
        if view["status"] != "running":
            break
        await asyncio.sleep(0.05)
    assert view["status"] == "budget_exhausted", view
    assert view["spend"] <= 23.0  # expected == actual cost here: never above the budget
    assert view["spend"] > 23.0 - 5.0  # stopped only when the next duel did not fit
    assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 409
    log = (await api.get(f"/v1/campaigns/{cid}/duels")).json()["items"]
    assert view["spend"] == pytest.approx(sum(d["cost"] for d in log))


async def test_pending_duels_expire(db_url):
    # Long enough that the first read comes before the expiry on a loaded machine; the
    # expiry itself is then awaited with a deadline instead of a fixed sleep.
    async with app_client(db_url, duel_expiry_seconds=1.0) as api:
        cid = (await create(api))["id"]
        posted = time.monotonic()
        d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
        pending = (await api.get(f"/v1/campaigns/{cid}")).json()["pending"]
        if time.monotonic() - posted < 1.0:  # read before the expiry could have passed
            assert pending == 1
        deadline = time.monotonic() + 30
        while (await api.get(f"/v1/campaigns/{cid}")).json()["pending"] != 0:
            assert time.monotonic() < deadline, "the pending duel did not expire"
            await asyncio.sleep(0.1)
        assert time.monotonic() - posted >= 1.0  # not before its expiry
        r = await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})
        assert r.status_code == 409 and "expired" in r.json()["detail"]
        assert (await api.get(f"/v1/duels/{d['id']}")).json()["status"] == "expired"
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201
        assert r.json()["number"] == 2
        # The expired duel is not in flight: the policy saw no pending pair.
        assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


# ---------------------------------------------------------------- webhook
class _Hook(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("ending", ["stop", "budget", "certified"])
async def test_webhook_gets_the_final_report_once(api, ending):
    _Hook.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        if ending == "stop":
            c = await create(api, webhook_url=url)
            assert (await api.post(f"/v1/campaigns/{c['id']}/stop")).status_code == 200
            expected = "stopped"
        elif ending == "budget":  # ended by the budget check of the next plan
            c = await create(api, webhook_url=url, judge=simulated_judge(), budget=9.0)
            assert (await api.post(f"/v1/campaigns/{c['id']}/run")).status_code == 202
            expected = "budget_exhausted"
        else:  # a near-deterministic judge certifies quickly
            P = [[0.5, 0.99, 0.99], [0.01, 0.5, 0.99], [0.01, 0.01, 0.5]]
            c = await create(api, webhook_url=url, judge=simulated_judge(P), delta=0.2)
            assert (await api.post(f"/v1/campaigns/{c['id']}/run")).status_code == 202
            expected = "certified"
        for _ in polling():
            if (await api.get(f"/v1/campaigns/{c['id']}")).json()["webhook_state"] == "sent":
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)
        assert len(_Hook.received) == 1
        report = _Hook.received[0]
        assert report["event"] == "campaign.ended"
        assert report["campaign"]["id"] == c["id"] and report["campaign"]["status"] == expected
    finally:
        server.shutdown()


# ---------------------------------------------------------------- database down
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_unreachable_database_gives_503(tmp_path, backend):
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'missing-dir' / 'x.db'}"  # the directory does not exist
    else:
        url = "postgresql://postgres@127.0.0.1:1/nowhere"  # nothing listens on port 1
    async with app_client(url) as client:
        r = await client.get("/v1/campaigns")
        assert r.status_code == 503
        assert "database" in r.json()["detail"]
        r = await client.get("/healthz")
        assert r.status_code == 503 and r.json()["database"] == "unavailable"


# ---------------------------------------------------------------- every algorithm
async def test_every_algorithm_runs_and_replays(api):
    for algorithm in ("dctas", "tas", "crr", "dctac", "dpca"):
        c = await create(api, judge=simulated_judge(), algorithm=algorithm, tie_policy="half")
        cid = c["id"]
        assert (await api.post(f"/v1/campaigns/{cid}/run", json={"max_duels": 8, "concurrency": 2})).status_code == 202
        for _ in polling():
            view = (await api.get(f"/v1/campaigns/{cid}")).json()
            if not view["run"]["active"]:
                break
            await asyncio.sleep(0.02)
        assert view["algorithm"] == algorithm and view["duels"] == 8, view
        rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
        assert rep["ok"] is True, (algorithm, rep["diff"])


# ---------------------------------------------------------------- amounts and delta at the edges
@pytest.mark.parametrize(
    "field, value",
    [
        ("delta", 5e-324),  # its threshold is infinite: no campaign could stop
        ("delta", 1e-301),
        ("budget", 1e-300),  # rounds to 0 nano-USD in the ledger
        ("budget", 1e12),  # past what the int64 nano-USD ledger holds
        ("budget", 9.3e9),
    ],
)
async def test_amounts_and_delta_outside_what_the_ledger_and_thresholds_hold_are_422(api, field, value):
    r = await api.post("/v1/campaigns", json=campaign_body(name=f"edge {field}", **{field: value}))
    assert r.status_code == 422, r.text
    assert field in r.text


async def test_a_model_cost_past_the_ledger_is_422_and_the_edges_inside_are_accepted(api):
    body = campaign_body(name="edge cost", costs=(1e10, 1.0, 1.0))
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422, r.text
    ok = await api.post(
        "/v1/campaigns", json=campaign_body(name="edge ok", delta=1e-300, budget=1e9, costs=(1e-9, 1, 1))
    )
    assert ok.status_code == 201, ok.text
    c = ok.json()
    assert c["budget"] == 1e9 and c["delta"] == 1e-300
    assert (await api.get(f"/campaigns/{c['id']}")).status_code == 200  # the dashboard renders it


def test_the_ledger_cap_ends_a_campaign_without_a_budget():
    from service.money import budget

    cap = budget.LEDGER_CAP_NUSD
    assert cap < 2**63 - 1 - 10**18  # room for one more duel's charges of up to 1e9 USD
    assert not budget.over_budget(None, cap - 10, 5, 5)
    assert budget.over_budget(None, cap - 10, 5, 6)
    assert budget.budget_spent(None, cap) and not budget.budget_spent(None, cap - 1)
    assert budget.effective_budget(10) == 10 and budget.effective_budget(None) == cap
