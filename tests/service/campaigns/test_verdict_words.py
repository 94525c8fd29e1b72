"""Numbers a user can trust (issue 22), in process through the REST API and the pages (SQLite and
PostgreSQL): the evidence shown for dctas-pc is its certificates' (k of L-1 pairs, each pair's log
statistic against log(L/delta)), the GLR Z / beta only for the paper's algorithms; verdicts in
plain words by name (what ties, what is not beaten, the cheapest); the certificate graph first and
the top cycle only as far as the certificates show it; a unit on every amount; which cost a model
uses, and a 422 when a configured cost and a price-map price disagree without a choice."""

from __future__ import annotations

import json
import math
import time

from service_helpers import campaign_body, run_to_end, simulated_judge

from service.cli.campaign_text import progress_line, summary, verdict_line

CLEAR = [[0.5, 0.9, 0.9], [0.1, 0.5, 0.6], [0.1, 0.4, 0.5]]
CYCLE = [[0.5, 0.95, 0.05], [0.05, 0.5, 0.95], [0.95, 0.05, 0.5]]
BASE = "http://fake.test/v1"


async def _create(api, body: dict) -> dict:
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    return r.json()


async def _certificate(api, cid: int) -> dict:
    return json.loads((await api.get(f"/v1/campaigns/{cid}/export")).json()["files"]["certificate.json"])


# ---------------------------------------------------------------- evidence of the rule that decides
async def test_a_certified_dctas_pc_campaign_shows_its_certificates_not_the_glr_statistic(api):
    view = await _create(api, campaign_body(name="pc clear", costs=(1.0, 1.0, 1.0), judge=simulated_judge(CLEAR)))
    cid = view["id"]
    # before any duel: 0 of 2 pairs
    assert view["pc_evidence"]["certified"] == 0 and view["pc_evidence"]["needed"] == 2
    end = await run_to_end(api, cid)
    assert end["status"] == "certified" and end["winner"] == "m0", end
    ev = end["pc_evidence"]
    assert ev["test"] == "betting" and ev["reference"] == "m0"  # the default certificate test
    assert ev["certified"] == 2 and ev["needed"] == 2 and ev["progress"] == 1.0
    assert ev["log_threshold"] == math.log(3 / end["delta"])  # log(L / delta)
    assert len(ev["pairs"]) == 6
    won = [p for p in ev["pairs"] if p["winner"] == "m0"]
    assert {p["loser"] for p in won} == {"m1", "m2"} and all(p["certified"] for p in won)
    assert all(p["log_stat"] >= p["log_threshold"] for p in won)
    assert {"model": "m1", "beaten_by": ["m0"]} in ev["losers"]
    assert {(e["winner"], e["loser"]) for e in end["certificate_graph"]} >= {("m0", "m1"), ("m0", "m2")}
    assert (
        end["verdict"] == "m0 beats every other model: it was shown to beat m1 and m2 (error probability at most 0.05)."
    )
    assert end["cost_unit"] == "cost units"
    # campaign show / watch
    text = summary(end)
    assert "m0: 2 of 2 pairs certified (betting test" in text
    # three models: the product level is delta / 3, log(1/alpha) = log(L/delta)
    assert f"log(1/alpha) = {math.log(3 / end['delta']):.3f})" in text and ev["level"] == "product"
    assert "m1 beaten by m0:" in text and "GLR" not in text and "of threshold" not in text
    assert "shown      m0 beats" in text and "cost units" in text
    assert "certified 2/2 pairs" in progress_line(end) and "evidence" not in progress_line(end)
    assert verdict_line(end) == "certified: " + end["verdict"]
    # the dashboard: tile, chart caption, winner box by name, units
    page = (await api.get(f"/campaigns/{cid}")).text
    assert 'title="2 of 2 pairs certified">2 of 2</span>' in page and 'id="zbeta"' not in page
    assert "Certificate evidence over time" in page and "log(1/&alpha;)" in page
    assert "crossed the dashed threshold" not in page
    assert "m1 beaten by m0" in page  # a line of the chart
    assert "model #" not in page and ">#0" not in page and "#0 " not in page
    assert '<small class="unit">cost units</small>' in page
    assert "<li><strong>m0</strong> beat m1</li>" in page
    # the certificate says the same
    cert = await _certificate(api, cid)
    assert cert["verdict"] == "certified: " + end["verdict"]


async def test_a_running_campaign_lists_its_certificate_progress(api):
    view = await _create(api, campaign_body(name="pc running", costs=(1.0, 1.0, 1.0), judge=simulated_judge(CLEAR)))
    cid = view["id"]
    for _ in range(3):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 201, r.text
    now = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert now["status"] == "running"
    ev = now["pc_evidence"]
    assert 0.0 <= ev["progress"] < 1.0 and ev["certified"] < 2
    assert now["cheapest"] is None and now["verdict"].startswith("running")
    listing = (await api.get("/")).text
    row = listing[listing.index(f'data-id="{cid}"') :]
    row = row[: row.index("</tr>")]
    assert f"{ev['reference']}: {ev['certified']} of 2 pairs certified" in row and "evidence Z" not in row
    assert f"{ev['certified']}/2 pairs" in progress_line(now)
    assert ev["progress"] == ev["certified"] / 2  # certified pairs only: the figure and the words agree
    # stopped without a certificate: the bar is not filled
    assert (await api.post(f"/v1/campaigns/{cid}/stop")).status_code == 200
    stopped = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert stopped["pc_evidence"]["progress"] == stopped["pc_evidence"]["certified"] / 2 < 1.0
    listing = (await api.get("/")).text
    row = listing[listing.index(f'data-id="{cid}"') :]
    row = row[: row.index("</tr>")]
    assert "(100%)" not in row and f"{stopped['pc_evidence']['certified']} of 2 pairs certified" in row


async def test_the_papers_algorithms_keep_the_glr_view(api):
    view = await _create(
        api, campaign_body(name="paper", costs=(1.0, 1.0, 1.0), judge=simulated_judge(CLEAR), algorithm="dctas")
    )
    end = await run_to_end(api, view["id"])
    assert end["pc_evidence"] is None
    assert "GLR Z" in summary(end) and "evidence" in progress_line(end)
    page = (await api.get(f"/campaigns/{view['id']}")).text
    assert 'id="zbeta"' in page and "crossed the dashed threshold" in page


# ---------------------------------------------------------------- verdicts in plain words
async def test_an_exact_tie_at_the_top_says_who_ties_that_both_beat_the_rest_and_the_cheaper(api, fake):
    # the fake provider's strict judge: equal qualities tie on every prompt, a higher quality wins
    tag = f"t{time.monotonic_ns()}"
    body = campaign_body(
        name="tie at the top",
        costs=(0.002, 0.001, 0.0015),
        clients=[{"kind": "openai", "base_url": BASE, "model": f"{tag}-{n}"} for n in ("a-q4", "b-q4", "c-q1")],
        judge={"kind": "llm", "client": {"kind": "openai", "base_url": BASE, "model": "fake-judge"}, "cost": 0.0},
    )
    body["prompts"] = ["first question", "second question", "third question"]
    view = await _create(api, body)
    assert view["prompt_sampling"] == "without_replacement"
    cid = view["id"]
    for _ in range(20):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        if r.status_code == 409:
            break
        assert r.status_code == 201, r.text
    end = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert end["status"] == "undecidable", end
    assert end["not_beaten"] == ["m0", "m1"] and end["exact_ties"] == [["m0", "m1"]] and end["cheapest"] == "m1"
    words = (
        "No model can be certified the winner on these 3 prompts. m0 and m1 tie at the top on this prompt set; "
        "both beat the rest; the cheaper is m1 (0.001 USD per query)."
    )
    assert end["verdict"] == words
    assert {(e["winner"], e["loser"], e["exact"]) for e in end["certificate_graph"]} == {
        ("m0", "m2", True),
        ("m1", "m2", True),
    }
    assert end["pc_evidence"]["test"] == "without_replacement"
    # campaign show: the verdict, the certificate graph, the reason once
    text = summary(end)
    assert words in text and "shown      m0 beats m2 (exact)" in text and "m1 beats m2 (exact)" in text
    assert text.count("no model can be certified") == 0  # the stored end reason is not repeated
    # the dashboard: the verdict once, the reason not repeated, "Shown to beat" as a readable list
    page = (await api.get(f"/campaigns/{cid}")).text
    box = page[page.index('id="undecidable"') : page.index("</section>", page.index('id="undecidable"'))]
    assert words in box and box.count("tie at the top") == 1
    assert end["end_reason"] not in box
    assert "<li><strong>m0</strong> beat m2 <em>(exact" in box and "<h3>Shown to beat" in box
    assert 'class="sub">Shown to beat' not in page
    assert 'id="not-beaten">m0, m1</span>' in page
    assert "0.001 USD" in box
    cert = await _certificate(api, cid)
    assert cert["verdict"] == "undecidable: " + words
    listing = (await api.get("/")).text
    row = listing[listing.index(f'data-id="{cid}"') :]
    row = row[: row.index("</tr>")]
    assert 'm0, m1 <span class="sub">not beaten</span>' in row and "leading" not in row
    assert '<span class="sub">USD</span>' in row
    assert cert["not_beaten"] == ["m0", "m1"] and cert["cheapest"] == "m1"
    assert {"winner": "m0", "loser": "m2", "exact": True} in cert["certificate_graph"]


async def test_no_condorcet_winner_shows_the_certified_cycle_not_the_plug_in_estimate(api):
    view = await _create(api, campaign_body(name="cycle", costs=(3.0, 1.0, 2.0), judge=simulated_judge(CYCLE)))
    end = await run_to_end(api, view["id"])
    assert end["status"] == "no_condorcet_winner", end
    assert end["not_beaten"] == []
    # the certificates m0 > m1 > m2 > m0 form a cycle: each model reaches the others by certified wins
    assert sorted(end["top_cycle_certified"]) == ["m0", "m1", "m2"]
    assert end["cheapest"] == "m1"
    assert end["verdict"].startswith(
        "Every model was shown to lose to another (m0 lost to m2; m1 lost to m0; m2 lost to m1)."
    )
    assert "The cheapest of them is m1 (1 cost unit per query)." in end["verdict"]
    page = (await api.get(f"/campaigns/{view['id']}")).text
    box = page[
        page.index('id="no-condorcet-winner"') : page.index("</section>", page.index('id="no-condorcet-winner"'))
    ]
    # the certificate graph comes first, then the top cycle as far as the certificates show it
    assert box.index('id="certificate-graph"') < box.index('id="top-cycle"')
    assert "as far as the certificates show it: <strong>m0, m1, m2</strong>" in box
    assert "top cycle of the estimate" not in page
    assert "every model was certified beaten by some other model" in page
    assert 'id="not-beaten">none</span>' in page and 'id="leader"' not in page
    assert "m0 beaten by any model" in page  # the chart: each model's strongest certificate
    text = summary(end)
    assert "top cycle  certified members: m0, m1, m2" in text and "GLR" not in text


# ---------------------------------------------------------------- which cost a model uses
def _priced_body(**model_extra) -> dict:
    body = campaign_body(name="priced", costs=(1.0, 1.0), judge=simulated_judge([[0.5, 0.6], [0.4, 0.5]]))
    body["models"][0] = {
        "name": "gpt",
        "client": {"kind": "openai", "model": "gpt-4o", "api_key_env": "NO_SUCH_KEY"},
        **model_extra,
    }
    return body


async def test_a_configured_cost_that_disagrees_with_the_price_map_needs_a_choice(api, monkeypatch):
    monkeypatch.setenv("NO_SUCH_KEY", "sk-test-not-used")  # the server checks named keys exist before any spend
    r = await api.post("/v1/campaigns", json=_priced_body(cost=0.002))
    assert r.status_code == 422, r.text
    msg = str(r.json()["detail"])
    assert "the configured cost 0.002 USD per query disagrees with the price of 'gpt-4o'" in msg
    assert "cost_source: configured" in msg and "cost_source: price_map" in msg
    # configured wins: the policy uses 0.002 and each call is charged 0.002 (no per-token price)
    v = await _create(api, _priced_body(cost=0.002, cost_source="configured"))
    m = v["models"][0]
    assert m["cost"] == 0.002 and m["cost_source"] == "configured" and m["charged"] == "per_call"
    assert m["client"].get("price") is None and m["derived_cost"] > 0.004
    # the price map wins: the cost is derived from the price, calls are charged per token
    v = await _create(api, _priced_body(cost=0.002, cost_source="price_map"))
    m = v["models"][0]
    assert m["cost_source"] == "derived" and m["charged"] == "per_token" and m["cost"] == m["derived_cost"]
    assert m["client"]["price"]["input_per_1m"] == 2.5
    page = (await api.get(f"/campaigns/{v['id']}")).text
    assert "derived, charged per token" in page
    # a cost close to the price map's: accepted as before (configured, charged per token)
    v = await _create(api, _priced_body(cost=m["derived_cost"] * 1.5))
    assert v["models"][0]["cost_source"] == "configured" and v["models"][0]["charged"] == "per_token"
    assert "charged" in summary(v)


async def test_a_cost_source_without_what_it_names_is_a_422(api):
    r = await api.post("/v1/campaigns", json=_priced_body(cost_source="configured"))
    assert r.status_code == 422 and "cost_source configured needs a 'cost'" in r.text
    body = _priced_body(cost=0.002, cost_source="price_map")
    body["models"][0]["client"]["model"] = "no-such-model-anywhere"
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422 and "cost_source price_map needs a price map entry" in r.text
    r = await api.post("/v1/campaigns", json=_priced_body(cost=0.002, cost_source="neither"))
    assert r.status_code == 422 and "cost_source" in r.text
