"""A certified leaderboard from dctas-pc's pairwise certificates: ordered tiers, top k, blocking pairs.

The order certified is the **beats order**: model ``u`` ranks above ``v`` when ``p_uv > 1/2``
(``u``'s mean score against ``v``, ties counted as the tie policy says). On any instance,
transitive or not, the *true tiers* are the strongly connected components of the digraph
with an edge ``u -> v`` whenever ``p_uv >= 1/2``, listed in their one possible order (between
two components every pair points the same way): a transitive instance without exact ties has
``L`` one-model tiers; two models tied on the prompt set, or a Condorcet cycle, share a tier.

From the certificates ``B[u, v]`` ("``v`` is beaten by ``u``") the **certified tiers** are the
finest ordered partition such that every model of an earlier tier holds a certificate against
every model of a later tier: the strongly connected components of the digraph ``H`` with an
edge ``u -> v`` whenever ``u != v`` and ``not B[v, u]`` (``v`` is not shown to beat ``u``, so
``v`` cannot sit in an earlier tier than ``u``), in topological order
(:func:`certified_tiers`). If every certificate is right, each certified tier is a union of
consecutive true tiers, so the reported order is right; it is *final* (no more duels can split
it) when the model pairs already resolved inside it (a certificate, or on a finite prompt set
an exact tie) connect it strongly: it is then exactly one true tier.

``top_k``: the union of the certified tiers up to the one holding position ``k``, a certified
superset of the best ``k``; it has exactly ``k`` models once a tier boundary falls at ``k``.

Validity (docs/algorithms.md, *Certified leaderboard*): every certificate is issued at level
``delta / (L (L - 1))`` (each of the ``L (L - 1)`` ordered pairs whose null ``p_mk >= 1/2`` may
be true: both directions of a pair tied exactly); by Ville's inequality and the union bound,
the probability that *any* false certificate is ever issued is at most ``delta``, and the tiers
and top set reported at any time are right whenever none is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "GOALS",
    "GOAL_WINNER",
    "GOAL_TOP_K",
    "GOAL_RANKING",
    "Tier",
    "certified_tiers",
    "goal_reached",
    "top_k_set",
    "blocking_pairs",
    "relevant_pairs",
    "cost_weighted_pick",
    "validate_goal",
    "goal_delta_divisor",
    "true_tiers",
    "claim_is_wrong",
]

GOAL_WINNER, GOAL_TOP_K, GOAL_RANKING = "winner", "top_k", "ranking"
GOALS = (GOAL_WINNER, GOAL_TOP_K, GOAL_RANKING)

#: a tier's status: one model; every pair inside exactly tied; final but not all ties (a cycle, or ties
#: and wins mixed: no order exists); not final (more duels may split it)
TIER_SINGLE, TIER_TIE, TIER_UNDECIDABLE, TIER_OPEN = "ranked", "tie", "undecidable", "open"


@dataclass(frozen=True)
class Tier:
    models: tuple[int, ...]
    status: str

    @property
    def final(self) -> bool:
        return self.status != TIER_OPEN


def validate_goal(goal: Any, k: Any, L: int) -> tuple[str, int | None]:
    """``(goal, k)`` checked: ``k`` an integer in ``[1, L - 1]`` for ``top_k`` only; ``ValueError`` otherwise."""
    if goal not in GOALS:
        raise ValueError(f"unknown goal {goal!r}; choose one of {', '.join(GOALS)}")
    if goal != GOAL_TOP_K:
        if k is not None:
            raise ValueError(f"k is the size of the certified top set and goes with goal top_k only, not {goal}")
        return str(goal), None
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"goal top_k needs k, an integer in [1, {L - 1}], got {k!r}")
    if not 1 <= int(k) <= L - 1:
        raise ValueError(f"k must be in [1, {L - 1}] (the number of models minus one), got {k}")
    return GOAL_TOP_K, int(k)


def goal_delta_divisor(goal: str, L: int) -> int:
    """Per-certificate level ``delta / divisor`` of a leaderboard goal: ``L (L - 1)`` ordered pairs."""
    return L * (L - 1)


def _sccs(adj: np.ndarray) -> list[list[int]]:
    """Strongly connected components of a small digraph (boolean adjacency), in topological order.

    Kosaraju's algorithm; components come out sources first.
    """
    L = adj.shape[0]
    seen = [False] * L
    order: list[int] = []
    for s in range(L):
        if seen[s]:
            continue
        seen[s] = True
        stack = [(s, 0)]
        while stack:
            u, nxt = stack[-1]
            for v in range(nxt, L):
                if adj[u, v] and not seen[v]:
                    stack[-1] = (u, v + 1)
                    seen[v] = True
                    stack.append((v, 0))
                    break
            else:
                stack.pop()
                order.append(u)
    comp = [-1] * L
    comps: list[list[int]] = []
    for s in reversed(order):
        if comp[s] >= 0:
            continue
        cur = [s]
        comp[s] = len(comps)
        i = 0
        while i < len(cur):
            u = cur[i]
            i += 1
            for v in range(L):
                if adj[v, u] and comp[v] < 0:
                    comp[v] = len(comps)
                    cur.append(v)
        comps.append(sorted(cur))
    return comps


def _strongly_connected(members: list[int], edges: np.ndarray) -> bool:
    sub = edges[np.ix_(members, members)]
    return len(_sccs(sub)) == 1


def certified_tiers(beat: np.ndarray, tie: np.ndarray | None = None) -> list[Tier]:
    """The certified tiers, best first (module docstring).

    ``beat[u, v]``: ``u`` holds a certificate against ``v``; ``tie[u, v]`` (symmetric): the pair is
    known to be exactly tied (an exhausted prompt set with mean 1/2), or None.
    """
    B = np.asarray(beat, dtype=bool)
    L = B.shape[0]
    T = np.zeros((L, L), dtype=bool) if tie is None else np.asarray(tie, dtype=bool)
    H = ~B.T & ~np.eye(L, dtype=bool)
    resolved = B | T
    tiers = []
    for comp in _sccs(H):
        if len(comp) == 1:
            status = TIER_SINGLE
        elif not _strongly_connected(comp, resolved):
            status = TIER_OPEN
        elif all(T[u, v] for u in comp for v in comp if u != v):
            status = TIER_TIE
        else:
            status = TIER_UNDECIDABLE
        tiers.append(Tier(tuple(comp), status))
    return tiers


def _tier_at(tiers: list[Tier], k: int) -> tuple[int, int]:
    """``(index of the tier holding position k, models in the tiers before it)``."""
    before = 0
    for a, t in enumerate(tiers):
        if before + len(t.models) >= k:
            return a, before
        before += len(t.models)
    raise ValueError("k beyond the number of models")


def top_k_set(tiers: list[Tier], k: int) -> list[int]:
    """The union of the tiers up to the one holding position ``k``: a certified superset of the best ``k``."""
    a, _ = _tier_at(tiers, k)
    return [m for t in tiers[: a + 1] for m in t.models]


def goal_reached(tiers: list[Tier], goal: str, k: int | None) -> str | None:
    """None while the goal's certificate is still open; else ``"certified"`` or ``"undecidable"``.

    ``ranking``: every tier final (``"undecidable"`` when a tier holds no order: a cycle or ties and
    wins mixed). ``top_k``: a tier boundary at ``k`` (certified), or a final tier straddling position
    ``k`` (undecidable: no set of exactly ``k`` best exists).
    """
    if goal == GOAL_RANKING:
        if not all(t.final for t in tiers):
            return None
        return "undecidable" if any(t.status == TIER_UNDECIDABLE for t in tiers) else "certified"
    assert k is not None
    a, before = _tier_at(tiers, k)
    if before + len(tiers[a].models) == k:
        return "certified"
    return "undecidable" if tiers[a].final else None


def _estimate_order(members: tuple[int, ...], P: np.ndarray) -> list[int]:
    """Members ordered by the plug-in Copeland score inside the tier, then by mean preference."""
    mem = list(members)
    sub = P[np.ix_(mem, mem)]
    wins = (sub > 0.5).sum(axis=1) + 0.5 * (sub == 0.5).sum(axis=1) - 0.5  # the diagonal is 1/2
    mean = sub.sum(axis=1)
    return [mem[a] for a in sorted(range(len(mem)), key=lambda a: (-wins[a], -mean[a], mem[a]))]


def blocking_pairs(
    tiers: list[Tier], goal: str, k: int | None, P: np.ndarray | None, resolved: np.ndarray
) -> list[tuple[int, int]]:
    """The unresolved pairs that block the goal on the current estimate ``P`` (plug-in preferences).

    ``ranking``: every unresolved pair inside an open tier. ``top_k``: the unresolved pairs across the
    estimated split of the tier holding position ``k`` (its best ``k - before`` members by the plug-in
    order against the others). Empty when the goal is reached.
    """
    out: list[tuple[int, int]] = []
    if goal == GOAL_RANKING:
        for t in tiers:
            if t.final:
                continue
            m = t.models
            out += [(u, v) for a, u in enumerate(m) for v in m[a + 1 :] if not resolved[u, v]]
        return out
    assert k is not None
    a, before = _tier_at(tiers, k)
    t = tiers[a]
    if t.final or before + len(t.models) == k:
        return out
    assert P is not None
    est = _estimate_order(t.models, P)
    top, rest = est[: k - before], est[k - before :]
    return [(min(u, v), max(u, v)) for u in top for v in rest if not resolved[u, v]]


def relevant_pairs(tiers: list[Tier], goal: str, k: int | None, resolved: np.ndarray) -> list[tuple[int, int]]:
    """The unresolved pairs that matter for the goal whatever the estimate: inside an open tier
    (``ranking``), inside the open tier holding position ``k`` (``top_k``)."""
    if goal == GOAL_TOP_K:
        assert k is not None
        a, before = _tier_at(tiers, k)
        if before + len(tiers[a].models) == k:
            return []
        tiers = [tiers[a]]
    out: list[tuple[int, int]] = []
    for t in tiers:
        if not t.final:
            m = t.models
            out += [(u, v) for i, u in enumerate(m) for v in m[i + 1 :] if not resolved[u, v]]
    return out


def true_tiers(P: np.ndarray) -> list[list[int]]:
    """The true tiers of a preference matrix: components of ``u -> v`` iff ``p_uv >= 1/2``, best first."""
    P = np.asarray(P, dtype=float)
    L = P.shape[0]
    adj = (P >= 0.5) & ~np.eye(L, dtype=bool)
    return _sccs(adj)


def claim_is_wrong(P: np.ndarray, tiers: list[list[int]]) -> bool:
    """True when a reported ordered partition puts ``u`` above ``v`` (different tiers) while ``p_uv <= 1/2``."""
    P = np.asarray(P, dtype=float)
    for a, upper in enumerate(tiers):
        for lower in tiers[a + 1 :]:
            if any(P[u, v] <= 0.5 for u in upper for v in lower):
                return True
    return False


def cost_weighted_pick(
    candidates: list[tuple[int, int]], neff: np.ndarray, pair_cost: np.ndarray, PK: np.ndarray
) -> int:
    """Cost-aware round robin over ``candidates``: the pair index minimising ``cost_k * (N_k + 1)`` (lowest index on ties)."""
    best, best_v = -1, math.inf
    for u, v in candidates:
        kk = int(PK[u, v])
        val = float(pair_cost[kk]) * (float(neff[kk]) + 1.0)
        if val < best_v or (val == best_v and kk < best):
            best, best_v = kk, val
    return best
