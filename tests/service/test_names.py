"""Campaign and model names: visible, no invisible characters, distinct after normalisation (422 otherwise)."""

from __future__ import annotations

import pytest
from service_helpers import campaign_body

from service.names import check_name, name_key

INVISIBLE_ONLY = [" ", "\t\n", "\u00a0", "\u3000", "\u2003 \u2009"]
HIDDEN = ["gpt\u200b4", "\ufeffgpt-4", "gpt-4\u202e", "a\u200db", "x\x07"]


@pytest.mark.parametrize("name", INVISIBLE_ONLY + HIDDEN)
async def test_campaign_name_refused(api, name):
    r = await api.post("/v1/campaigns", json=campaign_body(name=name))
    assert r.status_code == 422, r.text
    assert "name" in r.text and ("visible" in r.text or "character" in r.text)


@pytest.mark.parametrize("name", INVISIBLE_ONLY + HIDDEN)
async def test_model_name_refused(api, name):
    body = campaign_body()
    body["models"][1]["name"] = name
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422, r.text


@pytest.mark.parametrize(
    "first, second",
    [("gpt-4", " gpt-4"), ("gpt-4", "gpt-4 "), ("gpt 4", "gpt\u00a04"), ("gpt 4", "gpt  4"), ("gpt-4", "\uff47pt-4")],
)
async def test_model_names_distinct_after_normalisation(api, first, second):
    body = campaign_body()
    body["models"][0]["name"], body["models"][1]["name"] = first, second
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422, r.text
    assert "unique" in r.text


async def test_visible_names_with_inner_spaces_and_case_accepted(api):
    body = campaign_body(name="Caf\u00e9 \u2013 prompts \U0001f600")
    body["models"][0]["name"], body["models"][1]["name"], body["models"][2]["name"] = "GPT 4", "gpt 4", "gpt\u00a0o"
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    assert [m["name"] for m in r.json()["models"]] == ["GPT 4", "gpt 4", "gpt\u00a0o"]


def test_name_rule_units():
    assert name_key(" a\u00a0 b ") == "a b" and name_key("\uff41") == "a"
    with pytest.raises(ValueError, match="visible"):
        check_name("\u2028\u2029 ")
    with pytest.raises(ValueError, match="U\\+200B"):
        check_name("a\u200bb")
