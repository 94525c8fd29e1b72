"""What the vote cycle is given and what its sequences need, as types.

:class:`CycleDeps` is everything the :class:`service.cycle.orchestration.Cycle` uses from
other objects, handed to it once (``service/container.py: build_campaigns``) as one frozen
dataclass with keyword-only fields; the cycle and its sequences reach each collaborator by
name (``svc.deps.prompts.cached_prompt(...)``), so a reader and a call tracer follow the
path to the owner.

:class:`HotService` is the cycle as the sequences (:mod:`.plan`, :mod:`.answers`,
:mod:`.verdict`) and their drivers see it: its collaborators and the per-process state the
cycle owns. The sequences take it instead of the class, which would make them and
:mod:`.orchestration` import each other (tests/test_layering.py counts type-only imports).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Protocol

from ..campaigns.calls import Calls
from ..campaigns.endings import Endings
from ..campaigns.leases import Leases
from ..campaigns.policy_cache import PolicyCache
from ..campaigns.pregeneration import Pregeneration
from ..campaigns.prompt_cache import PromptCache
from ..campaigns.store_lookup import StoredKeys
from ..campaigns.stores import Stores
from ..campaigns.views import Views
from ..campaigns.webhooks import Webhooks
from ..config import Settings
from ..db import Database


@dataclass(frozen=True, kw_only=True)
class CycleDeps:
    """The vote cycle's collaborators, each used under its own name."""

    settings: Settings
    db: Database
    #: duel views (``duel_view``, ``get_duel``)
    views: Views
    #: a campaign's ``campaign.ended`` webhook (``schedule_webhook``)
    webhooks: Webhooks
    #: the owner id that fences this process's runs (``owner_id``)
    leases: Leases
    #: the stores' marginal costs (``store_costs_for``, ``update_store_costs``)
    stores: Stores
    #: the model and judge calls, the stores' single flight and claims
    calls: Calls
    #: answers made ahead for annotators (``schedule``)
    pregen: Pregeneration
    #: a campaign's end in the caller's session (``finish``, ``pause_for_fault``)
    endings: Endings
    #: prompt texts and extras read so far (``cached_prompt``, ``remember_prompt``, ``cached_prompt_extras``)
    prompts: PromptCache


class HotService(Protocol):
    """The vote cycle as its sequences and drivers see it."""

    deps: CycleDeps
    policies: PolicyCache
    config_cache: dict[int, Any]
    stored_keys: StoredKeys
    call_expiry: dt.timedelta
    call_lease: dt.timedelta
    pending_expiry: dt.timedelta
    owner_id: str

    def permutation(self, campaign_id: int, draw_key: str, n_prompts: int) -> list[int]: ...

    def secret_keys(self, models: list, judge: dict) -> tuple[str, ...]: ...
