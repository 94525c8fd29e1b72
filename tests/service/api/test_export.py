"""GET /v1/campaigns/{id}/export: certificate, FastChat battle log, matrix, ranking; read back by `llmduel analyze`."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from service_helpers import all_duels, campaign_body, simulated_judge

from algorithms.ranking import betting_field_intervals, field_win_rates
from algorithms.research.analyze import analyze_source

PROMPTS = [{"id": f"q{n}", "prompt": f"question {n}", "category": "odd" if n % 2 else "even"} for n in range(6)]


async def certified_campaign(api) -> dict:
    body = campaign_body(judge=simulated_judge(), prompts=PROMPTS, seed=11, delta=0.1, tie_policy="drop")
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(3000):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        if r.status_code != 201:
            break
    c = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert c["status"] == "certified", c["status"]
    return c


async def test_export_files(api, tmp_path):
    c = await certified_campaign(api)
    r = await api.get(f"/v1/campaigns/{c['id']}/export")
    assert r.status_code == 200, r.text
    files = r.json()["files"]
    assert set(files) == {
        "certificate.json",
        "battles.jsonl",
        "matrix.csv",
        "ranking.csv",
        "ranking.json",
        "ranking_by_category.csv",
        "judge_bias.json",
        "judgments.jsonl",
        "ranking_style.json",
        "model_answer/m0.jsonl",
        "model_answer/m1.jsonl",
        "model_answer/m2.jsonl",
    }
    assert files["judgments.jsonl"] == ""  # a simulated judge makes no calls

    cert = json.loads(files["certificate.json"])
    assert cert["winner"] == c["winner"] and cert["status"] == "certified" and cert["delta"] == 0.1
    assert cert["duels"] == c["duels"] and cert["spend"] == c["spend"] and cert["ended_at"]
    assert c["winner"] in cert["verdict"] and cert["algorithm"] == "dctas-pc"

    battles = [json.loads(line) for line in files["battles.jsonl"].splitlines()]
    judged = [d for d in await all_duels(api, c["id"]) if d["status"] == "judged"]
    assert len(battles) == len(judged) == c["duels"]
    by_id = {d["id"]: d for d in judged}
    for b in battles:
        d = by_id[b["duel_id"]]
        assert b["model_a"] == d["model_a_name"] and b["model_b"] == d["model_b_name"]
        expected = {"a": "model_a", "b": "model_b", "tie": "tie", "both_bad": "tie (bothbad)"}[d["choice"]]
        assert b["winner"] == expected
        assert b["question_id"] == d["question_id"] and b["question_id"].startswith("q")
        assert b["category"] == ("odd" if int(b["question_id"][1:]) % 2 else "even")
        assert b["judge"] == "judge:simulated" and isinstance(b["tstamp"], float)

    # `llmduel analyze` reads the battle log back and names the same winner
    path = tmp_path / "battles.jsonl"
    path.write_text(files["battles.jsonl"])
    rep = analyze_source(str(path))
    assert rep["condorcet_winner"] == c["winner"]

    rows = list(csv.DictReader(io.StringIO(files["matrix.csv"])))
    assert len(rows) == 3 * 2
    total = sum(int(r["duels"]) for r in rows)
    assert total == 2 * len(battles)
    for r in rows:  # the mirror row swaps wins and losses
        mirror = next(x for x in rows if x["model"] == r["opponent"] and x["opponent"] == r["model"])
        assert (r["wins"], r["losses"]) == (mirror["losses"], mirror["wins"])

    ranking = json.loads(files["ranking.json"])
    assert ranking[0]["model"] == c["winner"]
    assert [r["rank"] for r in ranking] == [1, 2, 3]
    for r in ranking:
        assert r["ci_low"] <= r["win_rate"] <= r["ci_high"]
        assert r["cost_per_query"] in (4.0, 1.0)
    assert abs(sum(r["spend"] for r in ranking) - (c["spend"] - c["judge_spend"])) < 1e-6
    assert list(csv.DictReader(io.StringIO(files["ranking.csv"])))[0]["model"] == c["winner"]
    # the same export twice (seeded bootstrap)
    assert (await api.get(f"/v1/campaigns/{c['id']}/export")).json()["files"] == files


async def test_export_errors(api):
    assert (await api.get("/v1/campaigns/999999/export")).status_code == 404
    r = await api.post("/v1/campaigns", json=campaign_body())
    cid = r.json()["id"]
    tok = (await api.post(f"/v1/campaigns/{cid}/annotators", json={})).json()["token"]
    r = await api.get(f"/v1/campaigns/{cid}/export", headers={"Authorization": f"Bearer {tok}"})
    assert r.status_code == 403
    # an empty campaign exports empty logs, not an error
    files = (await api.get(f"/v1/campaigns/{cid}/export")).json()["files"]
    assert files["battles.jsonl"] == "" and json.loads(files["certificate.json"])["winner"] is None


async def test_certificate_says_why_an_uncertified_campaign_ended(api):
    """``stopped`` is the status of an admin's stop and of a reached duel cap: the verdict names which."""
    even = [[0.5] * 3 for _ in range(3)]
    capped = (await api.post("/v1/campaigns", json=campaign_body(judge=simulated_judge(even), max_duels=4))).json()
    for _ in range(10):
        if (await api.post(f"/v1/campaigns/{capped['id']}/duels")).status_code != 201:
            break
    halted = (await api.post("/v1/campaigns", json=campaign_body(judge=simulated_judge(even)))).json()
    assert (await api.post(f"/v1/campaigns/{halted['id']}/stop")).status_code == 200
    verdicts = {}
    for name, c in (("capped", capped), ("halted", halted)):
        view = (await api.get(f"/v1/campaigns/{c['id']}")).json()
        assert view["status"] == "stopped", view["status"]
        files = (await api.get(f"/v1/campaigns/{c['id']}/export")).json()["files"]
        verdicts[name] = json.loads(files["certificate.json"])["verdict"]
    assert verdicts["capped"].startswith("not certified: max_duels (4) reached (leader: "), verdicts
    assert verdicts["halted"].startswith("not certified: stopped by the admin (leader: "), verdicts


def _field_rates(duels, names, keep=lambda d: True):
    """Win rate against the field from the duel log: counted duels, the score of the lower-index model."""
    W, N = _counted(duels, len(names), keep)
    return {names[m]: field_win_rates(W, N)[m] for m in range(len(names))}, {
        names[m]: int(N[m].sum()) for m in range(len(names))
    }


def _counted(duels, L, keep=lambda d: True):
    """The counted duels' score sums and counts per ordered pair."""
    W = np.zeros((L, L))
    N = np.zeros((L, L))
    for d in duels:
        if d["status"] != "judged" or not d["counted"] or d["score"] is None or not keep(d):
            continue
        i, j = min(d["model_a"], d["model_b"]), max(d["model_a"], d["model_b"])
        W[i, j] += d["score"]
        W[j, i] += 1.0 - d["score"]
        N[i, j] += 1
        N[j, i] += 1
    return W, N


async def test_ranking_counts_what_the_certificate_counts_and_ranks_each_category(api):
    prompts = [dict(p, category="=cmd|' /C calc'!A0" if p["category"] == "odd" else "even") for p in PROMPTS]
    body = campaign_body(
        judge=simulated_judge(tie_prob=0.3), prompts=prompts, seed=5, delta=0.1, tie_policy="drop", max_duels=400
    )
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    for _ in range(400):
        if (await api.post(f"/v1/campaigns/{cid}/duels")).status_code != 201:
            break
    duels = await all_duels(api, cid)
    names = ["m0", "m1", "m2"]
    assert any(d["choice"] == "tie" and not d["counted"] for d in duels)  # ties dropped by the certificate
    files = (await api.get(f"/v1/campaigns/{cid}/export")).json()["files"]
    ranking = json.loads(files["ranking.json"])
    rates, counts = _field_rates(duels, names)
    low, high = betting_field_intervals(*_counted(duels, 3), 0.95)  # every model at once, valid at stopping
    for r in ranking:
        m = names.index(r["model"])
        assert (r["ci_low"], r["ci_high"]) == (
            pytest.approx(low[m], abs=1e-4),
            pytest.approx(high[m], abs=1e-4),
        )  # counted duels only, as the certificate counts them (ties under drop are left out)
        assert r["win_rate"] == pytest.approx(rates[r["model"]], abs=1e-4) and r["duels"] == counts[r["model"]]
        assert r["ci_low"] <= r["win_rate"] <= r["ci_high"]
        assert r["bootstrap_low"] <= r["win_rate"] <= r["bootstrap_high"]
        assert r["ci_high"] - r["ci_low"] >= r["bootstrap_high"] - r["bootstrap_low"]  # valid at stopping: wider
    rows = list(csv.DictReader(io.StringIO(files["ranking_by_category.csv"])))
    assert list(rows[0]) == ["category", "rank", "model", "win_rate", "ci_low", "ci_high", "duels"]
    # a category a spreadsheet would run as a formula is written with a leading quote
    assert {r["category"] for r in rows} == {"even", "'=cmd|' /C calc'!A0"}
    for cat, raw in (("even", "even"), ("'=cmd|' /C calc'!A0", "=cmd|' /C calc'!A0")):
        mine = [r for r in rows if r["category"] == cat]
        assert [r["model"] for r in mine] != [] and sorted(r["model"] for r in mine) == names
        assert [int(r["rank"]) for r in mine] == [1, 2, 3]
        want, n = _field_rates(duels, names, keep=lambda d, raw=raw: d["category"] == raw)
        for r in mine:
            assert float(r["win_rate"]) == pytest.approx(want[r["model"]], abs=1e-4)
            assert int(r["duels"]) == n[r["model"]]
            assert float(r["ci_low"]) <= float(r["win_rate"]) <= float(r["ci_high"])
    # the two categories split the counted duels
    assert sum(int(r["duels"]) for r in rows) == sum(r["duels"] for r in ranking)


async def test_ranking_pages_match_the_export(api):
    """GET /v1/campaigns/{id}/ranking: the export's rankings, a page at a time; a category's page; bad input 4xx."""
    c = await certified_campaign(api)
    files = (await api.get(f"/v1/campaigns/{c['id']}/export")).json()["files"]
    ranking = json.loads(files["ranking.json"])
    r = await api.get(f"/v1/campaigns/{c['id']}/ranking", params={"bootstrap": "true"})
    assert r.status_code == 200, r.text
    page = r.json()
    assert page["total"] == 3 and page["rows"] == ranking and page["category"] is None
    assert {x["category"] for x in page["categories"]} == {"odd", "even"}
    plain = (await api.get(f"/v1/campaigns/{c['id']}/ranking", params={"offset": 1, "limit": 1})).json()
    assert plain["total"] == 3 and len(plain["rows"]) == 1
    assert plain["rows"][0]["model"] == ranking[1]["model"] and plain["rows"][0]["ci_low"] == ranking[1]["ci_low"]
    assert plain["rows"][0]["bootstrap_low"] is None  # not resampled unless asked for
    odd = (await api.get(f"/v1/campaigns/{c['id']}/ranking", params={"category": "odd", "limit": 2})).json()
    by_cat = [row for row in csv.DictReader(io.StringIO(files["ranking_by_category.csv"])) if row["category"] == "odd"]
    assert odd["total"] == len(by_cat) == 3 and [x["model"] for x in odd["rows"]] == [x["model"] for x in by_cat[:2]]
    assert (await api.get(f"/v1/campaigns/{c['id']}/ranking", params={"category": "nope"})).status_code == 404
    assert (await api.get(f"/v1/campaigns/{c['id']}/ranking", params={"limit": 0})).status_code == 422
    assert (await api.get("/v1/campaigns/999999/ranking")).status_code == 404
