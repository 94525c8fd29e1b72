"""Client and judge configs as pydantic models: validated once, stored as JSON, old rows still load."""

import pytest
from conftest import REPO

from service.clients import (
    AnthropicClientConfig,
    OpenAIClientConfig,
    SimulatedClientConfig,
    build_client,
    parse_client_config,
)
from service.clients.config import client_json
from service.judging import (
    HumanJudgeConfig,
    LLMJudgeConfig,
    build_judge,
    judge_json,
    parse_judge_config,
)
from service.schemas import CampaignCreate

# Rows as the hand-written validators stored them before the config models existed.
OLD_OPENAI = {
    "kind": "openai",
    "base_url": "https://api.example.com/v1",
    "model": "deepseek-chat",
    "api_key_env": "DS_KEY",
    "params": {"temperature": 0.7},
    "price": {"input_per_1m": 0.27, "output_per_1m": 0.85},
    "system": None,
    "timeout_s": 60.0,
    "max_attempts": 4,
    "backoff_base_s": 0.5,
    "backoff_max_s": 20.0,
    "max_retry_after_s": 60.0,
}
OLD_ANTHROPIC = {
    **OLD_OPENAI,
    "kind": "anthropic",
    "base_url": "https://api.anthropic.com",
    "api_key_env": "ANTHROPIC_API_KEY",
    "price": None,
    "max_cost_per_query": 0.02,
    "anthropic_version": "2023-06-01",
}
OLD_SIMULATED = {"kind": "simulated", "seed": 3, "failure_rate": 0.0, "latency_s": 0.0}
OLD_JUDGES = [
    {"kind": "human"},
    {"kind": "simulated", "preference": [[0.5, 0.7], [0.3, 0.5]], "tie_prob": 0.0},
    {"kind": "llm", "client": OLD_OPENAI, "cost": 0.001, "both_orders": True},
]


@pytest.mark.parametrize("row", [OLD_OPENAI, OLD_ANTHROPIC, OLD_SIMULATED])
def test_old_client_rows_load_and_round_trip(row):
    cfg = parse_client_config(row)
    stored = client_json(cfg)
    assert {k: v for k, v in stored.items() if k in row} == row  # every old key kept, same value
    new_keys = set(stored) - set(row)
    assert new_keys <= {"max_cost_per_query", "rpm", "tpm", "batch_price"}  # new keys are optional ones, null
    assert all(stored[k] is None for k in new_keys)
    assert parse_client_config(stored) == cfg  # the stored form parses back to the same model
    assert client_json(parse_client_config(stored)) == stored


@pytest.mark.parametrize("row", OLD_JUDGES)
def test_old_judge_rows_load_and_round_trip(row):
    cfg = parse_judge_config(row, n_models=2)
    stored = judge_json(cfg)
    for k, v in row.items():
        if k == "client":
            assert {kk: vv for kk, vv in stored["client"].items() if kk in v} == v
        else:
            assert stored[k] == v
    assert judge_json(parse_judge_config(stored)) == stored


def test_models_are_typed_and_defaults_filled():
    c = parse_client_config({"kind": "anthropic", "model": "claude-x"})
    assert isinstance(c, AnthropicClientConfig)
    assert c.base_url == "https://api.anthropic.com" and c.api_key_env == "ANTHROPIC_API_KEY"
    assert isinstance(parse_client_config({"kind": "simulated"}), SimulatedClientConfig)
    o = parse_client_config({"kind": "openai", "model": "m", "base_url": "http://h:1/v1/", "params": None})
    assert isinstance(o, OpenAIClientConfig) and o.base_url == "http://h:1/v1" and o.params == {}
    j = parse_judge_config({"kind": "llm", "client": {"kind": "gemini", "model": "g"}})
    assert isinstance(j, LLMJudgeConfig) and j.client.api_key_env == "GEMINI_API_KEY"
    assert isinstance(parse_judge_config({"kind": "human"}), HumanJudgeConfig)


def test_build_takes_only_validated_models():
    with pytest.raises(TypeError, match="parse_client_config"):
        build_client({"kind": "simulated"}, "m", 0.0)
    with pytest.raises(TypeError, match="parse_judge_config"):
        build_judge({"kind": "human"}, ["a", "b"])


@pytest.mark.parametrize(
    "cfg, message",
    [
        ("nope", "client: must be an object with a 'kind' field"),
        ({}, "client.kind: must be one of"),
        ({"kind": "warp"}, "client.kind: must be one of"),
        ({"kind": "openai", "model": "m", "temperature": 1}, "client.temperature: unknown field"),
        ({"kind": "openai", "model": "m", "params": {"n": 2}}, "client.params.n: is set by the client"),
        ({"kind": "openai", "model": "m", "timeout_s": "5"}, "client.timeout_s: must be a finite number"),
        ({"kind": "openai", "model": "m", "max_attempts": True}, "client.max_attempts: must be an integer"),
        ({"kind": "gemini", "model": " "}, "client.model: must be a non-empty string"),
    ],
)
def test_client_errors_are_one_line_naming_the_field(cfg, message):
    with pytest.raises(ValueError) as ei:
        parse_client_config(cfg)
    assert str(ei.value).startswith(message), str(ei.value)
    assert "\n" not in str(ei.value)


def test_campaign_body_holds_the_models_and_stores_the_same_json():
    body = CampaignCreate.model_validate(
        {
            "name": "c",
            "models": [
                {"name": "a", "cost": 1, "client": {"kind": "simulated"}},
                {"name": "b", "cost": 1, "client": OLD_OPENAI},
            ],
            "prompts": ["p"],
            "judge": OLD_JUDGES[2],
        }
    )
    assert isinstance(body.models[1].client, OpenAIClientConfig)
    assert isinstance(body.judge, LLMJudgeConfig)
    assert body.models[1].stored()["client"] == client_json(parse_client_config(OLD_OPENAI))
    assert body.stored_judge()["client"]["price"] == OLD_OPENAI["price"]
    with pytest.raises(ValueError, match="is 2x2 but the campaign has 3 models"):
        CampaignCreate.model_validate(
            {
                "name": "c",
                "models": [{"name": n, "cost": 1, "client": {"kind": "simulated"}} for n in "abc"],
                "prompts": ["p"],
                "judge": OLD_JUDGES[1],
            }
        )


def test_docs_name_every_config_field():
    """docs/clients-and-judges.md is the config reference: it names every field of every model."""
    from service.clients.config import (
        AnthropicClientConfig,
        GeminiClientConfig,
        OpenAIClientConfig,
        Price,
        SimulatedClientConfig,
    )
    from service.judging import SimulatedJudgeConfig, VerdictPatterns

    doc = (REPO / "docs" / "clients-and-judges.md").read_text()
    for model in (
        SimulatedClientConfig,
        OpenAIClientConfig,
        AnthropicClientConfig,
        GeminiClientConfig,
        Price,
        HumanJudgeConfig,
        SimulatedJudgeConfig,
        LLMJudgeConfig,
        VerdictPatterns,
    ):
        for name, field in model.model_fields.items():
            assert f"`{name}`" in doc or f'"{name}"' in doc or f"{name}:" in doc, f"{model.__name__}.{name}"
            assert field.description, f"{model.__name__}.{name} has no description"


def test_rules_read_a_config_model_as_its_stored_json():
    from service.money.bounds import judge_bound_nusd, model_bound_nusd
    from service.money.costs import judge_cost_per_duel, vote_fee_nusd

    for cfg in (
        {"kind": "human", "fee_per_vote": 0.1},
        {"kind": "llm", "client": {**OLD_OPENAI, "params": {"max_tokens": 100}}, "cost": 0.01, "both_orders": False},
    ):
        model = parse_judge_config(cfg)
        assert judge_cost_per_duel(model) == judge_cost_per_duel(judge_json(model)) > 0
        assert judge_bound_nusd(model, "q") == judge_bound_nusd(judge_json(model), "q") > 0
        assert vote_fee_nusd(model) == vote_fee_nusd(judge_json(model))
    m = {"name": "a", "cost": 0.5, "client": parse_client_config({**OLD_OPENAI, "params": {"max_tokens": 10}})}
    assert model_bound_nusd(m, "q") == model_bound_nusd({**m, "client": client_json(m["client"])}, "q")


def test_the_documented_yaml_judge_is_valid_and_reads_its_verdicts():
    yaml = pytest.importorskip("yaml")
    doc = (REPO / "docs" / "clients-and-judges.md").read_text()
    block = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    cfg = parse_judge_config(yaml.safe_load(block)["judge"])
    assert isinstance(cfg, LLMJudgeConfig) and cfg.system_prompt and "{reference}" in cfg.prompt_template
    rule = cfg.verdict_rule()
    assert rule.parse("... so my verdict is [[A>>B]]") == ("A>>B", 1.0)
    assert rule.parse("final: [b>a]") == ("b>a", 0.25)  # the second regex, any case
