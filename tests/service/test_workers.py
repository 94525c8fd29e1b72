"""``llmduel serve --workers N``: one SO_REUSEPORT socket per worker (service/workers.py).

Real processes and real TCP connections on 127.0.0.1: the kernel spreads
keep-alive connections over the workers, a killed worker is replaced on its own
socket while the others keep serving, SIGTERM stops everything cleanly, and a
port already in use is a clear error.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from conftest import ADMIN_KEY, REPO, free_port, wait_until

pytestmark = pytest.mark.skipif(
    not hasattr(socket, "SO_REUSEPORT") or not Path("/proc/net/tcp").exists(),
    reason="needs Linux (SO_REUSEPORT, /proc)",
)


def workers_of(pid: int) -> list[int]:
    """The live worker processes of the supervisor ``pid`` (its children, not the resource tracker)."""
    out = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"resource_tracker" not in cmdline:
            out.append(int(child))
    return out


def established_on(port: int) -> set[int]:
    """Inodes of the ESTABLISHED TCP sockets whose local port is ``port`` (server side)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                inodes.add(int(fields[9]))
    return inodes


def connections_by_worker(workers: list[int], port: int) -> dict[int, int]:
    served = established_on(port)
    counts = {}
    for pid in workers:
        n = 0
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and int(target[8:-1]) in served:
                n += 1
        counts[pid] = n
    return counts


def open_clients(base: str, n: int) -> list[httpx.Client]:
    clients = [
        httpx.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) for _ in range(n)
    ]
    for c in clients:  # one keep-alive connection each
        assert c.get("/healthz").status_code == 200
    return clients


def wait_for(predicate, timeout: float, what: str):
    return wait_until(predicate, timeout, what, every=0.2)


def test_workers_share_the_port_survive_a_kill_and_stop_cleanly(tmp_path):
    port = free_port()
    env = dict(
        os.environ,
        DATABASE_URL=f"sqlite:///{tmp_path / 'w.db'}",
        LLMDUEL_API_KEY=ADMIN_KEY,
        LLMDUEL_RESUME_RUNS="0",
        LLMDUEL_KEEP_ALIVE_SECONDS="300",  # the counted connections stay open however slow the machine
        PYTHONUNBUFFERED="1",
    )
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
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
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    clients: list[httpx.Client] = []
    try:

        def up():
            try:
                return httpx.get(base + "/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 120, "the service")

        def two_workers(exclude: int | None = None):
            w = workers_of(proc.pid)
            return w if len(w) == 2 and exclude not in w else None

        workers = wait_for(two_workers, 30, "two workers")

        # 40 keep-alive connections: the kernel spreads them over both workers.
        clients = open_clients(base, 40)
        counts = connections_by_worker(workers, port)
        assert sum(counts.values()) == 40, counts
        assert min(counts.values()) >= 5, counts  # a hash split of 40 is this uneven with p < 1e-6

        # Requests that change state work through both workers (one database).
        cid = (
            clients[0]
            .post(
                "/v1/campaigns",
                json={
                    "name": "workers",
                    "delta": 0.1,
                    "judge": {"kind": "human"},
                    "prompts": ["p"],
                    "models": [
                        {"name": "x", "cost": 1, "client": {"kind": "simulated"}},
                        {"name": "y", "cost": 1, "client": {"kind": "simulated"}},
                    ],
                },
            )
            .json()["id"]
        )
        for c in clients:
            d = c.post(f"/v1/campaigns/{cid}/duels")
            assert d.status_code == 201, d.text
            assert c.post(f"/v1/duels/{d.json()['id']}/vote", json={"choice": "tie"}).status_code == 200
        assert clients[1].get(f"/v1/campaigns/{cid}").json()["duels"] == 40

        # SIGKILL one worker: its connections drop, the other worker keeps serving,
        # and a new worker takes its socket.
        victim = workers[0]
        os.kill(victim, signal.SIGKILL)
        survivor = [c for c in clients if _alive(c)]
        assert survivor, "the surviving worker must keep its connections"
        replaced = wait_for(lambda: two_workers(exclude=victim), 60, "a replacement worker")
        for c in clients:
            c.close()
        clients = open_clients(base, 40)
        counts = connections_by_worker(replaced, port)
        assert sum(counts.values()) == 40 and min(counts.values()) >= 5, counts
        assert clients[0].get(f"/v1/campaigns/{cid}").json()["duels"] == 40
        assert clients[0].get(f"/v1/campaigns/{cid}/replay").json()["ok"] is True
    finally:
        for c in clients:
            c.close()
        last_workers = workers_of_safe(proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, text
    assert len(last_workers) == 2, last_workers
    survivors = [w for w in last_workers if Path(f"/proc/{w}").exists()]
    assert not survivors, f"no worker may outlive the supervisor: {survivors}"
    assert "Traceback" not in text, text
    assert "exited with -9" in text  # the kill was noticed and logged


def _alive(client: httpx.Client) -> bool:
    try:
        return client.get("/healthz").status_code == 200
    except httpx.HTTPError:
        return False


def workers_of_safe(pid: int) -> list[int]:
    try:
        return workers_of(pid)
    except OSError:
        return []


def test_serve_workers_reports_a_port_in_use(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'w.db'}", LLMDUEL_API_KEY=ADMIN_KEY)
        p = subprocess.run(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "2"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert p.returncode == 2, p.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in p.stderr and "Traceback" not in p.stderr
