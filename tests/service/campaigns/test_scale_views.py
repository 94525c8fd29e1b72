"""Views of a campaign with many models stay small: the per-pair figures on request, the dashboard's
figures computed once per change (service/campaigns/views.py, service/web/data.py)."""

from __future__ import annotations

from service_helpers import campaign_body, simulated_judge

from service.web import data as web_data


def _body(n: int, **extra) -> dict:
    P = [[0.5 + (0.3 if i < j else -0.3) * (i == 0 or j == 0) for j in range(n)] for i in range(n)]
    return campaign_body(name=f"{n} models", costs=[1.0] * n, judge=simulated_judge(P), delta=0.05, **extra)


async def _campaign(api, n: int, duels: int) -> int:
    r = await api.post("/v1/campaigns", json=_body(n))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(duels):
        assert (await api.post(f"/v1/campaigns/{cid}/duels")).json()["status"] == "judged"
    return cid


async def test_the_view_summarises_its_pairs_above_16_models_and_gives_them_on_request(api):
    cid = await _campaign(api, 20, 30)
    r = await api.get(f"/v1/campaigns/{cid}")
    view = r.json()
    assert view["pairs_included"] is False and view["counts"] == [] and view["wins"] == []
    ev = view["pc_evidence"]
    assert len(ev["pairs"]) == 19 and {p["winner"] for p in ev["pairs"]} == {ev["reference"]}
    assert "preference" not in view["judge"] and view["judge"]["kind"] == "simulated"
    assert view["t"] == 30 and len(view["evidence"]) == 20
    full = (await api.get(f"/v1/campaigns/{cid}", params={"pairs": "true"})).json()
    assert full["pairs_included"] is True and len(full["pc_evidence"]["pairs"]) == 20 * 19
    assert sum(map(sum, full["counts"])) == 2 * 30 and len(full["judge"]["preference"]) == 20
    assert len(r.content) * 4 < len((await api.get(f"/v1/campaigns/{cid}", params={"pairs": "true"})).content)
    again = (await api.get(f"/v1/campaigns/{cid}")).json()  # the cached evidence was not cut by the summary
    assert again["pc_evidence"] == ev
    listed = (await api.get("/v1/campaigns")).json()["items"]
    assert next(v for v in listed if v["id"] == cid)["pairs_included"] is False
    small = await _campaign(api, 4, 3)
    view = (await api.get(f"/v1/campaigns/{small}")).json()
    assert view["pairs_included"] is True and len(view["counts"]) == 4 and "preference" in view["judge"]
    assert (await api.get(f"/v1/campaigns/{small}", params={"pairs": "false"})).json()["counts"] == []


async def test_the_dashboard_shows_16_models_and_computes_its_figures_once_per_change(api, monkeypatch):
    cid = await _campaign(api, 20, 30)
    made = []
    figures = web_data._figures
    monkeypatch.setattr(web_data, "_figures", lambda *a: made.append(1) or figures(*a))
    page = await api.get(f"/campaigns/{cid}")
    assert page.status_code == 200 and "Preference matrix of the 16 leading models (of 20)" in page.text
    assert (await api.get(f"/campaigns/{cid}")).status_code == 200
    assert len(made) == 1  # the second request reused the figures
    await api.post(f"/v1/campaigns/{cid}/duels")
    assert (await api.get(f"/campaigns/{cid}")).status_code == 200 and len(made) == 2


async def test_the_dashboard_shows_each_categorys_leading_models_and_the_export_all(api):
    prompts = [{"id": f"q{k}", "prompt": f"question {k}", "category": "odd" if k % 2 else "even"} for k in range(8)]
    r = await api.post("/v1/campaigns", json=_body(14, prompts=prompts))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(60):
        assert (await api.post(f"/v1/campaigns/{cid}/duels")).json()["status"] == "judged"
    html = (await api.get(f"/campaigns/{cid}")).text
    section = html[html.index('id="category-ranking-section"') :]
    section = section[: section.index("</section>")]
    shown = section.count('<tr><td class="num">')
    files = (await api.get(f"/v1/campaigns/{cid}/export")).json()["files"]
    exported = files["ranking_by_category.csv"].strip().splitlines()[1:]
    per_cat = {cat: sum(1 for row in exported if row.startswith(cat + ",")) for cat in ("odd", "even")}
    assert shown == sum(min(n, web_data.CATEGORY_ROWS) for n in per_cat.values()) < len(exported)
    assert section.count('class="sub category-more"') == sum(n > web_data.CATEGORY_ROWS for n in per_cat.values()) > 0


async def test_one_categorys_ranking_is_the_campaigns_and_both_follow_each_duel(api):
    """Prompts of one category (none here): the ranking is read without the prompts' join and the category's
    rows share the campaign's intervals (service/campaigns/results.py); both are read again after a duel."""
    cid = await _campaign(api, 4, 10)
    totals = []
    for more in (0, 6):
        for _ in range(more):
            assert (await api.post(f"/v1/campaigns/{cid}/duels")).json()["status"] == "judged"
        whole = (await api.get(f"/v1/campaigns/{cid}/ranking")).json()
        one = (await api.get(f"/v1/campaigns/{cid}/ranking", params={"category": "(none)"})).json()
        assert whole["categories"] == [{"category": "(none)", "duels": whole["categories"][0]["duels"]}]
        keys = ("model", "win_rate", "ci_low", "ci_high", "duels")
        assert [[row[k] for k in keys] for row in one["rows"]] == [[row[k] for k in keys] for row in whole["rows"]]
        totals.append(whole["categories"][0]["duels"])
    assert totals == [10, 16]
