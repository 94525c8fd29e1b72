"""The annotator request limit holds across processes and hosts: two apps on one database
(two worker processes, or two hosts on one PostgreSQL) share each annotator's bucket, so
together they admit at most ``LLMDUEL_ANNOTATOR_REQUESTS_PER_MINUTE`` in a burst, and the
voting page's routes count against the same bucket as the API. SQLite and PostgreSQL."""

from __future__ import annotations

from contextlib import AsyncExitStack

from conftest import app_client
from service_helpers import campaign_body

JSON_HDR = {"X-Llmduel": "1", "Authorization": ""}
LIMIT = 5


async def _token(api, cid: int, label: str) -> str:
    r = await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": label})
    assert r.status_code == 201, r.text
    return r.json()["token"]


async def test_two_apps_on_one_database_share_the_limit(db_url):
    async with AsyncExitStack() as stack:
        one = await stack.enter_async_context(app_client(db_url, annotator_requests_per_minute=LIMIT))
        two = await stack.enter_async_context(app_client(db_url, annotator_requests_per_minute=LIMIT))
        cid = (await one.post("/v1/campaigns", json=campaign_body("shared request limit"))).json()["id"]
        x = {"Authorization": f"Bearer {await _token(one, cid, 'x')}"}
        codes = [(await api.get(f"/v1/campaigns/{cid}", headers=x)).status_code for api in (one, two) * LIMIT]
        # before: each process had its own bucket, 2 x LIMIT answered
        assert codes.count(200) == LIMIT and codes[:LIMIT] == [200] * LIMIT, codes
        for api in (one, two):
            r = await api.get(f"/v1/campaigns/{cid}", headers=x)
            assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1, r.text
            assert "LLMDUEL_ANNOTATOR_REQUESTS_PER_MINUTE" in r.json()["detail"]
        y = {"Authorization": f"Bearer {await _token(two, cid, 'y')}"}
        assert (await two.get(f"/v1/campaigns/{cid}", headers=y)).status_code == 200  # another token: its own
        assert [(await one.get(f"/v1/campaigns/{cid}")).status_code for _ in range(8)] == [200] * 8  # admin


async def test_a_process_that_knows_the_bucket_empty_refuses_without_the_database(db_url):
    async with app_client(db_url, annotator_requests_per_minute=2) as api:
        cid = (await api.post("/v1/campaigns", json=campaign_body("local refusals"))).json()["id"]
        x = {"Authorization": f"Bearer {await _token(api, cid, 'x')}"}
        limiter = api.app.state.annotator_limiter
        codes = [(await api.get(f"/v1/campaigns/{cid}", headers=x)).status_code for _ in range(12)]
        assert codes == [200, 200] + [429] * 10
        assert limiter.asked == 3  # two tokens and the first refusal; the next nine refused in process


async def test_the_voting_page_counts_against_the_same_limit(db_url):
    async with AsyncExitStack() as stack:
        one = await stack.enter_async_context(app_client(db_url, annotator_requests_per_minute=LIMIT))
        two = await stack.enter_async_context(app_client(db_url, annotator_requests_per_minute=LIMIT))
        cid = (
            await one.post("/v1/campaigns", json=campaign_body("page request limit", judge={"kind": "human"}))
        ).json()["id"]
        token = await _token(one, cid, "x")
        api_hdr = {"Authorization": f"Bearer {token}"}
        # the page and its form posts, on both apps, then the API: one bucket of LIMIT
        assert (await one.get(f"/annotate/{token}", headers={"Authorization": ""})).status_code == 200
        assert (await two.post(f"/annotate/{token}/next", headers=JSON_HDR)).status_code == 200
        assert (await one.post(f"/annotate/{token}/next", headers=JSON_HDR)).status_code == 200
        assert (await two.get(f"/v1/campaigns/{cid}", headers=api_hdr)).status_code == 200
        assert (await one.get(f"/v1/campaigns/{cid}", headers=api_hdr)).status_code == 200
        # over the limit: the script gets a 429 with a message, a plain form post a page saying so
        r = await two.post(f"/annotate/{token}/vote", headers=JSON_HDR, data={"duel_id": "1", "choice": "a"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert r.json()["state"] == "limited" and "Too many requests" in r.json()["message"]
        r = await one.post(f"/annotate/{token}/skip", headers={"Authorization": ""}, data={"duel_id": "1"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert "text/html" in r.headers["content-type"] and "Too many requests" in r.text
        r = await two.get(f"/annotate/{token}", headers={"Authorization": ""})
        assert r.status_code == 429 and "Too many requests" in r.text
        assert (await one.get(f"/v1/campaigns/{cid}", headers=api_hdr)).status_code == 429  # the API too
        # a bad link is still the 403 it was
        assert (await one.post("/annotate/ann_unknown/next", headers=JSON_HDR)).status_code == 403
