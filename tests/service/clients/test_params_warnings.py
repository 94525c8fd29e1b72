"""Unknown ``params`` keys of a known provider (service/clients/params.py): a warning with the
closest documented key on the campaign view, the CLI summary and the dashboard; never a refusal
(OpenAI-compatible servers other than OpenAI's take parameters of their own)."""

from __future__ import annotations

from service_helpers import campaign_body

from service.cli.campaign_text import summary
from service.clients.params import campaign_params_warnings, params_warnings


def test_documented_keys_pass_and_a_misspelt_one_is_named_with_the_closest():
    openai = {"kind": "openai", "model": "gpt-4.1", "params": {"temprature": 0.2, "max_tokens": 10}}
    (w,) = params_warnings("model 'a'", openai)
    assert w.startswith("model 'a': params.temprature is not a documented openai parameter") and "'temperature'" in w
    local = {**openai, "base_url": "http://localhost:8000/v1", "params": {"repetition_penalty": 1.1}}
    assert params_warnings("model 'a'", local) == []  # another server: its own parameters
    gemini = {"kind": "gemini", "model": "g", "params": {"max_output_tokens": 5, "temperature": 0, "topp": 1}}
    (w,) = params_warnings("judge", gemini)
    assert "params.topp" in w and "'topP'" in w  # snake_case spellings are documented
    claude = {"kind": "anthropic", "model": "c", "params": {"max_tokens": 5, "stop": ["x"]}}
    assert [w.split(":")[1].split()[0] for w in params_warnings("m", claude)] == ["params.stop"]
    assert params_warnings("m", {"kind": "simulated"}) == []


def test_judges_jurors_and_a_hybrid_judges_clients_are_checked():
    bad = {"kind": "anthropic", "model": "c", "params": {"temprature": 1}}
    jury = {"kind": "jury", "judges": [{"client": {"kind": "anthropic", "model": "c"}}, {"client": bad}]}
    assert [w.split(":")[0] for w in campaign_params_warnings([], jury)] == ["judge 2"]
    hybrid = {"kind": "hybrid", "llm": {"kind": "llm", "client": bad}}
    assert [w.split(":")[0] for w in campaign_params_warnings([], hybrid)] == ["judge"]


async def test_the_view_the_summary_and_the_dashboard_show_the_warning(api):
    body = campaign_body("params warning")
    body["models"][1]["client"] = {
        "kind": "openai",
        "model": "gpt-4.1",
        "price": {"input_per_1m": 1, "output_per_1m": 1},
        "params": {"max_token": 5},
    }
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text  # a warning, not a refusal
    view = r.json()
    (w,) = view["config_warnings"]
    assert "model 'm1': params.max_token" in w and "'max_tokens'" in w
    assert f"warning    {w}" in summary(view)
    page = (await api.get(f"/campaigns/{view['id']}")).text
    assert 'id="config-warnings"' in page and "params.max_token" in page
