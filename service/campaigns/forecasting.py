"""The cost forecast of a campaign (POST /v1/campaigns/forecast, POST /v1/campaigns/{id}/forecast).

The mathematics is :mod:`algorithms.forecast`; this module only builds its input
from a campaign-create body (the *prior*: a simulated judge's matrix, else
Bradley-Terry draws) or from a running campaign's counts (the *pilot*: posterior
draws), runs it in a worker thread, one forecast at a time per process, and says
in ``note`` what the numbers rest on.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from algorithms.forecast import (
    DEFAULT_SPREAD,
    DEFAULT_TIME_LIMIT_S,
    DEFAULT_TRIALS,
    Forecast,
    bradley_terry_draws,
    fixed_draws,
    posterior_draws,
    run_forecast,
)

from ..models import Campaign, from_nusd
from ..schemas import CampaignCreate
from . import rules
from .types import Conflict, NotFound

# CPU work: one forecast at a time per process; a second one meanwhile gets 409 (retry later).
_BUSY = threading.Lock()


def _note(f: Forecast, extra: str) -> str:
    parts = [extra]
    unfinished = int((~f.certified).sum())
    if unfinished:
        parts.append(
            f"{unfinished} of {f.trials} simulated campaigns had not certified after {f.duel_cap} duels: "
            "their cost counts as if they ended there, so the upper figures are lower bounds"
        )
    if f.timed_out:
        parts.append(f"the time limit stopped the forecast after {f.trials} of {f.requested} trials")
    parts.append(
        "models cost their expected cost per query (derived or configured), the judge its c_J per duel; "
        "ties, failed calls and duels in flight are not simulated"
    )
    return "; ".join(parts) + "."


def _answer(basis: str, f: Forecast, budget: float | None, max_duels: int | None, note: str) -> dict[str, Any]:
    out = f.summary(budget, max_duels)
    out.update(basis=basis, note=_note(f, note), requested_trials=f.requested, budget=budget, max_duels=max_duels)
    return rules.jsonable(out)


def _run(matrices: np.ndarray, costs: list[float], delta: float, algorithm: str, judge_cost: float, seed: int):
    if not _BUSY.acquire(blocking=False):
        raise Conflict("another forecast is running in this process; retry in a few seconds", retry_later=True)
    try:
        return run_forecast(
            matrices,
            costs,
            delta,
            algorithm,
            judge_cost,
            seed=seed,
            time_limit_s=DEFAULT_TIME_LIMIT_S,
        )
    finally:
        _BUSY.release()


class CampaignForecasts:
    """Forecasts of the cost to certify (synchronous: they run in worker threads)."""

    def forecast_prior(
        self, body: CampaignCreate, trials: int = DEFAULT_TRIALS, spread: float = DEFAULT_SPREAD
    ) -> dict[str, Any]:
        """The forecast of a campaign that does not exist yet (basis ``prior``)."""
        costs = [float(m.cost) for m in body.models]
        seed = body.seed if body.seed is not None else 0
        rng = np.random.default_rng(seed)
        judge = body.stored_judge()
        if judge.get("kind") == "simulated":
            matrices = fixed_draws(judge["preference"], trials)
            note = "the preference matrix is the simulated judge's"
        else:
            matrices = bradley_terry_draws(len(costs), spread, trials, rng)
            note = (
                f"preference matrices drawn from a Bradley-Terry prior (strengths ~ N(0, {spread:g}^2)); "
                "the real matrix decides the cost: a pilot forecast (POST /v1/campaigns/{id}/forecast) "
                "after some duels narrows it"
            )
        f = _run(matrices, costs, body.delta, body.algorithm, rules.judge_cost_per_duel(judge), seed)
        return _answer("prior", f, body.budget, body.max_duels, note)

    def forecast_pilot(self, campaign_id: int, trials: int = DEFAULT_TRIALS) -> dict[str, Any]:
        """The forecast of a whole campaign like this one, from its counted duels (basis ``pilot``)."""
        with self.db.read() as s:
            c = s.get(Campaign, campaign_id)
            if c is None:
                raise NotFound(f"campaign {campaign_id} not found")
            counts = c.counts or {}
            L = len(c.models)
            W = counts.get("W") or [[0.0] * L for _ in range(L)]
            N = counts.get("N") or [[0] * L for _ in range(L)]
            costs = [float(m["cost"]) for m in c.models]
            delta, algorithm, judge, seed = c.delta, c.algorithm, c.judge, int(c.seed)
            budget, max_duels, spend, t = (
                from_nusd(c.budget_nusd),
                c.max_duels,
                from_nusd(c.spend_nusd),
                c.duels_counted,
            )
        matrices = posterior_draws(W, N, trials, np.random.default_rng(seed))
        f = _run(matrices, costs, delta, algorithm, rules.judge_cost_per_duel(judge), seed)
        out = _answer(
            "pilot",
            f,
            budget,
            max_duels,
            f"preference matrices drawn from the posterior of the {t} duels counted so far "
            "(uniform prior per pair); the figures are for a whole campaign from its start, 'remaining' "
            "subtracts what this one has spent",
        )
        out["spent"] = spend
        out["remaining"] = {k: max(0.0, v - spend) for k, v in out["cost"].items()}
        return out
