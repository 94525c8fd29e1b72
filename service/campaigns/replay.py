"""Replay: rebuild a campaign's policy from its duel log and compare with the stored state."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from algorithms.hybrid import HybridPolicy
from algorithms.policies import Policy, PolicyError, state_params
from algorithms.restricted import RestrictedPolicy, restrict
from algorithms.vocabulary import DuelStatus

from ..db import Database
from ..models import Campaign, Charge, Duel
from ..money.costs import judge_cost_per_duel
from ..plain_values import jsonable
from . import hybrid, policy_log
from .model_changes import initial_model_count
from .policy_cache import new_policy
from .sampling import is_wor, prompt_permutation
from .types import NotFound, ReplayResult
from .views import json_diff

log = logging.getLogger("llmduel.campaigns")


@dataclass
class ReplayLog:
    """What a replay reads from one snapshot: the duel log, the ledger and the campaign row."""

    rows: list[Any]
    charge_sums: dict[int | None, int]  # by duel; None: charges of no duel (pre-generation)
    stored_state: dict[str, Any] | None
    algorithm: str
    delta: float
    costs: list[float]
    judge_cost: float
    population: int | None
    perm: list[int] | None
    counters: dict[str, int]
    state_seq: int = 0  # the stored state's event_seq (a checkpoint, service.campaigns.policy_log)
    judge: dict[str, Any] | None = None  # a hybrid judge's config and the campaign's draw key
    draw_key: Any = None
    changes: list[dict[str, Any]] | None = None  # models disabled or replaced (campaigns.model_changes)


def read_log(s: Session, c: Campaign, perm: list[int] | None) -> ReplayLog:
    """The campaign's duels (the columns replay needs), its charges per duel and its counters."""
    rows = s.execute(
        select(
            Duel.id,
            Duel.model_i,
            Duel.model_j,
            Duel.select_seq,
            Duel.record_seq,
            Duel.score,
            Duel.pending_at_select,
            Duel.status,
            Duel.cost_nusd,
            Duel.choice,
            Duel.costs_at_select,
            Duel.position,
            Duel.prompt_index,
            Duel.number,  # hybrid hook: the keyed coin and the hybrid record
            Duel.judge_detail,
        ).where(Duel.campaign_id == c.id)
    ).all()
    charge_sums = dict(
        s.execute(
            select(Charge.duel_id, func.sum(Charge.amount_nusd))
            .where(Charge.campaign_id == c.id)
            .group_by(Charge.duel_id)
        ).all()
    )
    return ReplayLog(
        rows=list(rows),
        charge_sums=charge_sums,
        stored_state=policy_log.stored_state(s, c.id),
        algorithm=c.algorithm,
        delta=c.delta,
        costs=[float(m["cost"]) for m in c.models[: initial_model_count(len(c.models), c.model_changes)]],
        judge_cost=judge_cost_per_duel(c.judge),
        population=int(c.n_prompts) if perm is not None else None,
        perm=perm,
        counters=dict(
            spend=c.spend_nusd,
            judged=c.duels_judged,
            counted=c.duels_counted,
            created=c.duels_created,
            failed=c.duels_failed,
            event_seq=c.event_seq,
        ),
        judge=c.judge,
        draw_key=c.draw_key,
        state_seq=int(c.state_seq if c.state_seq is not None else c.event_seq),
        changes=list(c.model_changes or []),
    )


def log_events(rows: list[Any], changes: list[dict[str, Any]] | None = None) -> list[tuple[int, int, Any]]:
    """Selections (kind 0), records (kind 1) and model changes (kind 2) in the order the policy saw them."""
    events = [(r.select_seq, 0, r) for r in rows]
    events += [(r.record_seq, 1, r) for r in rows if r.record_seq is not None]
    events += [(int(e["seq"]), 2, e) for e in changes or ()]
    events.sort(key=lambda e: (e[0], e[1]))
    return events


def replay_policy(log: ReplayLog, events: list[tuple[int, int, Any]]) -> list[str]:
    """Feed the events to a fresh policy; the differences from the log and from the stored state."""
    diff: list[str] = []
    # the certificate test the stored state was made with (a state from before "betting" was the
    # default names none and is a mixture-test state)
    # and its level (a state from before the level delta / L names none and is a delta / (L - 1) state)
    params = state_params(log.stored_state) if log.stored_state else {}
    threshold, goal, k = params.get("threshold"), params.get("goal", "winner"), params.get("k")
    level = params.get("level")
    hyb = log.algorithm == hybrid.ALGORITHM  # hybrid hook: its policy and its records (J, H or None, pi)
    policy: Policy | HybridPolicy | RestrictedPolicy
    if hyb:
        if log.judge is None:
            raise ValueError("a hybrid campaign's log carries its judge")
        policy = hybrid.new_policy(log.judge, log.costs, log.delta, log.stored_state)
    else:
        policy = new_policy(
            log.algorithm,
            log.costs,
            log.delta,
            judge_cost=log.judge_cost,
            population=log.population,
            threshold=threshold,
            level=level,
            goal=goal,
            k=k,
        )
    next_position: dict[tuple[int, int], int] = {}
    records: list[tuple[int, int, float]] = []  # what a model change rebuilds the policy from
    # the stored state is a checkpoint at state_seq: compared with the replayed policy there
    checkpoint = None if log.state_seq > 0 else jsonable(policy.to_state())
    for _seq, kind, r in events:
        if checkpoint is None and _seq > log.state_seq:
            checkpoint = jsonable(policy.to_state())
        if kind == 2:  # a model disabled or replaced: the policy rebuilt on the active models, as it was
            try:
                policy = restrict(policy.to_state(), r["costs"], r["arms"], records)
            except (PolicyError, KeyError, TypeError, ValueError) as exc:
                diff.append(f"model change at {_seq}: the policy cannot be rebuilt ({exc})")
            continue
        if kind == 0:
            pair = policy_log.apply_event(policy, kind, r)
            if pair is None or sorted(pair) != [r.model_i, r.model_j]:
                diff.append(f"duel {r.id}: replayed selection {pair} != logged pair ({r.model_i}, {r.model_j})")
            continue
        if log.perm is not None:  # each pair's outcomes entered the policy in permutation order
            diff.extend(_check_position(r, log.perm, next_position))
        try:
            if isinstance(policy, HybridPolicy):
                hybrid.replay_record(policy, r, log.draw_key, diff)
            else:
                policy.record(r.model_i, r.model_j, r.score)
                records.append((r.model_i, r.model_j, r.score))
        except PolicyError as exc:  # a corrupt log (a model paired with itself, a score out of range)
            diff.append(f"duel {r.id}: the policy refuses the logged outcome ({exc})")
    if hyb:
        diff.extend(hybrid.draw_order_diff(log.rows))  # hybrid hook: each pair's records in draw order
    if checkpoint is None:  # the stored state is at the last event
        checkpoint = jsonable(policy.to_state())
    diff.extend(json_diff(jsonable(log.stored_state), checkpoint, "policy_state"))
    return diff


def _check_position(r: Any, perm: list[int], next_position: dict[tuple[int, int], int]) -> list[str]:
    """Without replacement: the recorded duel is its pair's next position, on the permutation's prompt."""
    pair = (int(r.model_i), int(r.model_j))
    q = next_position.get(pair, 0)
    next_position[pair] = q + 1
    if r.position == q and r.prompt_index == perm[q]:
        return []
    return [
        f"duel {r.id}: recorded as pair {pair}'s outcome {q} but has position {r.position} "
        f"(prompt {r.prompt_index}, permutation gives {perm[q] if q < len(perm) else None})"
    ]


def check_counters(log: ReplayLog, events: list[tuple[int, int, Any]]) -> list[str]:
    """The campaign row's counters and each duel's cost against what the log and the ledger give."""
    diff: list[str] = []
    rows, counters = log.rows, log.counters
    seqs = [e[0] for e in events]
    if len(set(seqs)) != len(seqs) or (seqs and max(seqs) != counters["event_seq"]):
        diff.append(f"event sequence numbers are not unique or do not end at {counters['event_seq']}")
    checks = {
        "judged": (
            sum(1 for r in rows if r.choice is not None and r.status == DuelStatus.JUDGED),
            counters["judged"],
        ),
        "counted": (sum(1 for r in rows if r.record_seq is not None), counters["counted"]),
        "created": (len(rows), counters["created"]),
        "failed": (sum(1 for r in rows if r.status == DuelStatus.FAILED), counters["failed"]),
        "spend_nusd": (int(sum(log.charge_sums.values())), counters["spend"]),
    }
    for name, (from_log, stored) in checks.items():
        if from_log != stored:
            diff.append(f"{name}: log gives {from_log}, campaign row says {stored}")
    for r in rows:
        if int(log.charge_sums.get(r.id, 0)) != int(r.cost_nusd):
            diff.append(f"duel {r.id}: cost {r.cost_nusd} nUSD != its charges {log.charge_sums.get(r.id, 0)} nUSD")
    return diff


class Replay:
    """Replays a campaign's log (stateless)."""

    def __init__(self, db: Database):
        self.db = db

    # ------------------------------------------------------------ replay
    def replay(self, campaign_id: int) -> ReplayResult:
        """Rebuild the policy from the duel log, in the order the policy saw it.

        Selections are replayed too (``next_pair`` with the pending pairs of the
        time must give the logged pair), after the cost changes logged with them
        (``costs_at_select``: marginal costs given the answer and verdict stores). Also checks the counters and the ledger.
        """
        with self.db.read() as s:
            if not self.db.is_sqlite:  # the row, the log and the ledger from one snapshot (a live campaign
                s.connection(execution_options={"isolation_level": "REPEATABLE READ"})  # changes meanwhile)
            c = s.get(Campaign, campaign_id)
            if c is None:
                raise NotFound(f"campaign {campaign_id} not found")
            perm = prompt_permutation(c.draw_key, c.n_prompts) if c.draw_key and is_wor(c.prompt_sampling) else None
            log = read_log(s, c, perm)
        events = log_events(log.rows, log.changes)
        diff = replay_policy(log, events) + check_counters(log, events)
        return ReplayResult(campaign_id, not diff, len(events), diff)
