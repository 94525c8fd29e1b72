"""The response body of the cost forecast (``/forecast``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Spread(BaseModel):
    mean: float | None
    p10: float | None
    median: float | None
    p90: float | None


class BatchForecast(BaseModel):
    round_size: int
    growth: float
    max_round_size: int
    price_ratio: float = Field(
        description="A duel's expected cost at the batch prices over its cost at the list prices (1 for a model "
        "without a known batch price); 'cost' is the list-price cost times it."
    )
    cost_at_list_price: Spread = Field(description="The same duels (rounds included) at the list prices (USD).")
    rounds: Spread | None = Field(description="Rounds to certify (null: a human campaign, planned one at a time).")
    extra_duels: Spread | None = Field(description="Duels the rounds planned past the stop (paid, not counted).")


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
    batch: BatchForecast | None = Field(
        None,
        description="A batch campaign (its 'batch' setting): 'cost' and 'within_budget' are at the batch prices "
        "and count the duels its rounds plan past the stop; this says how (docs/service.md, Forecast).",
    )
    note: str
