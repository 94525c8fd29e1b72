"""A judge's charges: an LLM judge's call (its amount from :func:`service.money.ledger.judge_charge`,
capped at its bound) and a reused stored verdict, written by :mod:`service.money.charges` (which
also adds the amount to the duel's cost and the campaign's spend in the same transaction), and
the verdict store's row they paid for.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from algorithms.vocabulary import CampaignStatus

from .. import stored_config
from ..models import Campaign, Duel
from ..money import charges, ledger
from ..plain_values import jsonable
from . import store_claims
from .expiry import is_stale

log = logging.getLogger("llmduel.campaigns")


@dataclass
class Judgement:
    """What the judge (or the annotator) gave, as :func:`service.cycle.verdict.decide_verdict` records it."""

    choice: str | None
    judged_by: str
    principal: Any = None
    judge_cost: float = 0.0
    judge_detail: dict | None = None
    judge_error: str | None = None
    judge_score: float | None = None
    verdict_claim: store_claims.Claim | None = None
    stored_choice: str | None = None
    reused_verdict: store_claims.Stored | None = None
    fault: str | None = None  # the judge's provider fault (ledger), set by charge_judge


def price_judge(
    judge: dict,
    prompt: str,
    reference: str | None,
    *,
    j: Judgement,
    stale: bool,
    duel_id: int,
    image_answers: bool = False,
) -> tuple[int, dict]:
    """What the judge call is charged (a judge call is charged whatever happens to its verdict): at
    most its bound (:func:`.ledger.judge_charge`), nothing past the duel's hard deadline (``stale``);
    and the fault's detail. A lying judge's verdict becomes a judge error (``j`` is updated)."""
    if not j.judge_cost and not ledger.usage_faulted(j.judge_detail):
        return 0, {}
    if stale:  # past the hard deadline (see store_answers_tx)
        log.warning("duel %s: the judge returned after its hard deadline; not charged", duel_id)
        return 0, {}
    charge = ledger.judge_charge(
        judge, prompt, reference, cost=j.judge_cost, detail=j.judge_detail, image_answers=image_answers
    )
    j.fault, fault_detail = charge.fault, charge.detail()
    if j.fault is not None:  # the verdict of a lying judge is not counted
        j.choice, j.judge_error = None, f"provider fault: {j.fault}"
        j.judge_detail = {**(j.judge_detail or {}), **fault_detail}
    return charge.amount_nusd, fault_detail


def charge_judge(prompts: Any, s, c: Campaign, d: Duel, *, j: Judgement, now, judge: dict | None = None) -> int:
    """The judge call's charges and the verdict store's row, on ORM objects ``c`` and ``d`` (the
    hybrid judge's transactions); returns the amount. ``judge``: the config whose bound caps the
    charge (default the campaign's; a hybrid's ``llm`` part); ``prompts``: the
    :class:`.prompt_cache.PromptCache` that reads the prompt's reference answer."""
    reference = prompts.prompt_extras_in(s, c.id, d.prompt_index)[1] if j.judge_cost else None
    judge_nusd, fault_detail = price_judge(
        judge or c.judge,
        d.prompt,
        reference,
        j=j,
        stale=is_stale(d.expires_at, now),
        duel_id=d.id,
        image_answers=stored_config.image_answers(c.models),
    )
    _reuse_row(s, c.id, d.id, j=j, now=now)
    fault_detail = ledger.mark_late(fault_detail, bool(judge_nusd) and c.status != CampaignStatus.RUNNING) or {}
    charge_id = charges.charge_judgement(s, c, d, amount_nusd=judge_nusd, detail=fault_detail or None, now=now)
    _store_verdict(s, j, judge_nusd, charge_id)
    return judge_nusd


def write_judge_charges(
    conn, campaign_id: int, duel_id: int, *, j: Judgement, amount_nusd: int, detail: dict, now
) -> None:
    """The same rows as :func:`charge_judge` as Core statements (the vote cycle's SQLAlchemy driver):
    the reuse row, the judge charge added to the duel's cost and the campaign's spend, the stored verdict."""
    _reuse_row(conn, campaign_id, duel_id, j=j, now=now)
    charge_id = charges.charge_judgement_core(
        conn, campaign_id, duel_id, amount_nusd=amount_nusd, detail=detail or None, now=now
    )
    _store_verdict(conn, j, amount_nusd, charge_id)


def _reuse_row(s, campaign_id: int, duel_id: int, *, j: Judgement, now) -> None:
    """A verdict taken from the store: its zero-cost ledger row naming the charge that paid for it."""
    if j.reused_verdict is not None:
        row = charges.reuse_charge(campaign_id, "judge", model_index=None, stored=j.reused_verdict, now=now)
        charges.insert_charge(s, dict(row, duel_id=duel_id))


def _store_verdict(s, j: Judgement, amount_nusd: int, charge_id: int | None) -> None:
    """The verdict store's row this judgement was paid for, with its charge (a verdict only)."""
    if j.verdict_claim is not None and j.choice is not None and j.stored_choice is not None:
        detail = jsonable(j.judge_detail) if j.judge_detail else None
        store_claims.finalize_verdict(
            s, j.verdict_claim, choice=j.stored_choice, detail=detail, amount_nusd=amount_nusd, charge_id=charge_id
        )
