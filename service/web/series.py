"""The evidence time series of a campaign, by replaying its judged duel log.

The campaign row stores only the current policy state, so the history of the
statistics is rebuilt from the duel log: the counted duels in the order the
policy recorded them (``record_seq``), fed to a fresh policy built with
:func:`algorithms.make_policy` from the stored state's algorithm, costs, delta
and parameters -- the same code that runs the campaign. (Selections do not
change the statistics, so only the records are replayed.)

Checkpoints are bounded: a point is kept every ``stride`` counted duels, and
the stride doubles whenever more than ``MAX_POINTS`` points accumulate, so a
campaign of any length gives at most ``MAX_POINTS`` points plus the current
one. Replays are incremental and cached per campaign in this process (only the
duels recorded since the last view are read and replayed).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from sqlalchemy import select

from algorithms import make_policy
from algorithms.hybrid import policy_from_state
from algorithms.policies import Policy, state_params
from algorithms.restricted import is_restricted_state

from ..models import Duel

MAX_POINTS = 160
#: above this many models a point keeps no per-pair certificate evidence (L(L-1) items at each of
#: 160 points); the dashboard then plots the evidence S of the challengers nearest the reference
PC_POINT_MODELS = 16
CACHE_SIZE = 64
BATCH = 5000


@dataclass
class Point:
    t: int
    S: list[float]
    beta: float
    Z: float
    leader: int
    pc: list[dict] | None = None  # dctas-pc: PCPolicy.pair_evidence() at this point


@dataclass
class _Replay:
    signature: tuple
    policy: Policy
    last_seq: int = 0
    stride: int = 1
    points: list[Point] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _point(policy) -> Point:
    raw = getattr(policy, "_S", None)  # the evidence vector, without summary()'s L x L matrices
    S = [float(x) for x in (raw if raw is not None else policy.summary()["S"])]
    pc = None
    if hasattr(policy, "pair_evidence") and int(getattr(policy, "L", 0)) <= PC_POINT_MODELS:
        pc = policy.pair_evidence()
    beta = float(policy.beta())
    return Point(
        t=int(policy.t),
        S=S,
        beta=beta if math.isfinite(beta) else float("nan"),
        Z=float(policy.Z()),
        leader=int(policy.leader()),
        pc=pc,
    )


class SeriesCache:
    """Per-process cache of incremental replays, keyed by campaign id."""

    def __init__(self, size: int = CACHE_SIZE):
        self.size = size
        self._items: OrderedDict[int, _Replay] = OrderedDict()
        self._figures: OrderedDict[int, tuple[object, dict]] = OrderedDict()
        self._lock = threading.Lock()

    def _entry(self, campaign_id: int, state: dict) -> _Replay:

        signature = (
            state.get("algorithm"),
            tuple(state.get("costs") or ()),
            state.get("delta"),
            tuple(sorted((state.get("params") or {}).items())),
        )
        with self._lock:
            entry = self._items.get(campaign_id)
            if entry is None or entry.signature != signature:
                policy = make_policy(state["algorithm"], state["costs"], state["delta"], **state_params(state))
                entry = _Replay(signature=signature, policy=policy)
                entry.points.append(_point(policy))
                self._items[campaign_id] = entry
            self._items.move_to_end(campaign_id)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
            return entry

    def series(self, db, campaign_id: int, state: dict) -> tuple[list[Point], Policy]:
        """(checkpoints including the current point, the replayed policy).

        A campaign whose models changed (algorithms/restricted.py) shows its current point only:
        its policy was rebuilt on the remaining models, and the series before it asked another question."""
        if is_restricted_state(state):
            policy = policy_from_state(state)
            return [_point(policy)], policy
        entry = self._entry(campaign_id, state)
        with entry.lock:
            while True:
                with db.read() as s:
                    rows = s.execute(
                        select(Duel.model_i, Duel.model_j, Duel.score, Duel.record_seq)
                        .where(
                            Duel.campaign_id == campaign_id,
                            Duel.record_seq.is_not(None),
                            Duel.record_seq > entry.last_seq,
                        )
                        .order_by(Duel.record_seq)
                        .limit(BATCH)
                    ).all()
                for r in rows:
                    entry.policy.record(int(r.model_i), int(r.model_j), float(r.score))
                    entry.last_seq = int(r.record_seq)
                    t = entry.policy.t
                    if t % entry.stride == 0:
                        entry.points.append(_point(entry.policy))
                        if len(entry.points) > MAX_POINTS:
                            entry.stride *= 2
                            entry.points = [p for p in entry.points if p.t % entry.stride == 0]
                if len(rows) < BATCH:
                    break
            points = list(entry.points)
            if not points or points[-1].t != entry.policy.t:
                points.append(_point(entry.policy))
            return points, entry.policy

    def forget(self, campaign_id: int) -> None:
        with self._lock:
            self._items.pop(campaign_id, None)
            self._figures.pop(campaign_id, None)

    def figures(self, campaign_id: int, version: object) -> dict | None:
        """The dashboard's figures kept for this ``version`` of the campaign, else None."""
        with self._lock:
            hit = self._figures.get(campaign_id)
        return hit[1] if hit is not None and hit[0] == version else None

    def keep_figures(self, campaign_id: int, version: object, figures: dict) -> None:
        with self._lock:
            self._figures[campaign_id] = (version, figures)
            self._figures.move_to_end(campaign_id)
            while len(self._figures) > self.size:
                self._figures.popitem(last=False)
