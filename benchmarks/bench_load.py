"""Load benchmark: 50 concurrent annotators against the service (2 uvicorn workers) on PostgreSQL.

    .venv/bin/python benchmarks/bench_load.py [--votes 5000] [--annotators 50] [--campaigns 5]
                                              [--paced-votes 3000] [--rate RATE] [--workers 2]
                                              [--server llmduel|uvicorn]

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

Under saturation the request latencies are mostly queueing (Little's law: 50
annotators with no think time wait ~50/throughput per cycle); the paced phase
gives the latency at the target load. Exit status 0 when every consistency check
passes (the speed targets only print PASS/MISS).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

ADMIN_KEY = "bench-admin-key-" + uuid.uuid4().hex
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
TARGET_VOTES_PER_S = 300.0
TARGET_P99_MS = 50.0


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
    url: str, workers: int, log_path: Path, extra_env: dict, server: str = "llmduel"
) -> tuple[subprocess.Popen, str]:
    """``llmduel serve --workers N`` (one SO_REUSEPORT socket per worker), or plain
    ``uvicorn --workers N`` (one socket shared by the workers) for comparison."""
    port = free_port()
    env = dict(
        os.environ,
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
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
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
    raise RuntimeError("uvicorn did not start in 60 s")


def tree_cpu_seconds(pid: int) -> float:
    """User+system CPU seconds of a process and its live children (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pids = [pid]
    try:
        for entry in os.listdir(f"/proc/{pid}/task"):
            children = Path(f"/proc/{pid}/task/{entry}/children").read_text().split()
            pids += [int(c) for c in children]
    except OSError:
        pass
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
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


def verify(base: str, campaigns: list[int], accepted: dict[int, dict[str, int]], db_url: str) -> list[str]:
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
    env = dict(os.environ, DATABASE_URL=db_url, LLMDUEL_API_KEY=ADMIN_KEY)
    for cid in campaigns:
        p = subprocess.run(
            [sys.executable, "-m", "service.cli", "replay", str(cid)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        print(f"  llmduel replay {cid}: exit {p.returncode}: {p.stdout.strip() or p.stderr.strip()}")
        if p.returncode != 0:
            problems.append(f"llmduel replay {cid} exited {p.returncode}")
    return problems


async def run_phases(args, base: str, tokens, campaigns: list[int], pid: int, conninfo: str, dbname: str):
    """The three phases in one event loop, each annotator keeping its client (and connection)."""
    clients = [LeanClient(base, timeout=60) for _ in range(args.annotators)]
    try:
        # Warm-up and the uncontended cost: one annotator alone (its votes are checked too).
        cpu0 = cpu_now(pid)
        solo, swall = await phase(clients, {0: tokens[0]}, campaigns, args.solo_votes, 1, None, 3)
        cpu = cpu_since(pid, cpu0)
        report("one annotator alone (no contention)", solo, swall, cpu)

        cpu0 = cpu_now(pid)
        s0 = pg_sessions(conninfo, dbname)
        sat_task = asyncio.ensure_future(phase(clients, tokens, campaigns, args.votes, args.annotators, None, 1))
        await asyncio.sleep(2.0)  # every annotator has connected by now
        spread = await asyncio.to_thread(connections_per_worker, pid, int(base.rsplit(":", 1)[1]))
        sat, wall = await sat_task
        cpu = cpu_since(pid, cpu0)
        if spread:
            print(f"\nannotator connections per worker process: {sorted(spread.values(), reverse=True)}")
        await asyncio.sleep(1.5)  # statistics are flushed about once a second
        s1 = pg_sessions(conninfo, dbname)
        vps, _, _ = report(
            f"saturation ({args.annotators} annotators, no think time)",
            sat,
            wall,
            cpu,
            None if s0 is None or s1 is None else s1 - s0,
        )
        accepted: dict[int, dict[str, int]] = {}
        for part in (solo, sat):
            for c, v in part.accepted.items():
                a = accepted.setdefault(c, {"votes": 0, "decisive": 0})
                a["votes"] += v["votes"]
                a["decisive"] += v["decisive"]
        errors = solo.errors + sat.errors
        paced = None
        if args.paced_votes > 0:
            rate = args.rate or (TARGET_VOTES_PER_S if vps >= TARGET_VOTES_PER_S else round(vps / 2, 1))
            n_paced = min(args.paced_votes, max(100, int(rate * 30)))
            cpu0 = cpu_now(pid)
            s0 = pg_sessions(conninfo, dbname)
            paced, pwall = await phase(clients, tokens, campaigns, n_paced, args.annotators, rate, 2)
            cpu = cpu_since(pid, cpu0)
            await asyncio.sleep(1.5)
            s1 = pg_sessions(conninfo, dbname)
            report(
                f"paced (offered {rate:g} votes/s)", paced, pwall, cpu, None if s0 is None or s1 is None else s1 - s0
            )
            for c, v in paced.accepted.items():
                a = accepted.setdefault(c, {"votes": 0, "decisive": 0})
                a["votes"] += v["votes"]
                a["decisive"] += v["decisive"]
            errors += paced.errors
        return accepted, errors, vps, paced, sat
    finally:
        for c in clients:
            await c.aclose()


def main() -> int:
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
        "when that is below 300)",
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
    ap.add_argument("--keep", action="store_true", help="keep the database and print its URL")
    args = ap.parse_args()

    db_url, conninfo, dbname = create_database(args.pg)
    tmp = Path(tempfile.mkdtemp(prefix="llmduel-bench-"))
    proc = None
    try:
        from service.db import upgrade_database

        upgrade_database(db_url)
        proc, base = start_server(
            db_url,
            args.workers,
            tmp / "server.log",
            {"LLMDUEL_PG_SYNCHRONOUS_COMMIT": args.synchronous_commit},
            args.server,
        )
        server_cmd = "llmduel serve" if args.server == "llmduel" else "uvicorn"
        print(
            f"{server_cmd} --workers {args.workers} on {base}, PostgreSQL database {dbname} "
            f"(synchronous_commit={args.synchronous_commit}); {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.2f} before the run"
        )
        campaigns: list[int] = []
        tokens: dict[int, dict[int, str]] = {n: {} for n in range(args.annotators)}
        with httpx.Client(base_url=base, headers=ADMIN, timeout=60) as api:
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
                campaigns.append(cid)
                for n in range(args.annotators):
                    r = api.post(f"/v1/campaigns/{cid}/annotators", json={"label": f"annotator {n}"})
                    r.raise_for_status()
                    tokens[n][cid] = r.json()["token"]
        print(
            f"{args.campaigns} human-judged campaigns x {args.models} simulated models, "
            f"{args.annotators} annotators (one token per campaign each)"
        )

        accepted, errors, vps, paced, sat = asyncio.run(
            run_phases(args, base, tokens, campaigns, proc.pid, conninfo, dbname)
        )
        print("\nconsistency (every campaign):")
        problems = verify(base, campaigns, accepted, db_url)
        lat = paced if paced is not None else sat
        p99_sel, p99_duel, p99_vote = pct(lat.select_ms, 99), pct(lat.duel_ms, 99), pct(lat.vote_ms, 99)
        print("\ntargets:")
        print(
            f"  votes/s (saturation)       {vps:7.0f}  >= {TARGET_VOTES_PER_S:.0f}  "
            f"{'PASS' if vps >= TARGET_VOTES_PER_S else 'MISS'}"
        )
        src = "paced" if paced is not None else "saturation"
        for name, v in (
            ("select p99 (server)", p99_sel),
            ("POST duels p99 (client)", p99_duel),
            ("POST vote p99 (client)", p99_vote),
        ):
            print(
                f"  {name:<26} {v:7.2f} ms < {TARGET_P99_MS:.0f} ms ({src})  {'PASS' if v < TARGET_P99_MS else 'MISS'}"
            )
        print(f"  load average after the run: {os.getloadavg()[0]:.2f}")
        if errors:
            problems.append(f"{len(errors)} request errors")
        if problems:
            print("\nCONSISTENCY PROBLEMS:", *problems, sep="\n  ")
            return 1
        print("\nconsistency: every campaign's stored state equals its replayed log; counts equal accepted votes")
        return 0
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        if args.keep:
            print(f"database kept: {db_url}")
        else:
            drop_database(conninfo, dbname)


if __name__ == "__main__":
    raise SystemExit(main())
