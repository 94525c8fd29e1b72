"""The campaign objects of one process, built once and handed to the API, the web pages and the CLI.

Each object gets its collaborators in ``__init__`` and owns its own state (caches, tasks,
clients); none reaches into another's private state. :func:`build_campaigns` is the one
place that wires them (``service.app.create_app`` and ``service.cli`` call it).
"""

from __future__ import annotations

from dataclasses import dataclass

from .auth import TokenCache
from .campaigns.annotators import Annotators
from .campaigns.batch_jobs import BatchJobs
from .campaigns.calls import Calls
from .campaigns.endings import Endings
from .campaigns.forecasting import Forecasts
from .campaigns.leases import Leases, new_owner_id
from .campaigns.lifecycle import Lifecycle
from .campaigns.pregeneration import Pregeneration
from .campaigns.prompt_cache import PromptCache
from .campaigns.replay import Replay
from .campaigns.results import Results
from .campaigns.stores import Stores
from .campaigns.tasks import Background, Keeper
from .campaigns.views import Views
from .campaigns.webhooks import Webhooks
from .config import Settings
from .cycle.batch_collector import pregen_batches
from .cycle.orchestration import Cycle
from .cycle.pregen_recovery import PregenRecovery
from .cycle.runs import Runs
from .cycle.service_port import CycleDeps
from .db import Database


@dataclass
class Campaigns:
    """The wired campaign objects of one app (no behaviour of its own beyond closing them)."""

    settings: Settings
    db: Database
    background: Background
    keeper: Keeper
    tokens: TokenCache
    views: Views
    results: Results
    replay: Replay
    forecasts: Forecasts
    annotators: Annotators
    webhooks: Webhooks
    leases: Leases
    stores: Stores
    calls: Calls
    pregen: Pregeneration
    lifecycle: Lifecycle
    cycle: Cycle
    runs: Runs

    async def aclose(self) -> None:
        """Stop the runs (their leases released), the keeper and the background tasks, then close
        the HTTP clients."""
        await self.runs.cancel_runs()
        self.background.cancel_all()
        await self.calls.close_clients()
        await self.webhooks.aclose()


def build_campaigns(settings: Settings, db: Database) -> Campaigns:
    """Build every campaign object of this process over ``db``, each with its collaborators."""
    owner_id = new_owner_id()
    background = Background()
    keeper = Keeper(settings.run_heartbeat_seconds, background)
    tokens = TokenCache(db)
    views = Views(db)
    webhooks = Webhooks(settings=settings, db=db, views=views, background=background, owner_id=owner_id)
    leases = Leases(settings, db, owner_id)
    stores = Stores(db, background)
    prompts = PromptCache(db)
    endings = Endings()
    calls = Calls(settings=settings, db=db, prompts=prompts, stores=stores, keeper=keeper)
    pregen = Pregeneration(
        settings=settings,
        db=db,
        calls=calls,
        background=background,
        endings=endings,
        batches=pregen_batches(BatchJobs(db, owner_id), calls.http_client),
    )
    cycle = Cycle(
        deps=CycleDeps(
            settings=settings,
            db=db,
            views=views,
            webhooks=webhooks,
            leases=leases,
            stores=stores,
            calls=calls,
            pregen=pregen,
            endings=endings,
            prompts=prompts,
        )
    )
    lifecycle = Lifecycle(settings=settings, db=db, views=views, endings=endings, leases=leases, webhooks=webhooks)
    runs = Runs(
        settings,
        db,
        cycle=cycle,
        lifecycle=lifecycle,
        calls=calls,
        leases=leases,
        stores=stores,
        webhooks=webhooks,
        keeper=keeper,
        background=background,
    )
    keeper.beats.append(runs.beat)
    keeper.beats.append(calls.drop_gone_calls)  # calls of duels gone elsewhere: cancelled
    recovery = PregenRecovery(BatchJobs(db, owner_id), pregen, calls, background)
    pregen.recover = recovery.recover
    keeper.beats.append(recovery.beat)
    return Campaigns(
        settings=settings,
        db=db,
        background=background,
        keeper=keeper,
        tokens=tokens,
        views=views,
        results=Results(db, views),
        replay=Replay(db),
        forecasts=Forecasts(db, max_duels=settings.forecast_max_duels),
        annotators=Annotators(db, views, tokens),
        webhooks=webhooks,
        leases=leases,
        stores=stores,
        calls=calls,
        pregen=pregen,
        lifecycle=lifecycle,
        cycle=cycle,
        runs=runs,
    )
