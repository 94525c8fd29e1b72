"""The marginal cost of a duel given the answers and verdicts already stored (docs/reuse.md).

Pure arithmetic shared by the service (``service/campaigns/stores.py`` feeds it the
store's coverage) and the campaign simulators
(:mod:`algorithms.prompt_policy_sim`): with reuse, a component (a model's answers,
the judge's verdicts) costs, on a uniformly drawn prompt, its configured cost
times the chance that its result is not yet stored. That share is rounded up to a
multiple of ``1 / COST_STEPS`` and kept at least ``COST_FLOOR`` (the policies need
positive costs), so a policy's costs change at most ``COST_STEPS`` times per
component in a campaign.
"""

from __future__ import annotations

import math
from typing import Sequence

__all__ = ["COST_FLOOR", "COST_STEPS", "missing_fraction", "marginal_costs"]

#: The marginal cost of a component whose results are all stored, as a fraction of
#: its configured cost (policies need positive costs; docs/reuse.md, "The policy").
COST_FLOOR = 0.01
#: The missing fraction is rounded up to a multiple of 1/COST_STEPS, so the policy's
#: costs change at most COST_STEPS times per component in a campaign.
COST_STEPS = 20


def missing_fraction(stored: int, total: int) -> float:
    """The expected marginal fraction of a component's cost: the share of results not yet
    stored, rounded up to a multiple of 1/COST_STEPS, at least COST_FLOOR."""
    if total <= 0:
        return 1.0
    missing = max(0, total - min(stored, total)) / total
    q = math.ceil(missing * COST_STEPS - 1e-9) / COST_STEPS
    return max(COST_FLOOR, min(1.0, q))


def marginal_costs(
    base_costs: Sequence[float], base_judge: float, answered: Sequence[int | None], judged: int | None, totals: tuple
) -> dict:
    """The cost vector the policy uses given the stores.

    ``answered[i]``: how many of the campaign's prompts have a stored answer of
    model ``i`` (None: the model does not use the store, its cost stays);
    ``judged``: stored verdicts of the campaign's judge on its prompts (None: not
    stored); ``totals`` = (prompts, verdicts the campaign can need). The cost of a
    uniformly drawn prompt is the configured cost times the chance that its result
    is missing.
    """
    n_prompts, n_verdicts = totals
    costs = [
        float(c) if a is None else float(c) * missing_fraction(int(a), n_prompts) for c, a in zip(base_costs, answered)
    ]
    judge = float(base_judge) if judged is None else float(base_judge) * missing_fraction(int(judged), n_verdicts)
    return {"costs": costs, "judge_cost": judge}
