"""The certificate tests of dctas-pc: one rule from the option names to the kernels' constants.

A certificate "``m`` is beaten by ``k``" rejects ``H0: p_mk >= 1/2`` at level
``d' = delta / (L - 1)`` with a test that is valid at any stopping time. Three tests,
chosen by the ``threshold`` option of dctas-pc (see ``docs/algorithms.md`` for the
validity argument of each and the measured costs):

``mixture`` (default)
    the grid mixture martingale of :func:`algorithms._kernels.pc_log_mixture` reaches ``1/d'``.
``kk``
    ``n d(phat, 1/2) > 3 log(1 + log n) + C(log(1/d'))``: the single-term threshold of
    Kaufmann and Koolen (2021) with their calibration function ``C``.
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

__all__ = ["PC_THRESHOLDS", "PC_DEFAULTS", "certificate_test", "validate_pc_params"]

PC_THRESHOLDS = {"mixture": kern.PC_MIXTURE, "kk": kern.PC_KK, "stitched": kern.PC_STITCHED}
PC_DEFAULTS: dict[str, Any] = {"threshold": "mixture", "stick": 0.0}


def certificate_test(threshold: str, delta: float, L: int) -> tuple[int, float]:
    """``(rule, c0)`` for :func:`algorithms._kernels.pc_certifies` at ``d' = delta / (L - 1)``."""
    log_inv = math.log((L - 1) / delta)  # log(1/d')
    if threshold == "mixture":
        return kern.PC_MIXTURE, log_inv
    if threshold == "kk":
        return kern.PC_KK, calibration_C(log_inv)
    if threshold == "stitched":
        s, eta = kern.PC_S, kern.PC_ETA
        # log(zeta(s) / (d' log(eta)^s)), written with log(1/d') so that tiny deltas stay finite
        return kern.PC_STITCHED, math.log(float(zeta(s))) + log_inv - s * math.log(math.log(eta))
    raise ValueError(f"unknown certificate threshold {threshold!r}; choose one of {', '.join(PC_THRESHOLDS)}")


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
