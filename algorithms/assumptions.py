"""Structural assumptions on a dueling-bandit preference matrix.

The checks follow Appendix C of the paper (definitions after Bengs, Busa-Fekete,
El Mesaoudi-Paul and Huellermeier, "Preference-based online learning with dueling
bandits: a survey", JMLR 2021). With ``Delta = P - 1/2``:

* **LNM** (low noise model): ``Delta_ij > 0`` implies
  ``sum_k Delta_ik > sum_k Delta_jk``.
* **TO** (total ordering): there is a total order ``>`` of the arms with
  ``Delta_ij > 0`` whenever ``i > j``. For a complete preference matrix this is
  "no pair is exactly tied and the majority relation has no cycle".
* **SST**: ``Delta_ij > 0, Delta_jk > 0`` implies ``Delta_ik >= max(Delta_ij, Delta_jk)``.
* **gamma-RST**: the same with ``Delta_ik >= gamma * max(Delta_ij, Delta_jk)`` for some
  ``gamma in (0, 1]``; we report the largest such gamma,
  ``min Delta_ik / max(Delta_ij, Delta_jk)`` over the qualifying triples (capped at 1;
  1 when there is no qualifying triple). It holds when that gamma is positive.
* **MST**: ``... implies Delta_ik >= min(Delta_ij, Delta_jk)``.
* **WST**: ``... implies Delta_ik > 0`` (strict, as the paper writes it).
* **STI** (stochastic triangle inequality): assuming a total order, for all
  ``i > j > k``: ``Delta_ik <= Delta_ij + Delta_jk``. Without a total order the
  paper reports "NA"; we report ``holds = False`` with ``applicable = False``.
* **GIA** (general identifiability): some arm ``i*`` has, for every ``j != i*``,
  ``min_k (Delta_{i*,k} - Delta_{j,k}) > 0`` (k ranges over all arms, diagonal
  ``Delta_kk = 0`` included, exactly as in the paper's formula).
* **CW** (Condorcet winner): some arm ``i`` has ``Delta_ij > 0`` for all ``j != i``.

Every check returns a dict ``{"holds": bool, "example": dict | None, ...}``; the
example is the most severe violation (by the margin named in ``"margin"``), with arm
indices, or with names when :func:`check_assumptions` is given ``names``; pair and
triple conditions also report the number of violating pairs/triples (``"violations"``). Pure numpy;
``O(L^3)`` memory and time, fine for a few hundred arms.

Comparisons treat ``|Delta| <= tol`` as an exact tie (``tol`` defaults to 1e-12 to
absorb floating-point noise only).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = [
    "ASSUMPTIONS",
    "as_preference",
    "low_noise_model",
    "total_order",
    "strong_stochastic_transitivity",
    "relaxed_stochastic_transitivity",
    "moderate_stochastic_transitivity",
    "weak_stochastic_transitivity",
    "stochastic_triangle_inequality",
    "general_identifiability",
    "condorcet_winner",
    "majority_order",
    "check_assumptions",
]

DEFAULT_TOL = 1e-12

#: key -> long name, in the paper's order
ASSUMPTIONS: dict[str, str] = {
    "LNM": "Low Noise Model",
    "TO": "Total Ordering",
    "SST": "Strong Stochastic Transitivity",
    "gamma-RST": "gamma-Relaxed Stochastic Transitivity",
    "MST": "Moderate Stochastic Transitivity",
    "WST": "Weak Stochastic Transitivity",
    "STI": "Stochastic Triangle Inequality",
    "GIA": "General Identifiability Assumption",
    "CW": "Condorcet Winner",
}


def as_preference(P: Any) -> np.ndarray:
    """Validate and return ``P`` as a float ``LxL`` array.

    Requires a square matrix with entries in ``[0, 1]``, diagonal ``1/2`` and
    ``P + P.T == 1`` (to 1e-6). Raises ``ValueError`` with a one-line message.
    """
    A = np.asarray(P, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
        raise ValueError(f"preference matrix must be square, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError("preference matrix has non-finite entries")
    if np.any(A < 0) or np.any(A > 1):
        raise ValueError("preference entries must lie in [0, 1]")
    if not np.allclose(np.diag(A), 0.5, atol=1e-9):
        raise ValueError("preference diagonal must be 0.5")
    if not np.allclose(A + A.T, 1.0, atol=1e-6):
        i, j = np.unravel_index(np.argmax(np.abs(A + A.T - 1.0)), A.shape)
        raise ValueError(
            f"preference matrix is not complementary: P[{i}][{j}] + P[{j}][{i}] = {A[i, j] + A[j, i]:.6g}, expected 1"
        )
    return A


def _delta(P: Any) -> np.ndarray:
    return as_preference(P) - 0.5


def _chain_mask(D: np.ndarray, tol: float) -> np.ndarray:
    """Boolean [i, j, k]: Delta_ij > 0 and Delta_jk > 0."""
    pos = D > tol
    return pos[:, :, None] & pos[None, :, :]


def _triple_check(D: np.ndarray, margin: np.ndarray, tol: float) -> dict:
    """Generic triple check: violated where chain holds and margin < -tol."""
    chain = _chain_mask(D, tol)
    bad = chain & (margin < -tol)
    if not bad.any():
        return {"holds": True, "example": None}
    m = np.where(bad, margin, np.inf)
    i, j, k = np.unravel_index(int(np.argmin(m)), m.shape)
    return {
        "holds": False,
        "example": {"i": int(i), "j": int(j), "k": int(k)},
        "margin": float(margin[i, j, k]),
        "violations": int(bad.sum()),
    }


def majority_order(P: Any, tol: float = DEFAULT_TOL) -> list[int]:
    """Arms sorted by Copeland score (number of strict wins), best first; ties by index."""
    D = _delta(P)
    wins = (D > tol).sum(axis=1)
    return [int(x) for x in sorted(range(len(wins)), key=lambda a: (-wins[a], a))]


def low_noise_model(P: Any, tol: float = DEFAULT_TOL) -> dict:
    """LNM: ``Delta_ij > 0  =>  sum_k Delta_ik > sum_k Delta_jk``.

    Example ``{"i", "j"}``: i beats j but i's row sum is not larger (margin =
    rowsum_i - rowsum_j, most negative reported).
    """
    D = _delta(P)
    r = D.sum(axis=1)
    margin = r[:, None] - r[None, :]
    bad = (D > tol) & (margin <= tol)
    if not bad.any():
        return {"holds": True, "example": None}
    m = np.where(bad, margin, np.inf)
    i, j = np.unravel_index(int(np.argmin(m)), m.shape)
    return {
        "holds": False,
        "example": {"i": int(i), "j": int(j)},
        "margin": float(margin[i, j]),
        "violations": int(bad.sum()),
    }


def total_order(P: Any, tol: float = DEFAULT_TOL) -> dict:
    """TO: the strict majority relation ``Delta_ij > 0`` is a strict total order.

    Fails on an exactly tied pair (example ``{"i", "j", "tie": True}``) or on a
    preference cycle (example ``{"i", "j", "k"}`` with i beats j, j beats k and k
    beats i). When it holds, ``"order"`` lists the arms best first.
    """
    D = _delta(P)
    L = D.shape[0]
    off = ~np.eye(L, dtype=bool)
    tie = off & (np.abs(D) <= tol)
    if tie.any():
        i, j = np.argwhere(tie)[0]
        return {"holds": False, "example": {"i": int(i), "j": int(j), "tie": True}}
    pos = D > tol
    cyc = pos[:, :, None] & pos[None, :, :] & pos.T[:, None, :]  # i>j, j>k, k>i
    if cyc.any():
        i, j, k = np.argwhere(cyc)[0]
        return {"holds": False, "example": {"i": int(i), "j": int(j), "k": int(k)}}
    return {"holds": True, "example": None, "order": majority_order(P, tol)}


def strong_stochastic_transitivity(P: Any, tol: float = DEFAULT_TOL) -> dict:
    """SST: ``Delta_ij, Delta_jk > 0  =>  Delta_ik >= max(Delta_ij, Delta_jk)``."""
    D = _delta(P)
    margin = D[:, None, :] - np.maximum(D[:, :, None], D[None, :, :])
    return _triple_check(D, margin, tol)


def moderate_stochastic_transitivity(P: Any, tol: float = DEFAULT_TOL) -> dict:
    """MST: ``Delta_ij, Delta_jk > 0  =>  Delta_ik >= min(Delta_ij, Delta_jk)``."""
    D = _delta(P)
    margin = D[:, None, :] - np.minimum(D[:, :, None], D[None, :, :])
    return _triple_check(D, margin, tol)


def weak_stochastic_transitivity(P: Any, tol: float = DEFAULT_TOL) -> dict:
    """WST: ``Delta_ij, Delta_jk > 0  =>  Delta_ik > 0`` (strict, as in the paper)."""
    D = _delta(P)
    chain = _chain_mask(D, tol)
    Dik = np.broadcast_to(D[:, None, :], chain.shape)
    bad = chain & (Dik <= tol)
    if not bad.any():
        return {"holds": True, "example": None}
    m = np.where(bad, Dik, np.inf)
    i, j, k = np.unravel_index(int(np.argmin(m)), m.shape)
    return {
        "holds": False,
        "example": {"i": int(i), "j": int(j), "k": int(k)},
        "margin": float(D[i, k]),
        "violations": int(bad.sum()),
    }


def relaxed_stochastic_transitivity(P: Any, tol: float = DEFAULT_TOL) -> dict:
    """gamma-RST with the largest gamma.

    ``gamma* = min Delta_ik / max(Delta_ij, Delta_jk)`` over triples with
    ``Delta_ij, Delta_jk > 0``, capped at 1 (1 if no such triple). Holds iff
    ``gamma* > 0``. The example is the triple attaining the minimum (when it fails,
    a triple with ``Delta_ik <= 0``).
    """
    D = _delta(P)
    chain = _chain_mask(D, tol)
    if not chain.any():
        return {"holds": True, "example": None, "gamma": 1.0}
    den = np.maximum(D[:, :, None], D[None, :, :])
    ratio = np.where(chain, D[:, None, :] / np.where(chain, den, 1.0), np.inf)
    idx = int(np.argmin(ratio))
    i, j, k = np.unravel_index(idx, ratio.shape)
    g = float(ratio[i, j, k])
    holds = bool(D[i, k] > tol)
    out: dict = {"holds": holds, "gamma": float(min(g, 1.0)) if holds else 0.0}
    out["example"] = None if holds else {"i": int(i), "j": int(j), "k": int(k)}
    if holds:
        out["binding"] = {"i": int(i), "j": int(j), "k": int(k)}
    else:
        out["margin"] = float(D[i, k])
    return out


def stochastic_triangle_inequality(P: Any, tol: float = DEFAULT_TOL) -> dict:
    """STI: under a total order, ``Delta_ik <= Delta_ij + Delta_jk`` for ``i > j > k``.

    Without a total order the property is not defined (the paper's "NA"): we return
    ``holds = False, applicable = False`` and TO's counterexample.
    """
    to = total_order(P, tol)
    if not to["holds"]:
        return {"holds": False, "applicable": False, "example": to["example"], "reason": "no total order"}
    D = _delta(P)
    L = D.shape[0]
    rank = np.empty(L, dtype=int)
    rank[np.asarray(to["order"])] = np.arange(L)
    # i above j above k in the order
    above = rank[:, None] < rank[None, :]
    mask = above[:, :, None] & above[None, :, :]
    margin = D[:, :, None] + D[None, :, :] - D[:, None, :]  # Delta_ij + Delta_jk - Delta_ik
    bad = mask & (margin < -tol)
    if not bad.any():
        return {"holds": True, "applicable": True, "example": None}
    m = np.where(bad, margin, np.inf)
    i, j, k = np.unravel_index(int(np.argmin(m)), m.shape)
    return {
        "holds": False,
        "applicable": True,
        "example": {"i": int(i), "j": int(j), "k": int(k)},
        "margin": float(margin[i, j, k]),
        "violations": int(bad.sum()),
    }


def general_identifiability(P: Any, tol: float = DEFAULT_TOL) -> dict:
    """GIA: some ``i*`` with ``Delta_{i*,k} > Delta_{j,k}`` for all ``j != i*`` and all k.

    Taking ``k = j`` shows that ``i*`` must be the Condorcet winner. Reports ``"arm"``
    (the identifiable arm) when it holds; otherwise the example is ``{"i", "j", "k"}``
    with ``Delta_ik <= Delta_jk``, for ``i`` the Condorcet winner if there is one, else
    the arm with the largest worst-case margin.
    """
    D = _delta(P)
    L = D.shape[0]
    if L == 1:
        return {"holds": True, "example": None, "arm": 0}
    # margin[i, j] = min_k (D[i, k] - D[j, k])
    diff = D[:, None, :] - D[None, :, :]
    margin = diff.min(axis=2)
    np.fill_diagonal(margin, np.inf)
    worst = margin.min(axis=1)
    best = int(np.argmax(worst))
    if worst[best] > tol:
        return {"holds": True, "example": None, "arm": best}
    cw = condorcet_winner(P, tol)
    if cw["holds"]:
        best = cw["winner"]
    j = int(np.argmin(margin[best]))
    k = int(np.argmin(diff[best, j]))
    return {"holds": False, "example": {"i": best, "j": j, "k": k}, "margin": float(worst[best])}


def condorcet_winner(P: Any, tol: float = DEFAULT_TOL) -> dict:
    """CW: an arm beating every other with probability above 1/2.

    Holds with ``"winner"`` (index). Otherwise the example is the Copeland leader
    ``i`` and an arm ``j`` it does not beat.
    """
    D = _delta(P)
    L = D.shape[0]
    off = ~np.eye(L, dtype=bool)
    beats_all = ((D > tol) | ~off).all(axis=1)
    if beats_all.any():
        return {"holds": True, "example": None, "winner": int(np.flatnonzero(beats_all)[0])}
    i = majority_order(P, tol)[0]
    cand = np.where(off[i] & (D[i] <= tol), D[i], np.inf)
    j = int(np.argmin(cand))
    return {"holds": False, "example": {"i": int(i), "j": j}, "margin": float(D[i, j])}


_CHECKS = {
    "LNM": low_noise_model,
    "TO": total_order,
    "SST": strong_stochastic_transitivity,
    "gamma-RST": relaxed_stochastic_transitivity,
    "MST": moderate_stochastic_transitivity,
    "WST": weak_stochastic_transitivity,
    "STI": stochastic_triangle_inequality,
    "GIA": general_identifiability,
    "CW": condorcet_winner,
}

_INDEX_KEYS = ("i", "j", "k")


def _name(names: Sequence[str] | None, x: int):
    return names[x] if names is not None else x


def check_assumptions(P: Any, names: Sequence[str] | None = None, tol: float = DEFAULT_TOL) -> dict:
    """Run every check; returns ``key -> {"holds", "example", "name", ...}``.

    With ``names`` the arm indices in examples (and ``order``, ``winner``, ``arm``)
    are replaced by names. JSON-safe.
    """
    A = as_preference(P)
    if names is not None and len(names) != A.shape[0]:
        raise ValueError(f"{len(names)} names for a {A.shape[0]}x{A.shape[0]} matrix")
    out: dict[str, dict] = {}
    for key, fn in _CHECKS.items():
        r = dict(fn(A, tol))
        ex = r.get("example")
        if ex is not None:
            r["example"] = {k: (_name(names, v) if k in _INDEX_KEYS else v) for k, v in ex.items()}
        if "binding" in r:
            r["binding"] = {k: _name(names, v) for k, v in r["binding"].items()}
        for k in ("winner", "arm"):
            if k in r:
                r[k] = _name(names, r[k])
        if "order" in r:
            r["order"] = [_name(names, v) for v in r["order"]]
        r["name"] = ASSUMPTIONS[key]
        r["holds"] = bool(r["holds"])
        out[key] = r
    return out
