"""Fault tests, on SQLite and PostgreSQL: providers that fail (500, 429 with
Retry-After, time-outs, malformed JSON, transient 503s, an outage), the service
killed with SIGKILL in the middle of a run, and the database going away and
coming back.

The providers are the fake OpenAI-compatible provider (``service.fake_provider``)
served by uvicorn on a loopback port in a thread. A test switches faults on and
off per model name at run time (``FaultyProvider.faults``) and the provider
records what it did with every request (``FaultyProvider.log``), so the ledger
can be checked against the answers that were really delivered.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

import httpx
import pytest
from conftest import (
    ADMIN_KEY,
    ThreadedServer,
    app_client,
    logged_tracebacks,
    make_settings,
    start_live_server,
    started_app_client,
)
from service_helpers import all_duels, campaign_body

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


# ---------------------------------------------------------------- a provider with switchable faults


class FaultyProvider:
    """The fake provider, with faults switched per model name at run time."""

    def __init__(self):
        from service.fake_provider import create_fake_provider_app

        self.app = create_fake_provider_app(timeout_sleep_s=3.0)
        self.provider = self.app.state.provider
        self.faults: dict[str, str] = {}  # model name -> "fault-500", "fault-429", ...
        self.log: list[tuple[str, str]] = []  # (model, "ok" | "fault" | "timeout")
        original = self.provider._fault

        async def fault(model: str, raw: bytes):
            mode = self.faults.get(model)
            if mode == "fault-timeout":
                self.log.append((model, "timeout"))
            resp = await original(mode or model, raw)
            if mode != "fault-timeout":
                self.log.append((model, "ok" if resp is None else "fault"))
            return resp

        self.provider._fault = fault
        self.server = ThreadedServer(self.app)
        self.url = self.server.url

    def outcomes(self, model: str) -> Counter:
        return Counter(outcome for m, outcome in self.log if m == model)

    def client(self, model: str, **overrides) -> dict:
        cfg = {
            "kind": "openai",
            "base_url": self.url + "/v1",
            "model": model,
            "max_attempts": 2,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.02,
            "timeout_s": 1.2,
        }
        # 1.2 s: long enough that a healthy answer is not cut off on a loaded
        # 2-core CI machine, short enough that "fault-timeout" (3 s) times out.
        cfg.update(overrides)
        return cfg


@pytest.fixture(scope="module")
def provider():
    p = FaultyProvider()
    yield p
    p.server.stop()


def names(*stems: str) -> list[str]:
    tag = uuid.uuid4().hex[:6]
    return [f"{tag}-{stem}" for stem in stems]  # a -q<number> suffix stays last (fake provider quality)


async def check_ledger(api, cid: int, provider: FaultyProvider, models: list[str], costs: list[float]) -> dict:
    """Charges == answers really delivered (nothing charged twice, failures free),
    spend == ledger, stored state == replayed log."""
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    duels = await all_duels(api, cid)
    paid = [[ch for ch in d["charges"] if not ch["reused"]] for d in duels]  # reuse rows cost 0 (docs/reuse.md)
    charges = Counter(ch["model_index"] for dc in paid for ch in dc if ch["kind"] == "model")
    for idx, model in enumerate(models):
        assert charges[idx] == provider.outcomes(model)["ok"], (model, charges, provider.outcomes(model))
    for d in duels:
        per_model = Counter(ch["model_index"] for ch in d["charges"] if ch["kind"] == "model")
        assert all(n == 1 for n in per_model.values()), d  # one charge per model and duel at most
        for ch in d["charges"]:
            if ch["kind"] == "model":
                assert ch["amount"] == pytest.approx(0.0 if ch["reused"] else costs[ch["model_index"]])
        assert d["cost"] == pytest.approx(sum(ch["amount"] for ch in d["charges"]))
    assert view["spend"] == pytest.approx(sum(d["cost"] for d in duels))
    rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
    assert rep["ok"] is True, rep["diff"]
    return view


# ---------------------------------------------------------------- provider faults
FAULTS = {
    # fault: (text in the stored error, provider requests per failed call)
    "fault-500": ("HTTP 500", 2),
    "fault-429": ("HTTP 429", 2),
    "fault-timeout": ("timed out", 2),
    "fault-badjson": ("malformed JSON", 1),  # a 200 with a broken body is not retried
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_provider_faults_fail_duels_cleanly_and_the_campaign_goes_on(api, provider, fault):
    models = names("alpha", "beta", "gamma")
    costs = [0.003, 0.002, 0.001]
    body = campaign_body(name=f"faults {fault}", costs=costs, clients=[provider.client(m) for m in models])
    body["answers"] = "fresh"  # every duel calls both models (a stored answer would be a zero-cost reuse)
    c = (await api.post("/v1/campaigns", json=body)).json()
    cid = c["id"]
    text, attempts = FAULTS[fault]

    provider.faults[models[0]] = fault
    failed, pending = [], []
    for _ in range(8):
        t0 = time.monotonic()
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        elapsed = time.monotonic() - t0
        assert r.status_code == 201, r.text
        d = r.json()
        if 0 in (d["model_a"], d["model_b"]):
            assert d["status"] == "failed", d
            assert text in d["error"] and "model 'm0'" in d["error"], d["error"]
            if attempts > 1:
                assert f"gave up after {attempts} attempts" in d["error"]
            if fault == "fault-429":  # Retry-After: 1 was honoured between the two tries
                assert elapsed >= 1.0
            # Only the model that answered is charged, once.
            partner = d["model_b"] if d["model_a"] == 0 else d["model_a"]
            d = (await api.get(f"/v1/duels/{d['id']}")).json()
            assert [(ch["kind"], ch["model_index"]) for ch in d["charges"]] == [("model", partner)]
            assert d["cost"] == pytest.approx(costs[partner])
            failed.append(d)
            if len(failed) == 2:
                break
        else:
            assert d["status"] == "pending"
            pending.append(d)
    assert len(failed) == 2, "the policy never chose the failing model"
    assert provider.outcomes(models[0])["ok"] == 0
    bad = provider.outcomes(models[0])
    # Retries as configured, no more. "<=": on a loaded machine an attempt can
    # time out while connecting, before the provider sees it; the stored error
    # ("gave up after N attempts") already proves the client-side count.
    assert 2 <= bad["fault"] + bad["timeout"] <= 2 * attempts, bad
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "running" and view["duels_failed"] == 2
    assert view["pending"] == len(pending)  # failed duels free their pair

    # The provider recovers: the same campaign goes on, the failing model included.
    provider.faults.pop(models[0])
    for d in pending:
        assert (await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})).status_code == 200
    judged_with_alpha = 0
    for _ in range(12):
        d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
        assert d["status"] == "pending", d
        assert (await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "b"})).status_code == 200
        judged_with_alpha += 0 in (d["model_a"], d["model_b"])
    assert judged_with_alpha > 0
    view = await check_ledger(api, cid, provider, models, costs)
    assert view["status"] == "running" and view["duels"] == len(pending) + 12 and view["duels_failed"] == 2


async def test_transient_failures_are_retried_and_charged_once(api, provider):
    models = names("flaky", "steady", "also-flaky")
    costs = [0.002, 0.001, 0.003]
    for m in (models[0], models[2]):
        provider.faults[m] = "fault-flaky"  # the first request with a given body fails with 503
    try:
        body = campaign_body(name="flaky", costs=costs, clients=[provider.client(m) for m in models])
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        for n in range(9):
            d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
            assert d["status"] == "pending", d  # the retry succeeded
            d = (await api.get(f"/v1/duels/{d['id']}")).json()
            assert len(d["charges"]) == 2 and {ch["model_index"] for ch in d["charges"]} == {d["model_a"], d["model_b"]}
            assert (await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "ab"[n % 2]})).status_code == 200
        assert provider.outcomes(models[0])["fault"] > 0  # retries did happen
        view = await check_ledger(api, cid, provider, models, costs)
        assert view["duels"] == 9 and view["duels_failed"] == 0
    finally:
        for m in models:
            provider.faults.pop(m, None)


async def test_provider_outage_pauses_a_run_which_then_resumes(db_url, provider):
    """A background run with an LLM judge: during an outage every call fails, the
    run pauses after ``run_max_failures`` failed duels with the reason stored; after
    the outage the admin starts it again and the campaign is certified."""

    models = names("small-q1", "mid-q2", "large-q4")
    costs = [0.001, 0.002, 0.004]
    judge = {"kind": "llm", "client": provider.client(names("judge")[0]), "cost": 0.0005}
    body = campaign_body(
        name="outage", costs=costs, clients=[provider.client(m) for m in models], judge=judge, delta=0.05
    )
    async with app_client(db_url, run_max_failures=4) as api:
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        provider.provider.failure_rate = 1.0  # every request: 503
        try:
            assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 2})).status_code == 202
            view = await wait_for(api, cid, lambda v: not v["run"]["active"], 30)
        finally:
            provider.provider.failure_rate = 0.0
        assert view["status"] == "running"
        assert "run paused after 4 consecutive failed duels" in view["run"]["error"]
        assert "HTTP 503" in view["run"]["error"]
        assert view["spend"] == 0 and view["duels_failed"] >= 4 and view["duels"] == 0
        assert (await api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 2})).status_code == 202
        view = await wait_for(api, cid, lambda v: v["status"] != "running", 60)
        assert view["status"] == "certified" and view["winner_index"] == 2  # the best quality
        duels = await all_duels(api, cid)
        for d in duels:  # one paid judgement per judged duel; a verdict that came after the end is paid too
            judged = sum(1 for ch in d["charges"] if ch["kind"] == "judge")
            assert judged == (1 if d["status"] == "judged" else judged), d
            assert judged <= 1 and (judged == 0 or d["status"] in ("judged", "cancelled")), d
        await check_ledger(api, cid, provider, models, costs)


async def wait_for(api, cid: int, predicate, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        view = (await api.get(f"/v1/campaigns/{cid}")).json()
        if predicate(view):
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"campaign {cid} did not reach the expected state in {timeout}s: {view}")
        await asyncio.sleep(0.1)


# ---------------------------------------------------------------- SIGKILL in the middle of a run
def _replay(db_url: str, cid: int):
    from service.container import build_campaigns
    from service.db import Database

    db = Database(db_url)
    try:
        return build_campaigns(make_settings(db_url), db).replay.replay(cid)
    finally:
        db.dispose()


def _in_flight_statuses(db_url: str, cid: int) -> int:
    from sqlalchemy import func, select

    from service.db import Database
    from service.models import IN_FLIGHT, Duel

    db = Database(db_url)
    try:
        with db.read() as s:
            return s.execute(
                select(func.count(Duel.id)).where(Duel.campaign_id == cid, Duel.status.in_(IN_FLIGHT))
            ).scalar_one()
    finally:
        db.dispose()


@pytest.mark.slow
async def test_sigkill_mid_run_then_restart_continues_from_the_stored_state(db_url, tmp_path, caplog):
    settings = {
        "resume_runs": True,
        "duel_expiry_seconds": 3,
        "run_lease_seconds": 2,  # the restart takes the dead owner's run over once it expires
        "run_heartbeat_seconds": 0.5,
    }
    env = {  # the same, for the first server's process
        "LLMDUEL_RESUME_RUNS": "1",
        "LLMDUEL_DUEL_EXPIRY_SECONDS": "3",
        "LLMDUEL_RUN_LEASE_SECONDS": "2",
        "LLMDUEL_RUN_HEARTBEAT_SECONDS": "0.5",
    }
    P = [[0.5, 0.68, 0.72], [0.32, 0.5, 0.6], [0.28, 0.4, 0.5]]
    clients = [{"kind": "simulated", "latency_s": 0.03}] * 3
    body = campaign_body(
        name="sigkill", judge={"kind": "simulated", "preference": P}, clients=clients, delta=0.01, seed=5
    )
    server = start_live_server(db_url, tmp_path / "first.log", extra_env=env, workers=1)
    try:
        with httpx.Client(base_url=server.url, headers=ADMIN, timeout=30) as api:
            cid = api.post("/v1/campaigns", json=body).json()["id"]
            assert api.post(f"/v1/campaigns/{cid}/run", json={"concurrency": 4}).status_code == 202
            deadline = time.monotonic() + 60
            while api.get(f"/v1/campaigns/{cid}").json()["duels"] < 40:
                assert time.monotonic() < deadline, "the run made no progress"
                time.sleep(0.05)
        server.process.send_signal(signal.SIGKILL)  # mid-run: duels are in flight
        server.process.wait(timeout=10)
    finally:
        if server.process.poll() is None:
            server.process.kill()

    # Right after the crash: the stored state equals the replayed log.
    rep = _replay(db_url, cid)
    assert rep.ok, rep.diff
    from service.container import build_campaigns
    from service.db import Database

    db = Database(db_url)
    try:
        before = build_campaigns(make_settings(db_url), db).views.get_campaign(cid)
    finally:
        db.dispose()
    assert before["status"] == "running" and before["run"]["active"] is True
    assert before["duels"] >= 40
    # Killed with duels in flight (still `calling` or `pending` in the log; the take-over settles them).
    assert _in_flight_statuses(db_url, cid) > 0

    # The restarted server: a fresh service started in this process (no process start to wait for).
    async with started_app_client(db_url, timeout=30, **settings) as api:
        deadline = time.monotonic() + 120
        while True:  # the run resumes by itself; duels orphaned by the kill expire
            view = (await api.get(f"/v1/campaigns/{cid}")).json()
            if view["status"] != "running" or view["duels"] >= before["duels"] + 60:
                break
            assert time.monotonic() < deadline, f"no progress after the restart: {view}"
            await asyncio.sleep(0.1)
        assert view["duels"] > before["duels"] and view["duels_created"] > before["duels_created"]
        # Continued from the stored counts (never restarted from zero).
        for i in range(3):
            for j in range(3):
                assert view["counts"][i][j] >= before["counts"][i][j]
        if view["status"] == "running":
            await api.post(f"/v1/campaigns/{cid}/stop")
        # Duels in flight when the campaign ended are cancelled; the answers that
        # still arrive are paid for. Wait until the ledger is quiet.
        last = None
        while (now := (await api.get(f"/v1/campaigns/{cid}")).json()) != last:
            last = now
            await asyncio.sleep(0.5)
        rep = (await api.get(f"/v1/campaigns/{cid}/replay")).json()
        assert rep["ok"] is True, rep["diff"]
        log = await all_duels(api, cid)
        numbers = [d["number"] for d in log]
        assert numbers == list(range(1, len(log) + 1))  # no duel lost or numbered twice
        status = Counter(d["status"] for d in log)
        assert status["calling"] == 0 and status["pending"] == 0
        final = (await api.get(f"/v1/campaigns/{cid}")).json()
        assert final["duels"] == status["judged"] and final["duels_failed"] == status["failed"]
        assert final["spend"] == pytest.approx(sum(d["cost"] for d in log))
    assert not logged_tracebacks(caplog)


# ---------------------------------------------------------------- the database goes away
class TCPProxy:
    """A loopback TCP proxy in front of PostgreSQL that can be cut and restored.

    ``cut()`` closes every proxied connection and the listening socket (new
    connections are refused); ``restore()`` listens again on the same port."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1"):
        self.target = (target_host, target_port)
        self.listener: socket.socket | None = None
        self.conns: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.port = 0
        self._listen()

    def _listen(self):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self.port = s.getsockname()[1]
        self.listener = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def _accept(self, listener: socket.socket):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            with self.lock:
                self.conns -= {src, dst}

    def cut(self):
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (close alone does not)
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            conns = list(self.conns)
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def restore(self):
        self._listen()

    def close(self):
        self.cut()


async def _expect_503(client, method: str, path: str, **kw) -> None:
    t0 = time.monotonic()
    r = await client.request(method, path, **kw)
    assert r.status_code == 503, (method, path, r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json")
    assert "database" in r.json()["detail"]
    assert r.headers.get("retry-after") == "1"
    assert time.monotonic() - t0 < 10, "a request hung while the database was away"


@pytest.mark.slow
@pytest.mark.postgres
async def test_postgres_unreachable_gives_503_and_the_service_recovers_by_itself(pg_url):
    from sqlalchemy.engine import make_url

    from service.db import upgrade_database

    upgrade_database(pg_url)
    target = make_url(pg_url)
    proxy = TCPProxy(target.port or 5432, target.host or "127.0.0.1")
    url = target.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    try:
        async with app_client(url, timeout=30) as api:
            cid = (await api.post("/v1/campaigns", json=campaign_body(name="db outage"))).json()["id"]
            d1 = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
            auto = (
                await api.post(
                    "/v1/campaigns",
                    json=campaign_body(
                        name="db outage run",
                        judge={"kind": "simulated", "preference": [[0.5, 0.6, 0.6], [0.4, 0.5, 0.6], [0.4, 0.4, 0.5]]},
                        clients=[{"kind": "simulated", "latency_s": 0.01}] * 3,
                        delta=1e-6,
                    ),
                )
            ).json()["id"]
            assert (await api.post(f"/v1/campaigns/{auto}/run", json={"concurrency": 2})).status_code == 202
            await asyncio.sleep(0.5)

            proxy.cut()  # mid-run: the background run has transactions in flight
            for _ in range(2):
                await _expect_503(api, "GET", f"/v1/campaigns/{cid}")
                await _expect_503(api, "POST", f"/v1/campaigns/{cid}/duels")
                await _expect_503(api, "POST", f"/v1/duels/{d1['id']}/vote", json={"choice": "a"})
                await _expect_503(api, "GET", "/v1/campaigns")
            r = await api.get("/healthz")
            assert r.status_code == 503 and r.json() == {"status": "degraded", "database": "unavailable"}
            await asyncio.sleep(2.0)  # unreachable for a while
            await _expect_503(api, "GET", f"/v1/campaigns/{cid}")
            during = time.monotonic()

            proxy.restore()  # no restart, no manual step
            deadline = time.monotonic() + 30
            while (await api.get(f"/v1/campaigns/{cid}")).status_code != 200:
                assert time.monotonic() < deadline, "the service did not recover"
                await asyncio.sleep(0.2)
            assert (await api.get("/healthz")).status_code == 200
            r = await api.post(f"/v1/duels/{d1['id']}/vote", json={"choice": "a"})
            assert r.status_code == 200, r.text  # the vote refused during the outage can be cast now
            d2 = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
            assert (await api.post(f"/v1/duels/{d2['id']}/vote", json={"choice": "b"})).status_code == 200
            view = (await api.get(f"/v1/campaigns/{cid}")).json()
            assert view["duels"] == 2 and view["duels_created"] == 2  # the refused requests left nothing behind

            # The background run rode out the outage (it retries database errors with a back-off).
            before = (await api.get(f"/v1/campaigns/{auto}")).json()["duels"]
            deadline = time.monotonic() + 30
            while (await api.get(f"/v1/campaigns/{auto}")).json()["duels"] < before + 20:
                assert time.monotonic() < deadline, "the run did not resume after the outage"
                await asyncio.sleep(0.2)
            assert time.monotonic() - during < 60
            await api.post(f"/v1/campaigns/{auto}/stop")
            for c in (cid, auto):
                rep = (await api.get(f"/v1/campaigns/{c}/replay")).json()
                assert rep["ok"] is True, rep["diff"]
    finally:
        proxy.close()


async def test_sqlite_database_unavailable_then_back_without_restart(tmp_path):
    """SQLite has no network path to cut. Its "unreachable" is a file that cannot be
    opened (its volume not mounted yet, a missing directory): 503 with a JSON
    message; once the file is there, the same process serves it with no restart."""
    from service.db import upgrade_database

    path = tmp_path / "volume" / "llmduel.db"
    url = f"sqlite:///{path}"
    async with app_client(url) as api:
        await _expect_503(api, "GET", "/v1/campaigns")
        await _expect_503(api, "POST", "/v1/campaigns", json=campaign_body())
        await _expect_503(api, "GET", "/v1/campaigns/1")
        assert (await api.get("/healthz")).status_code == 503

        path.parent.mkdir()  # the volume appears, with its database
        upgrade_database(url)
        r = await api.post("/v1/campaigns", json=campaign_body(name="after the outage"))
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        d = (await api.post(f"/v1/campaigns/{cid}/duels")).json()
        assert (await api.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})).status_code == 200
        assert (await api.get("/healthz")).json() == {"status": "ok", "database": "ok"}
        assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True


LOCK_HOLDER = """import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute('BEGIN IMMEDIATE'); print('locked', flush=True); time.sleep(2); c.execute('ROLLBACK')
"""


async def test_sqlite_locked_by_another_process_for_a_while_delays_but_loses_nothing(tmp_path):
    """Another process (a backup, a migration) holds the SQLite write lock for 2 s:
    writes wait for it (busy timeout) instead of failing, reads go on (WAL)."""
    from service.db import upgrade_database

    url = f"sqlite:///{tmp_path / 'locked.db'}"
    upgrade_database(url)
    async with app_client(url, timeout=120) as api:
        cid = (await api.post("/v1/campaigns", json=campaign_body(name="locked"))).json()["id"]
        holder = subprocess.Popen(  # noqa: ASYNC220 - another process takes the write lock for 2 s
            [sys.executable, "-c", LOCK_HOLDER, str(tmp_path / "locked.db")], stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout.readline().strip() == "locked"
            t0 = time.monotonic()
            reads = await api.get(f"/v1/campaigns/{cid}")
            assert reads.status_code == 200 and time.monotonic() - t0 < 1.5  # readers are not blocked
            writes = await asyncio.gather(*(api.post(f"/v1/campaigns/{cid}/duels") for _ in range(3)))
            assert time.monotonic() - t0 >= 1.5  # they waited for the lock ...
            assert [r.status_code for r in writes] == [201] * 3  # ... and none failed
        finally:
            holder.kill()
            holder.wait()
        for r in writes:
            assert (await api.post(f"/v1/duels/{r.json()['id']}/vote", json={"choice": "a"})).status_code == 200
        view = (await api.get(f"/v1/campaigns/{cid}")).json()
        assert view["duels"] == 3 and view["pending"] == 0
        assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True
