"""The cost forecast: algorithms.forecast (pure) and POST /v1/campaigns/forecast,
POST /v1/campaigns/{id}/forecast (pilot)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from service_helpers import SYNTHETIC_P, campaign_body, simulated_judge

from algorithms import forecast as fc
from algorithms.instance import Instance, condorcet_winner
from algorithms.simulator import simulate


def test_prior_draws_are_preference_matrices():
    P = fc.bradley_terry_draws(4, 0.5, 50, np.random.default_rng(0))
    assert P.shape == (50, 4, 4)
    assert np.allclose(P + P.transpose(0, 2, 1), 1.0)
    assert np.all((P > 0) & (P < 1))
    # a wider spread gives larger gaps
    wide = fc.bradley_terry_draws(4, 2.0, 50, np.random.default_rng(0))
    assert np.abs(wide - 0.5).mean() > np.abs(P - 0.5).mean()
    with pytest.raises(ValueError):
        fc.bradley_terry_draws(4, 0.0, 5, np.random.default_rng(0))


def test_posterior_draws_concentrate_on_the_counts():
    W = np.array([[0, 90, 80], [10, 0, 50], [20, 50, 0]], dtype=float)
    N = W + W.T
    P = fc.posterior_draws(W, N, 400, np.random.default_rng(1))
    assert np.allclose(P + P.transpose(0, 2, 1), 1.0)
    assert P[:, 0, 1].mean() == pytest.approx(91 / 102, abs=0.01)  # Beta(1 + 90, 1 + 10)
    assert P[:, 0, 1].std() < 0.05
    flat = fc.posterior_draws(np.zeros((3, 3)), np.zeros((3, 3)), 400, np.random.default_rng(1))
    assert flat[:, 0, 1].std() > 0.25  # uniform: nothing known yet


def test_forecast_shape_order_and_exact_trials():
    P = fc.fixed_draws(SYNTHETIC_P, 30)
    f = fc.run_forecast(P, [4.0, 1.0, 1.0], 0.05, "dctas-pc", judge_cost=0.5, seed=3)
    s = f.summary(budget=1e9, max_duels=None)
    assert s["trials"] == 30 and s["unfinished"] == 0
    for key in ("cost", "duels"):
        assert s[key]["p10"] <= s[key]["median"] <= s[key]["p90"]
        assert s[key]["p10"] > 0
    assert s["within_budget"] == 1.0
    assert s["lower_bound"] > 0
    assert f.summary()["within_budget"] is None
    # each trial is the simulator's campaign with the same seed, the judge's cost per duel included
    inst = Instance(["m0", "m1", "m2"], [4.0, 1.0, 1.0], SYNTHETIC_P)
    one = simulate(inst, "dctas-pc", 0.05, 1, seed=3 + 7, judge_cost=0.5)
    assert f.costs[7] == pytest.approx(one.costs[0]) and f.duels[7] == one.pulls[0]
    # a budget below the p10 is rarely enough
    assert f.within(s["cost"]["p10"] * 0.99, None) <= 0.1


def test_a_larger_delta_forecasts_less():
    P = fc.bradley_terry_draws(3, 0.8, 60, np.random.default_rng(5))
    strict = fc.run_forecast(P, [1.0, 1.0, 2.0], 0.001, seed=1).summary()
    loose = fc.run_forecast(P, [1.0, 1.0, 2.0], 0.2, seed=1).summary()
    assert loose["cost"]["median"] < strict["cost"]["median"]
    assert loose["cost"]["mean"] < strict["cost"]["mean"]
    assert loose["lower_bound"] < strict["lower_bound"]


def test_forecast_is_bounded_in_duels_and_runs_every_trial():
    nearly_even = fc.fixed_draws([[0.5, 0.5001], [0.4999, 0.5]], 20)
    f = fc.run_forecast(nearly_even, [1.0, 1.0], 0.01, duel_cap=2000, seed=0)
    assert f.trials == 20 and f.requested == 20  # no time limit: every trial asked for runs
    assert f.duels.max() == 2000 and f.summary()["unfinished"] >= 18  # (a rare trial ends early, wrongly)
    assert np.all(f.costs[~f.certified] == 2 * 2000)
    with pytest.raises(ValueError):
        fc.run_forecast(fc.fixed_draws(SYNTHETIC_P, 1)[:0], [1.0, 1.0, 1.0], 0.1)
    # many models: a step scans every pair, so a trial gets fewer duels
    assert fc.trial_duel_cap(3) == fc.DEFAULT_TRIAL_DUEL_CAP and fc.trial_duel_cap(64) == 2480
    assert fc.trial_duel_cap(200) == 1000
    big = fc.run_forecast(fc.bradley_terry_draws(64, 0.01, 1, np.random.default_rng(0)), [1.0] * 64, 0.05)
    assert big.duel_cap == 2480 and big.duels[0] <= 2480


async def test_forecast_route_prior_and_simulated_judge(api):
    body = campaign_body(
        name=f"forecast only {time.monotonic_ns()}", costs=(0.004, 0.001, 0.002), budget=5.0, delta=0.05
    )
    r = await api.post("/v1/campaigns/forecast", json=body, params={"trials": 60})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["basis"] == "prior" and out["algorithm"] == "dctas-pc" and out["delta"] == 0.05
    assert out["trials"] == 60 and out["requested_trials"] == 60  # every trial runs
    assert out["mode"] == "fresh" and out["ceiling"] is None  # human judge: every vote is a new duel
    assert out["cost"]["p10"] <= out["cost"]["median"] <= out["cost"]["p90"]
    assert out["duels"]["p10"] <= out["duels"]["median"] <= out["duels"]["p90"]
    assert 0.0 <= out["within_budget"] <= 1.0
    assert "Bradley-Terry" in out["note"]
    # nothing was created
    assert all(c["name"] != body["name"] for c in (await api.get("/v1/campaigns")).json()["items"])
    # the simulated judge's matrix is the one to simulate: the duels match the simulator's
    body = campaign_body(costs=(4.0, 1.0, 1.0), judge=simulated_judge(), delta=0.05, max_duels=10_000)
    out = (await api.post("/v1/campaigns/forecast", json=body, params={"trials": 20})).json()
    assert "simulated judge" in out["note"] and out["within_budget"] is not None
    inst = Instance(["m0", "m1", "m2"], [4.0, 1.0, 1.0], SYNTHETIC_P)
    sim = simulate(inst, "dctas-pc", 0.05, 20, seed=7)  # campaign_body's seed is 7: trial k uses seed 7 + k
    expected = [simulate(inst, "dctas-pc", 0.05, 1, seed=7 + k).pulls[0] for k in range(out["trials"])]
    assert out["duels"]["median"] == pytest.approx(float(np.median(expected)))
    assert sim.trials == 20
    # bad input: 422, not admin: 401
    assert (await api.post("/v1/campaigns/forecast", json={"name": "x"})).status_code == 422
    assert (await api.post("/v1/campaigns/forecast", json=body, params={"trials": 5})).status_code == 422
    assert (
        await api.post("/v1/campaigns/forecast", json=body, headers={"Authorization": "Bearer no"})
    ).status_code == 401


async def test_pilot_forecast_from_a_running_campaign(api):
    body = campaign_body(costs=(0.004, 0.001, 0.002), judge=simulated_judge(), delta=0.01, max_duels=60)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    for _ in range(60):
        if (await api.post(f"/v1/campaigns/{cid}/duels")).status_code != 201:
            break
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    r = await api.post(f"/v1/campaigns/{cid}/forecast", params={"trials": 40})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["basis"] == "pilot" and out["spent"] == pytest.approx(view["spend"])
    assert out["cost"]["p10"] <= out["cost"]["median"] <= out["cost"]["p90"]
    assert out["remaining"]["median"] == pytest.approx(max(0.0, out["cost"]["median"] - view["spend"]))
    assert f"{view['duels_counted']} duels counted" in out["note"]
    # the options in a JSON body count as in the query; given twice differently, or unknown: 422
    r = await api.post(f"/v1/campaigns/{cid}/forecast", json={"trials": 20, "spread": 0.3})
    assert r.status_code == 200 and r.json()["requested_trials"] == 20, r.text
    r = await api.post(f"/v1/campaigns/{cid}/forecast", json={"trials": 20}, params={"trials": 30})
    assert r.status_code == 422 and "given twice" in r.text
    r = await api.post(f"/v1/campaigns/{cid}/forecast", json={"trails": 20})
    assert r.status_code == 422 and "did you mean 'trials'" in r.text
    assert condorcet_winner(np.array(SYNTHETIC_P)) == 0
    assert (await api.post("/v1/campaigns/999999999/forecast")).status_code == 404


def test_prompt_level_link_matches_the_drawn_tables():
    from algorithms.prompt_level import bradley_terry_prompts

    plain = fc.prompt_level_preference(np.array([0.7, 0.0]), prompt_sd=0.0, tie_prob=0.0)
    assert plain[0, 1] == pytest.approx(1 / (1 + np.exp(-0.7)), abs=1e-9) and plain[1, 0] == pytest.approx(
        1 - plain[0, 1]
    )
    theta = np.array([0.8, 0.0, -0.5])
    inst = bradley_terry_prompts(theta, 40_000, costs=[1, 1, 1], judge_cost=0.0, prompt_sd=0.5, tie_prob=0.2, seed=3)
    want = fc.prompt_level_preference(theta, prompt_sd=0.5, tie_prob=0.2)
    assert np.abs(inst.preference() - want).max() < 0.01  # the posterior's link is the tables' expectation


def test_pilot_posterior_uses_what_the_pilot_saw():
    rng = np.random.default_rng(4)
    prior = fc.pilot_posterior_strengths(np.zeros((3, 3)), np.zeros((3, 3)), 0.5, 4000, rng)
    assert prior.std(axis=0) == pytest.approx([0.5] * 3, rel=0.05)  # no duels: the prior
    # 2000 duels a pair at a known Bradley-Terry matrix: the posterior sits on its strengths, narrowly
    theta = np.array([0.6, 0.0, -0.4])
    P = 1 / (1 + np.exp(-(theta[:, None] - theta[None, :])))
    N = np.full((3, 3), 2000.0) - np.diag([2000.0] * 3)
    W = P * N
    post = fc.pilot_posterior_strengths(W, N, 0.5, 4000, rng)
    diffs = post[:, 0] - post[:, 1], post[:, 1] - post[:, 2]
    assert diffs[0].mean() == pytest.approx(0.6, abs=0.02) and diffs[1].mean() == pytest.approx(0.4, abs=0.02)
    assert diffs[0].std() < 0.08
    # a short pilot narrows less than a long one, and leans the right way
    short = fc.pilot_posterior_strengths(W / 100, N / 100, 0.5, 4000, rng)
    assert 0.0 < (short[:, 0] - short[:, 1]).mean() < 0.6 and (short[:, 0] - short[:, 1]).std() > diffs[0].std()
    with pytest.raises(ValueError):
        fc.pilot_posterior_strengths(np.zeros((1, 1)), np.zeros((1, 1)), 0.5, 5, rng)


@pytest.mark.parametrize("mode", ["wor", "reuse"])
def test_prompt_forecast_never_exceeds_the_every_answer_once_ceiling(mode):
    costs, cj, n_prompts = [1.0, 2.0, 3.0], 0.5, 12
    ceiling = n_prompts * sum(costs) + 3 * n_prompts * cj
    near_tie = fc.bradley_terry_strengths(3, 0.05, 15, np.random.default_rng(2))  # small gaps: long campaigns
    f = fc.run_prompt_forecast(near_tie, costs, 0.05, n_prompts, mode, judge_cost=cj, seed=5, duel_cap=3000)
    assert f.trials == 15 and f.requested == 15  # every trial completes
    assert f.ceiling == pytest.approx(ceiling) and f.summary()["ceiling"] == pytest.approx(ceiling)
    assert np.all(f.costs <= ceiling + 1e-9) and f.costs.max() > 0.5 * ceiling
    # the same gaps, every duel paying (the forecast before reuse was modelled) goes far past it
    fresh = fc.run_forecast(_bt(near_tie), costs, 0.05, judge_cost=cj, seed=5, duel_cap=3000)
    assert np.median(fresh.costs) > ceiling


def _bt(theta):
    P = 1 / (1 + np.exp(-(theta[:, :, None] - theta[:, None, :])))
    idx = np.arange(theta.shape[1])
    P[:, idx, idx] = 0.5
    return P


def _llm_body(n_prompts=20, **extra):
    judge = {
        "kind": "llm",
        "client": {"kind": "openai", "base_url": "http://judge.test/v1", "model": "j"},
        "cost": 0.5,
    }
    body = campaign_body(costs=(1.0, 2.0, 3.0), judge=judge, delta=0.05, **extra)
    body["models"] = [
        {"name": f"m{n}", "cost": c, "client": {"kind": "openai", "base_url": "http://m.test/v1", "model": f"m{n}"}}
        for n, c in enumerate((1.0, 2.0, 3.0))
    ]
    body["prompts"] = [f"question {n}" for n in range(n_prompts)]
    return body


async def test_forecast_route_models_reuse_and_sampling_without_replacement(api):
    ceiling = 20 * 6.0 + 3 * 20 * 1.0  # every answer once, every pair judged (both orders, c_J = 1.0) once
    out = (await api.post("/v1/campaigns/forecast", json=_llm_body(), params={"trials": 30, "spread": 0.1})).json()
    assert out["mode"] == "wor" and out["trials"] == 30 and out["requested_trials"] == 30
    assert out["ceiling"] == pytest.approx(ceiling)
    assert out["cost"]["p10"] < out["cost"]["p90"] <= ceiling  # a spread, and never above the ceiling
    assert "without replacement" in out["note"]
    body = _llm_body(prompt_sampling="with_replacement")
    out = (await api.post("/v1/campaigns/forecast", json=body, params={"trials": 20, "spread": 0.1})).json()
    assert out["mode"] == "reuse" and out["trials"] == 20 and out["cost"]["p90"] <= ceiling
    body = _llm_body(answers="fresh", verdicts="fresh", prompt_sampling="with_replacement")
    out = (await api.post("/v1/campaigns/forecast", json=body, params={"trials": 20, "spread": 0.1})).json()
    assert out["mode"] == "fresh" and out["ceiling"] is None


async def test_default_trials_shrink_with_many_models_as_a_stated_choice(api):
    from service.campaigns.forecasting import default_trials

    assert default_trials(3) == default_trials(16) == 200 and default_trials(20) == 160 and default_trials(500) == 20
    theta = np.linspace(4.0, -4.0, 20)  # far apart: each trial certifies quickly
    P = (1 / (1 + np.exp(-(theta[:, None] - theta[None, :])))).tolist()
    body = campaign_body(costs=[1.0] * 20, judge=simulated_judge(P), delta=0.1)
    out = (await api.post("/v1/campaigns/forecast", json=body)).json()
    assert out["trials"] == out["requested_trials"] == 160
    assert "160 trials, the default for 20 models" in out["note"]
    out = (await api.post("/v1/campaigns/forecast", json=body, params={"trials": 12})).json()
    assert out["trials"] == 12 and "the default for" not in out["note"]


async def test_a_forecast_simulates_at_most_the_servers_limit_of_duels(db_url):
    """Equal models never certify: without the server's limit each of 1000 trials would run the
    simulator's full cap (minutes of CPU for one request). With LLMDUEL_FORECAST_MAX_DUELS the trials
    share the limit, end uncertified at their share, and the note says why."""
    from conftest import app_client

    from service.campaigns.forecasting import MIN_TRIAL_DUELS, trial_cap

    assert trial_cap(3, 200, 20_000_000) is None  # the default limit leaves the simulator's cap alone
    assert trial_cap(3, 1000, 50_000) == 100 and trial_cap(3, 10, 50_000) == 5_000
    assert trial_cap(3, 1000, 10_000) == MIN_TRIAL_DUELS
    equal = [[0.5] * 3 for _ in range(3)]
    body = campaign_body(costs=(1.0, 1.0, 1.0), judge=simulated_judge(equal), delta=0.05)
    async with app_client(db_url, forecast_max_duels=50_000) as client:
        out = (await client.post("/v1/campaigns/forecast", json=body, params={"trials": 500})).json()
    assert out["trials"] == 500 and out["duels"]["p90"] == 100  # 50,000 / 500 each
    assert "at most 100 duels" in out["note"] and "LLMDUEL_FORECAST_MAX_DUELS" in out["note"]
    assert "500 of 500 simulated campaigns had not certified after 100 duels" in out["note"]


# ---------------------------------------------------------------- batch campaigns: rounds and batch prices
ROUNDS = {"round_size": 4, "growth": 2.0, "max_round_size": 1024}


def test_planned_in_rounds_counts_whole_rounds():
    from algorithms.rounds import planned_in_rounds

    assert planned_in_rounds(0, ROUNDS) == (0, 0)
    assert planned_in_rounds(4, ROUNDS) == (4, 1)
    assert planned_in_rounds(5, ROUNDS) == (12, 2)  # 4 + 8
    assert planned_in_rounds(29, {**ROUNDS, "max_round_size": 8}) == (36, 5)  # 4 + 8 + 8 + 8 + 8


def test_a_forecast_in_rounds_pays_each_trials_whole_rounds():
    from algorithms.rounds import planned_in_rounds

    P = fc.fixed_draws(SYNTHETIC_P, 12)
    f = fc.run_forecast(P, [4.0, 1.0, 1.0], 0.05, "dctas-pc", judge_cost=0.5, seed=3, rounds=ROUNDS)
    one = fc.run_forecast(P, [4.0, 1.0, 1.0], 0.05, "dctas-pc", judge_cost=0.5, seed=3)
    for k in range(12):  # the same trial, its duels rounded up to whole rounds, each extra duel at its mean cost
        planned, rounds = planned_in_rounds(int(one.duels[k]), ROUNDS)
        assert f.duels[k] == planned and f.rounds[k] == rounds and f.extra_duels[k] == planned - one.duels[k]
        assert f.costs[k] == pytest.approx(one.costs[k] * planned / one.duels[k])
    s = f.summary()
    assert s["rounds"]["median"] >= 1 and s["extra_duels"]["p10"] >= 0
    assert "rounds" not in one.summary()


def _priced(body):
    for m in body["models"] + [body["judge"]]:
        m["client"]["params"] = {"max_tokens": 64}
    for m in body["models"]:
        m["client"].update(
            price={"input_per_1m": 2, "output_per_1m": 2}, batch_price={"input_per_1m": 1, "output_per_1m": 1}
        )
    body["judge"]["client"].update(
        price={"input_per_1m": 2, "output_per_1m": 2}, batch_price={"input_per_1m": 1, "output_per_1m": 1}
    )
    return body


@pytest.mark.parametrize("sampling", ["without_replacement", "with_replacement"])
async def test_the_forecast_of_a_batch_campaign_counts_its_rounds_and_its_batch_prices(api, sampling):
    body = _priced(_llm_body(prompt_sampling=sampling))
    params = {"trials": 20, "spread": 0.1}
    one = (await api.post("/v1/campaigns/forecast", json=body, params=params)).json()
    assert one["batch"] is None
    body["batch"] = {"round_size": 4}
    body["budget"] = one["cost"]["median"] * 0.6
    r = await api.post("/v1/campaigns/forecast", json=body, params=params)
    assert r.status_code == 200, r.text
    out = r.json()
    batch = out["batch"]
    assert batch["round_size"] == 4 and batch["growth"] == 2.0
    assert batch["price_ratio"] == pytest.approx(0.5)  # list and batch prices 2:1 for every model and the judge
    for k in ("p10", "median", "p90"):
        assert out["cost"][k] == pytest.approx(0.5 * batch["cost_at_list_price"][k])
    assert batch["rounds"]["median"] >= 1 and batch["extra_duels"]["median"] >= 0
    assert out["duels"]["median"] >= one["duels"]["median"]  # the rounds plan duels past the stop
    assert batch["cost_at_list_price"]["median"] >= one["cost"]["median"]
    assert out["within_budget"] is not None and out["within_budget"] > 0  # the budget is held to the batch prices
    assert "batch campaign" in out["note"] and "batch prices" in out["note"]
    if out["ceiling"] is not None:
        assert out["ceiling"] == pytest.approx(0.5 * one["ceiling"])
    # the pilot forecast of a batch campaign too
    body.pop("budget")
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    pilot = (await api.post(f"/v1/campaigns/{cid}/forecast", params=params)).json()
    assert pilot["batch"]["price_ratio"] == pytest.approx(0.5) and pilot["batch"]["rounds"] is not None


async def test_a_model_without_a_batch_price_is_forecast_at_its_list_price(api):
    body = _priced(_llm_body())
    for m in body["models"]:
        m["client"].pop("batch_price")
    body["judge"]["client"].pop("batch_price")
    body["batch"] = True
    out = (await api.post("/v1/campaigns/forecast", json=body, params={"trials": 20, "spread": 0.1})).json()
    assert out["batch"]["price_ratio"] == 1.0 and out["batch"]["round_size"] == 8


def test_the_cli_shows_a_batch_forecast_at_both_prices():
    from service.cli.campaign_text import format_forecast

    spread = {"mean": 2.0, "p10": 1.0, "median": 2.0, "p90": 3.0}
    text = format_forecast(
        {
            "basis": "prior",
            "cost": spread,
            "duels": spread,
            "batch": {"price_ratio": 0.5, "cost_at_list_price": spread, "rounds": spread, "extra_duels": spread},
        }
    )
    assert "at list prices" in text and "batch prices x0.5" in text and "rounds" in text and "duels past stop" in text
    assert "at list prices" not in format_forecast({"basis": "prior", "cost": spread, "duels": spread, "batch": None})


def _bt_counts(theta, per_pair: int, rng) -> tuple[np.ndarray, np.ndarray]:
    L = len(theta)
    W, N = np.zeros((L, L)), np.zeros((L, L))
    for i in range(L):
        for j in range(i + 1, L):
            w = rng.binomial(per_pair, 1.0 / (1.0 + np.exp(theta[j] - theta[i])))
            W[i, j], W[j, i], N[i, j], N[j, i] = w, per_pair - w, per_pair, per_pair
    return W, N


def test_the_spread_is_learned_from_counts():
    """Seeded: counts of models 0.8 apart put the posterior's mode near 0.8; counts of equal models put
    little weight on spreads of 0.5 and more; no counts leave the prior; the grid stays above the 0.01 floor."""
    rng = np.random.default_rng(3)
    grid = fc.SPREAD_GRID
    assert grid.min() >= 0.01
    far = [_bt_counts(rng.normal(0.0, 0.8, 6), 400, rng) for _ in range(6)]
    w = fc.stored_spread_weights(far)
    assert w is not None and w.sum() == pytest.approx(1.0)
    assert 0.4 <= grid[np.argmax(w)] <= 1.6, grid[np.argmax(w)]
    equal = fc.spread_weights(*_bt_counts(np.zeros(4), 400, rng))
    assert equal[grid >= 0.5].sum() < 0.05, equal
    assert fc.spread_weights(np.zeros((3, 3)), np.zeros((3, 3))) == pytest.approx(np.full(len(grid), 1 / len(grid)))
    assert fc.stored_spread_weights([(np.zeros((3, 3)), np.zeros((3, 3)))]) is None
    with pytest.raises(ValueError):
        fc.spread_weights(np.zeros((3, 3)), np.zeros((3, 3)), prior=[1.0, 2.0])
    theta = fc.pilot_learned_strengths(*_bt_counts(np.zeros(4), 100, rng), 50, rng)
    assert theta.shape == (50, 4) and np.all(np.isfinite(theta))
    # the draws follow the learned spread: models 0.8 apart are drawn far apart, equal ones close
    far_draws = fc.learned_strengths(6, w, 400, rng)
    near_draws = fc.learned_strengths(4, equal, 400, rng)
    assert np.median(far_draws.std(axis=1)) > 3 * np.median(near_draws.std(axis=1))


async def test_the_prior_spread_is_learned_from_the_campaigns_stored_here(api):
    body = campaign_body(name=f"learned {time.monotonic_ns()}", costs=(0.004, 0.001, 0.002), delta=0.05)
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    for n in range(22):  # a human-judged campaign with 22 counted votes: a campaign to learn from
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201, r.text
        r = await api.post(f"/v1/duels/{r.json()['id']}/vote", json={"choice": "a" if n % 3 else "b"})
        assert r.status_code == 200, r.text
    out = (await api.post("/v1/campaigns/forecast", json=body, params={"trials": 20})).json()
    assert "spread is learned from the" in out["note"] and "campaign(s) stored here" in out["note"], out["note"]
    out = (await api.post("/v1/campaigns/forecast", json=body, params={"trials": 20, "spread": 0.3})).json()
    assert "N(0, 0.3^2)" in out["note"] and "learned" not in out["note"]
    out = (await api.post(f"/v1/campaigns/{cid}/forecast", params={"trials": 20})).json()
    assert "s learned from these counts" in out["note"], out["note"]
    out = (await api.post(f"/v1/campaigns/{cid}/forecast", json={"trials": 20, "spread": 0.3})).json()
    assert "prior N(0, 0.3^2)" in out["note"]
