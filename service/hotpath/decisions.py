"""The hot path's plan and vote, written once for both drivers.

:func:`decide_plan` and :func:`decide_vote` are coroutines that ask a *transaction driver*
(:class:`service.hotpath.sync_driver.SyncTx` or
:class:`service.hotpath.pg_driver.PgTx`) for each database round trip. They
decide with :mod:`service.decide` and :mod:`service.campaigns.rules`, like the
general transactions, and raise the same refusals. They are called only for campaigns
that :func:`handles` accepts; the caller chooses the driver before the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from algorithms.vocabulary import CampaignStatus, DuelStatus

from ..campaigns import rules
from ..campaigns.policy_cache import policy_snapshot, restore_policy
from ..campaigns.types import Conflict, DuelOutcome, NotFound
from ..decide import plan as planning
from ..decide import verdict as deciding
from ..models import Duel, utcnow

if TYPE_CHECKING:  # pragma: no cover
    from ..auth import Principal
    from .service_port import HotService


@dataclass(frozen=True)
class CampaignConfig:
    """What never changes once a campaign exists (cached per process).

    The budget and the duel cap can be raised (PATCH): they are read with the locked row instead.
    """

    models: list
    judge: dict
    tie_policy: str
    seed: int
    n_prompts: int
    draw_key: str | None
    max_pending_per_annotator: int
    answers: str = "fresh"
    verdicts: str = "fresh"
    prompt_sampling: str = "with_replacement"
    algorithm: str = ""
    delta: float = 0.0


_CONFIG_COLUMNS = (
    "models",
    "judge",
    "tie_policy",
    "seed",
    "n_prompts",
    "draw_key",
    "max_pending_per_annotator",
    "answers",
    "verdicts",
    "prompt_sampling",
    "algorithm",
    "delta",
)


def handles(cfg: CampaignConfig) -> bool:
    """Whether the hot path plans and records for a campaign with this configuration.

    Not for sampling without replacement (positions, outcomes held for an earlier position,
    released in position order) nor for a hybrid judge (its pool of selected duels, its
    draw order): those requests run the general ORM transaction. A campaign sampling
    without replacement has an automatic judge, so from the API only an admin's request
    for a duel, or an admin's vote on a duel still pending, concerns it; a hybrid
    campaign's annotators request and vote through the general transaction.
    """
    return not rules.is_wor(cfg.prompt_sampling) and cfg.judge.get("kind") != "hybrid"


def not_handled(campaign_id: int) -> RuntimeError:
    return RuntimeError(f"campaign {campaign_id} is not one the hot path handles (hotpath.handles)")


class DuelRow(SimpleNamespace):
    """A duel's columns as plain attributes (unset ones None): the hot path builds
    its views from this instead of an ORM instance."""

    _EMPTY = dict.fromkeys(Duel.__table__.c.keys())
    model_a = Duel.model_a
    model_b = Duel.model_b

    def __init__(self, **columns):
        super().__init__(**{**self._EMPTY, **columns})


def remember_config(svc: HotService, campaign_id: int, row) -> CampaignConfig:
    cfg = CampaignConfig(
        models=row.models,
        judge=row.judge,
        tie_policy=row.tie_policy,
        seed=int(row.seed),
        n_prompts=int(row.n_prompts),
        draw_key=row.draw_key,
        max_pending_per_annotator=int(row.max_pending_per_annotator),
        answers=row.answers,
        verdicts=row.verdicts,
        prompt_sampling=row.prompt_sampling,
        algorithm=row.algorithm,
        delta=float(row.delta),
    )
    cache: dict = svc.config_cache
    if len(cache) >= 10_000:
        cache.clear()
    cache[campaign_id] = cfg
    return cfg


async def _config(svc: HotService, tx, campaign_id: int) -> CampaignConfig:
    cfg = svc.config_cache.get(campaign_id)
    return cfg if cfg is not None else remember_config(svc, campaign_id, await tx.config(campaign_id))


async def policy_at(svc: HotService, tx, campaign_id: int, event_seq: int, fetched_state: dict | None):
    """The campaign's policy at ``event_seq``: the cached object, else rebuilt from
    its stored state (``fetched_state`` when the first round trip brought it)."""
    hit = svc.policies.take_exact(campaign_id, event_seq)
    if hit is not None:
        return hit
    state = fetched_state if fetched_state is not None else await tx.policy_state(campaign_id)
    return restore_policy(state)


async def refuse_or_end(tx, campaign_id: int, decision, now) -> None:
    """Raise a refusal of :mod:`service.decide.plan`; an ending is written first (committed with the refusal)."""
    if isinstance(decision, planning.End):
        await tx.finish(campaign_id, decision, now)
        raise decision.error
    if decision is not None:
        raise decision


# ---------------------------------------------------------------- the vote
async def decide_vote(svc: HotService, tx, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
    """:meth:`Cycle.record_verdict_tx` for a human vote: refusals (a duel expired meanwhile is
    marked so), the score, the policy's record, and the campaign's end (certification, max_duels, budget)."""
    hint = principal.campaign_id  # an annotator's campaign (the admin's is learnt from the duel)
    crow, state, drow = await tx.vote_reads(duel_id, hint, svc.policies.seq_of(hint) if hint else None)
    if crow is None or drow is None or not principal.can_access(crow.id):
        raise NotFound(f"duel {duel_id} not found")  # as for a missing id: no probing of ids
    if not principal.admin and not rules.annotator_owns(drow.requested_by, principal.label):
        raise NotFound(f"duel {duel_id} not found")  # another annotator's duel
    cfg = await _config(svc, tx, crow.id)
    if not tx.covers(cfg, False):  # the caller chose the driver before the transaction
        raise not_handled(crow.id)
    now = utcnow()
    refused = deciding.refusal(
        duel_id, drow.status, drow.requested_by, drow.error, drow.expires_at, crow.id, crow.status, now
    )
    if refused is not None:
        if refused.expire:
            await tx.expire_duel(duel_id, crow.id, now)
        raise refused.error
    fee = rules.vote_fee_nusd(cfg.judge)  # a human judge's fee, charged with the vote
    d = DuelRow(**drow._asdict())
    d.cost_nusd = int(d.cost_nusd or 0) + fee
    c = SimpleNamespace(
        id=crow.id, models=cfg.models, status=CampaignStatus.RUNNING, tie_policy=cfg.tie_policy, seed=cfg.seed
    )
    score = rules.score_of(
        choice, d.model_i, d.model_a, d.model_b, cfg.tie_policy, cfg.seed, d.number, draw_key=cfg.draw_key
    )
    d.status, d.choice, d.judged_by, d.judged_at = DuelStatus.JUDGED, choice, principal.label, now
    judged: dict[str, Any] = {
        "did": duel_id,
        "choice": choice,
        "score": None,
        "counted": False,
        "judged_by": d.judged_by,
        "now": now,
        "record_seq": None,
        "fee": fee,
    }
    recorded, stopped = None, None
    if score is not None:
        seq = crow.event_seq + 1
        policy = await policy_at(svc, tx, crow.id, crow.event_seq, state)
        policy.record(d.model_i, d.model_j, score)
        stopped = _stopped(policy, cfg)
        d.score, d.counted, d.record_seq = score, True, seq
        judged.update(score=score, counted=True, record_seq=seq)
        policy_state, counts, stats, leader = policy_snapshot(policy)
        recorded = {"seq": seq, "policy_state": policy_state, "counts": counts, "stats": stats, "leader": leader}
    end = deciding.ending(
        stopped, True, crow.max_duels, crow.duels_judged + 1, crow.budget_nusd, crow.spend_nusd + fee, None
    )
    if not await tx.vote_writes(judged, {"cid": crow.id, "now": now, "fee": fee}, recorded, end):
        raise Conflict(f"duel {duel_id} already has a verdict")  # cannot happen under the lock; never count twice
    if recorded is not None:
        tx.after_commit = lambda: svc.policies.put(crow.id, recorded["seq"], policy)
    if end is not None:
        c.status = end.status
    return DuelOutcome(duel_id, DuelStatus.JUDGED, ended=end is not None, view=svc.duel_view(d, c))


def _stopped(policy, cfg: CampaignConfig) -> deciding.Ending | None:
    """The ending of a policy whose stopping rule fired with the score just recorded, else None."""
    if not policy.should_stop():
        return None
    verdict = getattr(policy, "verdict", None)
    winner = None if verdict in deciding.NO_WINNER else int(policy.recommendation())
    return deciding.stop_ending(verdict, winner, cfg.algorithm, cfg.delta, cfg.n_prompts)
