"""Human votes of the hybrid policy (LLM judge + sampled humans) against humans-only dctas-pc, same seeds.

    .venv/bin/python benchmarks/bench_hybrid.py --trials 500 --error-trials 2000 --json

Part 1 (``--delta``, default 0.05, ``--trials`` per cell) on the 4-model instance of
:func:`algorithms.hybrid_sim.hybrid_instance`. Every ratio is mean human votes over those of
humans-only dctas-pc with its default (``betting``) certificate test, run through the
step-wise policy on the same model of human votes: the hybrid policy with the calibrated
judge and the adversarial judge (``human_votes_ratio``, ``adversarial_human_votes_ratio``;
fixed ``--rate``, default 0.2), both with ``active`` rates, a coin-flip judge (verdict
independent of the human vote), the graded judge (fixed and active), and the hybrid test
with ``pi = 1`` (humans only). ``*_vs_mixture`` compare with humans-only dctas-pc on the
older grid-mixture test. ``aipw_bound`` gives, per pair of the winner and judge, the
fraction of humans-only votes below which no judge-augmented estimate can go at this rate
(:func:`algorithms.hybrid_sim.aipw_votes_ratio`); ``bound`` the four limits each ratio is measured
against (variance and betting limits, fixed and active ``pi``, per judge and pair of the winner);
``mixture_test_ratios`` the same cells with the test stored campaigns made before the plug-in
test (``test="mixture"``), same seeds. Mean duels (models and judge are paid on
every duel) and errors per cell under ``cells``. Part 2 (``--error-trials`` at delta = 0.1,
0 to skip): error rates with the one-sided binomial p-value of ``H0: error rate <= delta``
on the 4-model instance, on a 2-model instance where the adversarial judges favour the
human loser, and on a 3-model one (a winner at 0.55 over two exactly equal models) where they also
skew the choice of pairs; a trial that reaches the cap of 200,000 duels counts as an error.

``--phases N`` runs only N step-wise trials of the graded judge with the active rule (choosing pairs on the
stratified estimate, H10, and on the mean of H1) and of humans-only dctas-pc, and prints their human votes
per pair, split by whether the leader when the duel was chosen was the Condorcet winner.

``--quick`` runs only the baseline and the three cells the targets of issue 32 name (the calibrated,
graded and adversarial judges with the active rule: ``active_human_votes_ratio``,
``graded_active_human_votes_ratio``, ``active_adversarial_human_votes_ratio``, same keys, same seeds
as the full run) and skips Part 2; about a fifth of the full run's time:

    nice -n 15 .venv/bin/python benchmarks/bench_hybrid.py --quick --trials 300 --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from scipy.stats import binomtest  # noqa: E402

from algorithms import Instance  # noqa: E402
from algorithms.hybrid import HybridPolicy  # noqa: E402
from algorithms.hybrid_sim import (  # noqa: E402
    HUMAN_TIE,
    JudgeModel,
    _draw_graded,
    _seed,
    _seeds,
    _uniform,
    adversarial_judge,
    aipw_active_votes_ratio,
    aipw_votes_ratio,
    betting_votes_ratio,
    calibrated_judge,
    graded_judge,
    hybrid_instance,
    run_humans_only,
    run_humans_only_default,
    run_hybrid,
)
from algorithms.policies import make_policy, pair_index_arrays  # noqa: E402

# a judge whose verdict is independent of the human vote (agreement 1/2): no information at all
COIN = JudgeModel(0.5, judge_tie=0.13, human_tie=0.13, name="coin")
HARD = Instance(["a", "b"], [1.0, 1.0], [[0.5, 0.45], [0.55, 0.5]])
# three models, a near-tie Condorcet winner and two exactly equal losers: here the choice of pairs (H10: on the
# judge's bins, which an adversarial judge skews) decides which pairs get duels
HARD3 = Instance(["a", "b", "c"], [1.0, 1.0, 1.0], [[0.5, 0.55, 0.55], [0.45, 0.5, 0.5], [0.45, 0.5, 0.5]])


def _cell(res: dict) -> dict:
    return {k: v for k, v in res.items() if k != "human_votes"}


def _bounds(inst: Instance, rate: float) -> dict:
    """``aipw_votes_ratio`` on the pairs of the Condorcet winner: no judge-augmented estimate with this
    judge and a fixed ``rate`` needs fewer human votes than this fraction of humans alone (as n grows)."""
    w = inst.condorcet_winner
    P = inst.preference
    out = {}
    for judge in (calibrated_judge(), adversarial_judge(), graded_judge()):
        a = float(judge.agreement)
        out[judge.name] = {
            f"p={P[w][m]:.2f}": round(aipw_votes_ratio(float(P[w][m]), a, judge, rate), 3)
            for m in range(inst.L)
            if m != w
        }
    return out


def _limits(inst: Instance, rate: float) -> dict:
    """Per judge and pair of the winner, the four limits the measured ratios are set against:
    ``aipw`` (variance, fixed ``rate``), ``aipw_active`` (variance, ``pi`` proportional to ``sd(H | J)``
    at mean ``rate``), ``betting`` and ``betting_active`` (growth rate of the best constant bet on the
    oracle AIPW estimate against the best bet on human scores alone; :func:`betting_votes_ratio`)."""
    w = inst.condorcet_winner
    P = inst.preference
    out: dict = {}
    for judge in (calibrated_judge(), graded_judge(), adversarial_judge()):
        a = float(judge.agreement)
        cell: dict = {}
        for m in range(inst.L):
            if m == w:
                continue
            p = float(P[w][m])
            cell[f"p={p:.2f}"] = {
                "aipw": round(aipw_votes_ratio(p, a, judge, rate), 3),
                "aipw_active": round(aipw_active_votes_ratio(p, a, judge, rate), 3),
                "betting": round(betting_votes_ratio(p, a, judge, rate), 3),
                "betting_active": round(betting_votes_ratio(p, a, judge, rate, active=True), 3),
            }
        out[judge.name] = cell
    return out


def part_votes(trials: int, delta: float, rate: float, seed: int) -> dict:
    inst = hybrid_instance()
    # the baseline: humans-only dctas-pc with its default certificate test (betting), step-wise policy
    default = run_humans_only_default(inst, delta, trials, seed)
    base = default["mean_human_votes"]
    # humans-only dctas-pc with the older grid-mixture test, compiled (kept for comparison)
    humans = run_humans_only(inst, delta, trials, seed)
    base_mix = humans["mean_human_votes"]
    cal = run_hybrid(inst, calibrated_judge(), delta, trials, seed, human_rate=rate)
    adv = run_hybrid(inst, adversarial_judge(), delta, trials, seed, human_rate=rate)
    cal_a = run_hybrid(inst, calibrated_judge(), delta, trials, seed, human_rate="active")
    adv_a = run_hybrid(inst, adversarial_judge(), delta, trials, seed, human_rate="active")
    bet1 = run_hybrid(inst, calibrated_judge(), delta, trials, seed, human_rate=1.0)
    coin = run_hybrid(inst, COIN, delta, trials, seed, human_rate=rate)
    graded = run_hybrid(inst, graded_judge(), delta, trials, seed, human_rate=rate)
    graded_a = run_hybrid(inst, graded_judge(), delta, trials, seed, human_rate="active")
    # the test stored campaigns made before the plug-in test ran ("mixture"), same seeds
    old = {
        (j.name, r): run_hybrid(inst, j, delta, trials, seed, human_rate=r, test="mixture")
        for j in (calibrated_judge(), graded_judge(), adversarial_judge())
        for r in (rate, "active")
    }
    return {
        "human_votes_ratio": cal["mean_human_votes"] / base,
        "adversarial_human_votes_ratio": adv["mean_human_votes"] / base,
        "error_rate": cal["error_rate"],
        "adversarial_error_rate": adv["error_rate"],
        "trials": trials,
        "delta": delta,
        "rate": rate,
        # the same two ratios under their earlier names (the baseline is the default test in both)
        "human_votes_ratio_vs_default": cal["mean_human_votes"] / base,
        "adversarial_human_votes_ratio_vs_default": adv["mean_human_votes"] / base,
        "human_votes_ratio_vs_mixture": cal["mean_human_votes"] / base_mix,
        "adversarial_human_votes_ratio_vs_mixture": adv["mean_human_votes"] / base_mix,
        "humans_only_default_votes": base,
        "humans_only_default_errors": default["errors"],
        "humans_only_mixture_votes": base_mix,
        "active_human_votes_ratio": cal_a["mean_human_votes"] / base,
        "active_adversarial_human_votes_ratio": adv_a["mean_human_votes"] / base,
        "hybrid_test_pi_1_ratio": bet1["mean_human_votes"] / base,
        "coin_judge_human_votes_ratio": coin["mean_human_votes"] / base,
        "graded_human_votes_ratio": graded["mean_human_votes"] / base,
        "graded_active_human_votes_ratio": graded_a["mean_human_votes"] / base,
        "aipw_bound": _bounds(inst, rate),
        # what the ratios are measured against, per judge and pair of the winner (docs/algorithms.md, Hybrid)
        "bound": _limits(inst, rate),
        "mixture_test_ratios": {
            f"{name}_{'active' if r == 'active' else 'fixed'}": res["mean_human_votes"] / base
            for (name, r), res in old.items()
        },
        "cells": {
            "humans_only_dctas_pc_default": _cell(default),
            "humans_only_dctas_pc_mixture": _cell(humans),
            "hybrid_calibrated": _cell(cal),
            "hybrid_adversarial": _cell(adv),
            "hybrid_calibrated_active": _cell(cal_a),
            "hybrid_adversarial_active": _cell(adv_a),
            "hybrid_test_pi_1": _cell(bet1),
            "hybrid_coin_judge": _cell(coin),
            "hybrid_graded": _cell(graded),
            "hybrid_graded_active": _cell(graded_a),
        },
    }


def part_quick(trials: int, delta: float, seed: int) -> dict:
    """The baseline and the three active-rule cells of :func:`part_votes`, under the same keys."""
    inst = hybrid_instance()
    default = run_humans_only_default(inst, delta, trials, seed)
    base = default["mean_human_votes"]
    cells = {
        name: run_hybrid(inst, judge, delta, trials, seed, human_rate="active")
        for name, judge in (
            ("hybrid_calibrated_active", calibrated_judge()),
            ("hybrid_graded_active", graded_judge()),
            ("hybrid_adversarial_active", adversarial_judge()),
        )
    }
    return {
        "active_human_votes_ratio": cells["hybrid_calibrated_active"]["mean_human_votes"] / base,
        "graded_active_human_votes_ratio": cells["hybrid_graded_active"]["mean_human_votes"] / base,
        "active_adversarial_human_votes_ratio": cells["hybrid_adversarial_active"]["mean_human_votes"] / base,
        "trials": trials,
        "delta": delta,
        "humans_only_default_votes": base,
        "humans_only_default_errors": default["errors"],
        "cells": {"humans_only_dctas_pc_default": _cell(default), **{k: _cell(v) for k, v in cells.items()}},
    }


def part_errors(trials: int, seed: int) -> list[dict]:
    out = []
    judges = [
        calibrated_judge(),
        adversarial_judge(),
        JudgeModel(0.1, human_tie=0.13, name="adversarial-90"),
        graded_judge(),
    ]
    for inst_name, inst in (("4-model", hybrid_instance()), ("hard-2", HARD), ("hard-3", HARD3)):
        for judge in judges:
            for rate in (0.2, "active"):
                r = run_hybrid(inst, judge, 0.1, trials, seed, human_rate=rate, max_duels=200_000)
                p = binomtest(r["errors"], trials, 0.1, alternative="greater").pvalue
                out.append(
                    {
                        "instance": inst_name,
                        "judge": judge.name,
                        "rate": rate,
                        "trials": trials,
                        "errors": r["errors"],
                        "error_rate": r["error_rate"],
                        "unfinished": r["unfinished"],
                        "p_value": float(p),
                    }
                )
    return out


def part_phases(trials: int, delta: float, seed: int) -> dict:
    """Human votes per trial by pair, split by whether the policy's leader when the duel was chosen was the
    Condorcet winner: the hybrid (graded judge, active rule) choosing pairs on the stratified estimate (H10)
    and on the mean of (H1), and humans-only dctas-pc; step-wise policies (``HybridPolicy``, ``make_policy``)."""
    inst = hybrid_instance()
    P = np.asarray(inst.preference)
    w = inst.condorcet_winner
    judge = graded_judge()
    _, _, PK = pair_index_arrays(inst.L)
    out: dict = {}
    for alloc in ("strata", "mean"):
        votes = np.zeros((2, inst.L * (inst.L - 1) // 2))
        for s in _seeds(trials, seed):
            _seed(int(s))
            pol = HybridPolicy(list(inst.costs), delta, human_rate="active", alloc=alloc)
            while not pol.should_stop():
                lead = pol.leader() == w
                i, j = pol.next_pair()
                H, J = _draw_graded(
                    P[i, j], judge.agreement, judge.human_tie, judge.judge_tie, 0.0, judge.confident,
                    judge.agreement_confident,
                )  # fmt: skip
                pi = pol.human_probability(i, j, J)
                human = _uniform() < pi
                pol.record(i, j, J, H if human else None, pi)
                votes[int(lead), PK[min(i, j), max(i, j)]] += human
        out[f"graded_active_{alloc}"] = _phase_cell(votes / trials)
    votes = np.zeros((2, inst.L * (inst.L - 1) // 2))
    for s in _seeds(trials, seed):
        rng = np.random.default_rng(int(s))
        pc = make_policy("dctas-pc", list(inst.costs), delta)
        while not pc.should_stop():
            lead = pc.leader() == w
            i, j = pc.next_pair()
            q = (P[i, j] - 0.5 * HUMAN_TIE) / (1.0 - HUMAN_TIE)
            pc.record(i, j, 0.5 if rng.random() < HUMAN_TIE else float(rng.random() < q))
            votes[int(lead), PK[min(i, j), max(i, j)]] += 1
    out["humans_only_default"] = _phase_cell(votes / trials)
    return out


def _phase_cell(v: np.ndarray) -> dict:
    return {
        "votes": round(float(v.sum()), 1),
        "leader_not_winner": round(float(v[0].sum()), 1),
        "by_pair_leader_winner": [round(float(x), 1) for x in v[1]],
        "by_pair_leader_not_winner": [round(float(x), 1) for x in v[0]],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--delta", type=float, default=0.05)
    ap.add_argument("--rate", type=float, default=0.2, help="the fixed human rate pi (default 0.2)")
    ap.add_argument("--error-trials", type=int, default=2000, help="trials per cell at delta = 0.1 (0: skip)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--quick", action="store_true", help="only the baseline and the three active-rule cells")
    ap.add_argument(
        "--phases", type=int, default=0, help="only: human votes by pair and leader, this many step-wise trials"
    )
    a = ap.parse_args()
    if a.trials < 1 or a.error_trials < 0 or not (0.0 < a.delta < 1.0) or not (0.0 < a.rate <= 1.0):
        ap.error("need --trials >= 1, --error-trials >= 0, 0 < --delta < 1, 0 < --rate <= 1")
    t0 = time.time()
    if a.phases:
        print(json.dumps(part_phases(a.phases, a.delta, a.seed), indent=1))
        return
    if a.quick:
        out = part_quick(a.trials, a.delta, a.seed)
        out["seconds"] = round(time.time() - t0, 1)
        if a.json:
            print(json.dumps(out, indent=1))
            return
        for k in (
            "active_human_votes_ratio",
            "graded_active_human_votes_ratio",
            "active_adversarial_human_votes_ratio",
        ):
            print(f"{k:40s} {out[k]:.4f}")
        return
    out = part_votes(a.trials, a.delta, a.rate, a.seed)
    if a.error_trials:
        out["error_test"] = part_errors(a.error_trials, a.seed)
    out["seconds"] = round(time.time() - t0, 1)
    if a.json:
        print(json.dumps(out, indent=1))
        return
    for k in ("human_votes_ratio", "adversarial_human_votes_ratio", "error_rate", "adversarial_error_rate"):
        print(f"{k:40s} {out[k]:.4f}")
    for k in (
        "active_human_votes_ratio",
        "active_adversarial_human_votes_ratio",
        "hybrid_test_pi_1_ratio",
        "coin_judge_human_votes_ratio",
        "graded_human_votes_ratio",
        "graded_active_human_votes_ratio",
    ):
        print(f"{k:40s} {out[k]:.4f}")
    for name, c in out["cells"].items():
        print(
            f"{name:28s} human votes {c['mean_human_votes']:9.1f}  duels {c['mean_duels']:9.1f}  errors {c['errors']}"
        )
    for e in out.get("error_test", []):
        print(
            f"delta=0.1 {e['instance']:8s} {e['judge']:15s} rate={e['rate']!s:6s} "
            f"errors {e['errors']}/{e['trials']}  p={e['p_value']:.3g}"
        )


if __name__ == "__main__":
    main()
