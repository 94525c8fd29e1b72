"""Spend and error rate of llmduel's default against the protocols teams run instead.

    .venv/bin/python benchmarks/bench_field.py [--quick] [--json] [--trials N] [--delta 0.05]

Every protocol runs on the same prompt-level instances and pays the same prices.
An instance is a set of models with a price per answer and a judge with a price per
call; trial ``t`` draws one prompt set of ``--prompts`` prompts (seed ``t``) and the
verdict ``v_ij(p)`` in ``{0, 1/2, 1}`` of every pair on every prompt, and every
protocol in trial ``t`` reads that same table. The truth is the table's prompt-set
Condorcet winner (a table without one is redrawn). An answer is paid once per
(model, prompt) and a verdict once per (pair, prompt) in every protocol (answer and
verdict reuse, the cheapest reading of each); a verdict costs the judge calls the
protocol asks for (two for both presentation orders, one for one order). The judges
here are order-consistent (both orders agree), so the orders a protocol asks for
change its cost, not its information.

Protocols, each implemented from its public description:

* ``llmduel``: the service's default campaign with an LLM judge (``dctas-pc``,
  ``answers: reuse``, ``verdicts: reuse``, ``prompt_sampling: auto`` resolving to
  without replacement, ties as halves, delta tested at ``delta / L`` per certificate,
  the judge's ``orders: auto``), stepped through the project's own policy
  (:func:`algorithms.prompt_policy_sim.policy_campaign`, mode ``wor``, ``orders="auto"``:
  each verdict in both orders until the judge's own verdicts show that one order is
  cheaper, then one order with a 2% share of both-order checks; the policy is told the
  cost of two calls, as the service tells it).
* ``arena_hard``: arena-hard-auto (Li et al. 2024, "From Crowdsourced Data to
  High-Quality Benchmarks: Arena-Hard and BenchBuilder Pipeline", arXiv:2406.11939;
  github.com/lmarena/arena-hard-auto, v0.1: 500 questions, a fixed baseline model):
  every model answers every question, each non-baseline answer is judged against the
  baseline's in both orders (two calls), a Bradley-Terry fit on those battles with a
  100-round bootstrap interval, and the leaderboard's rule for naming a winner: the
  model with the highest score (win rate against the baseline, the baseline at 50%).
  The baseline is the model in the middle of the instance's list.
* ``chatbot_arena``: Chatbot Arena (Chiang et al. 2024, "Chatbot Arena: An Open
  Platform for Evaluating LLMs by Human Preference", arXiv:2403.04132, Sections 4-5):
  uniformly random pairs, one prompt per battle (uniform over the prompt set, with
  replacement), one vote per battle (a user reads the two answers side by side once:
  one judge call), a Bradley-Terry fit with a percentile bootstrap (100 rounds, 95%) of
  the ratings, checked every ``--check`` battles and stopped when the top model's
  interval lies above every other model's interval (a tie counts half a win, as in
  the Arena's computation); it names the top model, or none at ``--cap`` battles.
* ``alpaca_eval``: AlpacaEval (Li et al. 2023, github.com/tatsu-lab/alpaca_eval;
  Dubois et al. 2024, arXiv:2404.04475): every model answers every instruction and
  is judged against one reference model's answer, one call per comparison in a
  random order; the win rate (ties half) ranks the models, the reference at 50%, and
  the highest names the winner. The length-controlled correction needs answer
  lengths, which these instances do not have. The reference is the same middle model.
* ``chatbot_arena_equal_spend`` (extra): the same uniform sampling stopped when it
  has spent what llmduel spent in that trial, naming the Bradley-Terry leader.

``error_rate`` is the share of trials that named a model other than the truth (the
event the confidence 1 - delta bounds for llmduel); ``no_winner`` the share that
named none (llmduel: "undecidable" on this prompt set; Chatbot Arena: the cap).
``spend`` is the mean spend per trial in the instances' price unit.

Instances: the fake provider's models (``service/fake_provider.py``: in its
``bradley-terry`` judge mode model ``a`` beats ``b`` with probability
``q_a / (q_a + q_b)``, the same in both orders) with qualities giving a clear, a
moderate and a close gap, and GenAI-Arena's six text-to-image models with the
win, tie and loss shares of its human battle log (``algorithms/research/instances/
genai-image-ties.json``, derived from ../shared/data/genai_arena/battles_20240220.csv).
A gap is the Condorcet winner's smallest margin over 1/2: clear >= 0.15, moderate
0.05 to 0.15, close < 0.05.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from algorithms.prompt_level import PromptInstance  # noqa: E402
from algorithms.prompt_policy_sim import PolicyCampaign, policy_campaign  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GENAI = ROOT / "algorithms" / "research" / "instances" / "genai-image-ties.json"
PROTOCOLS = ("llmduel", "arena_hard", "chatbot_arena", "alpaca_eval", "chatbot_arena_equal_spend")
BOOTSTRAP = 100
NONE = -1  # no winner named


@dataclass(frozen=True)
class FieldInstance:
    """Models with answer prices, a judge price per call, and per-pair win and tie probabilities."""

    name: str
    names: list[str]
    costs: list[float]
    judge_cost: float
    win: np.ndarray  # win[i, j]: P(i beats j) on a prompt
    tie: np.ndarray  # tie[i, j]: P(tie) on a prompt

    @property
    def margin(self) -> float:
        pref = self.win + self.tie / 2
        return float(min(pref[0, k] for k in range(1, len(self.names))) - 0.5)

    @property
    def gap(self) -> str:
        return "clear" if self.margin >= 0.15 else "moderate" if self.margin >= 0.05 else "close"

    def table(self, n_prompts: int, seed: int) -> np.ndarray:
        """One (L, L, P) verdict table; redrawn (next sub-seed) until it has a Condorcet winner."""
        L = len(self.names)
        for sub in range(1000):
            rng = np.random.default_rng([seed, sub])
            t = np.full((L, L, n_prompts), 0.5)
            for i in range(L):
                for j in range(i + 1, L):
                    u = rng.random(n_prompts)
                    v = np.where(u < self.win[i, j], 1.0, np.where(u < self.win[i, j] + self.tie[i, j], 0.5, 0.0))
                    t[i, j], t[j, i] = v, 1.0 - v
            S = t.sum(axis=2)
            if any(all(S[m, k] > n_prompts / 2 for k in range(L) if k != m) for m in range(L)):
                return t
        raise RuntimeError(f"{self.name}: no table with a Condorcet winner")


def fake_instance(name: str, qualities: dict[str, float], costs: list[float], judge_cost: float) -> FieldInstance:
    q = np.array(list(qualities.values()))
    win = q[:, None] / (q[:, None] + q[None, :])
    np.fill_diagonal(win, 0.0)
    return FieldInstance(name, list(qualities), costs, judge_cost, win, np.zeros_like(win))


def genai_instance() -> FieldInstance:
    d = json.loads(GENAI.read_text())
    pref, tie = np.array(d["preference"]), np.array(d["ties"])
    win = pref - tie / 2  # P = (wins + ties / 2) / battles
    np.fill_diagonal(win, 0.0)
    np.fill_diagonal(tie, 0.0)
    # one image per answer at 1 unit (the log has no per-image prices), an LLM judge call at 0.1 unit
    return FieldInstance("genai-arena", list(d["names"]), [1.0] * len(d["names"]), 0.1, win, tie)


def instances() -> list[FieldInstance]:
    """Fake-provider models (answer prices in USD per answer, judge in USD per call) and GenAI-Arena."""
    prices, judge = [0.012, 0.006, 0.003, 0.0015], 0.002
    return [
        fake_instance(
            "fake-clear", {"good-q3": 3.0, "mid-q1.5": 1.5, "plain-q1": 1.0, "weak-q0.7": 0.7}, prices, judge
        ),
        genai_instance(),
        fake_instance(
            "fake-moderate", {"good-q1.4": 1.4, "mid-q1": 1.0, "plain-q0.9": 0.9, "weak-q0.8": 0.8}, prices, judge
        ),
        fake_instance(
            "fake-close", {"good-q1.15": 1.15, "mid-q1": 1.0, "plain-q0.95": 0.95, "weak-q0.9": 0.9}, prices, judge
        ),
    ]


# ----------------------------------------------------------------------------- protocols


def run_llmduel(inst: FieldInstance, table: np.ndarray, delta: float, seed: int) -> tuple[int, float, dict]:
    """The service's default campaign; also where its spend went (:func:`spend_breakdown`)."""
    pi = PromptInstance.from_table(inst.costs, inst.judge_cost, table)
    c = policy_campaign(pi, "wor", delta, seed, orders="auto")
    return (c.outcome if c.outcome >= 0 else NONE), c.spend, spend_breakdown(c, inst.costs)


def spend_breakdown(c: PolicyCampaign, costs: list[float]) -> dict:
    """Answers (in all and per model) and judge spend, judge calls per verdict, duels per pair, and the
    spend after the next-to-last certificate (the campaign's last certificate is the one it waits for)."""
    L = c.counts.shape[0]
    certs = c.certificates
    before_last = certs[-2][0] if len(certs) >= 2 else 0.0
    win = c.outcome if c.outcome >= 0 else None
    off = sum(c.counts[i, j] for i in range(L) for j in range(i + 1, L) if win not in (i, j)) if win is not None else 0
    return {
        "answers": c.answer_spend,
        "answers_by_model": {str(m): n * costs[m] for m, n in enumerate(c.answers_by_model)},
        "judge": c.spend - c.answer_spend,
        "calls_per_verdict": c.judge_calls / max(c.verdicts_paid, 1),
        "duels": {f"{i}-{j}": float(c.counts[i, j]) for i in range(L) for j in range(i + 1, L)},
        "duels_without_winner": float(off),
        "after_next_to_last_certificate": c.spend - before_last,
    }


def _reference_protocol(
    inst: FieldInstance, table: np.ndarray, calls: int, rng: np.random.Generator
) -> tuple[int, float, np.ndarray]:
    """Every model answers every prompt, every other model is judged against the middle model on every prompt.

    Returns the leader by win rate against the reference (the reference at 1/2), the spend, and the win rates.
    """
    L, P = table.shape[0], table.shape[2]
    ref = L // 2
    rates = np.array([0.5 if k == ref else float(table[k, ref].mean()) for k in range(L)])
    spend = P * float(sum(inst.costs)) + (L - 1) * P * calls * inst.judge_cost
    return int(np.argmax(rates)), spend, rates


def run_arena_hard(inst: FieldInstance, table: np.ndarray, rng: np.random.Generator) -> tuple[int, float]:
    """Both orders against the baseline. Bradley-Terry fitted on battles against one baseline gives each model
    the logit of its win rate against it, so the score (the fitted win rate against the baseline) is the win rate
    itself, and the leaderboard's top names the winner; the bootstrap interval the protocol reports around each
    score does not enter that rule, so it is not computed here."""
    winner, spend, _rates = _reference_protocol(inst, table, 2, rng)
    return winner, spend


def run_alpaca_eval(inst: FieldInstance, table: np.ndarray, rng: np.random.Generator) -> tuple[int, float]:
    """One call per comparison; with an order-consistent judge the random order does not change the verdict."""
    winner, spend, _rates = _reference_protocol(inst, table, 1, rng)
    return winner, spend


def bt_fit(W: np.ndarray, N: np.ndarray, iters: int = 60) -> np.ndarray:
    """Bradley-Terry log-strengths by the MM algorithm (Hunter 2004), vectorised over a leading batch axis.

    ``W[..., i, j]``: wins of i over j (ties as halves), ``N[..., i, j]``: battles. A pseudo-count of 0.05 of a
    tie per pair keeps the fit finite when a model never won (the logistic fits in use add a small penalty
    for the same reason). Log-strengths are centred to mean 0.
    """
    W = W + 0.05 * (1 - np.eye(W.shape[-1]))
    N = N + 0.1 * (1 - np.eye(N.shape[-1]))
    wins = W.sum(axis=-1)
    p = np.ones(W.shape[:-1])
    for _ in range(iters):
        p = wins / (N / (p[..., :, None] + p[..., None, :])).sum(axis=-1)
        p = p / np.exp(np.log(p).mean(axis=-1, keepdims=True))
    return np.log(p)


def run_chatbot_arena(
    inst: FieldInstance,
    table: np.ndarray,
    rng: np.random.Generator,
    *,
    check: int,
    cap: int,
    budget: float | None = None,
) -> tuple[int, float]:
    """Uniform pairs until the top model's bootstrap interval separates (or, with ``budget``, until that spend)."""
    L, P = table.shape[0], table.shape[2]
    iu, ju = np.triu_indices(L, 1)
    K = iu.size
    # outcome categories per pair: i wins, tie, j wins (counts aggregated; resampling battles = multinomial)
    cnt = np.zeros((K, 3))
    paid_ans = np.zeros((L, P), dtype=bool)
    paid_ver = np.zeros((K, P), dtype=bool)
    spend, n = 0.0, 0
    while n < cap:
        block_k = rng.integers(K, size=check)
        block_p = rng.integers(P, size=check)
        for k, p in zip(block_k, block_p):
            i, j = iu[k], ju[k]
            for m in (i, j):
                if not paid_ans[m, p]:
                    paid_ans[m, p] = True
                    spend += inst.costs[m]
            if not paid_ver[k, p]:
                paid_ver[k, p] = True
                spend += inst.judge_cost  # one vote per battle
            cnt[k, int(2 - 2 * table[i, j, p])] += 1
            n += 1
            if budget is not None and spend >= budget:
                return int(np.argmax(_bt_from_counts(cnt[None], iu, ju, L)[0])), spend
        if budget is not None:
            continue
        theta = _bt_from_counts(cnt[None], iu, ju, L)[0]
        top = int(np.argmax(theta))
        flat = cnt.ravel()
        boot = rng.multinomial(n, flat / n, size=BOOTSTRAP).reshape(BOOTSTRAP, K, 3)
        th = _bt_from_counts(boot, iu, ju, L)
        lo, hi = np.percentile(th, 2.5, axis=0), np.percentile(th, 97.5, axis=0)
        if all(lo[top] > hi[k] for k in range(L) if k != top):
            return top, spend
    return NONE, spend


def _bt_from_counts(cnt: np.ndarray, iu: np.ndarray, ju: np.ndarray, L: int) -> np.ndarray:
    B = cnt.shape[0]
    W = np.zeros((B, L, L))
    N = np.zeros((B, L, L))
    wi = cnt[:, :, 0] + cnt[:, :, 1] / 2
    wj = cnt[:, :, 2] + cnt[:, :, 1] / 2
    tot = cnt.sum(axis=2)
    W[:, iu, ju], W[:, ju, iu] = wi, wj
    N[:, iu, ju], N[:, ju, iu] = tot, tot
    return bt_fit(W, N)


# ----------------------------------------------------------------------------- driver


def run_instance(inst: FieldInstance, trials: int, delta: float, prompts: int, check: int, cap: int) -> dict[str, Any]:
    """``trials`` trials of every protocol on the same tables; per protocol mean spend, error and no-winner rates."""
    rec: dict[str, list[tuple[int, float]]] = {p: [] for p in PROTOCOLS}
    truths = []
    breakdowns: list[dict] = []
    for t in range(trials):
        table = inst.table(prompts, t)
        truth = PromptInstance.from_table(inst.costs, inst.judge_cost, table).condorcet_winner()
        truths.append(truth)
        rng = lambda k: np.random.default_rng([t, k])  # noqa: E731  one stream per protocol and trial
        *duel, parts = run_llmduel(inst, table, delta, t)
        rec["llmduel"].append((duel[0], duel[1]))
        breakdowns.append(parts)
        rec["arena_hard"].append(run_arena_hard(inst, table, rng(1)))
        rec["chatbot_arena"].append(run_chatbot_arena(inst, table, rng(2), check=check, cap=cap))
        rec["alpaca_eval"].append(run_alpaca_eval(inst, table, rng(3)))
        rec["chatbot_arena_equal_spend"].append(
            run_chatbot_arena(inst, table, rng(4), check=check, cap=cap, budget=duel[1])
        )
    out: dict[str, Any] = {"name": inst.name, "gap": inst.gap, "margin": round(inst.margin, 4)}
    for proto, runs in rec.items():
        named = np.array([w for w, _ in runs])
        out[proto] = {
            "spend": float(np.mean([s for _, s in runs])),
            "error_rate": float(np.mean([(w != NONE and w != tr) for w, tr in zip(named, truths)])),
            "no_winner": float(np.mean(named == NONE)),
            "trials": len(runs),
        }
    out["llmduel"]["breakdown"] = {
        k: (
            {p: float(np.mean([b[k][p] for b in breakdowns])) for p in breakdowns[0][k]}
            if isinstance(breakdowns[0][k], dict)
            else float(np.mean([b[k] for b in breakdowns]))
        )
        for k in breakdowns[0]
    }
    return out


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "n/a"


def print_table(result: dict[str, Any]) -> None:
    print(f"delta = {result['delta']}, {result['prompts']} prompts per trial, {result['seconds']:.0f} s")
    head = f"{'instance':<15}{'gap':<10}" + "".join(f"{p:>28}" for p in PROTOCOLS[:4]) + f"{'llmduel/arena_hard':>20}"
    print(head)
    for r in result["instances"]:
        cells = "".join(
            f"{r[p]['spend']:>14.4g} err {r[p]['error_rate']:.3f}"
            + (f" nw {r[p]['no_winner']:.2f}" if r[p]["no_winner"] else " " * 8)
            for p in PROTOCOLS[:4]
        )
        print(f"{r['name']:<15}{r['gap']:<10}{cells}{_ratio(r['llmduel']['spend'], r['arena_hard']['spend']):>20}")
    print("uniform sampling stopped at llmduel's spend (error rate):")
    for r in result["instances"]:
        e = r["chatbot_arena_equal_spend"]
        print(f"  {r['name']:<15} llmduel {r['llmduel']['error_rate']:.3f}  uniform {e['error_rate']:.3f}")
    print("where llmduel's spend went (means per campaign; duels per pair i-j, models in the instance's order):")
    for r in result["instances"]:
        b = r["llmduel"]["breakdown"]
        pairs = " ".join(f"{k}:{v:.0f}" for k, v in b["duels"].items())
        by_model = "/".join(f"{v:.3g}" for v in b["answers_by_model"].values())
        print(
            f"  {r['name']:<15} answers {b['answers']:.4g} ({by_model})  judge {b['judge']:.4g} "
            f"({b['calls_per_verdict']:.2f} calls a verdict)  after the next-to-last certificate "
            f"{b['after_next_to_last_certificate']:.4g}  duels on pairs without the winner "
            f"{b['duels_without_winner']:.0f}  duels {pairs}"
        )


def main(argv: list[str] | None = None, *, emit: Callable[[str], None] = print) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--quick", action="store_true", help="fewer trials (under four minutes)")
    ap.add_argument("--trials", type=int, default=None, help="trials per instance (default 500, --quick 50)")
    ap.add_argument("--delta", type=float, default=0.05)
    ap.add_argument("--prompts", type=int, default=500, help="prompts per trial (arena-hard-auto v0.1 has 500)")
    ap.add_argument("--check", type=int, default=100, help="Chatbot Arena: battles between interval checks")
    ap.add_argument("--cap", type=int, default=20_000, help="Chatbot Arena: battles before giving up")
    ap.add_argument("--only", nargs="+", default=None, help="instance names to run")
    args = ap.parse_args(argv)
    trials = args.trials if args.trials is not None else (50 if args.quick else 500)
    if trials < 1 or not 0 < args.delta < 1 or args.prompts < 2 or args.check < 1 or args.cap < 1:
        ap.error("--trials, --prompts, --check and --cap must be positive (--prompts >= 2), --delta in (0, 1)")
    chosen = [i for i in instances() if args.only is None or i.name in args.only]
    if not chosen:
        ap.error(f"--only names none of {[i.name for i in instances()]}")
    t0 = time.perf_counter()
    rows = [run_instance(i, trials, args.delta, args.prompts, args.check, args.cap) for i in chosen]
    result = {"delta": args.delta, "prompts": args.prompts, "instances": rows, "seconds": time.perf_counter() - t0}
    if args.json:
        emit(json.dumps(result))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
