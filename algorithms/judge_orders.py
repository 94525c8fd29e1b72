"""An LLM judge with position bias and ties, judging in both orders or in one random order.

The judge model (docs/algorithms.md, "One judge call per duel"): a duel of ``i`` and ``j``
has a latent better answer, ``i`` with probability ``P[i, j]``, drawn afresh per duel. The
judge, reading the two answers,

- with probability ``tie`` calls them equal in every order it is asked (a tie);
- with probability ``flip`` is driven by the position, not the content: in every order it
  picks the answer shown first (with probability ``first``) or the one shown second, so its
  verdict flips when the answers are swapped;
- otherwise picks the latent better answer in every order.

``orders="both"`` asks both orders (two calls) and combines them as the service's
``combine: consistent`` does (both favour the same answer: that answer; else a tie);
``orders="one"`` asks one order, ``i`` shown first with probability 1/2 (the service draws it
with the campaign's secret key), one call. In both modes the expected score of ``i`` is
``1/2 + (1 - tie - flip) (P[i, j] - 1/2)``: the preference averaged over the two orders.

:func:`run_trial` drives the real ``dctas-pc`` policy (:func:`algorithms.policies.make_policy`)
on these duels and counts the judge calls; the allocation is told the judge's cost per duel
(``call_cost`` times the calls per duel), as the service does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .policies import NoPairAvailable, make_policy

__all__ = ["ORDERS", "JudgeNoise", "duel_score", "expected_score", "run_trial", "run_trials"]

ORDERS = ("both", "one")
_TIE_POLICIES = ("half", "drop")


@dataclass(frozen=True)
class JudgeNoise:
    """The judge's behaviour: ``tie`` and ``flip`` rates per duel, ``first`` the share of
    position-driven verdicts that favour the first position."""

    tie: float = 0.30
    flip: float = 0.13
    first: float = 1.0

    def __post_init__(self) -> None:
        for name in ("tie", "flip", "first"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0.0 <= float(v) <= 1.0):
                raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")
        if self.tie + self.flip > 1.0:
            raise ValueError(f"tie + flip must be at most 1, got {self.tie + self.flip}")


def _call(kind: int, latent_i: bool, i_first: bool, first_wins: bool) -> float:
    """One call's score of ``i``: ``kind`` 0 tie, 1 position-driven, 2 content-driven."""
    if kind == 0:
        return 0.5
    if kind == 1:
        return 1.0 if i_first == first_wins else 0.0
    return 1.0 if latent_i else 0.0


def duel_score(p: float, noise: JudgeNoise, orders: str, rng: np.random.Generator) -> tuple[float, int]:
    """One duel of ``i`` against ``j`` (``p = P[i, j]``): ``(score of i, judge calls)``."""
    latent_i = bool(rng.random() < p)
    u = rng.random()
    kind = 0 if u < noise.tie else 1 if u < noise.tie + noise.flip else 2
    first_wins = bool(rng.random() < noise.first)
    if orders == "both":
        ab, ba = _call(kind, latent_i, True, first_wins), _call(kind, latent_i, False, first_wins)
        if (ab > 0.5 and ba > 0.5) or (ab < 0.5 and ba < 0.5) or (ab == 0.5 and ba == 0.5):
            return (ab + ba) / 2.0, 2
        return 0.5, 2
    if orders == "one":
        return _call(kind, latent_i, bool(rng.random() < 0.5), first_wins), 1
    raise ValueError(f"orders must be one of {ORDERS}, got {orders!r}")


def expected_score(p: float, noise: JudgeNoise) -> float:
    """The expected score of ``i`` in either mode: ``1/2 + (1 - tie - flip)(p - 1/2)``."""
    return 0.5 + (1.0 - noise.tie - noise.flip) * (p - 0.5)


def run_trial(
    preference: Any,
    noise: JudgeNoise,
    orders: str,
    delta: float,
    seed: int,
    *,
    call_cost: float = 1.0,
    model_costs: Any = None,
    tie_policy: str = "half",
    max_duels: int = 2_000_000,
    **policy_params: Any,
) -> dict[str, Any]:
    """One campaign of ``dctas-pc`` with this judge: winner (None: no certificate or "no Condorcet
    winner"), duels, judge calls, judge spend and whether it stopped. ``model_costs`` (default 1e-3
    each: answers reused) are the models' per-query costs; ``tie_policy`` ``half`` or ``drop``."""
    if orders not in ORDERS:
        raise ValueError(f"orders must be one of {ORDERS}, got {orders!r}")
    if tie_policy not in _TIE_POLICIES:
        raise ValueError(f"tie_policy must be one of {_TIE_POLICIES}, got {tie_policy!r}")
    P = np.asarray(preference, dtype=float)
    L = P.shape[0]
    costs = [1e-3] * L if model_costs is None else list(model_costs)
    per_duel = 2 if orders == "both" else 1
    policy = make_policy("dctas-pc", costs, delta, judge_cost=call_cost * per_duel, **policy_params)
    rng = np.random.default_rng(seed)
    duels = calls = 0
    while not policy.should_stop() and duels < max_duels:
        try:
            i, j = policy.next_pair()
        except NoPairAvailable:
            break
        score, n = duel_score(float(P[i, j]), noise, orders, rng)
        duels += 1
        calls += n
        if score == 0.5 and tie_policy == "drop":
            continue
        policy.record(i, j, score)
    stopped = bool(policy.should_stop())
    winner = policy.recommendation() if stopped and getattr(policy, "verdict", None) is None else None
    return {
        "winner": winner,
        "stopped": stopped,
        "verdict": getattr(policy, "verdict", None),
        "duels": duels,
        "calls": calls,
        "judge_spend": calls * call_cost,
    }


def run_trials(
    preference: Any, noise: JudgeNoise, orders: str, delta: float, trials: int, seed: int = 0, **kw: Any
) -> list[dict[str, Any]]:
    """``trials`` campaigns; trial ``n`` uses the seed stream ``(seed, n)`` in every mode (same seeds)."""
    seeds = np.random.SeedSequence(int(seed)).generate_state(int(trials), dtype=np.uint32)
    return [run_trial(preference, noise, orders, delta, int(s), **kw) for s in seeds]
