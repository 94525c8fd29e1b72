"""Response bodies that show a campaign: its models, run, statistics and verdict."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from algorithms.vocabulary import CampaignStatus, PromptSampling, Reuse, TiePolicy
from service.hybrid_schemas import HybridOut
from service.verdict_schemas import CertificateEdge, PCEvidence


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
    status: Literal["active", "disabled"] = Field(
        "active",
        description="disabled: the model was disabled or replaced while the campaign ran; its duels stay in the "
        "log and no longer count (docs/guide.md, A failing model).",
    )
    disabled_reason: str | None = Field(None, description="The reason given when the model was disabled.")
    disabled_at: str | None = Field(None, description="When the model was disabled (ISO 8601).")
    replaced_by: str | None = Field(None, description="The model that replaced this one.")
    replaces: str | None = Field(None, description="The model this one replaced.")


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
        None,
        description="dctas-pc: who was shown to beat whom, by name (the certificates, each at its level: pc_evidence.level).",
    )
    copeland_winner: str | None = Field(
        None, description="dctas-pc: the model beating the most others in the estimate (an estimate, not certified)."
    )
    top_cycle: list[str] | None = Field(
        None,
        description="dctas-pc: the plug-in estimate's top cycle (smallest dominant set). An estimate with no "
        "uncertainty: the pages show top_cycle_certified instead.",
    )
    goal: str = Field(
        "winner",
        description="What the campaign certifies: winner (the Condorcet winner), top_k (the best k models) or "
        "ranking (the full order); docs/algorithms.md, Certified leaderboard.",
    )
    k: int | None = Field(None, description="goal top_k: the size of the top set.")
    top_k: list[str] | None = Field(
        None,
        description="goal top_k: the certified set holding the best k models (exactly k once certified; more "
        "while the models around position k are not separated). Wrong with probability at most delta.",
    )
    ranking: list[list[str]] | None = Field(
        None,
        description="goal top_k or ranking: the certified order, as tiers best first; every model of a tier "
        "beats every model of each later tier unless a certificate is wrong (probability at most delta).",
    )
    ranking_tiers: list[dict[str, Any]] | None = Field(
        None,
        description="The tiers of `ranking` with their status: ranked (one model), tie (exactly tied on the "
        "prompt set), undecidable (no order exists: a cycle), open (more duels may split it).",
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
    model_changes: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Models disabled or replaced while the campaign ran, in order: action (disable, replace), "
        "model, reason, at, seq (the policy call at which it took effect), added (the replacement's name and index).",
    )
    judge: dict[str, Any]
    n_prompts: int
    budget: float | None
    remaining_budget: float | None
    max_duels: int | None
    seed: int
    max_pending_per_annotator: int
    webhook_url: str | None = None
    webhook_events: list[str] | None = Field(
        None, description="The events webhook_url receives (campaign.ended, campaign.settled); null: no webhook."
    )
    batch: dict[str, Any] | None = Field(
        None,
        description="A batch campaign's rounds: its settings (round_size, growth, max_round_size, poll_seconds, "
        "window_seconds) and the number of rounds so far (rounds); null for a campaign called one call at a time.",
    )
    leader: str | None
    leader_index: int | None
    winner: str | None
    winner_index: int | None
    spend: float
    judge_spend: float
    spend_final: bool = Field(
        False,
        description="Whether spend is final: the campaign has ended, its run is over and no call of it is still "
        "under way that could be charged (a duel's model or judge call before its deadline, a pre-generated "
        "answer's call, a batch at the provider). False while the campaign runs (docs/service.md, When a run is "
        "over).",
    )
    duels: int = Field(description="Judged duels (ties included).")
    duels_counted: int = Field(description="Duels the policy counted (ties excluded under tie_policy=drop).")
    duels_created: int
    duels_failed: int
    pending: int = Field(description="Duels in flight: models being called or waiting for a verdict.")
    t: int
    counts: list[list[int]] = Field(
        description="N[i][j]: counted duels between models i and j (empty when pairs_included is false)."
    )
    wins: list[list[float]] = Field(
        description="W[i][j]: wins of i over j (ties as halves under half; empty when pairs_included is false)."
    )
    pairs_included: bool = Field(
        True,
        description="Whether the per-pair figures are here in full. Above 16 models they are summarised unless "
        "asked for with ?pairs=true: counts and wins empty, pc_evidence.pairs only the reference's pairs, a "
        "simulated judge's preference matrix left out of judge.",
    )
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
    config_warnings: list[str] | None = Field(
        None,
        description="Client params keys the provider does not document (admin only): sent as they are, "
        "named with the closest documented key.",
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
    archived_at: dt.datetime | None = Field(
        None, description="When it was archived (hidden from the lists); null: not archived."
    )


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


class RunStarted(BaseModel):
    campaign_id: int
    run: RunOut


class RunResumed(RunStarted):
    previous_error: str | None = Field(None, description="Why the run had paused or failed (its run.error).")


class ModelChanged(BaseModel):
    campaign_id: int
    change: dict[str, Any] = Field(
        description="The change recorded: action, model, index, reason, at, seq, arms (the active model "
        "indices), costs, added (a replacement's name and index)."
    )
    run: RunOut | None = Field(None, description="The background run restarted by the change, if any.")
    campaign: CampaignOut


# Admin view or annotator view; each matches only its own shape (extra="forbid").
AnyCampaignOut = CampaignOut | AnnotatorCampaignOut
