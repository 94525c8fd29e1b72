"""Replay: rebuild a campaign's policy from its duel log and compare with the stored state."""

from __future__ import annotations

import logging

from sqlalchemy import func, select

from algorithms.policies import state_params
from algorithms.vocabulary import DuelStatus

from ..db import Database
from ..models import Campaign, Charge, Duel
from . import rules
from .policy_cache import new_policy
from .rules import jsonable
from .types import NotFound, ReplayResult
from .views import json_diff

log = logging.getLogger("llmduel.campaigns")


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
                ).where(Duel.campaign_id == campaign_id)
            ).all()
            charge_sums = dict(
                s.execute(
                    select(Charge.duel_id, func.sum(Charge.amount_nusd))
                    .where(Charge.campaign_id == campaign_id)
                    .group_by(Charge.duel_id)
                ).all()
            )
            stored_state = c.policy_state
            algorithm, delta = c.algorithm, c.delta
            costs = [float(m["cost"]) for m in c.models]
            judge_cost = rules.judge_cost_per_duel(c.judge)
            wor = rules.is_wor(c.prompt_sampling)
            population = int(c.n_prompts) if wor else None
            perm = rules.prompt_permutation(c.draw_key, c.n_prompts) if wor else None
            counters = dict(
                spend=c.spend_nusd,
                judged=c.duels_judged,
                counted=c.duels_counted,
                created=c.duels_created,
                failed=c.duels_failed,
                event_seq=c.event_seq,
            )
        events = [(r.select_seq, 0, r) for r in rows]
        events += [(r.record_seq, 1, r) for r in rows if r.record_seq is not None]
        events.sort(key=lambda e: (e[0], e[1]))
        diff: list[str] = []
        # the certificate test the stored state was made with (a state from before "betting" was the
        # default names none and is a mixture-test state)
        threshold = state_params(stored_state).get("threshold") if stored_state else None
        policy = new_policy(algorithm, costs, delta, judge_cost, population, threshold)
        next_position: dict[tuple[int, int], int] = {}
        for seq, kind, r in events:
            if kind == 0:
                if r.costs_at_select:  # the marginal costs given the stores changed before this selection
                    policy.set_costs(r.costs_at_select["costs"], r.costs_at_select["judge_cost"])
                pair = tuple(int(x) for x in policy.next_pair(pending=r.pending_at_select or []))
                if sorted(pair) != [r.model_i, r.model_j]:
                    diff.append(f"duel {r.id}: replayed selection {pair} != logged pair ({r.model_i}, {r.model_j})")
            else:
                if perm is not None:  # each pair's outcomes entered the policy in permutation order
                    pair = (int(r.model_i), int(r.model_j))
                    q = next_position.get(pair, 0)
                    if r.position != q or r.prompt_index != perm[q]:
                        diff.append(
                            f"duel {r.id}: recorded as pair {pair}'s outcome {q} but has position {r.position} "
                            f"(prompt {r.prompt_index}, permutation gives {perm[q] if q < len(perm) else None})"
                        )
                    next_position[pair] = q + 1
                policy.record(r.model_i, r.model_j, r.score)
        replayed = jsonable(policy.to_state())
        diff.extend(json_diff(jsonable(stored_state), replayed, "policy_state"))
        seqs = [e[0] for e in events]
        if len(set(seqs)) != len(seqs) or (seqs and max(seqs) != counters["event_seq"]):
            diff.append(f"event sequence numbers are not unique or do not end at {counters['event_seq']}")
        diff.extend(_counter_diff(rows, charge_sums, counters))
        return ReplayResult(campaign_id, not diff, len(events), diff)


def _counter_diff(rows: list, charge_sums: dict, counters: dict) -> list[str]:
    """The campaign row's counters and spend against the duel log and the ledger, and each duel's
    cost against its charges."""
    diff: list[str] = []
    checks = {
        "judged": (
            sum(1 for r in rows if r.choice is not None and r.status == DuelStatus.JUDGED),
            counters["judged"],
        ),
        "counted": (sum(1 for r in rows if r.record_seq is not None), counters["counted"]),
        "created": (len(rows), counters["created"]),
        "failed": (sum(1 for r in rows if r.status == DuelStatus.FAILED), counters["failed"]),
        "spend_nusd": (int(sum(charge_sums.values())), counters["spend"]),
    }
    for name, (from_log, stored) in checks.items():
        if from_log != stored:
            diff.append(f"{name}: log gives {from_log}, campaign row says {stored}")
    for r in rows:
        if int(charge_sums.get(r.id, 0)) != int(r.cost_nusd):
            diff.append(f"duel {r.id}: cost {r.cost_nusd} nUSD != its charges {charge_sums.get(r.id, 0)} nUSD")
    return diff
