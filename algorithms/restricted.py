"""A campaign's policy after some of its models were disabled (or replaced): the same algorithm
on the models still in the campaign, rebuilt from the duels already recorded between them.

Disabling model ``m`` changes the campaign's question to "the Condorcet winner (or the
certified top set, or the ranking) of the remaining models". :func:`restrict` builds a fresh
policy of the same algorithm and parameters on the ``L'`` active models only, so every
certificate is tested at the level for ``L'`` models (``delta / L'`` for the winner,
``delta / (L' (L' - 1))`` for a leaderboard), and feeds it, in the order they were recorded,
the recorded duels whose two models are both active: a re-run of the campaign as if it had
compared those models from the start. Each certificate test is a nonnegative supermartingale
on its own pair's outcomes whatever the sampling rule, so the re-run's certificates are the
ones a campaign on the ``L'`` models would have issued on the same outcomes (docs/algorithms.md,
*Disabling or replacing a model*). Duels with a disabled model stay in the log and in the
displayed counts (``frozen``) but no longer enter any test.

:class:`RestrictedPolicy` presents the inner policy with the campaign's own model indices
(all ``L`` models, the disabled ones included), so a caller uses it as any other policy:
``next_pair`` never returns a pair with a disabled model, ``record`` of such a pair (a duel
that was in flight when the model was disabled) is ignored, and the matrices are ``L x L``.
It is rebuilt the same way at the same point by a replay of the log, so replays stay exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .policies import STATE_VERSION, PolicyError, make_policy, policy_from_state, state_params

#: The key of a restricted policy's state that holds the active models and the inner state.
RESTRICTED = "restricted"

# Attributes without model indices, read from the inner policy as they are.
_PLAIN = frozenset(
    {
        "delta",
        "name",
        "stopping_rule",
        "goal",
        "k",
        "level",
        "threshold",
        "stick",
        "population",
        "certificate_test_name",
        "certificate_log_threshold",
        "stopped",
        "verdict",
        "goal_verdict",
        "stop_t",
        "judge_cost",
        "params",
        "t",
        "initialised",
    }
)


class RestrictedPolicy:
    """The inner policy on the active models ``arms`` (campaign indices, increasing), seen with
    the campaign's ``L`` model indices. ``frozen_N``/``frozen_W``: the ``L x L`` counts and wins of
    the recorded duels that involve a disabled model (shown, no longer used)."""

    def __init__(
        self,
        inner: Any,
        arms: Sequence[int],
        L: int,
        costs: Sequence[float],
        frozen_N: np.ndarray | None = None,
        frozen_W: np.ndarray | None = None,
    ) -> None:
        arms = [int(a) for a in arms]
        if len(arms) != inner.L or sorted(set(arms)) != arms or not all(0 <= a < L for a in arms):
            raise PolicyError(f"the active models must be {inner.L} distinct indices in [0, {L - 1}], got {arms}")
        if len(costs) != L:
            raise PolicyError(f"costs must have {L} entries, got {len(costs)}")
        self.inner = inner
        self.arms = arms
        self.L = int(L)
        self.K = self.L * (self.L - 1) // 2
        self._index = {m: a for a, m in enumerate(arms)}
        self._costs = np.array([float(c) for c in costs])
        self.frozen_N = np.zeros((L, L)) if frozen_N is None else np.array(frozen_N, dtype=float)
        self.frozen_W = np.zeros((L, L)) if frozen_W is None else np.array(frozen_W, dtype=float)
        if self.frozen_N.shape != (L, L) or self.frozen_W.shape != (L, L):
            raise PolicyError(f"the frozen counts must be {L} x {L} matrices")

    def __getattr__(self, name: str) -> Any:
        if name in _PLAIN:
            return getattr(self.__dict__["inner"], name)
        raise AttributeError(name)

    # ---------------------------------------------------------------- indices
    @property
    def disabled(self) -> list[int]:
        return [m for m in range(self.L) if m not in self._index]

    def _out(self, a: int | None) -> int | None:
        return None if a is None or int(a) < 0 else self.arms[int(a)]

    def _expand(self, M: np.ndarray, fill: float = 0.0) -> np.ndarray:
        out = np.full((self.L, self.L), fill, dtype=np.asarray(M).dtype)
        idx = np.array(self.arms)
        out[np.ix_(idx, idx)] = M
        return out

    # ---------------------------------------------------------------- the policy interface
    def next_pair(self, pending: Iterable[Sequence[int]] = ()) -> tuple[int, int]:
        """The inner policy's pair in campaign indices; pending duels of a disabled model are not counted."""
        inner_pending = [
            (self._index[int(p[0])], self._index[int(p[1])])
            for p in pending
            if len(p) == 2 and int(p[0]) in self._index and int(p[1]) in self._index
        ]
        i, j = self.inner.next_pair(pending=inner_pending)
        return self.arms[i], self.arms[j]

    def record(self, i: int, j: int, score: float) -> None:
        """Record a duel of two active models; a duel of a disabled model is ignored (not used)."""
        for v in (i, j):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not (0 <= v < self.L):
                raise PolicyError(f"arm index must be an integer in [0, {self.L - 1}], got {v!r}")
        if int(i) in self._index and int(j) in self._index:
            self.inner.record(self._index[int(i)], self._index[int(j)], score)

    def should_stop(self) -> bool:
        return bool(self.inner.should_stop())

    @property
    def winner(self) -> int | None:
        return self._out(self.inner.winner)

    def leader(self) -> int:
        out = self._out(self.inner.leader())
        return self.arms[0] if out is None else out

    def recommendation(self) -> int | None:
        return self._out(self.inner.recommendation())

    def Z(self) -> float:
        return float(self.inner.Z())

    def beta(self) -> float:
        return float(self.inner.beta())

    @property
    def costs(self) -> np.ndarray:
        return self._costs.copy()

    def set_costs(self, costs: Sequence[float], judge_cost: Any = None) -> bool:
        """The inner policy's :meth:`set_costs` on the active models' entries. Costs of another length
        (a list made before a model was added) change nothing (False), as does a change of a disabled
        model's cost alone."""
        if len(costs) != self.L:
            return False
        changed = bool(self.inner.set_costs([float(costs[m]) for m in self.arms], judge_cost))
        if changed:
            self._costs = np.array([float(c) for c in costs])
        return changed

    def counts_matrix(self) -> np.ndarray:
        return self._expand(self.inner.counts_matrix()) + self.frozen_N

    def wins_matrix(self) -> np.ndarray:
        return self._expand(self.inner.wins_matrix()) + self.frozen_W

    @property
    def BEAT(self) -> np.ndarray:
        return self._expand(self.inner.BEAT, False)

    def exact_ties(self) -> np.ndarray:
        return self._expand(self.inner.exact_ties(), False)

    def certificate_log_wealth(self) -> np.ndarray | None:
        LW = self.inner.certificate_log_wealth()
        return None if LW is None else self._expand(LW)

    def pair_evidence(self) -> list[dict[str, Any]]:
        return [
            {**e, "loser": self.arms[e["loser"]], "winner": self.arms[e["winner"]]} for e in self.inner.pair_evidence()
        ]

    def leaderboard(self) -> dict[str, Any]:
        out = dict(self.inner.leaderboard())
        out["ranking"] = [[self.arms[m] for m in tier] for tier in out["ranking"]]
        out["tiers"] = [{**t, "models": [self.arms[m] for m in t["models"]]} for t in out["tiers"]]
        if "top_k" in out:
            out["top_k"] = [self.arms[m] for m in out["top_k"]]
        return out

    def summary(self) -> dict[str, Any]:
        """The inner summary in campaign indices; ``N``/``W`` include the frozen duels; ``S`` is 0 for a
        disabled model; ``active`` and ``disabled`` list the models."""
        s = dict(self.inner.summary())
        out = self._out
        S = [0.0] * self.L
        for a, v in enumerate(s.get("S") or []):
            S[self.arms[a]] = float(v)
        s.update(
            N=self.counts_matrix().astype(int).tolist(),
            W=self.wins_matrix().tolist(),
            S=S,
            leader=self.leader(),
            winner=out(s.get("winner")),
            active=list(self.arms),
            disabled=self.disabled,
        )
        if "certificates" in s:
            s["certificates"] = [[self.arms[w], self.arms[lo]] for w, lo in s["certificates"]]
        for key in ("certified_beaten", "top_cycle"):
            if key in s:
                s[key] = [self.arms[m] for m in s[key]]
        if "copeland_winner" in s:
            s["copeland_winner"] = out(s["copeland_winner"])
        if "exact" in s:
            s["exact"] = [[self.arms[int(i)], self.arms[int(j)], p] for i, j, p in s["exact"]]
        if "ranking" in s:
            s.update(
                {k: v for k, v in self.leaderboard().items() if k in ("ranking", "tiers", "top_k")},
            )
        return s

    # ---------------------------------------------------------------- state
    def to_state(self) -> dict[str, Any]:
        inner = self.inner.to_state()
        return {
            "version": STATE_VERSION,
            "algorithm": inner["algorithm"],
            "costs": [float(x) for x in self._costs],
            "delta": inner["delta"],
            "params": dict(inner.get("params") or {}),
            RESTRICTED: {
                "arms": list(self.arms),
                "L": self.L,
                "frozen_N": self.frozen_N.tolist(),
                "frozen_W": self.frozen_W.tolist(),
            },
            "inner": inner,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> RestrictedPolicy:
        r = state.get(RESTRICTED)
        if not isinstance(r, Mapping) or not isinstance(state.get("inner"), Mapping):
            raise PolicyError("malformed restricted policy state: needs 'restricted' and 'inner'")
        try:
            L = int(r["L"])
            arms = [int(a) for a in r["arms"]]
            frozen_N = np.array(r["frozen_N"], dtype=float)
            frozen_W = np.array(r["frozen_W"], dtype=float)
        except (KeyError, TypeError, ValueError):
            raise PolicyError("malformed restricted policy state: arms, L and the frozen counts") from None
        return cls(policy_from_state(state["inner"]), arms, L, state.get("costs") or [], frozen_N, frozen_W)


def is_restricted_state(state: Any) -> bool:
    return isinstance(state, Mapping) and RESTRICTED in state


def restrict(
    state: Mapping[str, Any],
    costs: Sequence[float],
    arms: Sequence[int],
    records: Iterable[tuple[int, int, float]],
) -> RestrictedPolicy:
    """The campaign's policy on the active models ``arms`` (campaign indices) among ``len(costs)``.

    ``state``: the campaign's policy state before the change (plain or restricted): its
    algorithm, ``delta``, parameters (``threshold``, ``level``, ``goal``, ``k``, ``population``,
    judge cost) are kept; ``costs``: every model's cost now (a model added by a replacement
    included); ``records``: every recorded duel ``(i, j, score of i)`` in the order the policy
    recorded it. A fresh policy on ``costs[arms]`` gets the records of two active models, in
    order; the others go to the frozen counts. :class:`PolicyError` when the parameters do not
    fit ``len(arms)`` models (a ``top_k`` with ``k >= len(arms)``) or fewer than two remain.
    """
    arms = sorted(int(a) for a in arms)
    L = len(costs)
    if len(arms) < 2:
        raise PolicyError("a campaign needs at least two models")
    inner_state = state["inner"] if is_restricted_state(state) else state
    params = state_params(inner_state)
    judge_cost = params.pop("judge_cost", 0.0)
    inner = make_policy(
        str(inner_state["algorithm"]),
        [float(costs[m]) for m in arms],
        float(inner_state["delta"]),
        judge_cost=judge_cost,
        **params,
    )
    index = {m: a for a, m in enumerate(arms)}
    frozen_N = np.zeros((L, L))
    frozen_W = np.zeros((L, L))
    for i, j, score in records:
        i, j, s = int(i), int(j), float(score)
        if i in index and j in index:
            inner.record(index[i], index[j], s)
        else:
            frozen_N[i, j] += 1.0
            frozen_N[j, i] += 1.0
            frozen_W[i, j] += s
            frozen_W[j, i] += 1.0 - s
    return RestrictedPolicy(inner, arms, L, costs, frozen_N, frozen_W)
