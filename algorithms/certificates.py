"""The certificate tests of dctas-pc: one rule from the option names to the kernels' constants.

A certificate "``m`` is beaten by ``k``" rejects ``H0: p_mk >= 1/2`` at level
``d' = delta / L`` with a test that is valid at any stopping time (the ``level`` option;
``delta / (L - 1)`` for the states stored before, whose verdicts were bounded only when a
Condorcet winner exists: docs/algorithms.md, "Validity"). Five tests,
chosen by the ``threshold`` option of dctas-pc (see ``docs/algorithms.md`` for the
validity argument of each and the measured costs):

``betting`` (default)
    a diversified-Kelly mixture of betting martingales (Waudby-Smith and Ramdas 2024) with
    a prior focused on gaps 0.018 to 0.26 reaches ``1/d'``; ties are neutral (a factor of 1),
    so tie-heavy pairs certify sooner (:func:`algorithms._kernels.pc_bet_log_wealth`). With it,
    dctas-pc also bounds the near-tie weight of its sampling rule (``PC_TIE_CAP``) and explores
    the pairs outside the leader's at half the rate (``PC_EXPLORE``).
``mixture`` (the default before ``betting``; stored states without a ``threshold`` use it)
    the grid mixture martingale of :func:`algorithms._kernels.pc_log_mixture` reaches ``1/d'``.
``kk``
    ``n d(phat, 1/2) > 3 log(1 + log n) + C(log(1/d'))``: the single-term threshold of
    Kaufmann and Koolen (2021) with their calibration function ``C``.
``portfolio``
    one Ville level ``delta`` shared by the models instead of ``delta / L`` each: every model is a
    candidate whose ``L - 1`` bets (the betting test's mixture) are paid for once from a pool
    that goes mostly to the current leader as its evidence grows
    (:func:`algorithms._kernels.pc_port_pay`); the ``level`` option does not apply.
``stitched``
    ``n/2 - x >= k1 sqrt(v l(v))``, ``v = max(n/4, m)``: the polynomial stitched boundary of
    Howard, Ramdas, McAuliffe and Sekhon (2021) for a sub-Gaussian (Hoeffding) sum with
    variance clock ``n/4``, ``eta = 2``, ``s = 1.4``, ``m = 4``.

The ``stick`` option (nats, default 0) makes the leader sticky; see :func:`algorithms._kernels.pc_track_leader`.
"""

from __future__ import annotations

import math
from typing import Any

from scipy.special import zeta

from . import _kernels as kern
from .thresholds import calibration_C

__all__ = [
    "PC_THRESHOLDS",
    "PC_DEFAULTS",
    "PC_LEGACY_THRESHOLD",
    "certificate_test",
    "certificate_log_stat",
    "certified_top",
    "tie_cap_for",
    "explore_for",
    "validate_pc_params",
    "validate_pc_level",
    "resolve_pc_level",
    "product_levels",
    "no_winner_log_level",
    "certificate_log_level",
    "PC_LEVELS",
    "PC_LEGACY_LEVEL",
]

PC_THRESHOLDS = {
    "betting": kern.PC_BETTING,
    "mixture": kern.PC_MIXTURE,
    "kk": kern.PC_KK,
    "stitched": kern.PC_STITCHED,
    "portfolio": kern.PC_PORTFOLIO,
}
PC_DEFAULTS: dict[str, Any] = {"threshold": "betting", "stick": 0.0, "level": "auto"}
#: the test of a stored dctas-pc state that names none (states written before ``betting`` became the default)
PC_LEGACY_THRESHOLD = "mixture"
#: each certificate's level ``delta / divisor``: ``delta/L`` bounds every verdict by delta (the union over the
#: ``L`` models that could be named wrongly when no Condorcet winner exists); ``delta/(L-1)`` is the level of
#: the states stored before, which bounds only the verdicts on instances with a Condorcet winner
#: ``product`` (the default where it holds, chosen by ``auto``): each certificate at the level ``alpha`` of
#: :func:`product_levels`, which rests on the independence of the pairs' outcomes (sampling with replacement)
PC_LEVELS = ("delta/L", "delta/(L-1)", "product")
#: the level of a stored dctas-pc state that names none
PC_LEGACY_LEVEL = "delta/(L-1)"
#: the levels a hybrid campaign may use (its AIPW tests are not covered by the product argument)
PC_UNION_LEVELS = ("delta/L", "delta/(L-1)")
#: the tests whose certificates are nonnegative supermartingales of one pair's outcomes (the product argument)
PC_PRODUCT_TESTS = ("betting", "mixture")
#: near-tie weight bound of :func:`algorithms._kernels.pc_choose` per test (0: unbounded, today's rule)
PC_TIE_CAP = {"betting": 1.0, "portfolio": 1.0}


#: forced exploration of :func:`algorithms._kernels.pc_choose` per test: (mode, fraction); (0, 1.0) is today's rule
PC_EXPLORE = {"betting": (2, 0.5), "portfolio": (2, 0.5)}


def explore_for(threshold: str) -> tuple[int, float]:
    """``(explore, explore_frac)`` of :func:`algorithms._kernels.pc_choose` that go with a certificate test."""
    mode, frac = PC_EXPLORE.get(threshold, (0, 1.0))
    return int(mode), float(frac)


def tie_cap_for(threshold: str) -> float:
    """The ``tie_cap`` of :func:`algorithms._kernels.pc_choose` that goes with a certificate test."""
    return float(PC_TIE_CAP.get(threshold, 0.0))


def validate_pc_level(level: Any, allowed: tuple[str, ...] = PC_LEVELS) -> str:
    """Check dctas-pc's ``level`` option (``"auto"`` or one of ``allowed``); ``ValueError`` with a message when it is bad."""
    if level != "auto" and level not in allowed:
        raise ValueError(f"unknown certificate level {level!r}; choose auto or one of {', '.join(allowed)}")
    return str(level)


def resolve_pc_level(level: Any, *, threshold: str, population: int | None, goal: str = "winner") -> str:
    """The level a dctas-pc policy runs at: ``auto`` is ``product`` where its argument holds (sampling with
    replacement, a betting or mixture test, the winner goal; docs/algorithms.md, "The product level") and
    ``delta/L`` elsewhere; an explicit ``product`` where it does not hold is a ``ValueError``."""
    level = validate_pc_level(level)
    holds = population is None and threshold in PC_PRODUCT_TESTS and goal == "winner"
    if level == "auto":
        return "product" if holds else "delta/L"
    if level == "product" and not holds:
        raise ValueError(
            "level product needs sampling with replacement, the winner goal and the betting or mixture test "
            f"(got {'without replacement' if population is not None else 'with replacement'}, goal {goal}, "
            f"threshold {threshold}); use delta/L"
        )
    return level


def product_levels(delta: float, L: int) -> tuple[float, float]:
    """``(alpha, beta)`` of the ``product`` level for ``L`` models (docs/algorithms.md, "The product level").

    ``alpha``, each certificate's level, solves ``3 alpha + (L - 3) alpha^2 = delta`` (``delta / L`` for
    ``L <= 3``): on an instance without a Condorcet winner at most three models can be named with a single
    false certificate, every other name needs two on independent pairs (probability ``alpha^2``).
    ``beta = min(alpha, (2 alpha - alpha^2) / (L - 2))`` is the level at which every model must be beaten
    for the verdict "no Condorcet winner", so that with a winner ``alpha + (L - 2) (alpha^2 + beta) <= delta``.
    """
    if not (0.0 < delta < 1.0) or L < 2:
        raise ValueError(f"product_levels needs 0 < delta < 1 and L >= 2, got delta={delta!r}, L={L!r}")
    if L <= 3:
        alpha = delta / L
        return alpha, alpha
    alpha = 2.0 * delta / (3.0 + math.sqrt(9.0 + 4.0 * (L - 3) * delta))  # the root, written without cancellation
    return alpha, min(alpha, (2.0 * alpha - alpha * alpha) / (L - 2))


def certificate_log_level(delta: float, L: int, level: str = "delta/L") -> float:
    """``log(1/d')``: ``log(L / delta)`` for ``level = "delta/L"``, ``log((L - 1) / delta)`` for the legacy level,
    ``log(1 / alpha)`` for ``product`` (:func:`product_levels`).

    A certificate is issued when its test's log-wealth reaches this value.
    """
    level = validate_pc_level(level)
    if level == "product":
        return -math.log(product_levels(delta, L)[0])
    if level == "auto":
        raise ValueError("certificate_log_level needs a resolved level (resolve_pc_level), not auto")
    divisor = L if level == "delta/L" else L - 1
    return math.log(divisor / delta)


def no_winner_log_level(delta: float, L: int, level: str) -> float:
    """The log-wealth at which every model must be beaten for the verdict "no Condorcet winner": ``log(1/beta)``
    at the ``product`` level when ``beta < alpha`` (``L >= 4``), else 0 (the certificates' own level suffices)."""
    if level != "product":
        return 0.0
    alpha, beta = product_levels(delta, L)
    return -math.log(beta) if beta < alpha else 0.0


def certificate_test(threshold: str, delta: float, L: int, level: str = "delta/L") -> tuple[int, float]:
    """``(rule, c0)`` for :func:`algorithms._kernels.pc_certifies` at ``d' = delta / L`` (``level``)."""
    log_inv = certificate_log_level(delta, L, level)  # log(1/d')
    if threshold == "betting":
        return kern.PC_BETTING, log_inv
    if threshold == "mixture":
        return kern.PC_MIXTURE, log_inv
    if threshold == "portfolio":
        # one level delta shared by the models (docs/algorithms.md, "The portfolio test"); no level option
        return kern.PC_PORTFOLIO, math.log(1.0 / delta)
    if threshold == "kk":
        return kern.PC_KK, calibration_C(log_inv)
    if threshold == "stitched":
        s, eta = kern.PC_S, kern.PC_ETA
        # log(zeta(s) / (d' log(eta)^s)), written with log(1/d') so that tiny deltas stay finite
        return kern.PC_STITCHED, math.log(float(zeta(s))) + log_inv - s * math.log(math.log(eta))
    raise ValueError(f"unknown certificate threshold {threshold!r}; choose one of {', '.join(PC_THRESHOLDS)}")


def certificate_log_stat(n: float, x: float, rule: int) -> float:
    """The statistic of :func:`algorithms._kernels.pc_certifies` on a log scale, so that the test
    certifies "beaten" (for ``x < n/2``) exactly when it reaches the test's ``c0``.

    ``PC_MIXTURE``: ``log M_n`` (the log-wealth of the mixture martingale).
    ``PC_KK``: ``n d(x/n, 1/2) - 3 log(1 + log n)`` (0 for the divergence when ``x >= n/2``).
    ``PC_STITCHED``: ``(n/2 - x)_+^2 / (k1^2 v) - s log log(eta v / m)``: the boundary
    ``n/2 - x >= k1 sqrt(v l(v))`` squared and moved to the side of the statistic.
    0 for a pair never compared.
    """
    if n <= 0:
        return 0.0
    if rule == kern.PC_MIXTURE:
        return float(kern.pc_log_mixture(float(n), float(x)))
    if rule == kern.PC_KK:
        div = float(kern.kl_half(x / n)) if x < 0.5 * n else 0.0
        return n * div - 3.0 * math.log(1.0 + math.log(n)) if n >= 1.0 else n * div
    v = max(0.25 * n, kern.PC_VMIN)
    gap = max(0.0, 0.5 * n - x)
    return gap * gap / (kern.PC_K1**2 * v) - kern.PC_S * math.log(math.log(kern.PC_ETA * v / kern.PC_VMIN))


def validate_pc_params(threshold: Any, stick: Any) -> tuple[str, float]:
    """Check the dctas-pc options; ``ValueError`` with a message when one is bad."""
    if threshold not in PC_THRESHOLDS:
        raise ValueError(f"unknown certificate threshold {threshold!r}; choose one of {', '.join(PC_THRESHOLDS)}")
    try:
        st = float(stick)
    except (TypeError, ValueError):
        raise ValueError(f"stick must be a number >= 0 (nats), got {stick!r}") from None
    if not (math.isfinite(st) and st >= 0.0):
        raise ValueError(f"stick must be a finite number >= 0 (nats), got {stick!r}")
    return str(threshold), st


def certified_top(certificates: Any, L: int) -> list[int]:
    """The arms that reach every other arm through certified wins (``certificates``: ``[winner, loser]`` pairs).

    If every certificate is right, each such arm reaches every arm by a path of true
    ``p > 1/2`` edges, so it is in the top cycle (the smallest set whose members all beat
    every non-member). It fails only if a certificate "t beaten by u" with ``t`` in the top
    cycle and ``u`` outside is wrong: at most ``s (L - s) delta / L`` for a top cycle of
    ``s`` arms (docs/algorithms.md, "What the pages show beside a verdict"). Arms not listed
    may be in the top cycle too (their missing edges are undecided).
    """
    beats: list[set[int]] = [set() for _ in range(L)]
    for w, lo in certificates or []:
        beats[int(w)].add(int(lo))
    out = []
    for m in range(L):
        seen, stack = {m}, [m]
        while stack:
            for n in beats[stack.pop()]:
                if n not in seen:
                    seen.add(n)
                    stack.append(n)
        if len(seen) == L:
            out.append(m)
    return out
