"""Coverage of the forecast's 80% interval [p10, p90] against the spend of "true" campaigns.

Each case generates true campaigns by simulation from a known ground truth and
forecasts from what the user would know, as the service does
(service/campaigns/forecasting.py):

* ``fixed matrix``: a simulated judge's matrix (known to the user); truths are
  campaigns of the i.i.d. simulator on it with seeds the forecast never used.
* ``llm wor, 50 prompts, clear gaps`` / ``small gaps`` / ``500 prompts``: the
  default LLM-judged campaign (answers and verdicts reused, prompts without
  replacement). Each truth draws strengths from N(0, spread^2) (spread 1.0 for
  clear gaps, 0.25 for small gaps, 0.5 for 500 prompts), a verdict table of its
  prompts, and runs the real dctas-pc driver
  (:func:`algorithms.prompt_policy_sim.policy_campaign`); the user knows the
  spread, the costs and the prompt count, so one prior forecast serves every truth.
* ``pilot``: each truth (spread 0.5, 50 prompts, wor) also gives a pilot: its own
  first ``--pilot-duels`` duels; the forecast draws from the Bradley-Terry
  posterior of those counts and is made per truth.

* ``learned`` (spread unknown, small gaps): each truth draws its strengths with spread 0.15 (smaller
  gaps than the default prior's 0.5), at 50 and at 500 prompts. Side by side, the forecast of today's
  default (spread 0.5), the one whose spread is learned from ``--stored`` campaigns already run on the
  server (full campaigns of other models from the same population, 50 prompts each:
  :func:`algorithms.forecast.stored_spread_weights`), and (50 prompts) the pilot forecast whose spread is
  learned from the truth's own first ``--pilot-duels`` duels (:func:`algorithms.forecast.pilot_learned_strengths`).

Coverage is averaged over truths drawn from the prior the forecast assumes: it
checks that the forecast simulates what the campaign does and that [p10, p90]
holds about 80% of actual spends when the prior is right; it says nothing of one
fixed set of models that the prior makes unusual.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_forecast.py [--truths 200] [--trials 200] [--pilot-truths 100]
[--pilot-duels 40] [--stored 8] [--cases fixed,clear,small,p500,pilot,learned]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from algorithms import forecast as fc
from algorithms.instance import Instance
from algorithms.prompt_level import bradley_terry_prompts
from algorithms.prompt_policy_sim import policy_campaign
from algorithms.simulator import simulate

COSTS = [2.0, 3.0, 4.0, 5.0]  # per answer (USD units); 50 prompts: ceiling 50 x 14 + 6 x 50 x 2 = 1300
JUDGE = 2.0  # c_J: one verdict, both orders
DELTA = 0.05
FIXED_P = [
    [0.5, 0.7, 0.75, 0.8],
    [0.3, 0.5, 0.6, 0.65],
    [0.25, 0.4, 0.5, 0.55],
    [0.2, 0.35, 0.45, 0.5],
]


def coverage(f: fc.Forecast, actual: np.ndarray) -> tuple[float, dict]:
    s = fc.spread_summary(f.costs)
    inside = (actual >= s["p10"] - 1e-9) & (actual <= s["p90"] + 1e-9)
    return float(inside.mean()), s


def true_prompt_campaign(theta, n_prompts, seed, max_duels=50_000):
    inst = bradley_terry_prompts(
        theta,
        n_prompts,
        costs=COSTS,
        judge_cost=JUDGE / 2.0,
        prompt_sd=fc.DEFAULT_PROMPT_SD,
        tie_prob=fc.DEFAULT_TIE_PROB,
        seed=seed,
    )
    return inst, policy_campaign(inst, "wor", DELTA, seed, max_duels=max_duels)


def row(name, cov, s, actual, extra=""):
    print(
        f"{name:<34} coverage {100 * cov:5.1f}%  forecast p10/median/p90 {s['p10']:8.1f} {s['median']:8.1f} "
        f"{s['p90']:8.1f}  actual p10/median/p90 {np.quantile(actual, 0.1):8.1f} {np.median(actual):8.1f} "
        f"{np.quantile(actual, 0.9):8.1f}{extra}",
        flush=True,
    )


def case_fixed(truths, trials):
    f = fc.run_forecast(fc.fixed_draws(FIXED_P, trials), COSTS, DELTA, judge_cost=JUDGE, seed=0)
    inst = Instance([f"m{i}" for i in range(4)], COSTS, np.array(FIXED_P))
    actual = simulate(inst, "dctas-pc", DELTA, truths, seed=1_000_000, judge_cost=JUDGE).costs
    cov, s = coverage(f, actual)
    row("fixed matrix (simulated judge)", cov, s, actual)


def case_prior(name, spread, n_prompts, truths, trials):
    rng = np.random.default_rng(7)
    f = fc.run_prompt_forecast(
        fc.bradley_terry_strengths(4, spread, trials, rng), COSTS, DELTA, n_prompts, "wor", JUDGE, seed=0
    )
    truth_rng = np.random.default_rng(12345)
    actual = np.array(
        [
            true_prompt_campaign(truth_rng.normal(0.0, spread, 4), n_prompts, 1_000_000 + t)[1].spend
            for t in range(truths)
        ]
    )
    cov, s = coverage(f, actual)
    row(name, cov, s, actual, f"  ceiling {f.ceiling:.0f}, max forecast {f.costs.max():.1f}")


def case_pilot(truths, trials, pilot_duels, spread=0.5, n_prompts=50):
    truth_rng = np.random.default_rng(999)
    inside, widths, actual = [], [], []
    for t in range(truths):
        theta = truth_rng.normal(0.0, spread, 4)
        seed = 2_000_000 + t
        inst, full = true_prompt_campaign(theta, n_prompts, seed)
        pilot = policy_campaign(inst, "wor", DELTA, seed, max_duels=pilot_duels)
        draws = fc.pilot_posterior_strengths(
            pilot.wins,
            pilot.counts,
            spread,
            trials,
            np.random.default_rng(seed),
            prompt_sd=fc.DEFAULT_PROMPT_SD,
            tie_prob=fc.DEFAULT_TIE_PROB,
        )
        f = fc.run_prompt_forecast(draws, COSTS, DELTA, n_prompts, "wor", JUDGE, seed=seed + 7)
        s = fc.spread_summary(f.costs)
        inside.append(s["p10"] - 1e-9 <= full.spend <= s["p90"] + 1e-9)
        widths.append(s["p90"] - s["p10"])
        actual.append(full.spend)
    prior = fc.run_prompt_forecast(
        fc.bradley_terry_strengths(4, spread, trials, np.random.default_rng(3)), COSTS, DELTA, n_prompts, "wor", JUDGE
    )
    ps = fc.spread_summary(prior.costs)
    print(
        f"{'pilot (' + str(pilot_duels) + ' duels, 50 prompts, wor)':<34} coverage {100 * np.mean(inside):5.1f}%  "
        f"median width of [p10, p90] {np.median(widths):7.1f} (prior forecast's {ps['p90'] - ps['p10']:.1f}), "
        f"{truths} truths",
        flush=True,
    )


SMALL = 0.15  # the learned case's true spread: smaller gaps than the default prior says


def _stored_weights(k: int) -> np.ndarray:
    """The spread weights learned from ``k`` campaigns already run (other models of the same population)."""
    rng = np.random.default_rng(555)
    runs = [true_prompt_campaign(rng.normal(0.0, SMALL, 4), 50, 3_000_000 + c)[1] for c in range(k)]
    w = fc.stored_spread_weights(
        [(r.wins, r.counts) for r in runs], prompt_sd=fc.DEFAULT_PROMPT_SD, tie_prob=fc.DEFAULT_TIE_PROB
    )
    assert w is not None
    return w


def case_learned(truths, trials, stored, pilot_truths, pilot_duels):
    weights = _stored_weights(stored)
    for n_prompts, n_truths in ((50, truths), (500, max(truths // 2, 1))):
        truth_rng = np.random.default_rng(12345)
        actual = np.array(
            [
                true_prompt_campaign(truth_rng.normal(0.0, SMALL, 4), n_prompts, 1_000_000 + t)[1].spend
                for t in range(n_truths)
            ]
        )
        for name, theta in (
            ("default spread 0.5", fc.bradley_terry_strengths(4, fc.DEFAULT_SPREAD, trials, np.random.default_rng(7))),
            (f"learned from {stored} stored", fc.learned_strengths(4, weights, trials, np.random.default_rng(7))),
        ):
            f = fc.run_prompt_forecast(theta, COSTS, DELTA, n_prompts, "wor", JUDGE, seed=0)
            cov, s = coverage(f, actual)
            row(f"small gaps, {n_prompts} prompts, {name}", cov, s, actual, f"  {n_truths} truths")
    truth_rng = np.random.default_rng(999)
    inside = {"default spread 0.5": [], "spread learned": []}
    for t in range(pilot_truths):
        seed = 2_000_000 + t
        inst, full = true_prompt_campaign(truth_rng.normal(0.0, SMALL, 4), 50, seed)
        pilot = policy_campaign(inst, "wor", DELTA, seed, max_duels=pilot_duels)
        link = {"prompt_sd": fc.DEFAULT_PROMPT_SD, "tie_prob": fc.DEFAULT_TIE_PROB}
        for name, theta in (
            (
                "default spread 0.5",
                fc.pilot_posterior_strengths(
                    pilot.wins, pilot.counts, fc.DEFAULT_SPREAD, trials, np.random.default_rng(seed), **link
                ),
            ),
            (
                "spread learned",
                fc.pilot_learned_strengths(pilot.wins, pilot.counts, trials, np.random.default_rng(seed), **link),
            ),
        ):
            s = fc.spread_summary(fc.run_prompt_forecast(theta, COSTS, DELTA, 50, "wor", JUDGE, seed=seed + 7).costs)
            inside[name].append(s["p10"] - 1e-9 <= full.spend <= s["p90"] + 1e-9)
    for name, hits in inside.items():
        print(
            f"small gaps, 50 prompts, pilot of {pilot_duels} duels, {name:<18} coverage "
            f"{100 * np.mean(hits):5.1f}%  {pilot_truths} truths",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--truths", type=int, default=200, help="true campaigns per prior case (default 200)")
    ap.add_argument("--trials", type=int, default=200, help="forecast trials (default 200, the service's)")
    ap.add_argument("--pilot-truths", type=int, default=100, help="true campaigns of the pilot case (default 100)")
    ap.add_argument("--pilot-duels", type=int, default=40, help="duels of each pilot (default 40)")
    ap.add_argument("--stored", type=int, default=8, help="stored campaigns the learned case learns from (default 8)")
    ap.add_argument("--cases", default="fixed,clear,small,p500,pilot", help="comma-separated subset of the cases")
    a = ap.parse_args()
    cases = set(a.cases.split(","))
    t0 = time.perf_counter()
    print(f"delta {DELTA}, 4 models costing {COSTS}, judge c_J {JUDGE}; nominal coverage 80%")
    if "fixed" in cases:
        case_fixed(a.truths, a.trials)
    if "clear" in cases:
        case_prior("llm wor, 50 prompts, clear gaps", 1.0, 50, a.truths, a.trials)
    if "small" in cases:
        case_prior("llm wor, 50 prompts, small gaps", 0.25, 50, a.truths, a.trials)
    if "p500" in cases:
        case_prior("llm wor, 500 prompts", 0.5, 500, a.truths, a.trials)
    if "pilot" in cases:
        case_pilot(a.pilot_truths, a.trials, a.pilot_duels)
    if "learned" in cases:
        case_learned(a.truths, a.trials, a.stored, a.pilot_truths, a.pilot_duels)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
