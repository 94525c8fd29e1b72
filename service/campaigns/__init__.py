"""Campaigns: the domain logic of the service.

* :mod:`.rules`: the campaign rules as pure functions (costs, budget reservation,
  ``max_duels``, prompt and side draw, tie scores, end conditions), used by every
  transaction path;
* :mod:`.types`: plans, outcomes, replay results and domain errors (no HTTP codes);
* :mod:`.policy_cache`: policies between transactions;
* :mod:`.views`: what each caller may see, JSON forms, diffs;
* :mod:`.service`: :class:`CampaignService`, the facade the API, the web pages,
  the CLI and the demo use (transactions, replay, background runs, webhooks).
"""

from .policy_cache import PolicyCache, new_policy, policy_snapshot, restore_policy, warm_policies
from .rules import clean_text, draw_prompt_and_side, finite_or_none, jsonable
from .service import CampaignService
from .types import (CampaignEnded, Conflict, DomainError, DuelOutcome, DuelPlan, Forbidden, NotFound, ReplayResult,
                    Unprocessable)
from .views import duel_view_for, json_diff, jsonable_report

__all__ = [
    "CampaignEnded", "CampaignService", "Conflict", "DomainError", "DuelOutcome", "DuelPlan", "Forbidden",
    "NotFound", "PolicyCache", "ReplayResult", "Unprocessable", "clean_text", "draw_prompt_and_side",
    "duel_view_for", "finite_or_none", "json_diff", "jsonable", "jsonable_report", "new_policy",
    "policy_snapshot", "restore_policy", "warm_policies",
]
