"""Scale benchmark: duels per second by number of models, and the views of a large campaign.

    .venv/bin/python benchmarks/bench_scale.py [--models 8,32,128] [--duels 1000] [--clients 4]
                                               [--view-models 128] [--view-duels 3000] [--view-seed 50000]
                                               [--backends sqlite,postgres] [--tiny] [--json]

For each backend (SQLite in a temporary file; PostgreSQL in a fresh database on ``--pg``, skipped
with a note when no server answers) one server (``llmduel serve``, one worker) is started on a
free port of 127.0.0.1 and, with simulated models and the simulated judge (they answer at once,
so the figures exclude model latency; nothing leaves the machine):

1. **throughput**: for each size in ``--models``, a campaign of that many models (equal costs,
   a preference matrix of small gaps, delta 1e-9, so that none ends early) takes ``--duels`` duels
   from ``--clients`` concurrent clients, each ``POST /v1/campaigns/{id}/duels`` in a closed loop
   (the duel is planned, answered, judged and recorded in that request): duels per second, and the
   ratio to the smallest size's, in the same server and run; and the server's CPU time per duel
   (user + system of its process tree, from /proc), which a busy machine disturbs less than the rate;
2. **views**: a campaign of ``--view-models`` models runs ``--view-duels`` duels
   (``POST /v1/campaigns/{id}/run``, 4 in flight); its judged duels are then copied in the database
   (new ids and numbers, the same pairs, answers, verdicts and scores) until its log holds
   ``--view-seed`` judged duels (the server runs about 20 duels/s at 128 models on this machine, so 50,000
   through it would take most of an hour; the policy's state, the counters and the ledger stay those of
   the duels it ran, and this campaign's replay is not checked); then the time and size of the dashboard
   (``GET /campaigns/{id}``: the first request after the last change, which computes its figures,
   with the server's CPU time for it, and a second one), of the campaign's JSON view (``GET /v1/campaigns/{id}``; and with
   ``?pairs=true``, the full per-pair figures), of its ranking (``GET /v1/campaigns/{id}/ranking``), of its
   export (``GET /v1/campaigns/{id}/export``: certificate, battle log, matrix, rankings, audit files; the
   first request and a second one, each with the server's CPU time for it), and the server's resident memory (VmRSS of the server's process tree)
   at the end;
3. checks every campaign with ``GET /v1/campaigns/{id}/replay`` (stored state == replayed log).

Prints a table; ``--json`` prints one object instead. ``--tiny`` runs it small (4 and 8 models,
30 duels, a 20-model view campaign of 100 duels copied to 300; what the test runs).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import ADMIN_KEY, REPO, create_database, drop_database, start_server  # noqa: E402

HEADERS = {"Authorization": f"Bearer {ADMIN_KEY}"}


def preference(n: int) -> list[list[float]]:
    """Model m beats model m' > m with probability 0.5 + 0.1 (m' - m) / n: small gaps, a Condorcet winner."""
    return [[0.5 + 0.1 * (j - i) / n for j in range(n)] for i in range(n)]


def campaign_body(n: int, name: str, max_duels: int) -> dict:
    return {
        "name": name,
        "models": [{"name": f"m{k}", "cost": 1.0, "client": {"kind": "simulated"}} for k in range(n)],
        "prompts": [f"question {k}" for k in range(200)],
        "judge": {"kind": "simulated", "preference": preference(n)},
        "delta": 1e-9,
        "max_duels": max_duels,
        "seed": 1,
    }


def create(base: str, n: int, name: str, max_duels: int) -> int:
    r = httpx.post(f"{base}/v1/campaigns", json=campaign_body(n, name, max_duels), headers=HEADERS, timeout=120)
    r.raise_for_status()
    return int(r.json()["id"])


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its children (Linux /proc; 0.0 elsewhere)."""
    total, todo = 0.0, [pid]
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14 and 15)
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except (OSError, IndexError, ValueError):
            continue
        todo += [int(c) for c in children]
    return total


def throughput(base: str, n: int, duels: int, clients: int, pid: int | None = None) -> tuple[float, float]:
    """(duels per second of ``clients`` closed loops on one campaign of ``n`` models, the server's CPU
    milliseconds per duel: that of process ``pid`` and its children, 0.0 without it)."""
    cid = create(base, n, f"throughput {n}", duels + clients)
    warm = httpx.post(f"{base}/v1/campaigns/{cid}/duels", headers=HEADERS, timeout=60)
    warm.raise_for_status()  # the policy cached, the config read
    left = [duels]

    def loop() -> int:
        done = 0
        with httpx.Client(headers=HEADERS, timeout=60) as c:
            while True:
                if left[0] <= 0:
                    return done
                left[0] -= 1
                r = c.post(f"{base}/v1/campaigns/{cid}/duels")
                if r.status_code != 201:
                    raise RuntimeError(f"POST duels: {r.status_code} {r.text[:300]}")
                done += 1

    t0, c0 = time.perf_counter(), cpu_s(pid) if pid else 0.0
    with cf.ThreadPoolExecutor(clients) as pool:
        total = sum(pool.map(lambda _: loop(), range(clients)))
    rate = total / (time.perf_counter() - t0)
    return rate, (1000.0 * (cpu_s(pid) - c0) / total if pid else 0.0)


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children (MB)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except (OSError, StopIteration):
            continue
        todo += [int(c) for c in children]
    return total / 1024


def timed_get(base: str, path: str, params: dict | None = None) -> tuple[float, int]:
    t0 = time.perf_counter()
    r = httpx.get(base + path, params=params, headers=HEADERS, timeout=600)
    r.raise_for_status()
    return time.perf_counter() - t0, len(r.content)


def seed_log(url: str, cid: int, total: int) -> int:
    """Copies the campaign's judged duels (new ids and numbers, the same pairs, answers, verdicts and scores)
    until its log holds ``total`` judged duels, and bumps its version so that every cached figure is
    computed again; returns the judged duels stored. The policy's state, the counters and the ledger stay
    those of the duels the service ran (the copies are not a campaign the replay can check): what grows is
    what the views, the rankings and the export read from the log."""
    from sqlalchemy import create_engine, func, insert, literal, select, update

    sys.path.insert(0, str(REPO))
    from algorithms.vocabulary import DuelStatus
    from service.models import Campaign, Duel

    engine = create_engine(url)
    cols = [c for c in Duel.__table__.columns if c.name != "id"]
    judged = (Duel.campaign_id == cid) & (Duel.status == DuelStatus.JUDGED)
    try:
        with engine.begin() as conn:
            have = conn.execute(select(func.count()).select_from(Duel).where(judged)).scalar_one()
            top = conn.execute(select(func.max(Duel.number)).where(Duel.campaign_id == cid)).scalar_one() or 0
            base_ids = [r[0] for r in conn.execute(select(Duel.id).where(judged).order_by(Duel.id))]
            copy = 0
            while have < total and base_ids:
                copy += 1
                ids = base_ids[: total - have]
                # a copy has a new number and no record_seq: the evidence series replays the duels the
                # server recorded (which the policy's state describes), every other figure reads them all
                new = {"number": Duel.number + literal(copy * top), "record_seq": literal(None, Duel.record_seq.type)}
                rows = select(*[new[c.name].label(c.name) if c.name in new else c for c in cols]).where(
                    Duel.id.in_(ids)
                )
                conn.execute(insert(Duel.__table__).from_select([c.name for c in cols], rows))
                have += len(ids)
            conn.execute(update(Campaign).where(Campaign.id == cid).values(version=Campaign.version + 1))
        # the planner's statistics for the copied rows (PostgreSQL's autovacuum would gather them later; a
        # server reading right after the copy would plan on the statistics of the small log); SQLite: ANALYZE too
        with engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE duels")
            conn.commit()
    finally:
        engine.dispose()
    return int(have)


def views(base: str, n: int, duels: int, url: str | None = None, seed: int = 0, pid: int | None = None) -> dict:
    """A campaign of ``n`` models run to ``duels`` duels (its log then copied to ``seed`` judged duels, if
    more); its dashboard, JSON view, ranking and export, timed."""
    cid = create(base, n, f"views {n}", duels)
    httpx.post(
        f"{base}/v1/campaigns/{cid}/run", json={"concurrency": 4}, headers=HEADERS, timeout=60
    ).raise_for_status()
    t0 = time.perf_counter()
    while True:
        v = httpx.get(f"{base}/v1/campaigns/{cid}", headers=HEADERS, timeout=600).json()
        if v["status"] != "running" and not v["run"]["active"]:
            break
        time.sleep(1.0)
    run_s = time.perf_counter() - t0
    out = {"models": n, "duels": v["duels"], "status": v["status"], "run_duels_per_s": v["duels"] / run_s}
    out["stored_duels"] = seed_log(url, cid, seed) if url is not None and seed > v["duels"] else v["duels"]
    out["seeded"] = out["stored_duels"] > v["duels"]
    c0 = cpu_s(pid) if pid else 0.0
    out["dashboard_first_s"], out["dashboard_bytes"] = timed_get(base, f"/campaigns/{cid}")
    out["dashboard_first_cpu_s"] = cpu_s(pid) - c0 if pid else 0.0
    out["dashboard_again_s"], _ = timed_get(base, f"/campaigns/{cid}")
    out["view_s"], out["view_bytes"] = timed_get(base, f"/v1/campaigns/{cid}")
    out["view_pairs_s"], out["view_pairs_bytes"] = timed_get(base, f"/v1/campaigns/{cid}", {"pairs": "true"})
    out["ranking_s"], out["ranking_bytes"] = timed_get(base, f"/v1/campaigns/{cid}/ranking")
    c0 = cpu_s(pid) if pid else 0.0
    out["export_s"], out["export_bytes"] = timed_get(base, f"/v1/campaigns/{cid}/export")
    out["export_cpu_s"] = cpu_s(pid) - c0 if pid else 0.0
    c0 = cpu_s(pid) if pid else 0.0
    out["export_again_s"], _ = timed_get(base, f"/v1/campaigns/{cid}/export")
    out["export_again_cpu_s"] = cpu_s(pid) - c0 if pid else 0.0
    out["campaign_id"] = cid
    return out


def replay_ok(base: str, cid: int) -> bool:
    return bool(httpx.get(f"{base}/v1/campaigns/{cid}/replay", headers=HEADERS, timeout=600).json()["ok"])


def migrate(url: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO), DATABASE_URL=url)
    p = subprocess.run(
        [sys.executable, "-m", "service.cli", "db", "upgrade"], cwd=REPO, env=env, capture_output=True, text=True
    )
    if p.returncode != 0:
        raise RuntimeError(f"llmduel db upgrade failed:\n{p.stderr[-2000:]}")


def run_backend(args, backend: str, tmp: Path) -> dict:
    dropping = None
    if backend == "sqlite":
        url = f"sqlite:///{tmp / 'scale.db'}"
    else:
        try:
            url, conninfo, name = create_database(args.pg)
        except Exception as exc:  # no PostgreSQL here: the SQLite figures still stand
            return {"backend": backend, "skipped": f"no PostgreSQL at {args.pg} ({type(exc).__name__})"}
        dropping = (conninfo, name)
    try:
        migrate(url)
        proc, base = start_server(url, 1, tmp / f"{backend}.log", {})
        try:
            throughput(base, min(args.models), 10 * args.clients, args.clients)  # warm-up: kernels, caches, pools
            measured = {n: throughput(base, n, args.duels, args.clients, proc.pid) for n in args.models}
            rates = {n: m[0] for n, m in measured.items()}
            view = views(base, args.view_models, args.view_duels, url, args.view_seed, proc.pid)
            rss = rss_mb(proc.pid)
            campaigns = httpx.get(f"{base}/v1/campaigns", params={"limit": 500}, headers=HEADERS, timeout=600).json()
            seeded = {view["campaign_id"]} if view["seeded"] else set()  # its log is copies: no replay
            ok = all(replay_ok(base, c["id"]) for c in campaigns["items"] if c["id"] not in seeded)
        finally:
            proc.terminate()
            proc.wait(30)
    finally:
        if dropping is not None:
            drop_database(*dropping)
    smallest = min(args.models)
    return {
        "backend": backend,
        "duels_per_s": {str(n): r for n, r in rates.items()},
        "ratio_to_smallest": {str(n): r / rates[smallest] for n, r in rates.items()},
        "server_cpu_ms_per_duel": {str(n): m[1] for n, m in measured.items()},
        "views": view,
        "server_rss_mb": rss,
        "replay_ok": ok,
    }


def table(results: list[dict], args) -> str:
    lines = []
    for res in results:
        if "skipped" in res:
            lines.append(f"{res['backend']}: skipped ({res['skipped']})")
            continue
        lines.append(f"{res['backend']}: duels/s with {args.clients} clients, {args.duels} duels each")
        lines.append("| models | duels/s | / smallest | server CPU ms per duel |")
        lines.append("|---|---|---|---|")
        for n in args.models:
            cpu = res["server_cpu_ms_per_duel"][str(n)]
            lines.append(
                f"| {n} | {res['duels_per_s'][str(n)]:.1f} | {res['ratio_to_smallest'][str(n)]:.2f} | {cpu:.1f} |"
            )
        v = res["views"]
        seeded = f", its log copied to {v['stored_duels']} judged duels" if v["seeded"] else ""
        lines.append(f"{res['backend']}: {v['models']} models, {v['duels']} duels ({v['status']}){seeded}")
        lines.append("| what | time | size |")
        lines.append("|---|---|---|")
        lines.append(
            f"| dashboard, first after a change | {v['dashboard_first_s']:.2f} s (server CPU "
            f"{v['dashboard_first_cpu_s']:.2f} s) | {v['dashboard_bytes'] / 1e3:.0f} KB |"
        )
        lines.append(f"| dashboard, again | {v['dashboard_again_s']:.2f} s | |")
        lines.append(f"| JSON view | {v['view_s']:.2f} s | {v['view_bytes'] / 1e3:.0f} KB |")
        lines.append(f"| JSON view ?pairs=true | {v['view_pairs_s']:.2f} s | {v['view_pairs_bytes'] / 1e3:.0f} KB |")
        lines.append(
            f"| ranking (`GET /v1/campaigns/{{id}}/ranking`) | {v['ranking_s']:.2f} s | {v['ranking_bytes'] / 1e3:.0f} KB |"
        )
        lines.append(
            f"| export (every file, the ranking included) | {v['export_s']:.2f} s (server CPU "
            f"{v['export_cpu_s']:.2f} s) | {v['export_bytes'] / 1e3:.0f} KB |"
        )
        lines.append(
            f"| export, again (rankings kept) | {v['export_again_s']:.2f} s (server CPU {v['export_again_cpu_s']:.2f} s) | |"
        )
        lines.append(
            f"server memory (RSS): {res['server_rss_mb']:.0f} MB; replay of every campaign: {res['replay_ok']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="8,32,128", help="model counts of the throughput campaigns")
    ap.add_argument("--duels", type=int, default=1000, help="duels per throughput campaign")
    ap.add_argument("--clients", type=int, default=4, help="concurrent clients")
    ap.add_argument("--view-models", type=int, default=128)
    ap.add_argument("--view-duels", type=int, default=3_000, help="duels the view campaign runs through the server")
    ap.add_argument(
        "--view-seed",
        type=int,
        default=50_000,
        help="then its judged duels are copied in the database until its log holds this many (0: no copies)",
    )
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres", help="maintenance connection")
    ap.add_argument("--tiny", action="store_true", help="4 and 8 models, 30 duels, a 20-model view campaign of 100")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.tiny:
        args.models, args.duels, args.clients, args.view_models, args.view_duels = "4,8", 30, 2, 20, 100
        args.view_seed = 300
    try:
        args.models = sorted({int(x) for x in str(args.models).split(",")})
        if min(args.models) < 2 or args.view_models < 2 or args.duels < 1 or args.view_duels < 1:
            raise ValueError
    except ValueError:
        print("bench_scale: --models takes model counts of at least 2 (e.g. 8,32,128)", file=sys.stderr)
        return 2
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
            if backend not in ("sqlite", "postgres"):
                print(f"bench_scale: unknown backend {backend!r} (sqlite, postgres)", file=sys.stderr)
                return 2
            print(f"{backend}...", file=sys.stderr)
            results.append(run_backend(args, backend, Path(tmp)))
            print(table(results[-1:], args), file=sys.stderr)  # each backend's figures as soon as they exist
    if args.json:
        print(json.dumps({"models": args.models, "duels": args.duels, "clients": args.clients, "results": results}))
    else:
        print(table(results, args))
    bad = [r["backend"] for r in results if r.get("replay_ok") is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
