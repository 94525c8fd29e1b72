"""Pydantic request and response bodies of the REST API (v1)."""

from __future__ import annotations

import datetime as dt
import math
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from algorithms.thresholds import DELTA_MIN
from algorithms.vocabulary import Algorithm, CampaignStatus, Choice, DuelStatus, Reuse, TiePolicy
from service.clients import validate_client_config
from service.judging import validate_judge_config

MAX_MODELS = 64
MAX_PROMPTS = 100_000
MAX_PROMPT_CHARS = 200_000
MAX_JSON_DEPTH = 12
# Amounts the int64 nano-USD ledger holds with room to spare (service/campaigns/rules.py,
# LEDGER_CAP_NUSD ~ 4.6e9 USD): a budget or per-query cost above 1e9 USD is refused with 422.
MAX_USD = 1e9


def _check_text(value: str) -> str:
    """Reject text that no database can store (NUL, lone surrogates)."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (no lone surrogates)") from None
    return value


def check_json_safe(value: Any, path: str = "", depth: int = 0) -> Any:
    """Walk a JSON value: text must be storable, numbers finite, nesting bounded."""
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{path or 'value'}: nested too deeply")
    if isinstance(value, str):
        try:
            _check_text(value)
        except ValueError as exc:
            raise ValueError(f"{path or 'value'}: {exc}") from None
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path or 'value'}: numbers must be finite")
    elif isinstance(value, dict):
        for k, v in value.items():
            check_json_safe(k, path, depth + 1)
            check_json_safe(v, f"{path}.{k}" if path else str(k), depth + 1)
    elif isinstance(value, list):
        for n, v in enumerate(value):
            check_json_safe(v, f"{path}[{n}]", depth + 1)
    return value


SafeText = Annotated[str, AfterValidator(_check_text)]
Name = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_check_text)]
PromptText = Annotated[str, Field(min_length=1, max_length=MAX_PROMPT_CHARS), AfterValidator(_check_text)]
# At least one nano-USD (the ledger's unit: a smaller budget would be stored as 0), at most MAX_USD.
USD = Annotated[float, Field(ge=1e-9, le=MAX_USD, allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSpec(_Strict):
    name: Name = Field(description="Unique name of the model within the campaign.")
    cost: USD = Field(description="Expected cost of one query in USD (used by the policy).")
    client: dict[str, Any] = Field(
        description='How to call the model, e.g. {"kind": "simulated"} or an OpenAI-compatible '
        'endpoint with "api_key_env" naming the environment variable that holds the key.',
        json_schema_extra={"example": {"kind": "simulated"}},
    )

    @field_validator("client")
    @classmethod
    def _client(cls, v: dict[str, Any]) -> dict[str, Any]:
        check_json_safe(v, "client")

        try:
            return validate_client_config(v)
        except ValueError:
            raise
        except Exception as exc:  # a validator bug must not become a 500
            raise ValueError(f"client: invalid config ({type(exc).__name__})") from None


class CampaignCreate(_Strict):
    name: Name
    delta: float = Field(
        0.05,
        ge=DELTA_MIN,
        lt=1,
        allow_inf_nan=False,
        description=f"Error probability of the certificate, in [{DELTA_MIN:g}, 1).",
    )
    algorithm: Algorithm = Field(
        Algorithm.DCTAS_PC,
        description="dctas-pc (default: pairwise certificates, can answer 'no Condorcet winner'; not from the "
        "paper) or one of the paper's five, whose certificate assumes a Condorcet winner exists.",
    )
    models: list[ModelSpec] = Field(min_length=2, max_length=MAX_MODELS)
    prompts: list[PromptText] = Field(min_length=1, max_length=MAX_PROMPTS)
    judge: dict[str, Any] = Field(
        description='{"kind": "human"}, {"kind": "simulated", "preference": [[...]]} or '
        '{"kind": "llm", "client": {...}}.',
        json_schema_extra={"example": {"kind": "human"}},
    )
    budget: USD | None = Field(
        None, description="Spend limit in USD (never overrun: each duel reserves an upper bound of its cost)."
    )
    max_duels: int | None = Field(None, ge=1, le=10**9, description="End the campaign after this many judged duels.")
    tie_policy: TiePolicy = TiePolicy.DROP
    answers: Reuse = Field(
        Reuse.REUSE,
        description="reuse (default): one answer per (model, prompt), paid once and shared with every campaign "
        "using the same generation config; fresh: a new answer per duel (sampling at temperature > 0). "
        "Simulated models always answer per duel (docs/reuse.md).",
    )
    verdicts: Reuse = Field(
        Reuse.REUSE,
        description="reuse (default): an LLM judge rules once per (prompt, answer pair, order); fresh: a new "
        "verdict per duel. Human judges always give fresh votes.",
    )
    seed: int | None = Field(None, ge=0, le=2**62, description="Seed of prompt draws, answer order and coins.")
    webhook_url: str | None = Field(
        None, max_length=2000, description="POSTed the final report once the campaign ends."
    )

    @field_validator("webhook_url")
    @classmethod
    def _webhook(cls, v: str | None) -> str | None:
        if v is None:
            return v
        _check_text(v)
        try:
            parts = urlsplit(v)
        except ValueError:
            raise ValueError("webhook_url: not a valid URL") from None
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("webhook_url: must be an absolute http(s) URL")
        return v

    @model_validator(mode="after")
    def _cross(self) -> "CampaignCreate":
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise ValueError("models: names must be unique")
        check_json_safe(self.judge, "judge")

        try:
            self.judge = validate_judge_config(self.judge, n_models=len(self.models))
        except ValueError:
            raise
        except Exception as exc:
            raise ValueError(f"judge: invalid config ({type(exc).__name__})") from None
        if self.budget is not None:
            from service.campaigns.rules import unbounded_cost_reason

            reason = unbounded_cost_reason([m.model_dump() for m in self.models], self.judge)
            if reason is not None:
                raise ValueError(reason)
        return self


class VoteIn(_Strict):
    choice: Choice = Field(description="The answers as shown: a, b, tie or both_bad.")


class RunIn(_Strict):
    max_duels: int | None = Field(
        None, ge=1, le=10**9, description="Stop the run after this many duels (the campaign stays running)."
    )
    concurrency: int = Field(1, ge=1, le=32, description="Duels in flight at once.")


class AnnotatorIn(_Strict):
    label: Name | None = None


# ---------------------------------------------------------------- responses
class ModelOut(BaseModel):
    index: int
    name: str
    cost: float
    client: dict[str, Any]


class RunOut(BaseModel):
    active: bool
    remaining: int | None
    concurrency: int
    error: str | None


class CampaignOut(BaseModel):
    id: int
    name: str
    status: CampaignStatus
    end_reason: str | None
    algorithm: str
    assumes_condorcet_winner: bool = Field(
        description="True for the paper's five algorithms: their certificate is only valid if some model beats "
        "every other; dctas-pc does not assume it and ends no_condorcet_winner when none does."
    )
    condorcet_note: str | None = Field(description="That assumption in plain words (None for dctas-pc).")
    judge_cost: float = Field(description="c_J, the judge's expected cost per duel used by the allocation (USD).")
    answers: Reuse = Field(Reuse.FRESH, description="Answer reuse: reuse or fresh (docs/reuse.md).")
    verdicts: Reuse = Field(Reuse.FRESH, description="LLM verdict reuse: reuse or fresh.")
    cost_model: str = Field(
        "per query",
        description="What the policy, the oracle and the lower bound count as a duel's cost: 'per query' "
        "(configured costs) or 'marginal given stored answers' (a stored answer or verdict costs nothing).",
    )
    policy_costs: list[float] | None = Field(
        None, description="The per-model costs the policy uses now (marginal costs given the stores)."
    )
    policy_judge_cost: float | None = Field(None, description="The judge cost the policy uses now.")
    certificates: list[list[int]] | None = Field(
        None, description="dctas-pc: certified [winner, loser] pairs (who was shown to beat whom)."
    )
    copeland_winner: str | None = Field(
        None, description="dctas-pc: the model beating the most others in the estimate."
    )
    top_cycle: list[str] | None = Field(None, description="dctas-pc: the estimate's top cycle (smallest dominant set).")
    delta: float
    tie_policy: TiePolicy
    models: list[ModelOut]
    judge: dict[str, Any]
    n_prompts: int
    budget: float | None
    remaining_budget: float | None
    max_duels: int | None
    seed: int
    webhook_url: str | None = None
    leader: str | None
    leader_index: int | None
    winner: str | None
    winner_index: int | None
    spend: float
    judge_spend: float
    duels: int = Field(description="Judged duels (ties included).")
    duels_counted: int = Field(description="Duels the policy counted (ties excluded under tie_policy=drop).")
    duels_created: int
    duels_failed: int
    pending: int = Field(description="Duels in flight: models being called or waiting for a verdict.")
    t: int
    counts: list[list[int]] = Field(description="N[i][j]: counted duels between models i and j.")
    wins: list[list[float]] = Field(description="W[i][j]: wins of i over j (ties as halves under half).")
    evidence: list[float] = Field(description="S_i: evidence against model i being the best.")
    Z: float
    beta: float
    lower_bound: float | None = Field(
        description="Plug-in lower bound on the expected cost (USD) at the empirical matrix."
    )
    run: RunOut
    webhook_state: str
    created_at: dt.datetime
    updated_at: dt.datetime
    ended_at: dt.datetime | None


class CampaignPage(BaseModel):
    items: list[CampaignOut]
    total: int
    limit: int
    offset: int
    next_offset: int | None


class ChargeOut(BaseModel):
    id: int | None = None
    kind: str
    model_index: int | None
    amount: float
    reuses_charge_id: int | None = Field(
        None, description="A zero-cost reuse of a stored answer or verdict: the charge that paid for it."
    )
    reused: bool = Field(False, description="A zero-cost row: the answer or verdict came from the store.")
    created_at: dt.datetime


class DuelOut(BaseModel):
    id: int
    campaign_id: int
    number: int
    status: DuelStatus
    prompt: str
    answer_a: str | None
    answer_b: str | None
    model_a: int | None = Field(None, description="Index of the model behind answer a (hidden from annotators).")
    model_b: int | None = None
    model_a_name: str | None = None
    model_b_name: str | None = None
    choice: Choice | None
    counted: bool
    score: float | None = Field(None, description="Score of the pair's first model (lower index) as recorded.")
    judged_by: str | None = None
    judge: dict[str, Any] | None = None
    error: str | None
    cost: float
    charges: list[ChargeOut] | None = None
    created_at: dt.datetime
    answered_at: dt.datetime | None
    judged_at: dt.datetime | None
    expires_at: dt.datetime
    campaign_status: CampaignStatus | None = None


class DuelPage(BaseModel):
    items: list[DuelOut]
    total: int
    limit: int
    offset: int
    next_offset: int | None


class AnnotatorOut(BaseModel):
    id: int
    campaign_id: int
    label: str | None
    token: str = Field(description="Shown once; only its hash is stored.")


class RunStarted(BaseModel):
    campaign_id: int
    run: RunOut


class ErrorOut(BaseModel):
    detail: Any
