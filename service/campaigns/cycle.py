"""The vote cycle: create a campaign, next duel, vote, stop (:class:`Cycle`).

Every write that touches a campaign runs in one transaction that first locks the
campaign row (:meth:`Database.lock_campaign`), so writes on one campaign are
serialised and a vote and the state update it causes commit together. Model and
judge calls happen outside any transaction:

1. *plan* (locked): expire stale duels, rebuild the policy from its stored state,
   ``next_pair(pending=in-flight pairs)``, check budget and caps, draw a prompt and
   the display order, insert the duel as ``calling``, commit.
2. both models are called concurrently, no lock held.
3. *store answers* (locked): charges for what was really spent; the duel becomes
   ``pending`` (waiting for a verdict) or ``failed`` (its pair is free again).
4. an automatic judge decides (no lock), then *record* (locked) like a vote: the
   duel moves ``pending -> judged`` with a conditional UPDATE (a second verdict or
   a duplicate vote finds no pending row: 409), the policy records the score,
   stops when it certifies, and the campaign row gets the new state.

The synchronous ``*_tx`` methods run in worker threads; the async methods
orchestrate them with the model and judge calls.
"""

from __future__ import annotations

import logging
from typing import Any

from ..config import Settings
from ..db import Database
from ..egress import EgressDenied, EgressPolicy
from .leases import Leases
from .orchestration import DuelOrchestration
from .pregeneration import Pregeneration
from .stores import Stores
from .tasks import Background, Keeper
from .transactions import CampaignTransactions
from .types import Unprocessable
from .views import Views
from .webhooks import Webhooks

log = logging.getLogger("llmduel.campaigns")


def check_egress(policy: EgressPolicy, body: Any) -> None:
    """:class:`Unprocessable` naming the field and host of the first address of a campaign-create
    body (model and judge ``base_url``, ``webhook_url``) that ``policy`` does not allow."""
    if policy.allow_all:
        return
    targets = [(f"models[{n}].client.base_url", getattr(m.client, "base_url", None)) for n, m in enumerate(body.models)]
    targets.append(("judge.client.base_url", getattr(getattr(body.judge, "client", None), "base_url", None)))
    targets.append(("webhook_url", body.webhook_url))
    for field, url in targets:
        if url:
            try:
                policy.check_url(url)
            except EgressDenied as exc:
                raise Unprocessable(f"{field}: {exc.message}") from None


class Cycle(CampaignTransactions, DuelOrchestration, Pregeneration):
    """The vote cycle: plan a duel, call the models, store the answers, judge, record the verdict.

    Owns the policies, the prompt and config caches, the model and judge clients and the
    store claims of its calls under way (``live_claims``; :meth:`.runner.Runs.beat` keeps them
    alive). Its parts (:mod:`.transactions`, :mod:`.orchestration`, :mod:`.pregeneration`)
    share this one object; everything else comes from the collaborators handed in."""

    def __init__(
        self,
        settings: Settings,
        db: Database,
        views: Views,
        webhooks: Webhooks,
        leases: Leases,
        stores: Stores,
        keeper: Keeper,
        background: Background,
    ):
        self.settings = settings
        self.db = db
        self.background = background
        self.owner_id = leases.owner_id  # the fencing token of this process's runs
        # The collaborators' operations the transactions, the orchestration and the hot path
        # (service.hotpath.HotService) call, by name; their state stays with their owners.
        self.lock_existing = views.lock_existing
        self.duel_view = views.duel_view
        self.get_campaign = views.get_campaign
        self.get_duel = views.get_duel
        self.enqueue_webhook = webhooks.enqueue_webhook
        self.schedule_webhook = webhooks.schedule_webhook
        self.take_lease = leases.take_lease
        self.store_costs_for = stores.store_costs_for
        self.update_store_costs = stores.update_store_costs
        self.claim_tx = stores.claim_tx
        self.release_tx = stores.release_tx
        self.ensure_keeper = keeper.ensure
        self.init_transactions(settings)
        self.init_orchestration(settings, db)

    # ------------------------------------------------------------ create
    def create_campaign(self, body: Any) -> int:
        """Create a campaign whose addresses ``LLMDUEL_ALLOWED_HOSTS`` allows (else 422 naming the host)."""
        check_egress(self.settings.egress, body)
        return super().create_campaign(body)
