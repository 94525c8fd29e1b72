"""Pydantic request and response bodies of the REST API (v1).

One module per subject; every name is re-exported here, so ``from service.schemas import X``
is the one way to import them:

- :mod:`.common`: size limits, text and JSON checks, the field types (``Name``, ``USD``...), ``ErrorOut``;
- :mod:`.campaign_create`: the body of ``POST /v1/campaigns`` (``CampaignCreate``, ``ModelSpec``, prompts);
- :mod:`.requests`: the smaller request bodies (limits, votes, runs, resumes, annotators);
- :mod:`.campaign_views`: campaigns as responses (``CampaignOut``, its models and run, pages);
- :mod:`.duel_views`: duels as responses (``DuelOut``, charges, provider faults, pages);
- :mod:`.annotators`: annotators as responses;
- :mod:`.forecast`: the cost forecast.
"""

from __future__ import annotations

from service.schemas.annotators import AnnotatorOut, AnnotatorRecord
from service.schemas.campaign_create import CampaignCreate, ModelSpec, PromptObject, PromptTurn
from service.schemas.campaign_views import (
    AnnotatorCampaignOut,
    AnyCampaignOut,
    CampaignOut,
    CampaignPage,
    ModelChanged,
    ModelOut,
    PriceOut,
    RunOut,
    RunResumed,
    RunStarted,
)
from service.schemas.common import (
    MAX_JSON_DEPTH,
    MAX_MODELS,
    MAX_PROMPT_CHARS,
    MAX_PROMPTS,
    MAX_USD,
    USD,
    ErrorOut,
    Name,
    PromptText,
    QueryUSD,
    SafeText,
    StrictModel,
    check_json_safe,
    check_text,
)
from service.schemas.duel_views import AnnotatorDuelOut, AnyDuelOut, ChargeOut, DuelOut, DuelPage, ProviderFaultOut
from service.schemas.forecast import ForecastOut, Spread
from service.schemas.requests import (
    AnnotatorIn,
    AnswersImportIn,
    CampaignLimits,
    ModelDisableIn,
    ModelReplaceIn,
    PilotForecastIn,
    ResumeIn,
    RunIn,
    VoteIn,
)

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_MODELS",
    "MAX_PROMPTS",
    "MAX_PROMPT_CHARS",
    "MAX_USD",
    "USD",
    "AnnotatorCampaignOut",
    "AnnotatorDuelOut",
    "AnnotatorIn",
    "AnswersImportIn",
    "ModelChanged",
    "ModelDisableIn",
    "ModelReplaceIn",
    "PilotForecastIn",
    "AnnotatorOut",
    "AnnotatorRecord",
    "AnyCampaignOut",
    "AnyDuelOut",
    "CampaignCreate",
    "CampaignLimits",
    "CampaignOut",
    "CampaignPage",
    "ChargeOut",
    "DuelOut",
    "DuelPage",
    "ErrorOut",
    "ForecastOut",
    "ModelOut",
    "ModelSpec",
    "Name",
    "PriceOut",
    "PromptObject",
    "PromptText",
    "PromptTurn",
    "ProviderFaultOut",
    "QueryUSD",
    "ResumeIn",
    "RunIn",
    "RunOut",
    "RunResumed",
    "RunStarted",
    "SafeText",
    "Spread",
    "StrictModel",
    "VoteIn",
    "check_json_safe",
    "check_text",
]
