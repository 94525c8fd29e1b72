"""The supervisor of ``llmduel serve --workers N`` (service/workers.py), with real processes.

* a worker that dies after it has served is restarted, however often: three kills of
  serving workers leave the service serving (on main they counted as "workers keep
  failing at start" and the supervisor stopped the healthy worker too);
* shutdown is bounded by ``LLMDUEL_SHUTDOWN_GRACE_SECONDS``: with a request stuck on a
  slow model call, SIGTERM ends the supervisor and its workers within the grace plus
  a margin (uvicorn alone waits for that request with no limit);
* no signal sequence leaves a worker without its supervisor: a double SIGTERM, and a
  SIGKILL of the supervisor itself, leave no worker behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from conftest import ADMIN_KEY, REPO, free_port, start_fake_provider, stop_process
from test_workers import connections_by_worker, open_clients, wait_for, workers_of_safe

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux (/proc)"),
]

GRACE = 1.0  # the stuck request holds its worker this long: short, the test waits it out twice
MARGIN = 14.0  # process exit and reaping on a loaded 2-core machine (GRACE + MARGIN: 15 s, as with a 3 s grace)


def _serve(tmp_path: Path, port: int, **env) -> subprocess.Popen:
    full = dict(
        os.environ,
        DATABASE_URL=f"sqlite:///{tmp_path / 's.db'}",
        LLMDUEL_API_KEY=ADMIN_KEY,
        LLMDUEL_RESUME_RUNS="0",
        LLMDUEL_SHUTDOWN_GRACE_SECONDS=str(GRACE),
        LLMDUEL_KEEP_ALIVE_SECONDS="300",  # the counted connections stay open however slow the machine
        PYTHONUNBUFFERED="1",
        **env,
    )
    out = open(tmp_path / "serve.log", "ab")
    cmd = [
        sys.executable,
        "-m",
        "service.cli",
        "serve",
        "--port",
        str(port),
        "--workers",
        "2",
        "--log-level",
        "warning",
    ]
    return subprocess.Popen(cmd, cwd=REPO, env=full, stdout=out, stderr=subprocess.STDOUT)


def _up(base: str) -> bool:
    try:
        return httpx.get(base + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _two_workers(pid: int, exclude: set[int] = frozenset()):
    w = workers_of_safe(pid)
    return w if len(w) == 2 and not exclude & set(w) else None


def _gone(pids) -> bool:
    return not [p for p in pids if Path(f"/proc/{p}").exists() and _state(p) != "Z"]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_workers_killed_after_they_served_are_restarted(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _serve(tmp_path, port)
    clients: list[httpx.Client] = []
    try:
        wait_for(lambda: _up(base), 120, "the service")
        workers = wait_for(lambda: _two_workers(proc.pid), 30, "two workers")
        killed: set[int] = set()
        for _ in range(3):
            # the victim has served: it holds connections that answered
            for c in clients:
                c.close()
            clients = open_clients(base, 20)
            counts = connections_by_worker(workers, port)
            victim = max(counts, key=counts.get)
            assert counts[victim] > 0, counts
            os.kill(victim, signal.SIGKILL)
            killed.add(victim)
            workers = wait_for(lambda: _two_workers(proc.pid, killed), 60, "a replacement worker")
            wait_for(lambda: _up(base), 60, "the service after the kill")
        for c in clients:
            c.close()
        clients = open_clients(base, 20)
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()  # the supervisor goes on
        assert sum(connections_by_worker(workers, port).values()) == 20
        assert "it had served; restarting" in (tmp_path / "serve.log").read_text()
    finally:
        for c in clients:
            c.close()
        last = workers_of_safe(proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=GRACE + MARGIN)
        finally:
            _stop(proc)
    assert proc.returncode == 0 and wait_for(lambda: _gone(last), MARGIN, "the workers gone")


def _stuck_request(base: str, fake: str) -> threading.Thread:
    """A duel whose model call takes two minutes: the request stays in progress."""
    model = {"kind": "openai", "base_url": fake + "/v1", "max_attempts": 1, "timeout_s": 300}
    body = {
        "name": "stuck",
        "judge": {"kind": "human"},
        "prompts": ["p"],
        "models": [
            {"name": "x", "cost": 0.001, "client": dict(model, model="x-q1")},
            {"name": "y", "cost": 0.001, "client": dict(model, model="y-q2")},
        ],
    }
    h = {"Authorization": f"Bearer {ADMIN_KEY}"}
    cid = httpx.post(base + "/v1/campaigns", json=body, headers=h, timeout=30).json()["id"]

    def call() -> None:
        try:
            httpx.post(f"{base}/v1/campaigns/{cid}/duels", headers=h, timeout=300)
        except httpx.HTTPError:
            pass

    t = threading.Thread(target=call, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("signals", [1, 2])
def test_sigterm_with_a_stuck_request_ends_everything_within_the_grace(tmp_path, signals):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _serve(tmp_path, port)  # starts while the provider starts: the test waits for one start, not two
    try:
        fake, provider = start_fake_provider(tmp_path / "fake.log", "--latency", "120")
    except BaseException:
        _stop(proc)
        raise
    try:
        wait_for(lambda: _up(base), 120, "the service")
        workers = wait_for(lambda: _two_workers(proc.pid), 30, "two workers")
        _stuck_request(base, fake)
        # the provider lists a model once a request for it arrived (it answers two minutes later)
        wait_for(lambda: "x-q1" in httpx.get(fake + "/v1/models", timeout=5).text, 30, "the model call under way")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        if signals == 2:
            time.sleep(0.3)
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=GRACE + MARGIN)
        assert wait_for(lambda: _gone(workers), GRACE + MARGIN - (time.monotonic() - t0), "no orphan worker")
        assert time.monotonic() - t0 < GRACE + MARGIN
        assert "Traceback" not in (tmp_path / "serve.log").read_text()
    finally:
        _stop(proc)
        for w in workers_of_safe(proc.pid):
            os.kill(w, signal.SIGKILL)
        stop_process(provider)


def test_a_killed_supervisor_leaves_no_worker(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _serve(tmp_path, port)
    workers: list[int] = []
    try:
        wait_for(lambda: _up(base), 120, "the service")
        workers = wait_for(lambda: _two_workers(proc.pid), 30, "two workers")
        proc.kill()
        proc.wait()
        assert wait_for(lambda: _gone(workers), GRACE + MARGIN, "the workers follow their supervisor")
        assert wait_for(lambda: not _up(base), MARGIN, "nothing serves the port any more")
    finally:
        for w in workers:
            if Path(f"/proc/{w}").exists():
                os.kill(w, signal.SIGKILL)
