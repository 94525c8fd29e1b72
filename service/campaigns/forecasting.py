"""The cost forecast of a campaign (POST /v1/campaigns/forecast, POST /v1/campaigns/{id}/forecast).

The mathematics is :mod:`algorithms.forecast`; this module only builds its input
from a campaign-create body (the *prior*: a simulated judge's matrix, else
Bradley-Terry strengths) or from a running campaign's counts (the *pilot*: the
Bradley-Terry posterior of what it counted), chooses how a trial pays (``mode``:
``wor`` and ``reuse`` pay only what is not yet stored, on the campaign's own
prompt set; ``fresh`` pays every duel), runs it in a worker thread, one forecast
at a time per process, and says in ``note`` what the numbers rest on. Every trial
asked for runs (no time limit).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select

from algorithms.forecast import (
    DEFAULT_PROMPT_SD,
    DEFAULT_SPREAD,
    DEFAULT_TIE_PROB,
    DEFAULT_TRIALS,
    Forecast,
    bradley_terry_strengths,
    combine_spread_weights,
    fixed_draws,
    learned_strengths,
    pilot_learned_strengths,
    pilot_posterior_strengths,
    run_forecast,
    run_prompt_forecast,
    spread_weights,
    trial_duel_cap,
)
from algorithms.vocabulary import Algorithm, JudgeKind, Reuse

from ..db import Database
from ..models import Campaign, PolicyCheckpoint, from_nusd
from ..money.costs import judge_cost_per_duel
from ..plain_values import jsonable
from ..schemas import CampaignCreate
from . import hybrid, policy_log
from .model_changes import active_models
from .sampling import is_wor
from .types import Conflict, NotFound, Unprocessable

# CPU work: one forecast at a time per process; a second one meanwhile gets 409 (retry later).
_BUSY = threading.Lock()
#: The most recent campaigns whose counts teach the prior's spread (each at least STORED_MIN_DUELS counted
#: duels, judged by people or models: a simulated judge's matrix says nothing of real models).
STORED_CAMPAIGNS = 20
STORED_MIN_DUELS = 20


@dataclass(frozen=True)
class _Setup:
    """What a forecast needs to know of a campaign (a create body or a stored row)."""

    costs: list[float]
    delta: float
    algorithm: str
    judge: dict[str, Any]
    n_prompts: int
    prompt_sampling: str
    answers: str
    verdicts: str
    seed: int
    batch: dict[str, Any] | None = None  # a batch campaign's setting (round sizes)
    price_ratio: float = 1.0  # a duel's expected cost at batch prices over its cost at list prices

    @property
    def rounds(self) -> dict[str, Any] | None:
        """The round sizes the simulated policy runs in (a batch campaign with an automatic judge), or None."""
        if self.batch is None or self.judge.get("kind") in (JudgeKind.HUMAN, "hybrid"):
            return None  # a human campaign's duels are planned one at a time: only its answers are batched
        return {k: self.batch[k] for k in ("round_size", "growth", "max_round_size")}

    @property
    def mode(self) -> str:
        """``wor``, ``reuse`` (prompt-level, pays what is not stored) or ``fresh`` (every duel pays)."""
        if self.algorithm != Algorithm.DCTAS_PC or self.judge.get("kind") == JudgeKind.SIMULATED:
            return "fresh"
        if is_wor(self.prompt_sampling):
            return "wor"
        if self.answers == Reuse.REUSE and self.verdicts == Reuse.REUSE and self.judge.get("kind") == JudgeKind.LLM:
            return "reuse"
        return "fresh"


#: With more models than this, the default number of trials shrinks as 1/L (a stated choice, never a time-out).
FULL_TRIALS_UP_TO = 16
MIN_DEFAULT_TRIALS = 20


def default_trials(n_models: int) -> int:
    """Trials of a forecast nobody gave a number for: 200, or ``200 x 16 / L`` (at least 20) beyond 16 models
    (a trial's work grows with the pairs: this keeps a large forecast within minutes)."""
    if n_models <= FULL_TRIALS_UP_TO:
        return DEFAULT_TRIALS
    return max(MIN_DEFAULT_TRIALS, DEFAULT_TRIALS * FULL_TRIALS_UP_TO // n_models)


def _trials_note(asked: int | None, used: int, n_models: int) -> str:
    if asked is not None or used == DEFAULT_TRIALS:
        return ""
    return f"{used} trials, the default for {n_models} models (200 x 16 / L; ask for more with ?trials=)"


def _limit_note(n_models: int, trials: int, max_duels: int) -> str:
    cap = trial_cap(n_models, trials, max_duels)
    if cap is None:
        return ""
    return (
        f"each trial may take at most {cap} duels: the server simulates at most {max_duels} duels per forecast "
        "(LLMDUEL_FORECAST_MAX_DUELS), shared by the trials; fewer trials give each more"
    )


def _mode_note(mode: str, n_prompts: int) -> str:
    if mode == "fresh":
        return "every duel pays its two answers and its verdict"
    how = "without replacement" if mode == "wor" else "with replacement, answers and verdicts reused"
    return (
        f"each trial draws a verdict table of the campaign's {n_prompts} prompts (per-prompt strength noise "
        f"{DEFAULT_PROMPT_SD:g}, tie probability {DEFAULT_TIE_PROB:g} per judge order) and runs dctas-pc on it "
        f"{how}, paying each answer and verdict once: never above the every-answer-once ceiling; answers "
        "already stored by other campaigns are not counted as free"
    )


def _note(f: Forecast, extra: str) -> str:
    parts = [extra]
    unfinished = int((~f.certified).sum())
    if unfinished:
        parts.append(
            f"{unfinished} of {f.trials} simulated campaigns had not certified after {f.duel_cap} duels: "
            "their cost counts as if they ended there, so the upper figures are lower bounds"
        )
    parts.append(
        "models cost their expected cost per query (derived or configured), the judge its c_J per verdict; "
        "failed calls and duels in flight are not simulated"
    )
    return "; ".join(parts) + "."


def _batch_note(setup: _Setup) -> str:
    if setup.batch is None:
        return ""
    if setup.rounds is None:
        how = "its answers pre-generated in batches (its duels are planned one at a time)"
    else:
        how = (
            "in rounds (every duel a round plans is paid: 'batch.extra_duels' past the stop, counted with the "
            "plain growth of the round sizes, an upper bound; `llmduel simulate --round-size` runs the policy in rounds)"
        )
    return (
        f"a batch campaign, {how}; 'cost' is at the batch prices (x{setup.price_ratio:.3g} of the list prices "
        "per duel; a model without a known batch price at its list price), 'batch.cost_at_list_price' the "
        "same duels at the list prices"
    )


def _answer(
    basis: str, f: Forecast, *, budget: float | None, max_duels: int | None, note: str, setup: _Setup | None = None
) -> dict[str, Any]:
    batch = setup if setup is not None and setup.batch is not None else None
    if batch is not None:  # a batch campaign pays the batch prices: its cost, and the budget's check of it
        f.costs = f.costs * batch.price_ratio
    out = f.summary(budget, max_duels)
    if batch is not None:
        _batch_answer(out, batch)
    out.update(basis=basis, note=_note(f, note), requested_trials=f.requested, budget=budget, max_duels=max_duels)
    return jsonable(out)


def trial_cap(n_models: int, trials: int, max_duels: int) -> int | None:
    """The duels one trial may take when ``trials`` share ``max_duels`` (Settings.forecast_max_duels),
    at least :data:`MIN_TRIAL_DUELS`; None when the share is above the simulator's own cap
    (:func:`algorithms.forecast.trial_duel_cap`)."""
    share = max(MIN_TRIAL_DUELS, int(max_duels) // max(1, int(trials)))
    return share if share < trial_duel_cap(n_models) else None


#: The fewest duels a trial gets under the server's forecast limit.
MIN_TRIAL_DUELS = 100


def _run(setup: _Setup, draw: Any, trials: int, max_duels: int) -> Forecast:
    """``draw(kind, n)`` gives n matrices (kind ``matrices``) or n strength vectors (kind ``strengths``);
    the trials share ``max_duels`` simulated duels (:func:`trial_cap`)."""
    if not _BUSY.acquire(blocking=False):
        raise Conflict("another forecast is running in this process; retry in a few seconds", retry_later=True)
    try:
        judge_cost = judge_cost_per_duel(setup.judge)
        mode = setup.mode
        cap = trial_cap(len(setup.costs), trials, max_duels)
        if mode == "fresh":
            matrices = draw("matrices", trials)
            return run_forecast(
                matrices,
                setup.costs,
                setup.delta,
                setup.algorithm,
                judge_cost,
                seed=setup.seed,
                rounds=setup.rounds,
                duel_cap=cap,
            )
        return run_prompt_forecast(
            draw("strengths", trials),
            setup.costs,
            setup.delta,
            setup.n_prompts,
            mode,
            judge_cost,
            seed=setup.seed,
            duel_cap=cap,
            prompt_sd=DEFAULT_PROMPT_SD,
            tie_prob=DEFAULT_TIE_PROB,
            rounds=setup.rounds,
        )
    finally:
        _BUSY.release()


def _call_ratio(client: dict[str, Any] | None, tokens_in: float | None, tokens_out: float | None) -> float:
    """One call's cost at its batch price over its cost at its list price (1 without both prices)."""
    client = client or {}
    price, batch = client.get("price"), client.get("batch_price")
    if not isinstance(price, dict) or not isinstance(batch, dict):
        return 1.0  # no known batch price: the list price (never an assumed discount)
    tin, tout = (tokens_in or 1.0), (tokens_out or 1.0)
    full = float(price.get("input_per_1m") or 0) * tin + float(price.get("output_per_1m") or 0) * tout
    part = float(batch.get("input_per_1m") or 0) * tin + float(batch.get("output_per_1m") or 0) * tout
    return part / full if full > 0 else 1.0


def _judge_ratio(judge: dict[str, Any]) -> float:
    if judge.get("kind") == "jury":
        jurors = judge.get("judges") or []
        costs = [judge_cost_per_duel(j) for j in jurors]
        total = sum(costs)
        return sum(_judge_ratio(j) * c for j, c in zip(jurors, costs)) / total if total > 0 else 1.0
    if judge.get("kind") != "llm":
        return 1.0  # a human's fee, a simulated judge: not batched
    return _call_ratio(judge.get("client"), None, None)


def batch_price_ratio(models: list[dict[str, Any]], judge: dict[str, Any]) -> float:
    """A duel's expected cost at the batch prices over its cost at the list prices: each model's ratio
    (its ``batch_price`` against its ``price`` at its expected input and output tokens) weighted by its
    expected cost per query, and the judge's by ``c_J`` (1 for a human fee, which is not batched)."""
    costs = [float(m.get("cost") or 0.0) for m in models]
    ratios = []
    for m in models:
        pricing = m.get("pricing") or {}
        ratios.append(
            _call_ratio(m.get("client"), pricing.get("expected_input_tokens"), pricing.get("expected_output_tokens"))
        )
    c_j = judge_cost_per_duel(judge)
    mean_c = sum(costs) / len(costs) if costs else 0.0
    mean_rc = sum(r * c for r, c in zip(ratios, costs)) / len(costs) if costs else 0.0
    full = 2 * mean_c + c_j
    return (2 * mean_rc + _judge_ratio(judge) * c_j) / full if full > 0 else 1.0


def _batch_answer(out: dict[str, Any], setup: _Setup) -> None:
    """A batch campaign's forecast (``cost`` already at the batch prices): the lower bound and the
    ceiling at the batch prices too, and ``batch`` with the round sizes, the price ratio, the same
    duels' cost at the list prices, the rounds and the duels planned past the stop."""
    assert setup.batch is not None
    ratio = setup.price_ratio
    for key in ("lower_bound", "ceiling"):
        if out.get(key) is not None:
            out[key] = out[key] * ratio
    out["batch"] = {
        **{k: setup.batch[k] for k in ("round_size", "growth", "max_round_size")},
        "price_ratio": ratio,
        "cost_at_list_price": {k: v / ratio for k, v in out["cost"].items()},
        "rounds": out.pop("rounds", None),
        "extra_duels": out.pop("extra_duels", None),
    }


def _bt_matrices(theta: np.ndarray) -> np.ndarray:
    diff = theta[:, :, None] - theta[:, None, :]
    P = np.clip(1.0 / (1.0 + np.exp(-diff)), 1e-6, 1 - 1e-6)
    idx = np.arange(theta.shape[1])
    P[:, idx, idx] = 0.5
    return P


class Forecasts:
    """Forecasts of the cost to certify (synchronous: they run in worker threads; the only state is a
    cache of the stored campaigns' spread weights per campaign row version)."""

    def __init__(self, db: Database, max_duels: int = 20_000_000):
        self.db = db
        self.max_duels = int(max_duels)  # all trials together (Settings.forecast_max_duels)

    def stored_spread(self, exclude: int | None = None) -> tuple[np.ndarray | None, int]:
        """The spread weights learned from the campaigns stored here (:func:`stored_spread_weights`) and
        how many campaigns taught them (None, 0: none to learn from)."""
        with self.db.read() as s:
            rows = s.execute(
                select(
                    Campaign.id,
                    Campaign.version,
                    PolicyCheckpoint.counts,
                    Campaign.judge,
                    Campaign.models,
                    Campaign.model_changes,
                )
                .outerjoin(PolicyCheckpoint, PolicyCheckpoint.campaign_id == Campaign.id)
                .where(Campaign.duels_counted >= STORED_MIN_DUELS)
                .order_by(Campaign.id.desc())
                .limit(4 * STORED_CAMPAIGNS)
            ).all()
        cache = self.__dict__.setdefault("_spread_cache", {})  # (id, version) -> that campaign's weights
        ev = []
        for cid, version, counts, judge, models, changes in rows:
            if cid == exclude or (judge or {}).get("kind") == JudgeKind.SIMULATED or not counts:
                continue
            on = active_models(len(models), changes)
            W, N = counts.get("W"), counts.get("N")
            if len(on) < 2 or not W or not N:
                continue
            key = (cid, int(version))
            if key not in cache:
                if len(cache) >= 4 * STORED_CAMPAIGNS:
                    cache.clear()
                Wa, Na = [[W[a][b] for b in on] for a in on], [[N[a][b] for b in on] for a in on]
                cache[key] = spread_weights(Wa, Na, prompt_sd=DEFAULT_PROMPT_SD, tie_prob=DEFAULT_TIE_PROB)
            ev.append(cache[key])
            if len(ev) == STORED_CAMPAIGNS:
                break
        weights = combine_spread_weights(ev)
        return weights, len(ev) if weights is not None else 0

    def forecast_prior(
        self, body: CampaignCreate, trials: int | None = None, spread: float | None = None
    ) -> dict[str, Any]:
        """The forecast of a campaign that does not exist yet (basis ``prior``); ``trials`` None: :func:`default_trials`."""
        judge = body.stored_judge()
        if hybrid.is_hybrid(judge):  # hybrid hook
            raise Unprocessable(hybrid.FORECAST_REFUSAL)
        setup = _Setup(
            costs=[float(m.query_cost()) for m in body.models],
            delta=body.delta,
            algorithm=str(body.algorithm),
            judge=judge,
            n_prompts=len(body.prompts),
            prompt_sampling=str(body.prompt_sampling),
            answers=str(body.answers),
            verdicts=str(body.verdicts),
            seed=body.seed if body.seed is not None else 0,
            batch=body.stored_batch(),
            price_ratio=batch_price_ratio([m.stored() for m in body.models], judge),
        )
        rng = np.random.default_rng(setup.seed)
        L = len(setup.costs)
        asked, trials = trials, trials if trials is not None else default_trials(L)
        if judge.get("kind") == JudgeKind.SIMULATED:
            note = "the preference matrix is the simulated judge's"

            def draw(kind: str, n: int) -> np.ndarray:
                return fixed_draws(judge["preference"], n)
        else:
            weights, taught = self.stored_spread() if spread is None else (None, 0)
            if weights is not None:
                prior = (
                    f"a Bradley-Terry prior whose spread is learned from the {taught} campaign(s) stored here "
                    f"with at least {STORED_MIN_DUELS} counted duels (theta ~ N(0, s^2), s drawn per trial)"
                )
            else:
                spread = DEFAULT_SPREAD if spread is None else spread
                prior = f"a Bradley-Terry prior (theta ~ N(0, {spread:g}^2))"
            note = (
                f"strengths drawn from {prior}; the real strengths decide the cost: a pilot forecast "
                "(POST /v1/campaigns/{id}/forecast) after some duels narrows it"
            )

            def draw(kind: str, n: int) -> np.ndarray:
                if weights is not None:
                    theta = learned_strengths(L, weights, n, rng)
                else:
                    theta = bradley_terry_strengths(L, float(spread or DEFAULT_SPREAD), n, rng)
                return theta if kind == "strengths" else _bt_matrices(theta)

        f = _run(setup, draw, trials, self.max_duels)
        notes = [
            note,
            _trials_note(asked, trials, L),
            _limit_note(L, trials, self.max_duels),
            _mode_note(f.mode, setup.n_prompts),
            _batch_note(setup),
        ]
        return _answer(
            "prior", f, budget=body.budget, max_duels=body.max_duels, note="; ".join(n for n in notes if n), setup=setup
        )

    def forecast_pilot(
        self, campaign_id: int, trials: int | None = None, spread: float | None = None
    ) -> dict[str, Any]:
        """The forecast of a whole campaign like this one, from its counted duels (basis ``pilot``)."""
        with self.db.read() as s:
            c = s.get(Campaign, campaign_id)
            if c is None:
                raise NotFound(f"campaign {campaign_id} not found")
            if hybrid.is_hybrid(c.judge):  # hybrid hook
                raise Unprocessable(hybrid.FORECAST_REFUSAL)
            counts = policy_log.snapshot_of(s, c).counts or {}
            on = active_models(len(c.models), c.model_changes)  # the models still compared
            L, n_all = len(on), len(c.models)
            W = counts.get("W") or [[0.0] * n_all for _ in range(n_all)]
            N = counts.get("N") or [[0] * n_all for _ in range(n_all)]
            W, N = [[W[a][b] for b in on] for a in on], [[N[a][b] for b in on] for a in on]
            setup = _Setup(
                costs=[float(c.models[m]["cost"]) for m in on],
                delta=c.delta,
                algorithm=c.algorithm,
                judge=c.judge,
                n_prompts=int(c.n_prompts),
                prompt_sampling=c.prompt_sampling,
                answers=c.answers,
                verdicts=c.verdicts,
                seed=int(c.seed),
                batch=dict(c.batch) if c.batch is not None else None,
                price_ratio=batch_price_ratio([c.models[m] for m in on], c.judge),
            )
            budget, max_duels, spend, t = (
                from_nusd(c.budget_nusd),
                c.max_duels,
                from_nusd(c.spend_nusd),
                c.duels_counted,
            )
        rng = np.random.default_rng(setup.seed)
        prompt_level = setup.mode != "fresh"
        asked, trials = trials, trials if trials is not None else default_trials(L)
        prompt_sd = DEFAULT_PROMPT_SD if prompt_level else 0.0
        tie_prob = DEFAULT_TIE_PROB if prompt_level else 0.0
        hyper, taught = self.stored_spread(exclude=campaign_id) if spread is None else (None, 0)

        def draw(kind: str, n: int) -> np.ndarray:
            if spread is None:
                theta = pilot_learned_strengths(W, N, n, rng, prior=hyper, prompt_sd=prompt_sd, tie_prob=tie_prob)
            else:
                theta = pilot_posterior_strengths(W, N, spread, n, rng, prompt_sd=prompt_sd, tie_prob=tie_prob)
            return theta if kind == "strengths" else _bt_matrices(theta)

        f = _run(setup, draw, trials, self.max_duels)
        prior = (
            f"prior N(0, {spread:g}^2)"
            if spread is not None
            else "prior N(0, s^2) with s learned from these counts"
            + (f" and the {taught} campaign(s) stored here" if taught else "")
        )
        notes = [
            f"strengths drawn from the Bradley-Terry posterior (Laplace approximation, {prior}) "
            f"of the {t} duels counted so far; the figures are for a whole campaign from its start, 'remaining' "
            "subtracts what this one has spent",
            _trials_note(asked, trials, L),
            _limit_note(L, trials, self.max_duels),
            _mode_note(f.mode, setup.n_prompts),
            _batch_note(setup),
            f"for the {L} models still compared ({n_all - L} disabled)" if n_all > L else "",
        ]
        out = _answer(
            "pilot", f, budget=budget, max_duels=max_duels, note="; ".join(n for n in notes if n), setup=setup
        )
        out["spent"] = spend
        out["remaining"] = {k: max(0.0, v - spend) for k, v in out["cost"].items()}
        return out
