"""What calls and votes cost: a reported cost in nano-USD, the judge's expected cost per duel
(c_J of the cost-aware allocation) and a human vote's fee. Pure functions over stored configs."""

from __future__ import annotations

from typing import Any

from ..models import to_nusd
from ..plain_values import finite_or_none
from ..stored_config import judge_orders, stored


def cost_nusd(cost: Any) -> int:
    """A reported cost in nano-USD (missing, negative or non-finite costs count 0)."""
    v = finite_or_none(cost)
    return to_nusd(v) if v is not None and v > 0 else 0


def judge_cost_per_duel(judge: dict) -> float:
    """c_J, the judge's expected cost per duel used by the cost-aware allocation.

    An LLM judge costs its configured per-call ``cost`` times its calls per duel
    (:func:`judge_orders`: two with ``orders: both``, one with ``orders: one``, two with
    ``orders: auto``, the mode it starts in); a human
    judge its ``fee_per_vote``; a simulated judge nothing (docs/service.md, Judge cost).
    """
    judge = stored(judge)
    if judge.get("kind") == "hybrid":  # hybrid hook: the automatic judge; the human fee is the policy's own
        return judge_cost_per_duel(judge["llm"])
    if judge.get("kind") == "human":
        return float(judge.get("fee_per_vote") or 0.0)
    if judge.get("kind") == "jury":  # each juror's calls at its own cost
        return sum(judge_cost_per_duel(j) for j in judge.get("judges") or [])
    if judge.get("kind") != "llm":
        return 0.0
    return float(judge.get("cost") or 0.0) * float(judge_orders(judge))


def vote_fee_nusd(judge: dict) -> int:
    """What one recorded human vote is charged (nano-USD): the judge's ``fee_per_vote``, 0 for other judges
    (``judge``: its stored form, as the campaign row keeps it, or its config model)."""
    judge = stored(judge)
    if judge.get("kind") != "human":
        return 0
    return cost_nusd(judge.get("fee_per_vote") or 0.0)
