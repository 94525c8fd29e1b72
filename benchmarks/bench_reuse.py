"""Spend to certify with and without answer/verdict reuse, on fake-provider campaigns.

    .venv/bin/python benchmarks/bench_reuse.py [--seeds 1] [--sizes 50,500] [--concurrency 8]
                                               [--max-duels 20000] [--fresh-max-duels 1500]
                                               [--modes fresh,reuse,wor]

Everything runs on 127.0.0.1: the fake provider (``python -m service.fake_provider
--judge-mode bradley-terry``, a real local HTTP server) answers as four models
(qualities 1, 1.6, 2.4, 3.2; per-token prices rising with quality) and as the LLM
judge (both orders; under ``bradley-terry`` the judge prefers an answer with
probability q_a / (q_a + q_b), drawn once per (question, answers)); the service
runs in this process on a fresh SQLite file, each campaign driven by a background
run (``--concurrency`` duels at once), dctas-pc, delta = 0.05.

For each prompt-set size (50 and 500) and seed, the same campaign runs in each of
``--modes``: ``fresh`` (``answers: fresh, verdicts: fresh``: every duel pays two
answers and two judge calls), ``reuse`` (``answers: reuse, verdicts: reuse``,
prompts drawn with replacement) and ``wor`` (reuse, prompts sampled without
replacement: the default for these campaigns). Each seed uses its own model names,
the same in every mode, and the stores are emptied before each campaign, so every
campaign starts with nothing paid for and sees the same answers and judge draws
(the fake judge's draw is a hash of the answers' markers, sealed with a fixed
marker key); the prompt set's Condorcet winner under these draws is printed first. Printed per
campaign: status, duels, spend (USD, the ledger), provider requests, and the
bound = every (model, prompt) answer once + every pair judged once (both orders)
on every prompt, computed from the fake provider's deterministic token counts.
Exit status 1 if a reuse campaign spent more than the bound or paid an answer
or a verdict twice (counted from the provider's request log).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import httpx

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

QUALITIES = ["q1", "q1.6", "q2.4", "q3.2"]
PRICES = [
    {"input_per_1m": 0.5, "output_per_1m": 1.0},
    {"input_per_1m": 1.0, "output_per_1m": 2.0},
    {"input_per_1m": 2.0, "output_per_1m": 4.0},
    {"input_per_1m": 4.0, "output_per_1m": 8.0},
]
JUDGE_PRICE = {"input_per_1m": 3.0, "output_per_1m": 6.0}
MARKER_KEY = "bench-reuse"  # the fake provider's: fixed, so the judge's draws are the same at every run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_fake_provider() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        # a fixed marker key: the judge's draws (a hash of the answers' markers) are the same at every run
        [
            sys.executable,
            "-m",
            "service.fake_provider",
            "--port",
            str(port),
            "--judge-mode",
            "bradley-terry",
            "--marker-key",
            MARKER_KEY,
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the fake provider did not start")


def body(fake: str, tag: str, prompts: list[str], seed: int, mode: str) -> dict:
    """``mode``: fresh, reuse (with replacement) or wor (reuse, prompts sampled without replacement)."""
    models = [
        {
            "name": f"m{k}",
            "cost": 1e-5 * (k + 1),  # the policy's prior costs (the ledger charges the real token prices)
            "client": {"kind": "openai", "base_url": fake + "/v1", "model": f"{tag}-m{k}-{q}", "price": PRICES[k]},
        }
        for k, q in enumerate(QUALITIES)
    ]
    judge = {
        "kind": "llm",
        "client": {"kind": "openai", "base_url": fake + "/v1", "model": f"{tag}-judge", "price": JUDGE_PRICE},
        "cost": 2e-5,
        "both_orders": True,
    }
    setting = "fresh" if mode == "fresh" else "reuse"
    return {
        "name": f"{tag} {mode}",
        "delta": 0.05,
        "models": models,
        "prompts": prompts,
        "judge": judge,
        "seed": seed,
        "answers": setting,
        "verdicts": setting,
        "prompt_sampling": "without_replacement" if mode == "wor" else "with_replacement",
    }


def bound_usd(tag: str, prompts: list[str]) -> float:
    """Every answer once + every pair judged once in both orders on every prompt (exact fake-provider tokens)."""
    from judges.llm import render_judge_prompt
    from service.fake_provider import FakeProvider, count_tokens

    fp = FakeProvider()

    def usd(pt: int, ct: int, price: dict) -> float:
        return (pt * price["input_per_1m"] + ct * price["output_per_1m"]) / 1e6

    total = 0.0
    for p in prompts:
        answers = []
        for k, q in enumerate(QUALITIES):
            text = fp.answer(f"{tag}-m{k}-{q}", p)
            answers.append(text)
            total += usd(count_tokens(p), count_tokens(text), PRICES[k])
        for i, j in itertools.combinations(range(len(answers)), 2):
            for first, second in ((answers[i], answers[j]), (answers[j], answers[i])):
                shown = render_judge_prompt(p, first, second)
                total += usd(count_tokens(shown), count_tokens(fp.judge(shown)), JUDGE_PRICE)
    return total


def prompt_set_winner(tag: str, prompts: list[str]) -> str:
    """The Condorcet winner on the prompt set (``m<k>`` or ``none``) of the judge's fixed verdicts.

    The fake judge in bradley-terry mode draws from the unordered pair of answer markers, so both
    orders agree and ``v_ij(p)`` is 0 or 1 (no ties); the winner beats every other model on more
    than half of the prompts (docs/reuse.md, The population is the prompt set).
    """
    from judges.llm import render_judge_prompt
    from service.fake_provider import FakeProvider

    fp = FakeProvider(judge_mode="bradley-terry", marker_key=MARKER_KEY)
    L = len(QUALITIES)
    wins = [[0] * L for _ in range(L)]
    for p in prompts:
        answers = [fp.answer(f"{tag}-m{k}-{q}", p) for k, q in enumerate(QUALITIES)]
        for i, j in itertools.combinations(range(L), 2):
            if fp.judge(render_judge_prompt(p, answers[i], answers[j])).endswith("[[A]]"):
                wins[i][j] += 1
            else:
                wins[j][i] += 1
    for m in range(L):
        if all(2 * wins[m][k] > len(prompts) for k in range(L) if k != m):
            return f"m{m}"
    return "none"


def clear_stores(svc) -> None:
    """Empty the answer and verdict stores: every campaign of a seed starts with nothing paid for,
    on the same model names (so the same answers and the same judge draws)."""
    from sqlalchemy import delete

    from service.models import StoredAnswer, StoredVerdict

    with svc.db.write() as s:
        s.execute(delete(StoredAnswer))
        s.execute(delete(StoredVerdict))


async def run_campaign(svc, payload: dict, concurrency: int, max_duels: int) -> dict:
    from service.campaigns.tasks import in_thread
    from service.schemas import CampaignCreate

    cid = await in_thread(svc.lifecycle.create_campaign, CampaignCreate(**payload))
    await svc.runs.start_run(cid, max_duels, concurrency)
    t0 = time.monotonic()
    while True:
        view = await in_thread(svc.views.get_campaign, cid)
        # ended, or the run reached its duel cap (a capped campaign stays running): nothing in flight
        if view["pending"] == 0 and not svc.runs.run_active_here(cid):
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(0.3)
    view = await in_thread(svc.views.get_campaign, cid)
    replay = await in_thread(svc.replay.replay, cid)
    view["elapsed_s"] = time.monotonic() - t0
    view["replay_ok"] = replay.ok
    return view


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-duels", type=int, default=20000, help="duel cap of the reuse campaigns")
    ap.add_argument(
        "--fresh-max-duels",
        type=int,
        default=1500,
        help="duel cap of the fresh campaigns (each duel pays 4 calls): a capped fresh campaign's spend is a "
        "lower bound of its spend to certify, printed with '>='",
    )
    ap.add_argument("--sizes", default="50,500", help="prompt-set sizes, comma-separated")
    ap.add_argument(
        "--modes",
        default="fresh,reuse,wor",
        help="fresh, reuse (with replacement), wor (reuse, prompts sampled without replacement); comma-separated",
    )
    args = ap.parse_args()

    from service.app import create_app
    from service.config import Settings
    from service.db import upgrade_database

    fake_proc, fake = start_fake_provider()
    tmp = tempfile.mkdtemp(prefix="bench-reuse-")
    url = f"sqlite:///{tmp}/reuse.db"
    upgrade_database(url)
    settings = Settings(
        database_url=url, api_key="bench-" + uuid.uuid4().hex, resume_runs=False, auto_migrate="never"
    ).with_database_url(url)
    app = create_app(settings)
    svc = app.state.campaigns
    bad = 0

    async def run() -> None:
        nonlocal bad
        print(
            f"{'prompts':>7} {'seed':>4} {'mode':<6} {'status':<10} {'duels':>6} {'spend USD':>10} "
            f"{'bound USD':>10} {'spend/bound':>11} {'answers':>7} {'judge':>6} {'max/key':>7} {'s':>5}  winner"
        )
        summary = collections.defaultdict(list)
        for size in [int(x) for x in args.sizes.split(",")]:
            prompts = [f"Benchmark question {n}: explain topic {n % 37} in case {n}." for n in range(size)]
            for seed in range(args.seeds):
                tag = f"P{size}-s{seed}"  # fixed names: the judge's draws (a hash of the texts) repeat
                bound = bound_usd(tag, prompts)
                print(f"{size:>7} {seed:>4} the prompt set's Condorcet winner: {prompt_set_winner(tag, prompts)}")
                for mode in args.modes.split(","):
                    reuse = mode != "fresh"
                    clear_stores(svc)
                    before = len(httpx.get(fake + "/v1/requests", timeout=60).json()["requests"])
                    cap = args.max_duels if reuse else args.fresh_max_duels
                    view = await run_campaign(svc, body(fake, tag, prompts, seed, mode), args.concurrency, cap)
                    reqs = httpx.get(fake + "/v1/requests", timeout=60).json()["requests"][before:]
                    answers = collections.Counter((r["model"], r["prompt"]) for r in reqs if r["kind"] == "answer")
                    judged = collections.Counter(
                        (r["question"], r["first"], r["second"]) for r in reqs if r["kind"] == "judge"
                    )
                    most = max(list(answers.values()) + list(judged.values()) + [0])
                    ge = ">=" if view["status"] != "certified" else "  "
                    print(
                        f"{size:>7} {seed:>4} {mode:<6} {view['status']:<10} {view['duels']:>6} "
                        f"{ge}{view['spend']:>8.5f} {bound:>10.5f} {view['spend'] / bound:>11.3f} "
                        f"{sum(answers.values()):>7} {sum(judged.values()):>6} {most:>7} {view['elapsed_s']:>5.1f}  {view['winner'] or '-'}",
                        flush=True,
                    )
                    summary[(size, mode)].append((view["spend"], view["status"] == "certified"))
                    if reuse and view["status"] != "certified":
                        print(f"   the {mode} campaign did not certify")
                        bad += 1
                    if not view["replay_ok"]:
                        print("   replay differs from the stored state")
                        bad += 1
                    if reuse and (view["spend"] > bound + 1e-12 or most > 1):
                        print(f"   a {mode} campaign spent more than the bound or paid something twice")
                        bad += 1
        print()
        for size in sorted({k[0] for k in summary}):
            fresh = [s for s, _ in summary[(size, "fresh")]]
            capped = not all(ok for _, ok in summary[(size, "fresh")])
            reuse = [s for s, _ in summary[(size, "reuse")]]
            wor = [s for s, _ in summary[(size, "wor")]]
            if reuse and wor:
                mr, mw = sum(reuse) / len(reuse), sum(wor) / len(wor)
                print(
                    f"{size} prompts: mean spend reuse {mr:.5f} USD, without replacement {mw:.5f} USD ({mr / mw:.2f}x)"
                )
            if fresh and reuse:
                mf, mr = sum(fresh) / len(fresh), sum(reuse) / len(reuse)
                ge = ">= " if capped else ""
                print(
                    f"{size} prompts: mean spend fresh {ge}{mf:.5f} USD, reuse {mr:.5f} USD: "
                    f"{ge}{mf / mr:.1f}x less with reuse ({len(fresh)} seeds"
                    + (", a fresh campaign hit its duel cap: its spend to certify is higher)" if capped else ")")
                )

    try:
        asyncio.run(run())
    finally:
        app.state.db.dispose()
        fake_proc.terminate()
        fake_proc.wait(timeout=10)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
