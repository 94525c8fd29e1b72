"""REST API v1 (see docs/service.md for the contract)."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Body, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError

from algorithms.vocabulary import CampaignStatus, DuelStatus

from .. import schemas
from ..auth import require_campaign
from .deps import (
    Admin,
    AnnotatorsDep,
    Caller,
    CampaignsDep,
    CycleDep,
    ForecastsDep,
    LifecycleDep,
    ReplayDep,
    RunsDep,
    ViewsDep,
)

router = APIRouter()

Id = Annotated[int, Path(ge=1, le=2**62)]
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": schemas.ErrorOut, "description": "Missing or invalid credentials"},
    403: {"model": schemas.ErrorOut, "description": "The credentials do not allow this"},
    404: {"model": schemas.ErrorOut, "description": "Not found"},
    409: {"model": schemas.ErrorOut, "description": "Conflict with the current state"},
    422: {"model": schemas.ErrorOut, "description": "Invalid input"},
    503: {"model": schemas.ErrorOut, "description": "Database unavailable"},
}


async def _t(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a worker thread."""
    if kwargs:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
    return await anyio.to_thread.run_sync(fn, *args)


@router.post(
    "/v1/campaigns",
    status_code=201,
    response_model=schemas.CampaignOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="Create a campaign",
)
async def create_campaign(body: schemas.CampaignCreate, campaigns: CampaignsDep, _: Admin, response: Response):
    campaign_id = await _t(campaigns.lifecycle.create_campaign, body)
    response.headers["Location"] = f"/v1/campaigns/{campaign_id}"
    view = await _t(campaigns.views.get_campaign, campaign_id)
    if body.webhook_url:  # shown this once: the key to verify the campaign's webhook signatures
        view["webhook_secret"] = await _t(campaigns.webhooks.webhook_secret_of, campaign_id)
    return view


Spread = Annotated[
    float,
    Query(
        ge=0.01,
        le=5,
        description="Standard deviation of the prior's strengths (absent: learned from the campaigns stored on "
        "the server and, for a pilot, from its own counts; 0.5 with nothing to learn from).",
    ),
]
ForecastTrials = Annotated[
    int,
    Query(
        ge=10,
        le=1000,
        description="Simulated campaigns; every one runs (fewer: a faster, rougher answer). Absent: 200, "
        "or 200 x 16 / L (at least 20) with more than 16 models.",
    ),
]


@router.post(
    "/v1/campaigns/forecast",
    response_model=schemas.ForecastOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="Forecast the cost to certify a campaign before creating it",
    description="The body is a campaign-create body; nothing is created. The simulator runs the campaign's "
    "algorithm on preference matrices from a prior (the simulated judge's matrix, else Bradley-Terry draws "
    "with strength spread `spread`; absent: a spread learned from the campaigns stored on the server, else 0.5), "
    "the judge's cost included; with reuse or prompts without replacement "
    "each trial runs dctas-pc on a verdict table of the campaign's prompts (docs/service.md, Forecast).",
)
async def forecast_campaign(
    body: schemas.CampaignCreate,
    forecasts: ForecastsDep,
    _: Admin,
    trials: ForecastTrials | None = None,
    spread: Spread | None = None,
):
    return await _t(forecasts.forecast_prior, body, trials, spread)


@router.post(
    "/v1/campaigns/{campaign_id}/forecast",
    response_model=schemas.ForecastOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="Forecast the cost to certify from a campaign's duels so far (pilot)",
)
async def forecast_pilot(
    campaign_id: Id,
    forecasts: ForecastsDep,
    _: Admin,
    body: schemas.PilotForecastIn | None = None,
    trials: ForecastTrials | None = None,
    spread: Spread | None = None,
):
    trials = _one_value("trials", trials, body.trials if body else None)
    spread = _one_value("spread", spread, body.spread if body else None)
    return await _t(forecasts.forecast_pilot, campaign_id, trials, spread)


def _one_value(name: str, query: Any, body: Any) -> Any:
    """A value given in the query or the body (422 when both give different ones)."""
    if query is not None and body is not None and query != body:
        raise RequestValidationError(
            [
                {
                    "loc": ("body", name),
                    "msg": f"{name} is given twice with different values (query and body)",
                    "type": "value_error",
                }
            ]
        )
    return body if body is not None else query


@router.get(
    "/v1/campaigns",
    response_model=schemas.CampaignPage,
    responses=ERRORS,
    tags=["campaigns"],
    summary="List campaigns, newest first",
)
async def list_campaigns(
    views: ViewsDep,
    _: Admin,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
    status: CampaignStatus | None = None,
    archived: Annotated[bool, Query(description="List the archived campaigns instead of the others.")] = False,
):
    return await _t(views.list_campaigns, limit, offset, status, archived)


@router.get(
    "/v1/campaigns/{campaign_id}",
    response_model=schemas.AnyCampaignOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="A campaign's status and statistics (annotators: its name and status only)",
)
async def get_campaign(
    campaign_id: Id,
    views: ViewsDep,
    who: Caller,
    pairs: Annotated[
        bool | None,
        Query(
            description="The per-pair figures in full (counts, wins, every pair's certificate evidence, a simulated "
            "judge's preference matrix): true; false: summarised (pairs_included false). Default: in full up to "
            "16 models."
        ),
    ] = None,
):
    require_campaign(who, campaign_id)
    return await _t(views.get_campaign, campaign_id, who.admin, pairs)


@router.patch(
    "/v1/campaigns/{campaign_id}",
    response_model=schemas.CampaignOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="Raise the budget or the duel cap; a campaign that ended on one continues",
    description="A campaign that ended on its budget (budget_exhausted) or its duel cap and has room under the "
    "new limits goes back to running with its policy state intact (start a run again with POST /run). "
    "409 for a campaign that ended otherwise (certified, no Condorcet winner, stopped by the admin); "
    "422 for a limit below what is already spent or judged.",
)
async def update_campaign(campaign_id: Id, body: schemas.CampaignLimits, lifecycle: LifecycleDep, _: Admin):
    return await lifecycle.update_limits(campaign_id, body.budget, body.max_duels)


@router.post(
    "/v1/campaigns/{campaign_id}/duels",
    status_code=201,
    response_model=schemas.AnyDuelOut,
    responses=ERRORS,
    tags=["duels"],
    summary="Start the next duel (an annotator at its limit of duels in flight gets its oldest one again, 200)",
)
async def next_duel(campaign_id: Id, cycle: CycleDep, who: Caller, response: Response):
    require_campaign(who, campaign_id)
    view, select_ms = await cycle.next_duel(campaign_id, who)
    if select_ms is None:  # the annotator's own duel in flight, handed back (max_pending_per_annotator)
        response.status_code = 200
    else:
        response.headers["Server-Timing"] = f"select;dur={select_ms:.3f}"
    response.headers["Location"] = f"/v1/duels/{view['id']}"
    return view


@router.get(
    "/v1/campaigns/{campaign_id}/duels",
    response_model=schemas.DuelPage,
    responses=ERRORS,
    tags=["duels"],
    summary="The audit log of a campaign's duels, oldest first",
)
async def list_duels(
    campaign_id: Id,
    views: ViewsDep,
    _: Admin,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**31)] = 0,
    status: DuelStatus | None = None,
):
    return await _t(views.list_duels, campaign_id, limit, offset, status)


@router.post(
    "/v1/campaigns/{campaign_id}/run",
    status_code=202,
    response_model=schemas.RunStarted,
    responses=ERRORS,
    tags=["campaigns"],
    summary="Drive duels in the background (automatic judges)",
)
async def run_campaign(campaign_id: Id, runs: RunsDep, _: Admin, body: Annotated[schemas.RunIn | None, Body()] = None):
    body = body or schemas.RunIn()
    run = await runs.start_run(campaign_id, body.max_duels, body.concurrency)
    return {"campaign_id": campaign_id, "run": run}


@router.post(
    "/v1/campaigns/{campaign_id}/resume",
    status_code=202,
    response_model=schemas.RunResumed,
    responses=ERRORS,
    tags=["campaigns"],
    summary="Restart a paused or failed background run with its own limits",
    description="A run that paused after its consecutive-failure cap, or crashed, starts again with its stored "
    "concurrency and remaining max_duels (`concurrency` in the body overrides the former). 422 naming the "
    "api_key_env variables the server lacks (never a value), before any spend; 409 when the run is active, "
    "the campaign ended (a budget or duel cap: PATCH a higher limit instead) or its judge is human.",
)
async def resume_campaign(
    campaign_id: Id, runs: RunsDep, _: Admin, body: Annotated[schemas.ResumeIn | None, Body()] = None
):
    return await runs.resume_run(campaign_id, body.concurrency if body else None)


_MODEL_CHANGE = (
    "The campaign's question becomes the same question about the remaining models (their Condorcet "
    "winner, top k or ranking): the policy is rebuilt from the duels already recorded between them, each "
    "certificate at the level for the new number of models; the model's duels stay in the log, the ledger "
    "and the exports and no longer count; its duels in flight are cancelled (docs/algorithms.md, Disabling "
    "or replacing a model). A campaign paused on a provider fault continues, and a run that had stalled "
    "restarts (`resume`: false to change the model only); if the remaining models are already decided the "
    "campaign ends with that verdict. 404 for an unknown model; 409 for an ended campaign, an algorithm "
    "other than dctas-pc, a hybrid judge, a batch campaign, a model already disabled, or fewer than two "
    "models left."
)


@router.post(
    "/v1/campaigns/{campaign_id}/models/{name}/disable",
    response_model=schemas.ModelChanged,
    responses=ERRORS,
    tags=["campaigns"],
    summary="Disable a model of a running campaign (a failing provider)",
    description=_MODEL_CHANGE,
)
async def disable_model(
    campaign_id: Id,
    name: Annotated[str, Path(min_length=1, max_length=200)],
    runs: RunsDep,
    views: ViewsDep,
    _: Admin,
    body: Annotated[schemas.ModelDisableIn | None, Body()] = None,
):
    body = body or schemas.ModelDisableIn()
    done = await runs.change_model(campaign_id, name, reason=body.reason, resume=body.resume)
    return {**done, "campaign": await _t(views.get_campaign, campaign_id)}


@router.post(
    "/v1/campaigns/{campaign_id}/models/{name}/replace",
    response_model=schemas.ModelChanged,
    responses=ERRORS,
    tags=["campaigns"],
    summary="Replace a model of a running campaign by a new one",
    description=_MODEL_CHANGE + " Replacing is disabling plus adding the new model, which starts with no "
    "evidence; 422 for a new model whose name is taken, whose address is not allowed, whose key the server "
    "lacks or whose cost cannot be bounded under the budget.",
)
async def replace_model(
    campaign_id: Id,
    name: Annotated[str, Path(min_length=1, max_length=200)],
    body: schemas.ModelReplaceIn,
    runs: RunsDep,
    views: ViewsDep,
    _: Admin,
):
    done = await runs.change_model(campaign_id, name, reason=body.reason, new_model=body.model, resume=body.resume)
    return {**done, "campaign": await _t(views.get_campaign, campaign_id)}


@router.post(
    "/v1/campaigns/{campaign_id}/stop",
    response_model=schemas.CampaignOut,
    responses=ERRORS,
    tags=["campaigns"],
    summary="End a campaign",
)
async def stop_campaign(campaign_id: Id, lifecycle: LifecycleDep, _: Admin):
    return await lifecycle.stop(campaign_id)


@router.post(
    "/v1/campaigns/{campaign_id}/annotators",
    status_code=201,
    response_model=schemas.AnnotatorOut,
    responses=ERRORS,
    tags=["annotators"],
    summary="Create an annotator: its token and absolute voting link (shown once)",
)
async def create_annotator(
    campaign_id: Id,
    annotators: AnnotatorsDep,
    _: Admin,
    request: Request,
    response: Response,
    body: Annotated[schemas.AnnotatorIn | None, Body()] = None,
):
    label = body.label if body else None
    created = await _t(annotators.create_annotator, campaign_id, label)
    base = request.app.state.campaigns.settings.public_base_url or str(request.base_url).rstrip("/")
    response.headers["Cache-Control"] = "no-store"  # the body holds a credential
    return dict(created, url=f"{base}/annotate/{created['token']}")


@router.get(
    "/v1/campaigns/{campaign_id}/annotators",
    response_model=list[schemas.AnnotatorRecord],
    responses=ERRORS,
    tags=["annotators"],
    summary="The campaign's annotators with their votes and agreement",
)
async def list_annotators(campaign_id: Id, annotators: AnnotatorsDep, _: Admin):
    return await _t(annotators.list_annotators, campaign_id)


@router.delete(
    "/v1/campaigns/{campaign_id}/annotators/{annotator_id}",
    response_model=schemas.AnnotatorRecord,
    responses=ERRORS,
    tags=["annotators"],
    summary="Revoke an annotator's token (its pending duels are released)",
)
async def revoke_annotator(campaign_id: Id, annotator_id: Id, annotators: AnnotatorsDep, _: Admin):
    return await _t(annotators.revoke_annotator, campaign_id, annotator_id)


@router.get(
    "/v1/campaigns/{campaign_id}/replay",
    responses=ERRORS,
    tags=["campaigns"],
    summary="Rebuild the policy from the duel log and compare with the stored state",
)
async def replay_campaign(campaign_id: Id, replay: ReplayDep, _: Admin):
    return (await _t(replay.replay, campaign_id)).to_dict()


@router.get(
    "/v1/duels/{duel_id}",
    response_model=schemas.AnyDuelOut,
    responses=ERRORS,
    tags=["duels"],
    summary="One duel (annotators: only their own, without anything telling the models apart)",
)
async def get_duel(duel_id: Id, views: ViewsDep, who: Caller):
    return await _t(views.get_duel, duel_id, who)


@router.post(
    "/v1/duels/{duel_id}/vote",
    response_model=schemas.AnyDuelOut,
    responses=ERRORS,
    tags=["duels"],
    summary="Vote on a pending duel (counted exactly once; annotators: only their own duels)",
)
async def vote(duel_id: Id, body: schemas.VoteIn, cycle: CycleDep, who: Caller):
    return await cycle.vote(duel_id, body.choice, who, comment=body.comment)


@router.post(
    "/v1/duels/{duel_id}/skip",
    status_code=204,
    responses=ERRORS,
    tags=["duels"],
    summary="Skip a pending duel (annotators): it goes back to the pool for another annotator, not counted",
)
async def skip(duel_id: Id, cycle: CycleDep, who: Caller) -> Response:
    await cycle.skip(duel_id, who)
    return Response(status_code=204)


@router.get(
    "/healthz",
    tags=["meta"],
    summary="Liveness, database and write check",
    description="200 when the database answers and accepts a tiny write; 503 with a `reason` otherwise "
    "(the answer is cached per process for about 1.5 s).",
)
async def healthz(request: Request, response: Response):
    answer = await _t(request.app.state.health.check)
    if answer["status"] != "ok":
        response.status_code = 503
    return answer
