"""'Did you mean' for unknown keys (service/schemas/suggest.py): the closest known key at the
error's place in the schema, through lists and kind-tagged unions, in the API's 422 and so in
the CLI's one-line error."""

from __future__ import annotations

from service_helpers import campaign_body

from service.schemas import CampaignCreate
from service.schemas.suggest import did_you_mean


def test_the_closest_key_where_the_unknown_key_stands():
    assert did_you_mean(CampaignCreate, ["delat"]) == "delta"
    assert did_you_mean(CampaignCreate, ["models", 0, "client", "simulated", "sede"]) == "seed"
    assert did_you_mean(CampaignCreate, ["judge", "llm", "templat"]) == "prompt_template"
    assert did_you_mean(CampaignCreate, ["zzzqqq"]) is None  # nothing close: no guess
    assert did_you_mean(CampaignCreate, ["models", "x", "name"]) is None  # a path the schema does not have
    assert did_you_mean(CampaignCreate, []) is None


async def test_an_unknown_key_is_a_422_naming_the_key_meant(api):
    body = campaign_body("suggest", delat=0.1)
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422
    (err,) = r.json()["detail"]
    assert err["loc"] == ["body", "delat"] and err["msg"].endswith("did you mean 'delta'?"), err
    body = campaign_body("suggest", zzzqqq=1)
    (err,) = (await api.post("/v1/campaigns", json=body)).json()["detail"]
    assert "did you mean" not in err["msg"] and err["type"] == "extra_forbidden"
    cid = (await api.post("/v1/campaigns", json=campaign_body("suggest"))).json()["id"]
    r = await api.patch(f"/v1/campaigns/{cid}", json={"max_duel": 5})
    assert r.status_code == 422 and r.json()["detail"][0]["msg"].endswith("did you mean 'max_duels'?"), r.text
