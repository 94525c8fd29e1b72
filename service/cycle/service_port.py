"""What the hot path needs from the campaign service, as a protocol.

The hot path is called by :class:`service.campaigns.cycle.Cycle` and handed the
service itself; naming that class here would make ``service.campaigns`` and
``service.cycle`` import each other (tests/test_layering.py counts type-only
imports). The protocol lists the members the decisions and drivers use, and the
service satisfies it structurally.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Protocol

from ..campaigns.policy_cache import PolicyCache
from ..campaigns.types import DuelPlan
from ..db import Database


class HotService(Protocol):
    """The campaign service as the hot path sees it."""

    db: Database
    policies: PolicyCache
    config_cache: dict[int, Any]
    stored_keys: Any
    call_expiry: dt.timedelta
    call_lease: dt.timedelta
    pending_expiry: dt.timedelta
    owner_id: str

    def permutation(self, campaign_id: int, draw_key: str, n_prompts: int) -> list[int]: ...

    def secret_keys(self, models: list, judge: dict) -> tuple[str, ...]: ...

    def store_costs_for(self, campaign_id: int) -> Any: ...

    def cached_prompt(self, campaign_id: int, idx: int) -> str | None: ...

    def remember_prompt(self, campaign_id: int, idx: int, text: str) -> str: ...

    def cached_prompt_extras(self, campaign_id: int, idx: int) -> tuple[list[str] | None, str | None] | None: ...

    def answer_now(self, plan: DuelPlan, now: dt.datetime) -> tuple[list[dict], dict[str, Any]]: ...

    def duel_view(self, d: Any, c: Any, charges: Any = None, meta: Any = None) -> dict: ...
