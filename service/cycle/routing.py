"""The choice of driver for a request, made before its transaction.

On PostgreSQL, a request's transaction runs on the asyncpg driver when
:func:`.shared.handles` accepts its campaign's configuration, else on the SQLAlchemy
driver in a worker thread; both run the same sequence. The configuration never changes
once a campaign exists, so the choice comes from the process's cache
(``svc.config_cache``); on a miss one small read fills it. A vote is routed by its
duel's campaign: an annotator's own campaign, or for the admin the duel's
``campaign_id`` (one small read). A campaign or duel that does not exist is sent to
the asyncpg driver, which answers 404 as the other does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import bindparam, select

from ..models import Duel
from .shared import CampaignConfig, handles, remember_config
from .sync_driver import CONFIG

if TYPE_CHECKING:  # pragma: no cover
    from ..auth import Principal
    from .service_port import HotService

CAMPAIGN_OF_DUEL = select(Duel.__table__.c.campaign_id).where(Duel.__table__.c.id == bindparam("did"))


def vote_campaign_hint(principal: Principal) -> int | None:
    """The campaign a vote is routed by when no read is needed (an annotator's), else None."""
    return None if principal.admin else principal.campaign_id


def cached_choice(svc: HotService, campaign_id: int | None) -> bool | None:
    """The choice from the cache alone: True (hot path), False (general), None (not cached)."""
    cfg = svc.config_cache.get(campaign_id) if campaign_id is not None else None
    return None if cfg is None else handles(cfg)


def _config(svc: HotService, campaign_id: int) -> CampaignConfig | None:
    cfg = svc.config_cache.get(campaign_id)
    if cfg is not None:
        return cfg
    with svc.deps.db.read() as s:
        row = s.connection().execute(CONFIG, {"cid": campaign_id}).first()
    return None if row is None else remember_config(svc, campaign_id, row)


def plan_on_hot_path(svc: HotService, campaign_id: int) -> bool:
    """Whether a duel of this campaign is planned on the hot path (may read the config once)."""
    cfg = _config(svc, campaign_id)
    return cfg is None or handles(cfg)


def vote_on_hot_path(svc: HotService, duel_id: int, principal: Principal) -> bool:
    """Whether a vote on this duel is recorded on the hot path (may read the duel's campaign id)."""
    campaign_id = vote_campaign_hint(principal)
    if campaign_id is None:
        with svc.deps.db.read() as s:
            campaign_id = s.connection().execute(CAMPAIGN_OF_DUEL, {"did": duel_id}).scalar()
        if campaign_id is None:
            return True  # no such duel: the hot path's 404
    return plan_on_hot_path(svc, int(campaign_id))
