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

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "ORDERS",
    "AutoOrders",
    "JudgeNoise",
    "duel_calls",
    "duel_score",
    "expected_score",
    "information_per_call",
    "run_trial",
    "run_trials",
]

ORDERS = ("both", "one", "auto")
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


def duel_calls(p: float, noise: JudgeNoise, orders: str, rng: np.random.Generator) -> tuple[float, list[float]]:
    """One duel of ``i`` against ``j`` (``p = P[i, j]``) in mode ``both`` or ``one``: ``(score of i, the
    calls' scores of i)`` (the ``ab`` call first, then ``ba``)."""
    # four draws in every mode, so that the same stream gives the same duels in every mode
    latent, u, w, side = rng.random(4)
    latent_i = bool(latent < p)
    kind = 0 if u < noise.tie else 1 if u < noise.tie + noise.flip else 2
    first_wins = bool(w < noise.first)
    if orders == "both":
        ab, ba = _call(kind, latent_i, True, first_wins), _call(kind, latent_i, False, first_wins)
        if (ab > 0.5 and ba > 0.5) or (ab < 0.5 and ba < 0.5) or (ab == 0.5 and ba == 0.5):
            return (ab + ba) / 2.0, [ab, ba]
        return 0.5, [ab, ba]
    if orders == "one":
        s = _call(kind, latent_i, bool(side < 0.5), first_wins)
        return s, [s]
    raise ValueError(f"orders must be 'both' or 'one' for one duel, got {orders!r}")


def duel_score(p: float, noise: JudgeNoise, orders: str, rng: np.random.Generator) -> tuple[float, int]:
    """One duel of ``i`` against ``j`` (``p = P[i, j]``): ``(score of i, judge calls)``."""
    score, calls = duel_calls(p, noise, orders, rng)
    return score, len(calls)


def _kl_half(q: float) -> float:
    """KL(Bernoulli(q) || Bernoulli(1/2)) in nats."""
    return sum(x * math.log(2.0 * x) for x in (q, 1.0 - q) if x > 0)


def information_per_call(noise: JudgeNoise, orders: str, p: float) -> float:
    """The growth rate per judge call of the best constant bet on one pair (``p = P[i, j]``), in nats.

    A duel's score lies in {0, 1/2, 1}; a tie moves no wealth, so the best bet on the decisive
    verdicts, which favour ``i`` with probability ``q``, grows by ``KL(q || 1/2)`` per decisive duel
    (Kelly). ``both``: decisive with probability ``1 - tie - flip``, ``q = p``, two calls.
    ``one``: decisive with probability ``1 - tie``, ``q = ((1 - tie - flip) p + flip / 2) / (1 - tie)``,
    one call. As ``p -> 1/2`` (a close pair, the one a certificate pays for) the ratio one / both
    tends to ``2 (1 - tie - flip) / (1 - tie)``: one order is cheaper exactly when
    ``flip < (1 - tie) / 2``.
    """
    c = 1.0 - noise.tie - noise.flip
    if orders == "both":
        return c * _kl_half(p) / 2.0
    if orders == "one":
        d = 1.0 - noise.tie
        return d * _kl_half((c * p + noise.flip / 2.0) / d) if d > 0 else 0.0
    raise ValueError(f"orders must be 'both' or 'one', got {orders!r}")


class AutoOrders:
    """``orders: auto``: which mode judges the next duel, decided from the duels judged before it.

    Each duel judged in both orders gives ``z = 4 (2 v_both - v_one)``, where ``v_both`` is the
    squared distance of the combined score from 1/2 and ``v_one`` the mean of the two calls'
    squared distances. The information per call of a close pair is the squared drift over twice
    the second moment per call (the bet's growth to second order), and the drift is the same in
    both modes, so one order is cheaper exactly when ``E z > 0``: with verdicts 1, 1/2, 0 and
    ``combine: consistent``, ``z`` is 1 for two orders that agree on a winner, -1 for two that
    name different winners (a flip), -1/2 for a winner and a tie, 0 for two ties; ``E z > 0`` is
    ``flip < (1 - tie) / 2`` in the judge model above.

    The rule: fewer than ``min_pairs`` both-order duels in the last ``window``: both orders.
    Otherwise one order when the mean of ``z`` is more than ``z_level`` standard errors above 0
    (the estimated rates say one order is cheaper); then a share of the duels, drawn
    independently of the verdicts, still reads both orders so the rates keep being measured and
    the mode goes back to both when they change: ``monitor`` when the mean is more than
    ``sure_level`` standard errors above 0, ``monitor_unsure`` below that (close to the point
    where the modes cost the same, where a both-order duel costs little more). Else both orders.

    The mode of a duel is a function of earlier verdicts and of an independent draw
    (predictable): the score it records has the same conditional mean in either mode (the
    order-averaged preference), so the test's supermartingale argument holds unchanged.
    """

    def __init__(
        self,
        min_pairs: int = 8,
        z_level: float = 1.3,
        monitor: float = 0.02,
        window: int = 400,
        sure_level: float = 2.0,
        monitor_unsure: float = 0.08,
    ) -> None:
        if not (isinstance(min_pairs, int) and min_pairs >= 1):
            raise ValueError(f"min_pairs must be an integer >= 1, got {min_pairs!r}")
        for name, v in (("monitor", monitor), ("monitor_unsure", monitor_unsure)):
            if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")
        if not (0.0 <= z_level <= sure_level):
            raise ValueError(f"need 0 <= z_level <= sure_level, got {z_level!r}, {sure_level!r}")
        if not (isinstance(window, int) and window >= min_pairs):
            raise ValueError(f"window must be an integer >= min_pairs, got {window!r}")
        self.min_pairs, self.z_level, self.sure_level, self.window = (
            min_pairs,
            float(z_level),
            float(sure_level),
            window,
        )
        self.monitor, self.monitor_unsure = float(monitor), float(monitor_unsure)
        self._z: deque[float] = deque(maxlen=window)
        self._sum = self._sq = 0.0
        self.duels = {"both": 0, "one": 0}

    @staticmethod
    def evidence(ab: float, ba: float, combined: float) -> float:
        """``z`` of one duel judged in both orders: the scores of one answer from each call and combined."""
        v_one = ((ab - 0.5) ** 2 + (ba - 0.5) ** 2) / 2.0
        return 4.0 * (2.0 * (combined - 0.5) ** 2 - v_one)

    def observe(self, ab: float, ba: float, combined: float) -> None:
        """Count a duel judged in both orders."""
        if len(self._z) == self.window:
            old = self._z[0]
            self._sum -= old
            self._sq -= old * old
        z = self.evidence(ab, ba, combined)
        self._z.append(z)
        self._sum += z
        self._sq += z * z

    def margin(self) -> float | None:
        """The mean of ``z`` over its standard error in the window (None: fewer than ``min_pairs``)."""
        n = len(self._z)
        if n < self.min_pairs:
            return None
        mean = self._sum / n
        var = max(self._sq / n - mean * mean, 0.0) * n / max(n - 1, 1)
        return mean / math.sqrt(max(var, 0.01) / n)

    def mode(self, u: float) -> str:
        """The next duel's mode; ``u`` a uniform draw independent of the verdicts (the monitoring draw)."""
        m = self.margin()
        if m is None or m <= self.z_level:
            out = "both"
        else:
            share = self.monitor if m > self.sure_level else self.monitor_unsure
            out = "both" if u < share else "one"
        self.duels[out] += 1
        return out

    @property
    def pairs(self) -> int:
        """Both-order duels in the window."""
        return len(self._z)


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
    auto_params: dict[str, Any] | None = None,
    **policy_params: Any,
) -> dict[str, Any]:
    """One campaign of ``dctas-pc`` with this judge: winner (None: no certificate or "no Condorcet
    winner"), duels, judge calls, judge spend, whether it stopped and the duels per mode (``modes``);
    ``orders`` ``both``, ``one`` or ``auto`` (:class:`AutoOrders` with ``auto_params``). ``model_costs`` (default 1e-3
    each: answers reused) are the models' per-query costs; ``tie_policy`` ``half`` or ``drop``."""
    if orders not in ORDERS:
        raise ValueError(f"orders must be one of {ORDERS}, got {orders!r}")
    if tie_policy not in _TIE_POLICIES:
        raise ValueError(f"tie_policy must be one of {_TIE_POLICIES}, got {tie_policy!r}")
    from .policies import NoPairAvailable, make_policy  # here: AutoOrders alone (a judge's) needs no kernels

    P = np.asarray(preference, dtype=float)
    L = P.shape[0]
    costs = [1e-3] * L if model_costs is None else list(model_costs)
    per_duel = 1 if orders == "one" else 2  # auto: told the cost of its first mode, as the service does
    policy = make_policy("dctas-pc", costs, delta, judge_cost=call_cost * per_duel, **policy_params)
    streams: dict[tuple[int, int], np.random.Generator] = {}  # one stream per pair: the k-th duel of a pair
    auto = AutoOrders(**(auto_params or {})) if orders == "auto" else None
    draws = np.random.default_rng([seed, 1])  # the monitoring draws: independent of the verdicts
    duels = calls = 0
    while not policy.should_stop() and duels < max_duels:
        try:
            i, j = policy.next_pair()
        except NoPairAvailable:
            break
        mode = orders if auto is None else auto.mode(float(draws.random()))
        rng = streams.get((i, j))
        if rng is None:
            rng = streams[(i, j)] = np.random.default_rng([seed, 2, i, j])
        score, scores = duel_calls(float(P[i, j]), noise, mode, rng)
        if auto is not None and mode == "both":
            auto.observe(scores[0], scores[1], score)
        duels += 1
        calls += len(scores)
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
        "modes": dict(auto.duels) if auto is not None else {orders: duels},
    }


def run_trials(
    preference: Any, noise: JudgeNoise, orders: str, delta: float, trials: int, seed: int = 0, **kw: Any
) -> list[dict[str, Any]]:
    """``trials`` campaigns; trial ``n`` uses the seed stream ``(seed, n)`` in every mode (same seeds)."""
    seeds = np.random.SeedSequence(int(seed)).generate_state(int(trials), dtype=np.uint32)
    return [run_trial(preference, noise, orders, delta, int(s), **kw) for s in seeds]
