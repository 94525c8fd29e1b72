"""Which models and judges use the answer and verdict stores (a campaign's ``answers`` and ``verdicts``
reuse settings), what the policy counts as a duel's cost, and the marginal costs handed to it before a
selection (docs/reuse.md). The marginal costs themselves are computed by
:meth:`.stores.Stores.refresh_store_costs` with :func:`algorithms.reuse_costs.marginal_costs`.
"""

from __future__ import annotations

from typing import Any, Sequence

from algorithms.vocabulary import CostModel, JudgeKind, Reuse

from .store_keys import judge_key, model_key


def stores_answers(setting: str | None, model: dict) -> bool:
    return setting == Reuse.REUSE and model_key(model) is not None


def stores_verdicts(setting: str | None, judge: dict) -> bool:
    """LLM judges only: a human always gives a fresh vote, a simulated judge costs nothing."""
    return setting == Reuse.REUSE and judge_key(judge) is not None


def pregenerates(answers: str | None, models: Sequence[dict], judge: dict) -> bool:
    """A campaign whose answers are pre-generated for annotators (human judge, a model using the
    answer store; service/campaigns/pregeneration.py): the only campaigns with budget holds."""
    return judge.get("kind") == JudgeKind.HUMAN and any(stores_answers(answers, m) for m in models)


def cost_model(answers: str | None, verdicts: str | None, models: Sequence[dict], judge: dict) -> str:
    """What the policy, the oracle and the lower bound count as a duel's cost."""
    if any(stores_answers(answers, m) for m in models) or stores_verdicts(verdicts, judge):
        return str(CostModel.MARGINAL)
    return str(CostModel.PER_QUERY)


def apply_costs(policy: Any, target: dict | None) -> dict | None:
    """Give the policy the campaign's current marginal costs before a selection.

    Returns what the duel log records (``duels.costs_at_select``) when the costs
    changed, else None; replay calls ``set_costs`` with the recorded values at the
    same point, so it stays exact however the costs were computed.
    """
    if target is None or not hasattr(policy, "set_costs"):
        return None
    if policy.set_costs(target["costs"], target["judge_cost"]):
        return {"costs": [float(x) for x in target["costs"]], "judge_cost": float(target["judge_cost"])}
    return None
