"""Stopping thresholds and confidence radii.

* ``beta(t, delta, L)``: the GLR threshold of the paper (Section 3.2)::

      beta(t, delta) = 3 (L-1) log(1 + log(t / (L-1))) + (L-1) C(log((L-1)/delta) / (L-1))

  with ``C`` the calibration function of Kaufmann and Koolen (2021), the
  paper's Definition 1 (``def: C_exp``).
* ``hoeffding_radius_dctac`` and ``hoeffding_radius_dpca``: the confidence radii
  of the DCTAC stopping rule and of DPCA (paper, Appendix B).

All functions validate their inputs and raise ``ValueError`` with a message.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "h",
    "h_inverse",
    "h_tilde",
    "calibration_C",
    "beta_constant",
    "beta_time_term",
    "beta",
    "hoeffding_radius_dctac",
    "hoeffding_radius_dpca",
]


def h(u: float) -> float:
    """``h(u) = u - log(u)`` (Definition 1), defined for ``u > 0``."""
    if not u > 0:
        raise ValueError(f"h(u) needs u > 0, got {u!r}")
    return u - math.log(u)


def h_inverse(x: float) -> float:
    """Inverse of ``h`` on ``u >= 1``: ``h^{-1}(x) = -W_{-1}(-e^{-x})`` for ``x >= 1``.

    Uses the lower branch of Lambert W. Guards both numerical edges:
    at ``x = 1`` (scipy returns NaN; the answer is 1) and for large ``x``
    (``e^{-x}`` underflows), where a few Newton steps on ``u - log u = x``
    started from ``u = x + log x`` are used instead.
    """
    x = float(x)
    if not math.isfinite(x) or x < 1.0:
        raise ValueError(f"h_inverse(x) needs a finite x >= 1, got {x!r}")
    if x == 1.0:
        return 1.0
    if x < 700.0:
        from scipy.special import lambertw  # here: importing scipy.special costs a light import (the CLI) a second

        u = float((-lambertw(-math.exp(-x), k=-1)).real)
        if math.isfinite(u) and u >= 1.0 and abs(u - math.log(u) - x) <= 1e-12 * x:
            return u
        if x > 2.0:
            u = x + math.log(x)
        else:
            # near the branch point (x close to 1) Lambert W loses accuracy and
            # Newton's derivative vanishes: bisect on [1, 4], where h(4) > 2.
            lo, hi = 1.0, 4.0
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                if mid - math.log(mid) < x:
                    lo = mid
                else:
                    hi = mid
            return 0.5 * (lo + hi)
    else:
        u = x + math.log(x)
    for _ in range(50):
        step = (u - math.log(u) - x) / (1.0 - 1.0 / u)
        u -= step
        if abs(step) <= 1e-15 * u:
            break
    return u


def h_tilde(z: float, x: float) -> float:
    """``htilde_z(x)`` of Definition 1.

    ``exp(1/h^{-1}(x)) h^{-1}(x)`` when ``x >= h(1/log z)``, else
    ``z (x - log log z)``; equal to ``min over lambda in (1, z] of
    lambda (x - log log lambda)``, continuous in ``x``.
    """
    if not z > 1:
        raise ValueError(f"h_tilde needs z > 1, got {z!r}")
    if x >= h(1.0 / math.log(z)):
        u = h_inverse(x)
        return math.exp(1.0 / u) * u
    return z * (x - math.log(math.log(z)))


def calibration_C(x: float) -> float:
    """Kaufmann-Koolen calibration ``C(x) = 2 htilde_{3/2}((h^{-1}(1+x) + log(pi^2/3)) / 2)``."""
    x = float(x)
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"calibration_C(x) needs a finite x >= 0, got {x!r}")
    return 2.0 * h_tilde(1.5, (h_inverse(1.0 + x) + math.log(math.pi**2 / 3.0)) / 2.0)


#: The smallest accepted delta. Below it log(1/delta) nears the largest float's
#: logarithm, the calibration C(x) and the lower bound overflow to infinity, and no
#: campaign could ever stop; 1e-300 keeps every threshold finite (tests/algorithms/test_thresholds.py).
DELTA_MIN = 1e-300


def delta_problem(delta: float) -> str | None:
    """Why ``delta`` is not an accepted error probability, or None when it is (the one rule)."""
    if not (DELTA_MIN <= delta < 1.0):
        return f"delta must be in [{DELTA_MIN:g}, 1), got {delta!r}"
    return None


def _check_delta(delta: float) -> float:
    delta = float(delta)
    problem = delta_problem(delta)
    if problem:
        raise ValueError(problem)
    return delta


def _check_L(L: int) -> int:
    if int(L) != L or L < 2:
        raise ValueError(f"the number of arms L must be an integer >= 2, got {L!r}")
    return int(L)


def beta_constant(delta: float, L: int) -> float:
    """The time-independent part ``(L-1) C(log((L-1)/delta) / (L-1))`` of beta."""
    delta, L = _check_delta(delta), _check_L(L)
    return (L - 1) * calibration_C(math.log((L - 1) / delta) / (L - 1))


def beta_time_term(t: float, L: int) -> float:
    """The time part ``3 (L-1) log(1 + log(t / (L-1)))``, with ``t`` floored at ``L-1``.

    The floor keeps ``1 + log(t/(L-1)) >= 1`` (the paper's formula is undefined for
    ``t < (L-1)/e``); every policy samples all ``L(L-1)/2 >= L-1`` pairs before the
    first stopping check, so the floor never binds in practice.
    """
    ratio = max(float(t), float(L - 1)) / (L - 1)
    return 3.0 * (L - 1) * math.log(1.0 + math.log(ratio))


def beta(t: float, delta: float, L: int) -> float:
    """GLR stopping threshold ``beta(t, delta)`` for ``L`` arms (paper, Section 3.2)."""
    L = _check_L(L)
    if not t >= 0:
        raise ValueError(f"t must be >= 0, got {t!r}")
    return beta_time_term(t, L) + beta_constant(delta, L)


def hoeffding_radius_dctac(n: np.ndarray | int, delta: float, L: int) -> np.ndarray | float:
    """DCTAC radius ``sqrt(log(2 pi^2 N^2 binom(L,2) / (6 delta)) / (2N))`` (Appendix B)."""
    delta, L = _check_delta(delta), _check_L(L)
    n = np.asarray(n, dtype=float)
    if np.any(n < 1):
        raise ValueError("the number of comparisons N must be >= 1")
    K = L * (L - 1) / 2
    r = np.sqrt(np.log(2 * math.pi**2 * n**2 * K / (6 * delta)) / (2 * n))
    return float(r) if r.ndim == 0 else r


def hoeffding_radius_dpca(n: np.ndarray | int, delta: float, L: int) -> np.ndarray | float:
    """DPCA radius ``sqrt(log(2 N^2 L^2 / delta) / (2N))`` (Appendix B, Algorithms 3-4)."""
    delta, L = _check_delta(delta), _check_L(L)
    n = np.asarray(n, dtype=float)
    if np.any(n < 1):
        raise ValueError("the number of comparisons N must be >= 1")
    r = np.sqrt(np.log(2 * n**2 * L**2 / delta) / (2 * n))
    return float(r) if r.ndim == 0 else r
