"""Campaigns: the domain logic of the service.

* pure rules, used by every transaction path: :mod:`.draws` (the secret prompt, side and tie
  draws), :mod:`.sampling` (prompts without replacement), :mod:`.scoring` (a verdict's score),
  :mod:`.limits` (duel cap, run concurrency, continuing), :mod:`.expiry` (duels, calls,
  leases), :mod:`.pairs`, :mod:`.annotator_access`; below this package,
  :mod:`service.stored_config` (reading stored configs), :mod:`service.stored_text` and
  :mod:`service.plain_values`; costs and budget bounds are in :mod:`service.money`;
* :mod:`.types`: plans, outcomes, replay results and domain errors (no HTTP codes);
* :mod:`.policy_cache`: policies between transactions;
* :mod:`.lifecycle`: :class:`Lifecycle`, a campaign's life outside its duels (create, stop,
  limits and continuing, a run's start and end), one locked transaction each;
* :mod:`.views`: read-only views (what each caller may see), JSON forms, diffs;
* :mod:`.replay`: a campaign's policy rebuilt from its log and compared;
* :mod:`.calls`: :class:`Calls`, the model and judge calls and the stores'
  single flight; :mod:`.pregeneration`: :class:`Pregeneration`, answers made
  ahead for annotators; :mod:`.endings`: how a campaign ends;
  :mod:`.prompt_cache`: the prompts of this process's campaigns;
* :mod:`.leases`: one owner per background run (lease, heartbeat, take-over);
* :mod:`.webhooks`: the webhook outbox (at-least-once, retried) and
  :mod:`.webhook_signature`: the HMAC signature of its requests;
* :mod:`.tasks`: a process's background tasks, and blocking work in a thread;

The package's face exports the domain types and errors and the pure helpers only (its
``__init__`` imports nothing heavier): import a collaborator from its module
(``from service.campaigns.views import Views``). The vote cycle that drives duels through these parts (:class:`Cycle`, background runs
:class:`Runs`) is :mod:`service.cycle`, above this package; :mod:`service.container`
builds every object once per process. Nothing here imports either.
"""

from ..plain_values import finite_or_none, jsonable
from ..stored_text import clean_text
from .draws import draw_prompt_and_side
from .policy_cache import PolicyCache, new_policy, policy_snapshot, restore_policy, warm_policies
from .types import (
    CampaignEnded,
    Conflict,
    DomainError,
    DuelOutcome,
    DuelPlan,
    Forbidden,
    HeldDuel,
    NotFound,
    ReplayResult,
    Unprocessable,
)

__all__ = [
    "CampaignEnded",
    "Conflict",
    "DomainError",
    "DuelOutcome",
    "DuelPlan",
    "Forbidden",
    "HeldDuel",
    "NotFound",
    "PolicyCache",
    "ReplayResult",
    "Unprocessable",
    "clean_text",
    "draw_prompt_and_side",
    "finite_or_none",
    "jsonable",
    "new_policy",
    "policy_snapshot",
    "restore_policy",
    "warm_policies",
]
