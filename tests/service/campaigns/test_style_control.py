"""Style control (algorithms/style_control.py): a judge that rewards length makes the verbose model
lead the raw Bradley-Terry ranking; with the style held fixed the models' own strengths come back.
Seeded simulations with known answers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from algorithms.bradley_terry import fit_bradley_terry
from algorithms.style_control import FEATURES, fit_style_controlled, style_counts


def _duels(theta, words, gamma_words, n, seed):
    """n duels between random pairs; answer lengths per model around ``words``; outcome from
    the true strengths plus a length effect of ``gamma_words`` per unit of normalised difference."""
    rng = np.random.default_rng(seed)
    L = len(theta)
    i = rng.integers(0, L, n)
    j = (i + rng.integers(1, L, n)) % L
    len_i = rng.poisson(np.asarray(words)[i]) + 1.0
    len_j = rng.poisson(np.asarray(words)[j]) + 1.0
    z = (len_i - len_j) / (len_i + len_j + 1)
    p = 1 / (1 + np.exp(-(np.asarray(theta)[i] - np.asarray(theta)[j] + gamma_words * z)))
    score = (rng.random(n) < p).astype(float)
    style_i = np.zeros((n, len(FEATURES)))
    style_j = np.zeros((n, len(FEATURES)))
    style_i[:, 0], style_j[:, 0] = len_i, len_j
    return i, j, score, style_i, style_j


def test_a_length_loving_judge_favours_the_verbose_model_until_style_is_controlled():
    theta = [0.3, 0.0, 0.0]  # model 0 is truly best; model 2 writes three times as much
    i, j, score, si, sj = _duels(theta, [100, 100, 300], gamma_words=4.0, n=6000, seed=1)
    raw = fit_style_controlled(i, j, score, 3)
    assert int(np.argmax(raw.theta)) == 2  # the raw ranking puts the verbose model first
    ctl = fit_style_controlled(i, j, score, 3, si, sj)
    assert int(np.argmax(ctl.theta)) == 0
    assert ctl.gamma["words"] > 0 and set(ctl.gamma) == {"words"}  # features that never differ are left out
    # the true strengths are within the Wald intervals (seeded: fixed outcome)
    for m in range(3):
        true = 1000 + 400 / np.log(10) * (theta[m] - np.mean(theta))
        assert ctl.lower[m] <= true <= ctl.upper[m], (m, ctl.lower[m], true, ctl.upper[m])


def test_without_style_it_is_the_bradley_terry_fit():
    i, j, score, _, _ = _duels([0.5, 0.0, -0.4, 0.1], [50] * 4, 0.0, 3000, seed=2)
    fit = fit_style_controlled(i, j, score, 4, l2=0.0 + 1e-9)
    W = np.zeros((4, 4))
    np.add.at(W, (i, j), score)
    np.add.at(W, (j, i), 1 - score)
    bt = fit_bradley_terry(W)
    assert fit.theta == pytest.approx(bt.theta, abs=1e-4)


def test_style_counts_and_bad_input():
    text = "# Title\n\nSome **bold** words here.\n\n- one\n- two\n1. three\n"
    assert list(style_counts(text)) == [12, 1, 3, 1]  # words split on whitespace
    assert list(style_counts(None)) == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="same length"):
        fit_style_controlled([0, 1], [1], [1.0], 2)
    with pytest.raises(ValueError, match="distinct"):
        fit_style_controlled([0], [0], [1.0], 2)
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        fit_style_controlled([0], [1], [2.0], 2)


async def test_the_style_route_and_the_export(api):
    from service_helpers import campaign_body, simulated_judge

    body = campaign_body(
        "style", costs=(1.0, 1.0, 1.0), judge=simulated_judge([[0.5, 0.8, 0.8], [0.2, 0.5, 0.5], [0.2, 0.5, 0.5]])
    )
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    r = await api.get(f"/v1/campaigns/{cid}/style")
    assert r.status_code == 200 and r.json()["leader_raw"] is None and "at least 20" in r.json()["note"]
    for _ in range(60):
        if (await api.post(f"/v1/campaigns/{cid}/duels")).status_code != 201:
            break
    out = (await api.get(f"/v1/campaigns/{cid}/style")).json()
    assert out["duels"] >= 20 and [row["rank"] for row in out["raw"]] == [1, 2, 3]
    assert {row["model"] for row in out["controlled"]} == {"m0", "m1", "m2"} and out["leader_raw"] == "m0"
    assert set(out["coefficients"]) <= set(FEATURES) and "not part of the certificate" in out["note"]
    files = (await api.get(f"/v1/campaigns/{cid}/export")).json()["files"]
    assert json.loads(files["ranking_style.json"])["raw"] == out["raw"]
    assert (await api.get("/v1/campaigns/999999999/style")).status_code == 404


async def test_the_fit_reads_the_features_stored_with_the_answers_and_counts_those_of_older_duels(api):
    """``duels.answer_style`` is written with the answers; the fit reads it, and counts the features from the
    texts for a duel stored without it (migration 0034): the same figures either way."""
    import sqlalchemy as sa
    from service_helpers import campaign_body, simulated_judge

    from service.campaigns.style import answer_style
    from service.models import Campaign, Duel

    body = campaign_body(
        "stored style",
        costs=(1.0, 1.0, 1.0),
        judge=simulated_judge([[0.5, 0.8, 0.7], [0.2, 0.5, 0.6], [0.3, 0.4, 0.5]]),
    )
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    for _ in range(40):
        assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
    db = api.app.state.db
    with db.read() as s:
        rows = s.execute(
            sa.select(Duel.id, Duel.answer_a, Duel.answer_b, Duel.answer_style).where(Duel.campaign_id == cid)
        ).all()
    assert len(rows) == 40 and all(r.answer_style == answer_style(r.answer_a, r.answer_b) for r in rows)
    stored = (await api.get(f"/v1/campaigns/{cid}/style")).json()

    def change(values_of) -> None:
        with db.write() as s:
            for r in rows[::2]:
                s.execute(sa.update(Duel).where(Duel.id == r.id).values(answer_style=values_of(r)))
            s.execute(sa.update(Campaign).where(Campaign.id == cid).values(version=Campaign.version + 1))

    change(lambda r: None)  # half the duels as stored before 0034
    assert (await api.get(f"/v1/campaigns/{cid}/style")).json() == stored
    change(lambda r: [400, 3, 9, 5, 0, 0, 0, 0])  # features that are not the texts': the fit reads these
    assert (await api.get(f"/v1/campaigns/{cid}/style")).json() != stored
