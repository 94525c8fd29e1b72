"""Rounds of duels planned ahead (batch campaigns): their sizes, and a simulator of a policy run in rounds.

Round ``k`` (1, 2, ...) plans at most ``min(max_round_size, ceil(round_size * growth ** (k - 1)))``
duels (:func:`round_size`), and from the second round on no more than the stopping rule's own
forecast of the duels it still needs (:func:`remaining_duels`) times :data:`FORECAST_MARGIN`
(:func:`next_round_size`). The forecast only sizes a round: which duels are planned and when the
campaign stops are the policy's and its stopping rule's.

Why the guarantee survives rounds: a round's pairs are chosen from the data recorded before the
round (the round's earlier duels count as pulled, not as observed), and its outcomes are recorded
in the order the round planned them, checking the stopping rule after each. Each duel's pair is
therefore fixed before its outcome is drawn, as when duels are planned one at a time with duels
in flight, and the sequence of recorded outcomes is the one the stopping rule's supermartingale
argument covers (docs/algorithms.md); the duels planned after the stopping time are paid and not
recorded, which changes the cost, not the error. :func:`simulate_rounds` measures both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .instance import Instance

#: How much more than the forecast of the duels still needed a round plans.
FORECAST_MARGIN = 1.1


def round_size(cfg: dict[str, Any], k: int) -> int:
    """The most duels round ``k`` (1-based) plans: ``cfg`` has ``round_size``, ``growth``, ``max_round_size``."""
    size = math.ceil(float(cfg["round_size"]) * float(cfg["growth"]) ** max(0, k - 1))
    return int(min(int(cfg["max_round_size"]), size))


def remaining_duels(policy: Any) -> float | None:
    """The stopping rule's own forecast of the duels it still needs, or None when it has no basis yet.

    A certificate's log-statistic grows about linearly in its pair's duels, so a test at ``stat``
    after ``n`` duels, with threshold ``thr``, needs about ``n * (thr - stat) / stat`` more. For
    dctas-pc: the sum over the current leader's certificates still missing (``pair_evidence``); for
    the other policies: the GLR statistic ``Z`` against ``beta`` after ``t`` duels.
    """
    if hasattr(policy, "pair_evidence"):
        leader = policy.recommendation()
        total = 0.0
        for e in policy.pair_evidence():
            if e["winner"] != leader or e["certified"]:
                continue
            n, stat, thr = float(e["n"]), float(e["log_stat"]), float(e["log_threshold"])
            if n <= 0 or not stat > 0 or not math.isfinite(stat):
                return None
            total += n * max(0.0, thr - stat) / stat
        return total
    summary = policy.summary()
    t, z, beta = float(summary.get("t") or 0), float(summary.get("Z") or 0), float(summary.get("beta") or 0)
    if t <= 0 or not z > 0 or not math.isfinite(z) or not math.isfinite(beta):
        return None
    return t * max(0.0, beta - z) / z


def next_round_size(cfg: dict[str, Any], k: int, remaining: float | None) -> int:
    """Round ``k``'s size: :func:`round_size`, cut to ``remaining`` (:func:`remaining_duels`) times
    :data:`FORECAST_MARGIN`, never below the first round's size."""
    cap = round_size(cfg, k)
    if k <= 1 or remaining is None or not math.isfinite(remaining):
        return cap
    want = math.ceil(FORECAST_MARGIN * remaining)
    return int(max(1, min(cap, max(int(cfg["round_size"]), want))))


def planned_in_rounds(duels: int, cfg: dict[str, Any]) -> tuple[int, int]:
    """(duels planned, rounds) of a campaign that records ``duels`` duels in rounds of :func:`round_size`:
    the rounds it takes to plan at least that many, all of them paid. An upper bound of the duels a
    running campaign plans (its rounds from the second on are also cut to :func:`next_round_size`'s
    forecast of the duels still needed), used where the policy itself is not simulated in rounds."""
    planned, k = 0, 0
    while planned < max(0, int(duels)):
        k += 1
        planned += round_size(cfg, k)
    return planned, k


@dataclass
class RoundsResult:
    """Per trial: ``costs`` (every planned duel paid, ``judge_cost`` included), ``planned`` duels,
    ``recorded`` duels (up to the stop), ``rounds``, ``recommended`` arm, ``stopped``."""

    costs: np.ndarray
    planned: np.ndarray
    recorded: np.ndarray
    rounds: np.ndarray
    recommended: np.ndarray
    stopped: np.ndarray


def simulate_rounds(
    instance: Instance,
    algorithm: str,
    delta: float,
    trials: int,
    cfg: dict[str, Any],
    seed: int = 0,
    judge_cost: float = 0.0,
    max_steps: int = 200_000,
    **params: Any,
) -> RoundsResult:
    """Trials of ``algorithm`` run in rounds (``cfg``: ``round_size``, ``growth``, ``max_round_size``).

    Outcomes are drawn from the instance's preferences (win, tie or loss with its ``ties``);
    a trial's random stream depends on ``seed`` and its index only.
    """
    from .policies import make_policy  # here: the round-size rules (a campaign file's check) need no kernels

    P, T, c = instance.preference, instance.tie_matrix(), np.asarray(instance.costs, dtype=float)
    seeds = np.random.SeedSequence(int(seed)).generate_state(int(trials), dtype=np.uint32)
    out = {name: np.zeros(trials) for name in ("costs", "planned", "recorded", "rounds", "recommended", "stopped")}
    for n in range(trials):
        rng = np.random.default_rng(int(seeds[n]))
        policy = make_policy(algorithm, costs=list(c), delta=delta, judge_cost=judge_cost, **params)
        cost, planned, recorded, k = 0.0, 0, 0, 0
        while not policy.should_stop() and planned < max_steps:
            k += 1
            pairs: list[tuple[int, int]] = []
            for _ in range(next_round_size(cfg, k, remaining_duels(policy))):
                i, j = policy.next_pair(pending=pairs)
                if i < 0:
                    break
                pairs.append((int(i), int(j)))
            if not pairs:
                break
            planned += len(pairs)
            cost += sum(c[i] + c[j] + judge_cost for i, j in pairs)
            for i, j in pairs:  # recorded in the plan order; the rest of the round is paid, not recorded
                u = rng.random()
                tie = T[i, j]
                score = 1.0 if u < P[i, j] - tie / 2 else (0.5 if u < P[i, j] + tie / 2 else 0.0)
                policy.record(i, j, score)
                recorded += 1
                if policy.should_stop():
                    break
        out["costs"][n], out["planned"][n], out["recorded"][n], out["rounds"][n] = cost, planned, recorded, k
        out["recommended"][n], out["stopped"][n] = policy.recommendation(), policy.should_stop()
    return RoundsResult(
        out["costs"],
        out["planned"].astype(int),
        out["recorded"].astype(int),
        out["rounds"].astype(int),
        out["recommended"].astype(int),
        out["stopped"].astype(bool),
    )
