"""The policy between checkpoints: its stored state every few records, the duel log after it.

Writing the whole policy state with every record costs O(L^2) per duel (the counts, the wins
and the test's history of every pair). The state is written
instead by the record that is :func:`checkpoint_every` policy calls (selections and records)
or more past the last one (and when the policy stops or the campaign ends), with
``campaigns.state_seq`` = the ``event_seq`` it is at (in the campaign's ``policy_checkpoints`` row, never
in the campaign row, which every duel updates); the policy at ``event_seq`` is that state
plus the policy calls after it, replayed from the duel log in the order the policy made them
(a duel's ``select_seq``: ``set_costs`` with its ``costs_at_select`` then ``next_pair`` with its
``pending_at_select``; its ``record_seq``: ``record`` with its score). The interval grows as
L^2 / 64, so the state's cost per duel stays constant, and a process whose cached policy is
behind (another worker recorded meanwhile) replays only the calls it missed.

A hybrid judge's campaign writes its state with every policy call (its records are not plain
``record`` calls): its ``state_seq`` is always its ``event_seq``.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any, Iterable

from sqlalchemy import bindparam, select, update

from algorithms.policies import PolicyError

from ..models import Campaign, Duel, PolicyCheckpoint
from .policy_cache import policy_snapshot, restore_policy

log = logging.getLogger("llmduel.campaigns")

D = Duel.__table__.c
K = PolicyCheckpoint.__table__.c

#: the state is written every ceil(L^2 / CHECKPOINT_DIVISOR) policy calls (every record up to 8 models)
CHECKPOINT_DIVISOR = 64

_TAIL_COLUMNS = (
    D.id,
    D.model_i,
    D.model_j,
    D.select_seq,
    D.record_seq,
    D.score,
    D.pending_at_select,
    D.costs_at_select,
)
# A campaign's selections and records in (after, upto] (ix_duels_campaign_select_seq / _record_seq).
TAIL_SELECTED = select(*_TAIL_COLUMNS).where(
    D.campaign_id == bindparam("cid"), D.select_seq > bindparam("after"), D.select_seq <= bindparam("upto")
)
TAIL_RECORDED = select(*_TAIL_COLUMNS).where(
    D.campaign_id == bindparam("cid"), D.record_seq > bindparam("after"), D.record_seq <= bindparam("upto")
)


# The checkpoint row: read whole (the views), its state alone (a policy restored), written whole (a
# record) or its state alone (a hybrid campaign's plan).
STORED_CHECKPOINT = select(K.policy_state, K.counts, K.stats).where(K.campaign_id == bindparam("cid"))
STORED_STATE = select(K.policy_state).where(K.campaign_id == bindparam("cid"))
WRITE_STATE = (
    update(PolicyCheckpoint.__table__)
    .where(K.campaign_id == bindparam("cid"))
    .values(policy_state=bindparam("policy_state", type_=K.policy_state.type))
)
WRITE_CHECKPOINT = WRITE_STATE.values(
    counts=bindparam("counts", type_=K.counts.type), stats=bindparam("stats", type_=K.stats.type)
)


def stored_state(conn, campaign_id: int) -> dict:
    """The campaign's stored policy state (at its ``state_seq``), on a connection or session."""
    return conn.execute(STORED_STATE, {"cid": campaign_id}).scalar_one()


def write_checkpoint(conn, campaign_id: int, *, state: dict, counts: dict, stats: dict) -> None:
    """Store the policy's state, counts and statistics (the caller sets ``state_seq`` in the same
    transaction)."""
    conn.execute(WRITE_CHECKPOINT, {"cid": campaign_id, "policy_state": state, "counts": counts, "stats": stats})


def checkpoint_every(n_models: int) -> int:
    """Policy calls between two writes of the policy state: ceil(L^2 / 64), at least 1."""
    return max(1, -(-n_models * n_models // CHECKPOINT_DIVISOR))


def checkpoint_due(n_models: int, seq: int, state_seq: int | None) -> bool:
    """Whether the record that brings the policy to ``seq`` writes its state."""
    return state_seq is None or seq - int(state_seq) >= checkpoint_every(n_models)


def leader_of(policy) -> int | None:
    """The empirical leader as :func:`.policy_cache.policy_snapshot` stores it (None before any record)."""
    return int(policy.leader()) if int(getattr(policy, "t", 0) or 0) > 0 else None


def tail_events(selected: Iterable[Any], recorded: Iterable[Any]) -> list[tuple[int, int, Any]]:
    """Selections (kind 0) and records (kind 1) in the order the policy made them."""
    events = [(int(r.select_seq), 0, r) for r in selected]
    events += [(int(r.record_seq), 1, r) for r in recorded]
    events.sort(key=lambda e: (e[0], e[1]))
    return events


def apply_event(policy, kind: int, r: Any) -> tuple[int, int] | None:
    """One logged policy call on ``policy``: a selection (returns the pair) or a record."""
    if kind == 0:
        if r.costs_at_select:  # the marginal costs given the stores changed before this selection
            policy.set_costs(r.costs_at_select["costs"], r.costs_at_select["judge_cost"])
        i, j = policy.next_pair(pending=r.pending_at_select or [])
        return int(i), int(j)
    policy.record(int(r.model_i), int(r.model_j), float(r.score))
    return None


def advance(policy, events: Iterable[tuple[int, int, Any]]):
    """``policy`` with the logged calls ``events`` applied (in place); returns it."""
    for _seq, kind, r in events:
        apply_event(policy, kind, r)
    return policy


def read_tail(conn, campaign_id: int, after: int, upto: int) -> list[tuple[int, int, Any]]:
    """The logged calls in (after, upto] on a SQLAlchemy connection or session."""
    p = {"cid": campaign_id, "after": after, "upto": upto}
    return tail_events(conn.execute(TAIL_SELECTED, p).all(), conn.execute(TAIL_RECORDED, p).all())


def policy_now(conn, c, state: dict | None = None) -> Any:
    """Campaign ``c``'s policy at its ``event_seq``: its stored state (``state`` when the caller has
    read it) and the calls logged after it."""
    policy = restore_policy(state if state is not None else stored_state(conn, c.id))
    state_seq = int(c.state_seq if c.state_seq is not None else c.event_seq)
    if state_seq < int(c.event_seq):
        advance(policy, read_tail(conn, c.id, state_seq, int(c.event_seq)))
    return policy


class Snapshot:
    """A campaign's policy figures at one ``event_seq``: ``policy_state``, ``counts``, ``stats``,
    ``leader`` (the stored columns when they are current)."""

    __slots__ = ("policy_state", "counts", "stats", "leader", "event_seq", "derived")

    def __init__(self, policy_state: dict, counts: dict, stats: dict, leader: int | None, event_seq: int):
        self.policy_state, self.counts, self.stats, self.leader = policy_state, counts, stats, leader
        self.event_seq = event_seq
        self.derived: dict[Any, Any] = {}  # figures computed from these once (the views' certificate evidence)


class SnapshotCache:
    """Figures computed once per change: (campaign id, event_seq) -> :class:`Snapshot` (a few
    hundred campaigns, least recently used first out)."""

    def __init__(self, size: int = 256):
        self._items: OrderedDict[int, Snapshot] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, campaign_id: int, event_seq: int) -> Snapshot | None:
        with self._lock:
            hit = self._items.get(campaign_id)
            if hit is None or hit.event_seq != event_seq:
                return None
            self._items.move_to_end(campaign_id)
            return hit

    def put(self, campaign_id: int, snap: Snapshot) -> None:
        with self._lock:
            self._items[campaign_id] = snap
            self._items.move_to_end(campaign_id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


def snapshot_of(conn, c, cache: SnapshotCache | None = None) -> Snapshot:
    """Campaign ``c``'s figures at its ``event_seq``: the stored columns when the state is current,
    else computed once from :func:`policy_now`; kept in ``cache`` until the next change. The
    leader is the row's (written with every record; the winner once named)."""
    seq = int(c.event_seq)
    hit = cache.get(c.id, seq) if cache is not None else None
    if hit is not None:
        return hit
    state_seq = c.state_seq if c.state_seq is not None else seq
    row = conn.execute(STORED_CHECKPOINT, {"cid": c.id}).one()
    snap = Snapshot(
        policy_state=row.policy_state, counts=row.counts, stats=row.stats, leader=c.leader, event_seq=seq
    )  # the stored checkpoint
    if int(state_seq) < seq:
        try:
            state, counts, stats, _leader = policy_snapshot(policy_now(conn, c, row.policy_state))
        except PolicyError as exc:
            # A stored state that cannot be restored (written by hand, or damaged) is the replay's to
            # report (GET /v1/campaigns/{id}/replay); the views show its stored figures, never a 500.
            log.warning("campaign %s: stored policy state not restorable (%s); showing its stored figures", c.id, exc)
        else:
            snap = Snapshot(policy_state=state, counts=counts, stats=stats, leader=c.leader, event_seq=seq)
    if cache is not None:
        cache.put(c.id, snap)
    return snap


def get_light(s, campaign_id: int) -> Campaign | None:
    """The campaign row for a view (its checkpoint, megabytes of JSON at 128 models, is read only
    through :func:`snapshot_of`)."""
    return s.get(Campaign, campaign_id)
