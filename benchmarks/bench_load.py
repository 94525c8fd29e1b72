"""Load benchmark: 50 concurrent annotators against the service (2 uvicorn workers) on PostgreSQL.

    .venv/bin/python benchmarks/bench_load.py [--votes 5000] [--annotators 50] [--campaigns 5]
                                              [--paced-votes 3000] [--rate RATE] [--workers 2]
                                              [--server llmduel|uvicorn] [--baseline REF [--rounds N]]

What it does (everything on 127.0.0.1, nothing leaves the machine):

1. creates a fresh PostgreSQL database on ``--pg`` (default
   ``postgresql://postgres@127.0.0.1:5432/test``, the maintenance connection),
   migrates it (``llmduel db upgrade``) and starts ``llmduel serve --workers 2``
   (a SO_REUSEPORT socket per worker; ``--server uvicorn``: plain ``uvicorn --factory
   service.app:create_app --workers 2``, one socket shared by the workers) on a free
   port, and prints how the annotators' connections are spread over the workers;
2. creates ``--campaigns`` human-judged campaigns with simulated models (they
   answer at once, so the figures exclude model latency) and one annotator token
   per (annotator, campaign);
3. **one annotator alone** (``--solo-votes``, 300): the uncontended cost and latency
   (also a warm-up); then the **saturation phase**: ``--annotators`` annotators, each with its own
   keep-alive connection (:class:`LeanClient`, a minimal HTTP/1.1 client: the
   generator shares the two cores with the service, so it must be cheap), each in a
   closed loop with no think time: ``POST /v1/campaigns/{id}/duels`` then
   ``POST /v1/duels/{id}/vote``, until ``--votes`` votes were accepted. Every 25th
   vote is sent a second time, which must be refused with 409 and not counted;
4. **paced phase**: the same annotators, but each starts its next duel on a fixed
   schedule so that together they offer ``--rate`` votes per second (a late start
   is not skipped; the lateness is reported apart from the request latencies,
   which are measured from the moment each request is sent), ``--paced-votes`` votes in all
   (at most 30 s worth). Default rate: the 300 votes/s target if the saturation
   phase reached it, else half the throughput it measured (the latency of a
   service offered more than it can do only measures the backlog);
5. checks every campaign: ``GET /v1/campaigns/{id}/replay`` and ``llmduel replay``
   (stored state == replayed log, counters, ledger), judged duels == accepted votes,
   counted duels == accepted decisive votes, sum of pair counts == 2 x counted,
   nothing pending; then stops the server and drops the database.

Figures: votes per second, and p50/p90/p99/max of
* ``select``: the server's own time for next-duel selection, read from the
  ``Server-Timing: select;dur=<ms>`` header: the plan transaction from its start,
  so including the wait for the campaign's row lock (expire stale duels, restore
  the policy, ``next_pair``, insert the duel, commit; model calls excluded);
* ``POST duels``: the request latency seen by the client (selection, the two
  simulated model calls, which answer at once, and storing the answers);
* ``POST vote``: the request latency seen by the client (the service exposes no
  timing for votes).

**Side by side with a baseline** (``--baseline REF``, e.g. ``--baseline main`` or a commit):
REF is checked out (detached) into a temporary git worktree, and the same load runs
against it and against this tree in one run, one after the other: the baseline's server
runs the three phases and stops, then this tree's. Each tree migrates its own fresh
database with its own migrations and is served by its own code (working directory and
``PYTHONPATH`` of the server, of ``llmduel db upgrade`` and of ``llmduel replay``) on its
own port, with the same seeds and campaigns, each tree's numba kernels compiled before
its server starts and the measurement started once every worker is up; the paced phase
offers both the same rate (set by the baseline's saturation throughput, or ``--rate``).
One server at a time
because two would need more PostgreSQL connections than the default ``max_connections``
of 100 (each worker's pools hold up to 38: the ORM pool's 10 + 20 overflow and the hot
path's 8), and the starved one answers 503. Every figure and consistency check is
printed for both, labelled, then a table side by side and the ratio new/baseline of the
**service CPU per vote**: user+system CPU seconds (``/proc/<pid>/stat`` utime+stime) of
the server's process tree (the supervisor and its workers, read before and after each
phase) per accepted vote, over the saturation and paced phases together. PASS when the
ratio is at most 1.25 (``MAX_CPU_RATIO``). The worktree is removed at the end. The
machine's speed drifts during a run on a shared machine, and the ratio of two runs of
the same code spreads by about +-0.2 (docs/reliability.md, *Load benchmark*):
``--rounds N`` runs both trees N times, each round on fresh databases, the order
alternating (baseline first in odd rounds, this tree first in even ones), prints every
round's ratio and decides on their median.

Under saturation the request latencies are mostly queueing (Little's law: 50
annotators with no think time wait ~50/throughput per cycle); the paced phase
gives the latency at the target load. Exit status 0 when every consistency check
passes (the speed targets only print PASS/MISS); 1 when one fails; with ``--baseline``,
3 when every check passes but the CPU ratio misses; 2 for a ``--baseline`` that is not a commit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

ADMIN_KEY = "bench-admin-key-" + uuid.uuid4().hex
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
TARGET_VOTES_PER_S = 300.0
TARGET_P99_MS = 50.0
# --baseline: the new tree's service CPU per vote may be at most this many times the baseline's.
MAX_CPU_RATIO = 1.25


# ---------------------------------------------------------------- infrastructure
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def create_database(maintenance_url: str) -> tuple[str, str, str]:
    """(service URL, maintenance conninfo, database name) of a fresh database."""
    import psycopg
    from sqlalchemy.engine import make_url

    admin = make_url(maintenance_url)
    conninfo = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"llmduel_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = admin.set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False)
    return url, conninfo, name


def drop_database(conninfo: str, name: str) -> None:
    import psycopg

    with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start_server(
    url: str, workers: int, log_path: Path, extra_env: dict, server: str = "llmduel", repo: Path = REPO
) -> tuple[subprocess.Popen, str]:
    """``llmduel serve --workers N`` (one SO_REUSEPORT socket per worker), or plain
    ``uvicorn --workers N`` (one socket shared by the workers) for comparison; the code
    is the tree at ``repo`` (this checkout, or the baseline's temporary worktree)."""
    port = free_port()
    env = dict(
        os.environ,
        PYTHONPATH=str(repo),
        DATABASE_URL=url,
        LLMDUEL_API_KEY=ADMIN_KEY,
        LLMDUEL_RESUME_RUNS="0",
        PYTHONUNBUFFERED="1",
        **extra_env,
    )
    if server == "uvicorn":
        cmd = [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "service.app:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--log-level",
            "warning",
            "--no-access-log",
        ]
    else:
        cmd = [
            sys.executable,
            "-m",
            "service.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--log-level",
            "warning",
        ]
    with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120  # a fresh tree compiles its numba kernels first
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited:\n{log_path.read_text(errors='replace')}")
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not start in 120 s")


def tree_cpu_seconds(pid: int) -> float:
    """User+system CPU seconds (utime+stime in ``/proc/<pid>/stat``) of a process and all its
    live descendants: the supervisor and its workers (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    todo, seen = [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for entry in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{entry}/children").read_text().split()]
        except (OSError, IndexError, ValueError):
            pass
    return total


def postgres_cpu_seconds() -> float | None:
    """User+system CPU seconds of the local PostgreSQL server's live processes, or None.

    Backends that exit between two readings are missed; the service's pool keeps
    its connections for the whole run, so a phase's difference is its share.
    """
    try:
        import pwd

        uid = pwd.getpwnam("postgres").pw_uid
    except (ImportError, KeyError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


def cpu_now(pid: int) -> tuple[float, float, float | None]:
    """(service, load generator, PostgreSQL) CPU seconds so far."""
    return tree_cpu_seconds(pid), time.process_time(), postgres_cpu_seconds()


def cpu_since(pid: int, start: tuple[float, float, float | None]) -> tuple[float, float, float | None]:
    now = cpu_now(pid)
    return now[0] - start[0], now[1] - start[1], None if now[2] is None or start[2] is None else now[2] - start[2]


def pg_sessions(conninfo: str, name: str) -> int | None:
    """Sessions (connections) established to the database so far (PostgreSQL >= 14), or None."""
    import psycopg

    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", (name,)).fetchone()
            return int(row[0]) if row and row[0] is not None else None
    except psycopg.Error:
        return None


def connections_per_worker(server_pid: int, port: int) -> dict[int, int] | None:
    """Established client connections on ``port`` by worker process (``ss``), or None.

    Keep-alive connections stay with the worker that accepted them, so this is
    how the annotators' load is split between the workers.
    """
    import re

    try:
        out = subprocess.run(
            ["ss", "-tnpH", "state", "established", f"( sport = :{port} )"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    counts: dict[int, int] = {}
    for pid in re.findall(r"pid=(\d+),", out):
        counts[int(pid)] = counts.get(int(pid), 0) + 1
    counts.pop(server_pid, None)
    return counts or None


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    xs = sorted(values)
    k = min(len(xs) - 1, max(0, round(q / 100.0 * (len(xs) - 1))))
    return xs[k]


def line(name: str, values: list[float]) -> str:
    return (
        f"  {name:<24} n={len(values):>5}  p50={pct(values, 50):7.2f}  p90={pct(values, 90):7.2f}  "
        f"p99={pct(values, 99):7.2f}  max={max(values) if values else float('nan'):7.2f}  ms"
    )


# ---------------------------------------------------------------- a lean HTTP/1.1 client
class Reply:
    __slots__ = ("status_code", "headers", "content")

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes):
        self.status_code, self.headers, self.content = status_code, headers, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.content)


class LeanClient:
    """One keep-alive HTTP/1.1 connection, requests one at a time (an annotator).

    The annotators' own CPU competes with the service for the machine's two
    cores, so the load generator is kept cheap: httpx.AsyncClient costs about
    5 ms of CPU per vote cycle, this about 0.3 ms. It speaks just what the
    benchmark needs (``Content-Length`` bodies, no chunked encoding, no TLS) and
    reconnects when the server closes the connection.
    """

    def __init__(self, base_url: str, timeout: float = 60.0):
        rest = base_url.split("://", 1)[1]
        self.host, _, port = rest.partition(":")
        self.port = int(port or 80)
        self.timeout = timeout
        self._reader = self._writer = None

    async def _connect(self):
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)

    async def post(self, path: str, json: dict | None = None, headers: dict | None = None) -> Reply:
        body = b"" if json is None else _json_bytes(json)
        head = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}", f"Content-Length: {len(body)}"]
        if json is not None:
            head.append("Content-Type: application/json")
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        for attempt in (1, 2):
            if self._writer is None:
                await self._connect()
            try:
                self._writer.write(request)
                return await asyncio.wait_for(self._read_reply(), self.timeout)
            except (ConnectionError, asyncio.IncompleteReadError):
                await self.aclose()
                if attempt == 2:
                    raise

    async def _read_reply(self) -> Reply:
        status_line = await self._reader.readuntil(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        headers: dict[str, str] = {}
        while True:
            line = await self._reader.readuntil(b"\r\n")
            if line == b"\r\n":
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        content = await self._reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            await self.aclose()
        return Reply(status, headers, content)

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._reader = self._writer = None


def _json_bytes(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


# ---------------------------------------------------------------- the load
class Shared:
    def __init__(self, votes: int):
        self.tickets = votes
        self.select_ms: list[float] = []
        self.duel_ms: list[float] = []
        self.vote_ms: list[float] = []
        self.lag_ms: list[float] = []  # paced phase: how late the client sent a scheduled request
        self.timeline: list[tuple[float, float]] = []  # (request start, POST duels latency ms)
        self.accepted: dict[int, dict[str, int]] = {}
        self.duplicates_refused = 0
        self.errors: list[str] = []
        self.ended: set[int] = set()

    def take(self) -> bool:
        if self.tickets <= 0:
            return False
        self.tickets -= 1
        return True


def choose(rng: random.Random, cid: int) -> str:
    # Near-even preferences (no campaign should certify within the run), some ties.
    u = rng.random()
    if u < 0.1:
        return "tie"
    return "a" if u < 0.55 else "b"


async def annotator(
    n: int,
    client: LeanClient,
    tokens: dict[int, str],
    campaigns: list[int],
    sh: Shared,
    rng: random.Random,
    period: float | None,
    t0: float,
) -> None:
    order = campaigns[n % len(campaigns) :] + campaigns[: n % len(campaigns)]
    if True:  # one client (keep-alive connection) per annotator for the whole run
        k = 0
        while sh.take():
            scheduled = None
            if period is not None:  # open-loop schedule: start k at t0 + offset + k * period
                scheduled = t0 + (n / sh.annotators + k) * period  # staggered starts
                delay = scheduled - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            k += 1
            cid = next((c for c in order if c not in sh.ended), None)
            if cid is None:
                sh.errors.append("every campaign has ended")
                return
            head = {"Authorization": f"Bearer {tokens[cid]}"}
            start = time.perf_counter()
            if scheduled is not None:
                sh.lag_ms.append(max(0.0, start - scheduled) * 1000)
            r = await client.post(f"/v1/campaigns/{cid}/duels", headers=head)
            sh.duel_ms.append((time.perf_counter() - start) * 1000)
            sh.timeline.append((start, sh.duel_ms[-1]))
            if r.status_code == 409:
                sh.ended.add(cid)
                sh.tickets += 1
                continue
            if r.status_code not in (200, 201):  # 200: its own duel still in flight, handed back
                sh.errors.append(f"next duel: HTTP {r.status_code} {r.text[:200]}")
                sh.tickets += 1
                continue
            timing = r.headers.get("server-timing", "")
            if "select;dur=" in timing:
                sh.select_ms.append(float(timing.split("select;dur=")[1].split(",")[0]))
            duel = r.json()
            if duel["status"] != "pending":
                sh.errors.append(f"duel {duel['id']} is {duel['status']}: {duel.get('error')}")
                sh.tickets += 1
                continue
            choice = choose(rng, cid)
            t = time.perf_counter()
            r = await client.post(f"/v1/duels/{duel['id']}/vote", json={"choice": choice}, headers=head)
            sh.vote_ms.append((time.perf_counter() - t) * 1000)
            if r.status_code != 200:
                sh.errors.append(f"vote: HTTP {r.status_code} {r.text[:200]}")
                if r.status_code == 409 and "ended" in r.text:
                    sh.ended.add(cid)
                sh.tickets += 1
                continue
            acc = sh.accepted.setdefault(cid, {"votes": 0, "decisive": 0})
            acc["votes"] += 1
            acc["decisive"] += choice in ("a", "b")
            if sum(a["votes"] for a in sh.accepted.values()) % 25 == 0:
                r = await client.post(f"/v1/duels/{duel['id']}/vote", json={"choice": "b"}, headers=head)
                if r.status_code == 409:
                    sh.duplicates_refused += 1
                else:
                    sh.errors.append(f"duplicate vote on duel {duel['id']} got HTTP {r.status_code}")


async def phase(
    clients: list[LeanClient],
    tokens: dict[int, dict[int, str]],
    campaigns: list[int],
    votes: int,
    annotators: int,
    rate: float | None,
    seed: int,
) -> tuple[Shared, float]:
    sh = Shared(votes)
    sh.annotators = annotators
    period = None if rate is None else annotators / rate
    t0 = time.perf_counter() + 0.2
    tasks = [
        annotator(n, clients[n], tokens[n], campaigns, sh, random.Random(seed * 1000 + n), period, t0)
        for n in range(annotators)
    ]
    start = time.perf_counter()
    await asyncio.gather(*tasks)
    return sh, time.perf_counter() - (t0 if rate else start)


def report(
    title: str, sh: Shared, wall: float, cpu: tuple[float, float, float | None], sessions: int | None = None
) -> tuple[float, float, float]:
    accepted = sum(a["votes"] for a in sh.accepted.values())
    vps = accepted / wall
    print(
        f"\n{title}: {accepted} votes accepted in {wall:.2f} s = {vps:.0f} votes/s "
        f"({sh.duplicates_refused} duplicate votes refused with 409, {len(sh.errors)} errors)"
    )
    print(
        f"  CPU used: service {cpu[0]:.1f} s ({cpu[0] / wall * 100:.0f}% of one core), "
        f"load generator {cpu[1]:.1f} s ({cpu[1] / wall * 100:.0f}%); per vote: service "
        f"{cpu[0] / max(1, accepted) * 1000:.1f} ms, load generator {cpu[1] / max(1, accepted) * 1000:.1f} ms"
    )
    if cpu[2] is not None:
        print(
            f"  CPU used by PostgreSQL: {cpu[2]:.1f} s ({cpu[2] / wall * 100:.0f}% of one core), "
            f"{cpu[2] / max(1, accepted) * 1000:.1f} ms per vote"
        )
    if sessions is not None:
        print(f"  PostgreSQL connections opened by the service during the phase: {sessions}")
    print(line("select (Server-Timing)", sh.select_ms))
    print(line("POST duels (client)", sh.duel_ms))
    print(line("POST vote (client)", sh.vote_ms))
    if sh.lag_ms:
        print(line("client lateness", sh.lag_ms) + "  (time a scheduled duel waited for its annotator)")
        t0 = min(t for t, _ in sh.timeline)
        worst: dict[int, float] = {}
        for t, ms in sh.timeline:
            worst[int(t - t0)] = max(worst.get(int(t - t0), 0.0), ms)
        print("  slowest POST duels in each second (ms): " + " ".join(f"{worst[k]:.0f}" for k in sorted(worst)))
    for e in sh.errors[:10]:
        print("  error:", e)
    return vps, pct(sh.duel_ms, 99), pct(sh.vote_ms, 99)


def verify(
    base: str, campaigns: list[int], accepted: dict[int, dict[str, int]], db_url: str, repo: Path = REPO
) -> list[str]:
    problems = []
    with httpx.Client(base_url=base, headers=ADMIN, timeout=120) as api:
        for cid in campaigns:
            view = api.get(f"/v1/campaigns/{cid}").json()
            acc = accepted.get(cid, {"votes": 0, "decisive": 0})
            rep = api.get(f"/v1/campaigns/{cid}/replay").json()
            n_pairs = sum(map(sum, view["counts"])) / 2
            ok = (
                rep["ok"]
                and view["duels"] == acc["votes"]
                and view["duels_counted"] == acc["decisive"]
                and n_pairs == acc["decisive"]
                and view["pending"] == 0
                and view["duels_created"] == view["duels"] + view["duels_failed"]
            )
            print(
                f"  campaign {cid}: {view['status']:<9} judged={view['duels']:>5} (accepted votes "
                f"{acc['votes']:>5})  counted={view['duels_counted']:>5} (decisive votes {acc['decisive']:>5})  "
                f"created={view['duels_created']:>5} pending={view['pending']}  replay ok={rep['ok']} "
                f"({rep['events']} events)  {'OK' if ok else 'MISMATCH'}"
            )
            if not ok:
                problems.append(f"campaign {cid}: {rep['diff'][:5]} view={view['duels']},{view['duels_counted']}")
    env = dict(os.environ, PYTHONPATH=str(repo), DATABASE_URL=db_url, LLMDUEL_API_KEY=ADMIN_KEY)
    for cid in campaigns:
        p = subprocess.run(
            [sys.executable, "-m", "service.cli", "replay", str(cid)],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        print(f"  llmduel replay {cid}: exit {p.returncode}: {p.stdout.strip() or p.stderr.strip()}")
        if p.returncode != 0:
            problems.append(f"llmduel replay {cid} exited {p.returncode}")
    return problems


# ---------------------------------------------------------------- one service under test
@dataclass
class Target:
    """One tree's service: its database, server, campaigns, annotators' clients and figures."""

    label: str  # "" when the run has no baseline (the output then reads as it always did)
    repo: Path
    db_url: str
    conninfo: str
    dbname: str
    proc: subprocess.Popen | None = None
    base: str = ""
    campaigns: list[int] = field(default_factory=list)
    tokens: dict[int, dict[int, str]] = field(default_factory=dict)
    clients: list[LeanClient] = field(default_factory=list)
    accepted: dict[int, dict[str, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # phase name -> (its shared record, wall seconds, (service, load generator, PostgreSQL) CPU seconds)
    results: dict[str, tuple[Shared, float, tuple[float, float, float | None]]] = field(default_factory=dict)
    torn_down: bool = False

    def title(self, text: str) -> str:
        return f"[{self.label}] {text}" if self.label else text


def migrate(t: Target) -> None:
    """``llmduel db upgrade`` with the target's own code (the baseline migrates with its migrations)."""
    env = dict(os.environ, PYTHONPATH=str(t.repo), DATABASE_URL=t.db_url)
    p = subprocess.run(
        [sys.executable, "-m", "service.cli", "db", "upgrade"],
        cwd=t.repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if p.returncode != 0:
        raise RuntimeError(f"llmduel db upgrade failed in {t.repo}:\n{p.stderr[-2000:]}")


def create_campaigns(args, t: Target) -> None:
    """``--campaigns`` human-judged campaigns with simulated models and a token per (annotator, campaign)."""
    t.tokens = {n: {} for n in range(args.annotators)}
    with httpx.Client(base_url=t.base, headers=ADMIN, timeout=60) as api:
        for k in range(args.campaigns):
            body = {
                "name": f"load campaign {k}",
                "delta": 0.001,
                "models": [
                    {"name": f"model-{m}", "cost": 0.001 * (1 + m % 3), "client": {"kind": "simulated"}}
                    for m in range(args.models)
                ],
                "prompts": [f"Prompt number {p}: explain something." for p in range(20)],
                "judge": {"kind": "human"},
                "seed": k,
            }
            r = api.post("/v1/campaigns", json=body)
            r.raise_for_status()
            cid = r.json()["id"]
            t.campaigns.append(cid)
            for n in range(args.annotators):
                r = api.post(f"/v1/campaigns/{cid}/annotators", json={"label": f"annotator {n}"})
                r.raise_for_status()
                t.tokens[n][cid] = r.json()["token"]


def compile_kernels(repo: Path) -> None:
    """Fill the tree's numba cache once, in one process, before its server starts.

    Each worker loads the compiled kernels at start-up (``warm_policies``); in a fresh
    checkout (the baseline's worktree) every worker would otherwise compile them itself,
    for tens of CPU seconds, possibly after the benchmark started measuring.
    """
    code = "from service.campaigns import warm_policies; warm_policies()"
    env = dict(os.environ, PYTHONPATH=str(repo))
    subprocess.run([sys.executable, "-c", code], cwd=repo, env=env, check=True, capture_output=True)


def wait_until_quiet(pid: int, limit: float = 120.0) -> None:
    """Wait until the server's process tree uses under 10% of a core over a second: every
    worker has finished starting (the sockets accept connections before the apps are ready)."""
    deadline = time.monotonic() + limit
    before = tree_cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = tree_cpu_seconds(pid)
        if now - before < 0.1:
            return
        before = now


def setup_target(args, label: str, repo: Path, tmp: Path) -> Target:
    """A fresh database, migrated and served by the code at ``repo``, with its campaigns."""
    t = Target(label, repo, *create_database(args.pg))
    try:
        migrate(t)
        compile_kernels(repo)
        log = tmp / f"server-{len(list(tmp.iterdir()))}.log"
        extra = {"LLMDUEL_PG_SYNCHRONOUS_COMMIT": args.synchronous_commit}
        t.proc, t.base = start_server(t.db_url, args.workers, log, extra, args.server, repo)
        wait_until_quiet(t.proc.pid)
        create_campaigns(args, t)
    except BaseException:
        teardown(args, t)
        raise
    server_cmd = "llmduel serve" if args.server == "llmduel" else "uvicorn"
    print(
        t.title(
            f"{server_cmd} --workers {args.workers} on {t.base}, PostgreSQL database {t.dbname} "
            f"(synchronous_commit={args.synchronous_commit}); {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.2f}; {args.campaigns} human-judged campaigns x "
            f"{args.models} simulated models, {args.annotators} annotators (one token per campaign each)"
        )
    )
    return t


def teardown(args, t: Target) -> None:
    """Stop the target's server and drop its database (once)."""
    if t.torn_down:
        return
    t.torn_down = True
    if t.proc is not None:
        t.proc.terminate()
        try:
            t.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            t.proc.kill()
        t.proc = None
    if args.keep:
        print(f"database kept: {t.db_url}")
    else:
        drop_database(t.conninfo, t.dbname)


# ---------------------------------------------------------------- the phases
async def run_phase(
    t: Target, key: str, title: str, votes: int, annotators: int, rate: float | None, seed: int, spread: bool = False
) -> float:
    """One phase against one target: its CPU, sessions and latencies printed; votes/s returned."""
    pid = t.proc.pid
    tokens = t.tokens if annotators > 1 else {0: t.tokens[0]}
    cpu0 = cpu_now(pid)
    s0 = pg_sessions(t.conninfo, t.dbname)
    task = asyncio.ensure_future(phase(t.clients, tokens, t.campaigns, votes, annotators, rate, seed))
    per_worker = None
    if spread:
        await asyncio.sleep(2.0)  # every annotator has connected by now
        per_worker = await asyncio.to_thread(connections_per_worker, pid, int(t.base.rsplit(":", 1)[1]))
    sh, wall = await task
    cpu = cpu_since(pid, cpu0)
    if per_worker:
        print(t.title(f"annotator connections per worker process: {sorted(per_worker.values(), reverse=True)}"))
    await asyncio.sleep(1.5)  # statistics are flushed about once a second
    s1 = pg_sessions(t.conninfo, t.dbname)
    vps, _, _ = report(t.title(title), sh, wall, cpu, None if s0 is None or s1 is None else s1 - s0)
    for c, v in sh.accepted.items():
        a = t.accepted.setdefault(c, {"votes": 0, "decisive": 0})
        a["votes"] += v["votes"]
        a["decisive"] += v["decisive"]
    t.errors += sh.errors
    t.results[key] = (sh, wall, cpu)
    return vps


async def run_target(args, t: Target, rate: float | None) -> float | None:
    """The three phases against one target, each annotator keeping its client (and connection).

    ``rate``: the paced phase's offered rate, decided by an earlier target (None: decide it
    here from this target's saturation throughput). Returns the rate used.
    """
    t.clients = [LeanClient(t.base, timeout=60) for _ in range(args.annotators)]
    try:
        # Warm-up and the uncontended cost: one annotator alone (its votes are checked too).
        await run_phase(t, "solo", "one annotator alone (no contention)", args.solo_votes, 1, None, 3)
        sat = f"saturation ({args.annotators} annotators, no think time)"
        vps = await run_phase(t, "saturation", sat, args.votes, args.annotators, None, 1, True)
        if args.paced_votes > 0:
            if rate is None:
                rate = args.rate or (TARGET_VOTES_PER_S if vps >= TARGET_VOTES_PER_S else round(vps / 2, 1))
            n_paced = min(args.paced_votes, max(100, int(rate * 30)))
            await run_phase(t, "paced", f"paced (offered {rate:g} votes/s)", n_paced, args.annotators, rate, 2)
        return rate
    finally:
        for c in t.clients:
            await c.aclose()


def check_target(t: Target) -> list[str]:
    """Every consistency check of one target (its server still running)."""
    print("\n" + t.title("consistency (every campaign):"))
    found = verify(t.base, t.campaigns, t.accepted, t.db_url, t.repo)
    if t.errors:
        found.append(f"{len(t.errors)} request errors")
    return [t.title(p) for p in found]


def print_targets(t: Target) -> None:
    """The speed targets (PASS/MISS printed, never the exit status)."""
    vps = _votes_per_s(t, "saturation")
    lat = t.results["paced"][0] if "paced" in t.results else t.results["saturation"][0]
    src = "paced" if "paced" in t.results else "saturation"
    print(t.title("targets:"))
    print(
        f"  votes/s (saturation)       {vps:7.0f}  >= {TARGET_VOTES_PER_S:.0f}  "
        f"{'PASS' if vps >= TARGET_VOTES_PER_S else 'MISS'}"
    )
    for name, v in (
        ("select p99 (server)", pct(lat.select_ms, 99)),
        ("POST duels p99 (client)", pct(lat.duel_ms, 99)),
        ("POST vote p99 (client)", pct(lat.vote_ms, 99)),
    ):
        print(f"  {name:<26} {v:7.2f} ms < {TARGET_P99_MS:.0f} ms ({src})  {'PASS' if v < TARGET_P99_MS else 'MISS'}")


def _votes(sh: Shared) -> int:
    return sum(a["votes"] for a in sh.accepted.values())


def _votes_per_s(t: Target, key: str) -> float:
    sh, wall, _ = t.results[key]
    return _votes(sh) / wall


def cpu_per_vote_ms(t: Target, keys: tuple[str, ...]) -> float:
    """Service CPU (supervisor and workers) per accepted vote over the given phases, in ms."""
    cpu = sum(t.results[k][2][0] for k in keys if k in t.results)
    votes = sum(_votes(t.results[k][0]) for k in keys if k in t.results)
    return cpu / max(1, votes) * 1000


def compare(base: Target, new: Target) -> float:
    """The two trees side by side; returns the ratio new/baseline of the service CPU per vote
    over the loaded phases (saturation and paced), printed with PASS at MAX_CPU_RATIO or less."""
    print(f"\nside by side ({base.label} / {new.label}):")
    print(
        f"  {'phase':<11} {'tree':<8} {'votes/s':>8} {'CPU ms/vote':>12} {'select p50/p99':>16} "
        f"{'duels p50/p99':>16} {'vote p50/p99':>16}"
    )
    for key in ("solo", "saturation", "paced"):
        for name, t in (("baseline", base), ("new", new)):
            if key not in t.results:
                continue
            sh = t.results[key][0]
            print(
                f"  {key:<11} {name:<8} {_votes_per_s(t, key):8.0f} {cpu_per_vote_ms(t, (key,)):12.2f} "
                f"{pct(sh.select_ms, 50):7.2f}/{pct(sh.select_ms, 99):<8.2f}"
                f"{pct(sh.duel_ms, 50):7.2f}/{pct(sh.duel_ms, 99):<8.2f}"
                f"{pct(sh.vote_ms, 50):7.2f}/{pct(sh.vote_ms, 99):<8.2f}"
            )
    loaded = ("saturation", "paced")
    b, n = cpu_per_vote_ms(base, loaded), cpu_per_vote_ms(new, loaded)
    ratio = n / b if b > 0 else float("inf")
    ok = ratio <= MAX_CPU_RATIO
    print(
        f"  service CPU per vote, saturation and paced phases: new {n:.2f} ms / baseline {b:.2f} ms = "
        f"{ratio:.2f}  <= {MAX_CPU_RATIO:g}  {'PASS' if ok else 'MISS'}"
    )
    return ratio


def cpu_verdict(ratios: list[float]) -> bool:
    """PASS when the median ratio over the rounds is at most MAX_CPU_RATIO (printed with every ratio)."""
    median = statistics.median(ratios)
    ok = median <= MAX_CPU_RATIO
    if len(ratios) > 1:
        print(
            f"\nservice CPU per vote, new/baseline, {len(ratios)} rounds: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f"; median {median:.2f}  <= {MAX_CPU_RATIO:g}  {'PASS' if ok else 'MISS'}"
        )
    return ok


# ---------------------------------------------------------------- the baseline's tree
def baseline_worktree(ref: str, tmp: Path) -> tuple[Path, str]:
    """Check ``ref`` out (detached) into a temporary git worktree; (its path, the commit)."""
    p = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if p.returncode != 0:
        print(f"bench_load.py: error: --baseline {ref!r} is not a commit of {REPO}", file=sys.stderr)
        raise SystemExit(2)
    sha = p.stdout.strip()
    path = tmp / "baseline"
    subprocess.run(
        ["git", "worktree", "add", "--detach", "--quiet", str(path), sha], cwd=REPO, check=True, capture_output=True
    )
    return path, sha


def remove_worktree(path: Path) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=REPO, check=False, capture_output=True)
    subprocess.run(["git", "worktree", "prune"], cwd=REPO, check=False, capture_output=True)


def parse_args(argv: list[str] | None = None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--pg",
        default=os.environ.get("LLMDUEL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
        help="maintenance connection of the PostgreSQL server (a fresh database is created there)",
    )
    ap.add_argument("--votes", type=int, default=5000, help="votes of the saturation phase")
    ap.add_argument("--solo-votes", type=int, default=300, help="votes of one annotator alone, first")
    ap.add_argument("--paced-votes", type=int, default=3000, help="votes of the paced phase (0: skip it)")
    ap.add_argument(
        "--rate",
        type=float,
        default=None,
        help="offered votes/s of the paced phase (default: 300, or half the saturation throughput "
        "when that is below 300; with --baseline, of the slower tree)",
    )
    ap.add_argument("--annotators", type=int, default=50)
    ap.add_argument("--campaigns", type=int, default=5)
    ap.add_argument("--models", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--server",
        choices=["llmduel", "uvicorn"],
        default="llmduel",
        help="llmduel serve --workers N (a SO_REUSEPORT socket per worker; default) or "
        "uvicorn --workers N (one shared socket)",
    )
    ap.add_argument(
        "--synchronous-commit",
        default="on",
        choices=["on", "off"],
        help="LLMDUEL_PG_SYNCHRONOUS_COMMIT of the service (default on)",
    )
    ap.add_argument(
        "--baseline",
        metavar="REF",
        default=None,
        help="a git ref (main, a commit...): run the same load against that code too, checked out into a "
        "temporary git worktree, each tree on its own fresh database and port, and compare the service's "
        f"CPU per vote (PASS when new/baseline <= {MAX_CPU_RATIO:g})",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="with --baseline: run both trees this many times, the order alternating (baseline first in odd "
        "rounds), each round on fresh databases; the verdict is on the median CPU ratio",
    )
    ap.add_argument("--keep", action="store_true", help="keep the database(s) and print the URL(s)")
    args = ap.parse_args(argv)
    if args.rounds < 1 or (args.rounds > 1 and not args.baseline):
        ap.error("--rounds needs --baseline and must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # progress shows in a log file as it happens
    tmp = Path(tempfile.mkdtemp(prefix="llmduel-bench-"))
    targets: list[Target] = []
    tree = None
    try:
        trees: list[tuple[str, Path]] = []
        if args.baseline:
            tree, sha = baseline_worktree(args.baseline, tmp)
            trees.append((f"baseline {args.baseline} {sha[:10]}", tree))
        trees.append(("new: this tree" if args.baseline else "", REPO))
        rate, problems, pairs = None, [], []
        for r in range(args.rounds):
            # one tree after the other (one server and its connections at a time); the order
            # alternates between rounds so that a machine slowing down does not favour one tree
            order = trees if r % 2 == 0 else trees[::-1]
            done: dict[Path, Target] = {}
            for label, repo in order:
                suffix = f" round {r + 1}" if args.rounds > 1 else ""
                t = setup_target(args, label + suffix, repo, tmp)
                targets.append(t)
                rate = asyncio.run(run_target(args, t, rate))
                problems += check_target(t)
                teardown(args, t)
                done[repo] = t
            if args.baseline:
                pairs.append((done[trees[0][1]], done[REPO]))
        print()
        for t in targets:
            print_targets(t)
        print(f"  load average after the run: {os.getloadavg()[0]:.2f}")
        cpu_ok = cpu_verdict([compare(b, n) for b, n in pairs]) if pairs else True
        if problems:
            print("\nCONSISTENCY PROBLEMS:", *problems, sep="\n  ")
            return 1
        print("\nconsistency: every campaign's stored state equals its replayed log; counts equal accepted votes")
        return 0 if cpu_ok else 3
    finally:
        for t in targets:
            teardown(args, t)
        if tree is not None:
            remove_worktree(tree)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
