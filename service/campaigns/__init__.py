"""Campaigns: the domain logic of the service.

* :mod:`.rules`: the campaign rules as pure functions (costs, budget reservation,
  ``max_duels``, prompt and side draw, tie scores, end conditions), used by every
  transaction path;
* :mod:`.types`: plans, outcomes, replay results and domain errors (no HTTP codes);
* :mod:`.policy_cache`: policies between transactions;
* :mod:`.lifecycle`: :class:`Lifecycle`, a campaign's life outside its duels (create, stop,
  limits and continuing, a run's start and end), one locked transaction each;
* :mod:`.views`: read-only views (what each caller may see), JSON forms, diffs;
* :mod:`.replay`: a campaign's policy rebuilt from its log and compared;
* :mod:`.orchestration`: :class:`Cycle`, the vote cycle: one duel end to end (its
  plan and verdict sequences are :mod:`service.cycle`'s, its answers transaction here);
* :mod:`.calls`: :class:`Calls`, the model and judge calls and the stores'
  single flight; :mod:`.pregeneration`: :class:`Pregeneration`, answers made
  ahead for annotators; :mod:`.endings`: how a campaign ends;
  :mod:`.prompt_cache`: the prompts of this process's campaigns;
* :mod:`.runner`: background runs (:class:`Runs`), the failure cap, and the
  keeper's beat (heartbeat, take-over, webhook sends);
* :mod:`.leases`: one owner per background run (lease, heartbeat, take-over);
* :mod:`.webhooks`: the webhook outbox (at-least-once, retried) and
  :mod:`.webhook_signature`: the HMAC signature of its requests;
* :mod:`.tasks`: a process's background tasks, and blocking work in a thread;
* :mod:`.container`: :class:`Campaigns`, every object above built once per process
  with its collaborators (:func:`build_campaigns`), handed to the API, the web pages,
  the CLI and the demo.
"""

from .annotators import Annotators
from .calls import Calls
from .container import Campaigns, build_campaigns
from .forecasting import Forecasts
from .leases import Leases
from .lifecycle import Lifecycle
from .orchestration import Cycle
from .policy_cache import PolicyCache, new_policy, policy_snapshot, restore_policy, warm_policies
from .pregeneration import Pregeneration
from .replay import Replay
from .results import Results
from .rules import clean_text, draw_prompt_and_side, finite_or_none, jsonable
from .runner import Runs
from .stores import Stores
from .tasks import Background, Keeper
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
from .views import Views, duel_view_for, json_diff, jsonable_report
from .webhooks import Webhooks

__all__ = [
    "Annotators",
    "Campaigns",
    "Forecasts",
    "Replay",
    "Results",
    "Views",
    "Webhooks",
    "build_campaigns",
    "CampaignEnded",
    "Background",
    "Calls",
    "Cycle",
    "Keeper",
    "Leases",
    "Lifecycle",
    "Runs",
    "Stores",
    "Conflict",
    "DomainError",
    "DuelOutcome",
    "DuelPlan",
    "Forbidden",
    "HeldDuel",
    "NotFound",
    "PolicyCache",
    "Pregeneration",
    "ReplayResult",
    "Unprocessable",
    "clean_text",
    "draw_prompt_and_side",
    "duel_view_for",
    "finite_or_none",
    "json_diff",
    "jsonable",
    "jsonable_report",
    "new_policy",
    "policy_snapshot",
    "restore_policy",
    "warm_policies",
]
