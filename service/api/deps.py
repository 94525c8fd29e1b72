"""FastAPI dependencies: the caller, and each campaign object a route needs.

The objects are built once per app (:func:`service.campaigns.build_campaigns`, on
``app.state.campaigns``); a route names the ones it uses, e.g. ``views: ViewsDep``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..auth import Principal, authenticate_async, require_admin
from ..campaigns.annotators import Annotators
from ..campaigns.forecasting import Forecasts
from ..campaigns.lifecycle import Lifecycle
from ..campaigns.replay import Replay
from ..campaigns.results import Results
from ..campaigns.views import Views
from ..container import Campaigns
from ..cycle.orchestration import Cycle
from ..cycle.runs import Runs
from .annotator_limits import MESSAGE, retry_after

_bearer = HTTPBearer(auto_error=False, description="The admin key (LLMDUEL_API_KEY) or an annotator token.")


async def principal(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)] = None,
) -> Principal:
    # On the event loop: a cached annotator token needs no thread (an uncached one is looked up in one).
    p = await authenticate_async(request)
    if not p.admin and p.annotator_id is not None:
        wait = await request.app.state.annotator_limiter.take_async(p.annotator_id)
        if wait is not None:
            raise HTTPException(429, MESSAGE, headers={"Retry-After": retry_after(wait)})
    return p


async def admin(p: Annotated[Principal, Depends(principal)]) -> Principal:
    return require_admin(p)


def campaigns_of(request: Request) -> Campaigns:
    return request.app.state.campaigns


def views_of(request: Request) -> Views:
    return request.app.state.campaigns.views


def results_of(request: Request) -> Results:
    return request.app.state.campaigns.results


def replay_of(request: Request) -> Replay:
    return request.app.state.campaigns.replay


def forecasts_of(request: Request) -> Forecasts:
    return request.app.state.campaigns.forecasts


def annotators_of(request: Request) -> Annotators:
    return request.app.state.campaigns.annotators


def cycle_of(request: Request) -> Cycle:
    return request.app.state.campaigns.cycle


def lifecycle_of(request: Request) -> Lifecycle:
    return request.app.state.campaigns.lifecycle


def runs_of(request: Request) -> Runs:
    return request.app.state.campaigns.runs


Admin = Annotated[Principal, Depends(admin)]
Caller = Annotated[Principal, Depends(principal)]
CampaignsDep = Annotated[Campaigns, Depends(campaigns_of)]
ViewsDep = Annotated[Views, Depends(views_of)]
ResultsDep = Annotated[Results, Depends(results_of)]
ReplayDep = Annotated[Replay, Depends(replay_of)]
ForecastsDep = Annotated[Forecasts, Depends(forecasts_of)]
AnnotatorsDep = Annotated[Annotators, Depends(annotators_of)]
CycleDep = Annotated[Cycle, Depends(cycle_of)]
LifecycleDep = Annotated[Lifecycle, Depends(lifecycle_of)]
RunsDep = Annotated[Runs, Depends(runs_of)]
