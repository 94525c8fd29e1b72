"""Policies between transactions: build, snapshot, restore, and the per-process cache."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable

from algorithms import ALGORITHMS, PolicyError, make_policy
from algorithms.hybrid import policy_from_state  # every state, the hybrid policy's too

from ..plain_values import jsonable
from .types import Unprocessable

if TYPE_CHECKING:
    from algorithms.policies import Policy


def new_policy(
    algorithm: str,
    costs: list[float],
    delta: float,
    *,
    judge_cost: float = 0.0,
    population: int | None = None,
    threshold: str | None = None,
    level: str | None = None,
    goal: str = "winner",
    k: int | None = None,
) -> Policy:
    """A campaign's policy; ``judge_cost`` is c_J (:func:`.costs.judge_cost_per_duel`); ``population``:
    the prompt set's size for a campaign sampling its prompts without replacement (None: with);
    ``threshold`` and ``level``: dctas-pc's certificate test and its level (None: the defaults;
    replays pass the stored ones); ``goal``, ``k``: dctas-pc's leaderboard goal (top_k, ranking;
    winner by default)."""
    extra: dict[str, Any] = {} if threshold is None else {"threshold": threshold}
    if level is not None:
        extra["level"] = level
    if goal != "winner":
        extra.update(goal=goal, k=k)
    if population is None:
        return make_policy(algorithm, costs=costs, delta=delta, judge_cost=judge_cost, **extra)
    return make_policy(algorithm, costs=costs, delta=delta, judge_cost=judge_cost, population=int(population), **extra)


def new_campaign_policy(
    algorithm: str,
    costs: list[float],
    delta: float,
    *,
    judge_cost: float = 0.0,
    population: int | None = None,
    goal: str = "winner",
    k: int | None = None,
):
    """:func:`new_policy` for a campaign being created: what the policy refuses (the schema's bounds
    should catch it first) is a 422 (:class:`Unprocessable`), never a 500."""
    try:
        return new_policy(algorithm, costs, delta, judge_cost=judge_cost, population=population, goal=goal, k=k)
    except PolicyError as exc:
        raise Unprocessable(f"campaign: {exc}") from None


def restore_policy(state: dict):
    return policy_from_state(state)


def policy_snapshot(policy) -> tuple[dict, dict, dict, int | None]:
    """(state, counts, stats, leader) as stored in the campaign row."""
    summary = jsonable(policy.summary())
    if "N" not in summary and hasattr(policy, "human_votes"):  # hybrid hook: its counts as LxL matrices
        from .hybrid import counts_of

        summary.update(counts_of(policy))
    counts = {"N": summary.get("N"), "W": summary.get("W")}
    stats = {k: v for k, v in summary.items() if k not in ("N", "W")}
    t = int(summary.get("t") or 0)
    leader = summary.get("leader") if t > 0 else None
    return jsonable(policy.to_state()), counts, stats, leader


def warm_policies() -> None:
    """Load every algorithm's compiled kernels (numba's on-disk cache) in this process.

    The first policy call of a process otherwise pays ~0.7 s loading them, on
    whichever request comes first; the app does this at start-up, in a thread,
    before the worker accepts connections.
    """
    for algorithm in ALGORITHMS:
        for costs in ([1.0, 2.0], [1.0, 2.0, 3.0]):
            policy = new_policy(algorithm, costs, 0.01)
            for _ in range(3 * len(costs)):
                i, j = policy.next_pair(pending=[])
                policy.record(i, j, 1.0 if i == 0 else 0.0)
                policy.should_stop()
            restore_policy(policy_snapshot(policy)[0]).next_pair(pending=[[0, 1]])


class PolicyCache:
    """Policies kept between transactions, keyed by the campaign's ``event_seq``.

    Every policy call anywhere (any process) increments the campaign's
    ``event_seq`` under the row lock, so a cached policy whose sequence number
    equals the row's is exactly the policy at the row's ``event_seq``; one behind it
    catches up by replaying the calls logged since (:mod:`.policy_log`). ``take`` removes the entry (a
    failed transaction cannot leave a half-updated policy behind); ``put`` runs
    after a successful commit.
    """

    def __init__(self, size: int = 1000):
        self._items: dict[int, tuple[int, Any]] = {}
        self._size = size
        self._lock = threading.Lock()
        # campaign id -> set when the policy :meth:`take_latest` lent out is put back (or replaced)
        self._lent: dict[int, threading.Event] = {}

    def take_exact(self, campaign_id: int, event_seq: int):
        """The cached policy if it is at ``event_seq`` (removed from the cache), else None."""
        with self._lock:
            hit = self._items.pop(campaign_id, None)
        return hit[1] if hit is not None and hit[0] == event_seq else None

    def take(self, campaign_id: int, event_seq: int, stored_state: Callable[[], dict]):
        """The policy at ``event_seq``: cached, or rebuilt from the stored state (read only then)."""
        policy = self.take_exact(campaign_id, event_seq)
        return policy if policy is not None else restore_policy(stored_state())

    def take_latest(self, campaign_id: int) -> tuple[int | None, Any]:
        """(event_seq, policy) of the cached policy, removed from the cache (lent out until the next
        :meth:`put`); (None, None): nothing."""
        with self._lock:
            hit = self._items.pop(campaign_id, None)
            if hit is not None:
                self._lent[campaign_id] = threading.Event()
        return (None, None) if hit is None else hit

    def lent(self, campaign_id: int) -> threading.Event | None:
        """The event :meth:`put` sets when the policy :meth:`take_latest` lent out is back; None when
        none is out. A transaction that holds the campaign's row lock and finds the cache empty while
        one is out waits for it briefly: the one that took it has committed (the lock was free) and
        is putting it back; restoring the stored state instead costs O(L^2) (tens of ms at 128
        models). One that failed never puts it back: the waiter's wait is bounded."""
        with self._lock:
            return self._lent.get(campaign_id)

    def seq_of(self, campaign_id: int) -> int | None:
        """The ``event_seq`` of the cached policy (None: nothing cached); the entry stays."""
        hit = self._items.get(campaign_id)
        return None if hit is None else hit[0]

    def put(self, campaign_id: int, event_seq: int, policy: Any) -> None:
        with self._lock:
            if len(self._items) >= self._size:
                self._items.clear()
            self._items[campaign_id] = (event_seq, policy)
            returned = self._lent.pop(campaign_id, None)
        if returned is not None:
            returned.set()
