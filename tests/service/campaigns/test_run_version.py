"""A background run's start and end move the campaign's ``version`` (service/campaigns/lifecycle.py ``start_run_tx``,
``end_run_tx``), so what is kept per version shows the run as it is: the dashboard's figures (service/web/data.py,
its campaign view with ``run``, and its live fragment, which answers 204 while the version stands) and the results'
data (service/campaigns/results.py ``Results._results_data``), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import threading
import time

from conftest import app_client
from service_helpers import campaign_body, simulated_judge


async def test_a_run_that_pauses_or_starts_after_the_dashboard_was_kept_shows_it(db_url, monkeypatch):
    """The run pauses after its failure cap; the dashboard is read after its last duel is recorded and before the
    run ends (its ``end_run_tx`` held), then again after: the second page says the run paused, and the live
    fragment asked with the first page's version sends it. A new run then starts (before its first duel, held):
    the page no longer says the run paused. On the code before, the run's start and end left the version as it
    was: the page kept showed the run active and unpaused after the pause (the live fragment answered 204), and
    paused after the new start."""
    clients = [{"kind": "simulated", "failure_rate": 1.0, "latency_s": 0.01}] * 3  # every call fails
    body = campaign_body(name="paused view", judge=simulated_judge(), clients=clients)
    async with app_client(db_url, run_max_failures=2) as api:
        campaigns = api.app.state.campaigns
        lifecycle = campaigns.runs.lifecycle
        reached, release = threading.Event(), threading.Event()
        real = lifecycle.end_run_tx

        def held_end(*args, **kwargs):  # in the run's worker thread: the run's end waits for the test
            reached.set()
            release.wait(120)
            return real(*args, **kwargs)

        monkeypatch.setattr(lifecycle, "end_run_tx", held_end)
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        try:
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 1})).status_code == 202
            deadline = time.monotonic() + 60
            while not reached.is_set():
                assert time.monotonic() < deadline, "the run did not end"
                await asyncio.sleep(0.02)
            before = (await api.get(f"/v1/campaigns/{cid}")).json()
            assert before["run"]["active"] is True and before["run"]["error"] is None, before["run"]
            page = await api.get(f"/campaigns/{cid}")  # kept for this version
            assert page.status_code == 200 and 'id="run-paused"' not in page.text
            live = await api.get(f"/campaigns/{cid}/live", params={"v": "-1"})
            assert live.status_code == 200, live.status_code
            version = live.headers["x-llmduel-version"]
        finally:
            release.set()
        runs = campaigns.runs
        while runs.run_active_here(cid):
            assert time.monotonic() < deadline, "the run's task did not end"
            await asyncio.sleep(0.02)
        fresh = (await api.get(f"/v1/campaigns/{cid}")).json()
        assert fresh["status"] == "running" and fresh["run"]["active"] is False, fresh["run"]
        assert fresh["run"]["error"].startswith("run paused after 2 consecutive failed duels"), fresh["run"]
        page = await api.get(f"/campaigns/{cid}")
        assert 'id="run-paused"' in page.text and "consecutive failed duels" in page.text
        live = await api.get(f"/campaigns/{cid}/live", params={"v": version})
        assert live.status_code == 200 and 'id="run-paused"' in live.text, live.status_code
        assert live.headers["x-llmduel-version"] != version
        # the results' data, kept per version too (the dashboard read it): its run is the fresh one
        kept = campaigns.results._results_data(cid)["view"]["run"]
        assert kept == {**fresh["run"], "owner": None, "lease_expires_at": None}, (kept, fresh["run"])
        # a new run: once started (its loop held before its first duel), the page no longer says the run paused
        started, go = threading.Event(), threading.Event()
        config = runs.batch_jobs.batch_config_tx

        def held_config(*args, **kwargs):  # the run loop's first read
            started.set()
            go.wait(120)
            return config(*args, **kwargs)

        monkeypatch.setattr(runs.batch_jobs, "batch_config_tx", held_config)
        try:
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 1})).status_code == 202
            deadline = time.monotonic() + 60
            while not started.is_set():
                assert time.monotonic() < deadline, "the run did not start"
                await asyncio.sleep(0.02)
            view = (await api.get(f"/v1/campaigns/{cid}")).json()
            assert view["run"]["active"] is True and view["run"]["error"] is None, view["run"]
            page = await api.get(f"/campaigns/{cid}")
            assert page.status_code == 200 and 'id="run-paused"' not in page.text
        finally:
            go.set()
        while runs.run_active_here(cid):  # it pauses again (every call fails)
            assert time.monotonic() < deadline, "the second run's task did not end"
            await asyncio.sleep(0.02)
