"""The dashboard and the API show dctas-pc's cost against c_pc* beside c* (issue 22, item 7):
c* (the paper's bound) assumes a Condorcet winner exists; c_pc* is the bound of a rule that may
also answer "no Condorcet winner", which must show the winner beats every other model directly."""

from __future__ import annotations

import re

from service_helpers import campaign_body, simulated_judge

from algorithms import plugin_lower_bound, plugin_pc_lower_bound

CLEAR = [[0.5, 0.8, 0.85], [0.2, 0.5, 0.6], [0.15, 0.4, 0.5]]


async def _run(api, cid: int) -> dict:
    for _ in range(400):
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        if r.status_code not in (200, 201):
            break
    return (await api.get(f"/v1/campaigns/{cid}")).json()


async def test_dctas_pc_shows_c_pc_star_beside_c_star(api):
    body = campaign_body(name="yardstick", costs=(2.0, 1.0, 1.0), judge=simulated_judge(CLEAR))
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    view = await _run(api, cid)
    assert view["status"] == "certified", view["status"]
    W, N, costs = view["wins"], view["counts"], [2.0, 1.0, 1.0]
    want_c = plugin_lower_bound(W, N, costs, view["delta"])
    want_pc = plugin_pc_lower_bound(W, N, costs, view["delta"])
    assert want_pc is not None and want_c is not None
    assert abs(view["lower_bound"] - want_c) <= 1e-9 * want_c
    assert abs(view["lower_bound_pc"] - want_pc) <= 1e-9 * want_pc
    assert view["lower_bound_pc"] >= view["lower_bound"] * (1 - 1e-9)  # the stricter rule cannot need less
    page = (await api.get(f"/campaigns/{cid}")).text
    assert 'id="lower-bound-pc"' in page and "c<sub>pc</sub>*" in page and "Kaufmann" in page
    gauge = re.search(r'<g class="lower-bound-pc" data-value="([0-9.e+-]+)"', page)
    assert gauge and abs(float(gauge.group(1)) - want_pc) <= 1e-6 * want_pc


async def test_the_papers_algorithms_show_c_star_only(api):
    body = campaign_body(name="yardstick dctas", costs=(2.0, 1.0, 1.0), judge=simulated_judge(CLEAR), algorithm="dctas")
    cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
    for _ in range(20):
        await api.post(f"/v1/campaigns/{cid}/duels")
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["lower_bound_pc"] is None
    page = (await api.get(f"/campaigns/{cid}")).text
    assert 'id="lower-bound-pc"' not in page and 'class="lower-bound-pc"' not in page
