"""Resume a background run that paused (its failure cap) or failed (crashed), with its own limits.

A run pauses after ``LLMDUEL_RUN_MAX_FAILURES`` consecutive failed duels (a missing
key, a provider outage) and stays paused: the campaign is still ``running``, its
run is idle with ``run.error`` saying why. ``LLMDUEL_RESUME_RUNS`` does not restart
such a run at server start (it takes over only runs that were active when their
owner died); ``POST /v1/campaigns/{id}/resume`` (``llmduel campaign resume ID``)
restarts it (:meth:`.runner.Runs.resume_run`) with the run's stored concurrency and remaining ``max_duels``, after
the server checked that it has every API key the campaign names.
"""

from __future__ import annotations

from algorithms.vocabulary import CampaignStatus

from ..db import Database
from ..models import Campaign
from .credentials import require_key_envs
from .expiry import lease_free
from .types import Conflict, NotFound


def resume_limits_tx(db: Database, campaign_id: int) -> tuple[int | None, int, str | None]:
    """(remaining max_duels, concurrency, the error that paused it) of a run that may resume."""
    with db.read() as s:
        c = s.get(Campaign, campaign_id)
        if c is None:
            raise NotFound(f"campaign {campaign_id} not found")
        if c.status != CampaignStatus.RUNNING:
            if c.end_limit is not None:
                raise Conflict(
                    f"campaign {campaign_id} ended on its {c.end_limit} (status {c.status}); raise the limit "
                    f"with `llmduel campaign continue {campaign_id} --budget USD` or `--max-duels N` "
                    "(PATCH /v1/campaigns/{id})"
                )
            raise Conflict(f"campaign {campaign_id} has ended (status {c.status}); there is no run to resume")
        if c.judge.get("kind") == "human":
            raise Conflict("a run needs an automatic judge; this campaign's judge is human")
        if c.run_active and not lease_free(c.run_owner, c.run_lease_expires_at, db.clock(s)):
            raise Conflict(f"the run of campaign {campaign_id} is active; there is nothing to resume")
        if c.run_remaining is not None and c.run_remaining <= 0:
            raise Conflict(
                f"the run of campaign {campaign_id} used all the duels it was started with (its max_duels); "
                "start a new run with POST /v1/campaigns/{id}/run"
            )
        require_key_envs(c.models, c.judge)
        return c.run_remaining, int(c.run_concurrency or 1), c.run_error
