"""Pydantic request and response bodies of the REST API (v1)."""

from __future__ import annotations

import datetime as dt
import math
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from algorithms.thresholds import DELTA_MIN
from algorithms.vocabulary import Algorithm, CampaignStatus, Choice, DuelStatus, PromptSampling, Reuse, TiePolicy
from service.clients.config import (
    MAX_QUERY_USD,
    URL_CREDENTIALS,
    ClientConfig,
    client_json,
    parse_client_config,
    url_problem,
)
from service.hybrid_schemas import HybridOut
from service.judging import JudgeConfig, check_judge_size, judge_json
from service.names import check_name, duplicate_names
from service.pricing import DEFAULT_EXPECTED_OUTPUT_TOKENS, normalise_price_map, resolve_model_cost
from service.prompts import normalize_prompt
from service.verdict_schemas import CertificateEdge, PCEvidence

MAX_MODELS = 64
MAX_PROMPTS = 100_000
MAX_PROMPT_CHARS = 200_000
MAX_JSON_DEPTH = 12
# Amounts the int64 nano-USD ledger holds with room to spare (service/campaigns/rules.py,
# LEDGER_CAP_NUSD ~ 4.6e9 USD): a budget above 1e9 USD, or a cost per query above MAX_QUERY_USD
# (1e6 USD, service/clients/config.py), is refused with 422 (docs/reliability.md, Limits).
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
# Visible, without invisible or control characters (service/names.py).
Name = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_check_text), AfterValidator(check_name)]
PromptText = Annotated[str, Field(min_length=1, max_length=MAX_PROMPT_CHARS), AfterValidator(_check_text)]
# At least one nano-USD (the ledger's unit: a smaller budget would be stored as 0), at most MAX_USD.
USD = Annotated[float, Field(ge=1e-9, le=MAX_USD, allow_inf_nan=False)]
QueryUSD = Annotated[float, Field(ge=1e-9, le=MAX_QUERY_USD, allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSpec(_Strict):
    name: Name = Field(description="Unique name of the model within the campaign.")
    cost: QueryUSD | None = Field(
        None,
        description="Expected cost of one query in USD (used by the policy). Omitted: derived from the model's "
        "per-token price (client.price or the price map) and the expected tokens (docs/service.md, Pricing).",
    )
    expected_output_tokens: int | None = Field(
        None,
        ge=0,
        le=10_000_000,
        description="Output tokens of one answer for a derived cost (default: the campaign's).",
    )
    cost_source: Literal["configured", "price_map"] | None = Field(
        None,
        description="Which cost wins when the model has both a `cost` and a price-map price: configured (the "
        "policy uses `cost` and each call is charged it) or price_map (the cost is derived from the price and "
        "calls are charged per token). Absent: a `cost` that disagrees with the price map's derived cost by more "
        "than a factor 2 is a 422 (docs/service.md, Pricing).",
    )
    client: ClientConfig = Field(
        description="How to call the model: one config per `kind` (simulated, openai, anthropic, gemini). "
        "Keys are never accepted; `api_key_env` names the environment variable that holds one.",
        examples=[{"kind": "simulated"}, {"kind": "openai", "model": "deepseek-chat", "api_key_env": "DS_KEY"}],
    )
    _pricing: dict[str, Any] | None = PrivateAttr(None)  # set by CampaignCreate (service.pricing)

    def stored(self) -> dict[str, Any]:
        """The model as a campaign stores it (after :class:`CampaignCreate` resolved its cost and price)."""
        out = {"name": self.name, "cost": self.cost, "client": client_json(self.client)}
        if self._pricing is not None:
            out["pricing"] = self._pricing
        return out

    @field_validator("client", mode="before")
    @classmethod
    def _client(cls, v: Any) -> Any:
        if isinstance(v, dict):
            check_json_safe(v, "client")
        return v


class PromptTurn(_Strict):
    content: PromptText


class PromptObject(_Strict):
    """A prompt with an id, a category, several user turns or a reference answer (``service/prompts.py``)."""

    id: Name | None = Field(None, description="The question's id (arena-hard `question_id`), kept in the duel log.")
    prompt: PromptText | None = None
    turns: list[PromptText | PromptTurn] | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="User turns, sent in order as consecutive user messages of one call (docs/guide.md).",
    )
    category: Name | None = None
    reference: PromptText | None = Field(None, description="A reference answer handed to the judge.")

    @model_validator(mode="after")
    def _one_text(self) -> "PromptObject":
        if (self.prompt is None) == (self.turns is None):
            raise ValueError("a prompt object needs exactly one of 'prompt' or 'turns'")
        if self.turns is not None:
            total = sum(len(t if isinstance(t, str) else t.content) for t in self.turns)
            if total > MAX_PROMPT_CHARS:
                raise ValueError(f"turns: at most {MAX_PROMPT_CHARS} characters in all")
        return self


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
    prompts: list[PromptText | PromptObject] = Field(
        min_length=1,
        max_length=MAX_PROMPTS,
        description='Strings, or objects {"id", "prompt" | "turns", "category", "reference"} (arena-hard style).',
    )
    judge: JudgeConfig = Field(
        description="Where preferences come from: one config per `kind` (human, simulated, llm).",
        examples=[{"kind": "human"}, {"kind": "llm", "client": {"kind": "openai", "model": "gpt-4.1"}}],
    )
    budget: USD | None = Field(
        None, description="Spend limit in USD (never overrun: each duel reserves an upper bound of its cost)."
    )
    max_duels: int | None = Field(None, ge=1, le=10**9, description="End the campaign after this many judged duels.")
    tie_policy: TiePolicy | None = Field(
        None,
        description="What a tie does to the statistics: drop, half or random. Absent: half for a campaign whose "
        "prompt_sampling resolves to without_replacement, drop otherwise (the view shows the resolved value).",
    )
    prompt_sampling: PromptSampling = Field(
        PromptSampling.AUTO,
        description="How duels draw their prompts (docs/reuse.md). with_replacement: uniformly at random for "
        "each duel. without_replacement: pair (i, j)'s q-th duel uses prompt q of a secret permutation shared "
        "by all pairs; needs algorithm dctas-pc, answers reuse, an llm or simulated judge and tie_policy half "
        "(random is refused: the exact test would certify the tie coin); can end 'undecidable' (no winner on this prompt set). auto (default): without_replacement "
        "when those hold, the judge is an llm judge and verdicts is reuse, else with_replacement. The "
        "resolved value is stored.",
    )
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
    seed: int | None = Field(
        None,
        ge=0,
        le=2**62,
        description="Seed of the automatic judges' random draws. The prompt, answer order and tie "
        "coin are drawn from a secret per-campaign key instead (docs/reliability.md, Blinding).",
    )
    webhook_url: str | None = Field(
        None, max_length=2000, description="POSTed the final report once the campaign ends."
    )
    max_pending_per_annotator: int = Field(
        1,
        ge=1,
        le=100,
        description="Duels one annotator may hold in flight at once; asking for another at the limit "
        "hands back the annotator's oldest such duel (200) instead of starting a new one.",
    )

    price_map: dict[str, Any] | None = Field(
        None,
        description="Per-token prices in LiteLLM's format ({model: {input_cost_per_token, output_cost_per_token}}); "
        "its entries win over the LLMDUEL_PRICE_MAP file and the bundled map.",
    )
    expected_output_tokens: int = Field(
        DEFAULT_EXPECTED_OUTPUT_TOKENS,
        ge=0,
        le=10_000_000,
        description="Output tokens of one answer, for the cost of models without a 'cost' (docs/service.md, Pricing).",
    )

    @field_validator("judge", mode="before")
    @classmethod
    def _judge(cls, v: Any) -> Any:
        if isinstance(v, dict):
            check_json_safe(v, "judge")
        return v

    def stored_judge(self) -> dict[str, Any]:
        """The judge config as the campaign row stores it."""
        return judge_json(self.judge)

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
        problem = url_problem(v)
        if problem == URL_CREDENTIALS:
            raise ValueError(f"webhook_url: {URL_CREDENTIALS}; requests are signed with the webhook secret")
        if problem:
            raise ValueError(f"webhook_url: {problem}")
        return v

    @model_validator(mode="after")
    def _cross(self) -> "CampaignCreate":
        repeated = duplicate_names([m.name for m in self.models])
        if repeated:
            raise ValueError(
                f"models: names must be unique after Unicode (NFKC) and whitespace normalisation; "
                f"{repeated[0]!r} repeats another model's name"
            )
        qids = [p.id for p in self.prompts if isinstance(p, PromptObject) and p.id is not None]
        if len(set(qids)) != len(qids):
            raise ValueError("prompts: ids must be unique")
        check_judge_size(self.judge, len(self.models))
        self._resolve_sampling()
        from service.campaigns import hybrid  # hybrid hook: the combinations a hybrid judge refuses

        if hybrid.is_hybrid(self.stored_judge()):
            reason = hybrid.refusal(self.algorithm, self.prompt_sampling, self.tie_policy)
            if reason is not None:
                raise ValueError(f"judge: {reason}")
        self._resolve_costs()
        from service.campaigns.rules import excessive_cost_reason, unbounded_cost_reason

        models, judge = [m.stored() for m in self.models], self.stored_judge()
        reason = excessive_cost_reason(models, judge)
        if reason is None and self.budget is not None:
            reason = unbounded_cost_reason(models, judge)
        if reason is not None:
            raise ValueError(reason)
        return self

    def _resolve_sampling(self) -> None:
        """Resolve ``prompt_sampling: auto`` and an absent ``tie_policy`` (stored resolved)."""
        from service.campaigns.rules import resolve_prompt_sampling

        sampling, tie_policy = resolve_prompt_sampling(
            self.prompt_sampling,
            self.tie_policy,
            algorithm=self.algorithm,
            answers=self.answers,
            verdicts=self.verdicts,
            judge_kind=self.stored_judge().get("kind"),
        )
        self.prompt_sampling, self.tie_policy = PromptSampling(sampling), TiePolicy(tie_policy)

    def _resolve_costs(self) -> None:
        """Each model's price (client, price maps) and expected cost per query (service.pricing)."""
        check_json_safe(self.price_map, "price_map")
        user_map = normalise_price_map(self.price_map, "price_map") if self.price_map is not None else None
        for m in self.models:
            cost, client, record = resolve_model_cost(
                m.name,
                m.cost,
                client_json(m.client),
                [normalize_prompt(p)["text"] for p in self.prompts],
                m.expected_output_tokens if m.expected_output_tokens is not None else self.expected_output_tokens,
                user_map,
                m.cost_source,
            )
            m.cost, m.client, m._pricing = cost, parse_client_config(client), record


class CampaignLimits(_Strict):
    budget: USD | None = Field(None, description="New spend limit in USD (not below what is already spent).")
    max_duels: int | None = Field(
        None, ge=1, le=10**9, description="New cap on judged duels (not below the duels already judged)."
    )

    @model_validator(mode="after")
    def _some(self) -> "CampaignLimits":
        if self.budget is None and self.max_duels is None:
            raise ValueError("give budget and/or max_duels")
        return self


class VoteIn(_Strict):
    choice: Choice = Field(description="The answers as shown: a, b, tie or both_bad.")
    comment: str | None = Field(
        None,
        max_length=2000,
        description="An optional note stored with the vote and exported (at most 2000 characters).",
    )


class RunIn(_Strict):
    max_duels: int | None = Field(
        None, ge=1, le=10**9, description="Stop the run after this many duels (the campaign stays running)."
    )
    concurrency: int = Field(1, ge=1, le=32, description="Duels in flight at once.")


class ResumeIn(_Strict):
    concurrency: int | None = Field(
        None, ge=1, le=32, description="Duels in flight at once (default: the run's own concurrency)."
    )


class AnnotatorIn(_Strict):
    label: Name | None = None


# ---------------------------------------------------------------- responses
class PriceOut(BaseModel):
    input_per_1m: float
    output_per_1m: float
    source: str = Field(
        description="client (its config), price_map (the campaign body), file (LLMDUEL_PRICE_MAP), "
        "litellm (an installed litellm package's map) or bundled (the copy of LiteLLM's map shipped with llmduel)."
    )
    key: str | None = Field(None, description="The price-map key that matched.")


class ModelOut(BaseModel):
    index: int
    name: str
    cost: float = Field(description="Expected cost per query (USD) used by the allocation.")
    client: dict[str, Any]
    cost_source: str | None = Field(
        None, description="configured (the body's cost) or derived (price x tokens). Admin only."
    )
    derived_cost: float | None = Field(None, description="The cost the price and expected tokens give. Admin only.")
    charged: str | None = Field(
        None,
        description="How its calls are charged: per_token (at `price`, when the provider reports usage) or "
        "per_call (the configured cost). Admin only.",
    )
    price: PriceOut | None = Field(None, description="Per-token price (USD per million tokens). Admin only.")
    expected_input_tokens: float | None = None
    expected_output_tokens: int | None = None
    calls: int | None = Field(None, description="Charged calls of this model so far (ledger). Admin only.")
    observed_cost: float | None = Field(None, description="Mean charge of those calls (USD). Admin only.")
    cost_warning: str | None = Field(
        None, description="Set when the observed mean differs from cost by more than 2x after 10 calls. Admin only."
    )


class RunOut(BaseModel):
    active: bool
    remaining: int | None
    concurrency: int
    error: str | None
    owner: str | None = Field(
        None, description="Admin only: the process driving the run (host:pid:random), while it holds the lease."
    )
    lease_expires_at: dt.datetime | None = Field(None, description="Admin only: when the owner's lease runs out.")


class CampaignOut(BaseModel):
    id: int
    name: str
    status: CampaignStatus
    end_reason: str | None
    end_limit: str | None = Field(
        None,
        description="budget or max_duels when that limit ended the campaign: raising it (PATCH) continues the campaign.",
    )
    algorithm: str
    assumes_condorcet_winner: bool = Field(
        description="True for the paper's five algorithms: their certificate is only valid if some model beats "
        "every other; dctas-pc does not assume it and ends no_condorcet_winner when none does."
    )
    condorcet_note: str | None = Field(description="That assumption in plain words (None for dctas-pc).")
    judge_cost: float = Field(description="c_J, the judge's expected cost per duel used by the allocation (USD).")
    answers: Reuse = Field(Reuse.FRESH, description="Answer reuse: reuse or fresh (docs/reuse.md).")
    verdicts: Reuse = Field(Reuse.FRESH, description="LLM verdict reuse: reuse or fresh.")
    prompt_sampling: PromptSampling = Field(
        PromptSampling.WITH_REPLACEMENT,
        description="How duels draw their prompts, as resolved at creation: with_replacement or "
        "without_replacement (docs/reuse.md).",
    )
    population: int | None = Field(
        None,
        description="without_replacement: the population each pair samples from, the campaign's prompt set "
        "(a pair is judged at most once per prompt).",
    )
    exact: list[tuple[int, int, float]] | None = Field(
        None,
        description="without_replacement: [i, j, p_ij] for each pair judged on every prompt: its preference on "
        "the prompt set, known exactly (model indices in the order of models).",
    )
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
    certificate_graph: list[CertificateEdge] | None = Field(
        None, description="dctas-pc: who was shown to beat whom, by name (the certificates, each at level delta/(L-1))."
    )
    copeland_winner: str | None = Field(
        None, description="dctas-pc: the model beating the most others in the estimate (an estimate, not certified)."
    )
    top_cycle: list[str] | None = Field(
        None,
        description="dctas-pc: the plug-in estimate's top cycle (smallest dominant set). An estimate with no "
        "uncertainty: the pages show top_cycle_certified instead.",
    )
    top_cycle_certified: list[str] = Field(
        [],
        description="The models that reach every other model through certified wins: in the top cycle unless a "
        "certificate is wrong (probability at most delta). Other models may be in it too.",
    )
    not_beaten: list[str] = Field(
        [], description="Ended campaigns and dctas-pc: the models no certificate shows to be beaten."
    )
    exact_ties: list[list[str]] = Field(
        [],
        description="without_replacement: pairs of not-beaten models whose preference on the whole prompt set is "
        "exactly 1/2.",
    )
    cheapest: str | None = Field(
        None,
        description="undecidable or no_condorcet_winner: the cheapest (cost per query) of the models not beaten, "
        "or of top_cycle_certified when every model is beaten.",
    )
    cost_unit: str = Field("USD", description="USD, or 'cost units' when every model and the judge are simulated.")
    verdict: str = Field("", description="The verdict in plain words, by name.")
    pc_evidence: PCEvidence | None = Field(
        None,
        description="dctas-pc: the evidence of the certificate tests that decide (the GLR Z and beta are only "
        "the paper's algorithms' rule).",
    )
    delta: float
    tie_policy: TiePolicy
    models: list[ModelOut]
    judge: dict[str, Any]
    n_prompts: int
    budget: float | None
    remaining_budget: float | None
    max_duels: int | None
    seed: int
    max_pending_per_annotator: int
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
        description="Plug-in lower bound on the expected cost (USD) at the empirical matrix: c*(P) log(1/4 delta), "
        "the paper's bound, which assumes a Condorcet winner exists."
    )
    lower_bound_pc: float | None = Field(
        None,
        description="dctas-pc only: the plug-in bound of a rule that may also answer 'no Condorcet winner', "
        "c_pc*(P) log(1/4 delta) with c_pc* = sum over m != a of (c_a + c_m) / d(p_am, 1/2) "
        "(docs/algorithms.md, The right yardstick).",
    )
    cost_warnings: list[str] | None = Field(
        None, description="The models' cost warnings (admin only; docs/service.md, Pricing)."
    )
    run: RunOut
    webhook_state: str = Field(description="The latest webhook event: none, pending, sent or failed.")
    webhook_error: str | None = Field(
        None, description="The last delivery error of the latest webhook event (null: none, or delivered)."
    )
    webhook_secret: str | None = Field(
        None,
        description="Only in the response to POST /v1/campaigns with a webhook_url: the key of the "
        "HMAC-SHA256 signatures of the campaign's webhook requests (shown once; docs/reliability.md).",
    )
    hybrid: HybridOut | None = Field(None, description="A hybrid judge's figures (service/hybrid_schemas.py).")
    created_at: dt.datetime
    updated_at: dt.datetime
    ended_at: dt.datetime | None


class AnnotatorCampaignOut(BaseModel):
    """A campaign as its annotators see it: no models, statistics, costs or draw inputs."""

    model_config = ConfigDict(extra="forbid")

    id: int
    name: str
    status: CampaignStatus = Field(description="running while votes are wanted.")
    judge_kind: str = Field(description="human when the campaign is judged by votes.")
    guidelines: str | None = Field(None, description="The campaign's guidelines for annotators (Markdown).")
    votes_counted: int = Field(0, description="Votes and verdicts counted in this campaign so far.")
    max_duels: int | None = Field(None, description="The campaign's duel cap, if it has one.")


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
    provider_fault: str | None = Field(
        None, description="The call reported usage above its bound: charged at the bound (docs/reliability.md, Ledger)."
    )
    reported_cost: float | None = Field(None, description="With a provider fault: what the reported usage would cost.")
    created_at: dt.datetime


class ProviderFaultOut(BaseModel):
    side: str = Field(description="Whose call: a, b (the answers) or judge.")
    fault: str = Field(description="The model and the figure it reported.")
    reported_cost: float | None = Field(None, description="USD the reported usage would cost.")
    bound: float | None = Field(None, description="USD the call was charged: its bound.")
    output_tokens: int | None = None


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
    score: float | None = Field(
        None,
        description="Score of the pair's first model (lower index) as recorded, in [0, 1]: 1 won, 0 lost, "
        "1/2 a tie under tie_policy=half; an LLM judge with graded verdicts gives values in between (e.g. 0.75).",
    )
    position: int | None = Field(
        None,
        description="Prompts sampled without replacement: the duel's position in its pair's sequence (the "
        "pair's q-th prompt of the campaign's secret permutation); None with replacement.",
    )
    record_seq: int | None = Field(
        None,
        description="When the policy counted the outcome (its event number; replay follows it). Without "
        "replacement a judged duel waits (None) until its pair's earlier positions are counted.",
    )
    judged_by: str | None = None
    judge: dict[str, Any] | None = None
    question_id: str | None = Field(None, description="The prompt's id (its position p1, p2, ... when it has none).")
    category: str | None = Field(None, description="The prompt's category, if it has one.")
    comment: str | None = Field(None, description="The note the annotator left with the vote, if any.")
    error: str | None
    cost: float
    charges: list[ChargeOut] | None = None
    provider_faults: list[ProviderFaultOut] = Field(
        default_factory=list,
        description="Calls of this duel whose provider reported usage above the call's bound (a provider fault).",
    )
    created_at: dt.datetime
    answered_at: dt.datetime | None
    judged_at: dt.datetime | None
    expires_at: dt.datetime
    campaign_status: CampaignStatus | None = None


class AnnotatorDuelOut(BaseModel):
    """A duel as the annotator who asked for it sees it: the prompt and two answers, nothing
    that tells which model gave which (docs/reliability.md, Blinding)."""

    model_config = ConfigDict(extra="forbid")

    id: int
    campaign_id: int
    status: DuelStatus
    prompt: str
    answer_a: str | None
    answer_b: str | None
    choice: Choice | None = Field(description="This annotator's vote, once cast.")
    error: str | None = Field(description="Why the duel cannot be voted on (one sentence per status).")
    created_at: dt.datetime
    expires_at: dt.datetime
    campaign_status: CampaignStatus | None
    comment: str | None = Field(None, description="This annotator's note with its vote, if any.")


# Admin views or annotator views; each matches only its own shape (extra="forbid" above).
AnyCampaignOut = CampaignOut | AnnotatorCampaignOut
AnyDuelOut = DuelOut | AnnotatorDuelOut


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
    url: str = Field(description="The absolute voting link, /annotate/{token} (holds the token: send it privately).")


class AnnotatorRecord(BaseModel):
    id: int
    label: str | None
    votes: int = Field(description="Votes this annotator cast.")
    skips: int = Field(0, description="Duels this annotator skipped (handed back to the pool, not counted).")
    agreement: float | None = Field(
        description="Mean agreement of its votes on items others also voted on with the majority of their votes "
        "(docs/service.md, Annotators); null without shared items."
    )
    shared_items: int = Field(description="Distinct (prompt, model pair) items it shares with other annotators.")
    created_at: dt.datetime
    revoked_at: dt.datetime | None


class RunStarted(BaseModel):
    campaign_id: int
    run: RunOut


class RunResumed(RunStarted):
    previous_error: str | None = Field(None, description="Why the run had paused or failed (its run.error).")


class Spread(BaseModel):
    mean: float | None
    p10: float | None
    median: float | None
    p90: float | None


class ForecastOut(BaseModel):
    basis: str = Field(
        description="prior (before the campaign: a simulated judge's matrix or Bradley-Terry draws) "
        "or pilot (posterior draws from a campaign's counted duels)."
    )
    trials: int = Field(description="Simulated campaigns the figures rest on (always the number asked for).")
    requested_trials: int
    algorithm: str
    delta: float
    cost: Spread = Field(description="Cost to certify (USD), models and judge.")
    duels: Spread = Field(description="Duels to certify.")
    lower_bound: float | None = Field(
        description="Median over the drawn matrices of the oracle's lower bound c* log(1/(4 delta)) (USD)."
    )
    within_budget: float | None = Field(
        description="Fraction of trials that certified within the budget and max_duels (null: neither set)."
    )
    unfinished: int = Field(description="Trials stopped at duel_cap before certifying.")
    duel_cap: int
    mode: str = Field(
        description="How a simulated duel pays: wor (prompts without replacement) or reuse (stored answers and "
        "verdicts), each paying what is not yet stored on the campaign's own prompts; fresh: every duel pays."
    )
    ceiling: float | None = Field(
        description="wor and reuse: every answer generated once and every pair judged once on every prompt "
        "(USD); no trial spends more. null for fresh."
    )
    budget: float | None
    max_duels: int | None
    spent: float | None = Field(None, description="pilot: what the campaign has spent so far (USD).")
    remaining: Spread | None = Field(None, description="pilot: cost minus spent, floored at 0.")
    note: str


class ErrorOut(BaseModel):
    detail: Any
