"""Client config validation and the simulated client."""

import pytest

from service.clients import (
    ClientError,
    Completion,
    SimulatedClient,
    build_client,
    compute_cost,
    parse_client_config,
    validate_client_config,
)
from service.clients.retry import RetryPolicy, is_retryable_status, parse_retry_after


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "cfg, field",
    [
        ({"kind": "nope"}, "client.kind"),
        ({}, "client.kind"),
        ({"kind": "openai"}, "client.model"),
        ({"kind": "openai", "model": ""}, "client.model"),
        ({"kind": "openai", "model": "m", "base_url": "ftp://x"}, "client.base_url"),
        ({"kind": "openai", "model": "m", "params": [1]}, "client.params"),
        ({"kind": "openai", "model": "m", "params": {"messages": []}}, "client.params.messages"),
        ({"kind": "openai", "model": "m", "price": {"input_per_1m": 1}}, "client.price.output_per_1m"),
        (
            {"kind": "openai", "model": "m", "price": {"input_per_1m": -1, "output_per_1m": 1}},
            "client.price.input_per_1m",
        ),
        ({"kind": "openai", "model": "m", "price": {"in": 1, "out": 2}}, "client.price"),
        ({"kind": "openai", "model": "m", "timeout_s": 0}, "client.timeout_s"),
        ({"kind": "openai", "model": "m", "timeout_s": 10**400}, "client.timeout_s"),
        ({"kind": "openai", "model": "m", "timeout_s": float("nan")}, "client.timeout_s"),
        (
            {"kind": "openai", "model": "m", "price": {"input_per_1m": 10**400, "output_per_1m": 1}},
            "client.price.input_per_1m",
        ),
        ({"kind": "openai", "model": "m", "max_attempts": 0}, "client.max_attempts"),
        ({"kind": "openai", "model": "m", "max_attempts": 2.5}, "client.max_attempts"),
        ({"kind": "openai", "model": "m", "temperature": 0.2}, "client.temperature"),
        ({"kind": "anthropic", "model": "m", "anthropic_version": ""}, "client.anthropic_version"),
        ({"kind": "gemini", "model": "m", "params": {"contents": []}}, "client.params.contents"),
        ({"kind": "simulated", "failure_rate": 1.5}, "client.failure_rate"),
        ({"kind": "simulated", "seed": "x"}, "client.seed"),
        ({"kind": "simulated", "model": "m"}, "client.model"),
        ("openai", "client"),
    ],
)
def test_invalid_configs_name_the_field(cfg, field):
    with pytest.raises(ValueError) as ei:
        validate_client_config(cfg)
    assert str(ei.value).startswith(field + ":") or str(ei.value).startswith(field + " "), str(ei.value)


def test_secret_values_are_never_echoed():
    secret = "sk-live-abcdef0123456789"
    with pytest.raises(ValueError) as ei:
        validate_client_config({"kind": "openai", "model": "m", "api_key_env": secret})
    assert "api_key_env" in str(ei.value) and secret not in str(ei.value)
    with pytest.raises(ValueError) as ei:
        validate_client_config({"kind": "openai", "model": "m", "api_key": secret})
    assert "api_key_env" in str(ei.value) and secret not in str(ei.value)


def test_defaults_are_filled_and_input_not_mutated():
    cfg = {"kind": "anthropic", "model": "claude-x", "params": {"temperature": 0}}
    out = validate_client_config(cfg)
    assert cfg == {"kind": "anthropic", "model": "claude-x", "params": {"temperature": 0}}
    assert out["base_url"] == "https://api.anthropic.com"
    assert out["api_key_env"] == "ANTHROPIC_API_KEY"
    assert out["anthropic_version"] == "2023-06-01"
    assert out["max_attempts"] == 4 and out["price"] is None
    assert validate_client_config(out) == out  # idempotent
    assert validate_client_config({"kind": "openai", "model": "m"})["api_key_env"] is None
    assert validate_client_config({"kind": "gemini", "model": "m"})["api_key_env"] == "GEMINI_API_KEY"
    assert validate_client_config({"kind": "simulated"}) == {
        "kind": "simulated",
        "seed": 0,
        "failure_rate": 0.0,
        "latency_s": 0.0,
    }


def test_issue_example_config_is_valid():
    cfg = {
        "kind": "openai",
        "base_url": "https://api.example.com/v1/",
        "model": "deepseek-chat",
        "api_key_env": "OPENAI_API_KEY",
        "params": {"temperature": 0.7},
        "price": {"input_per_1m": 0.27, "output_per_1m": 0.85},
    }
    out = validate_client_config(cfg)
    assert out["base_url"] == "https://api.example.com/v1"
    assert out["price"] == {"input_per_1m": 0.27, "output_per_1m": 0.85}
    assert out["params"] == {"temperature": 0.7}


def test_compute_cost():
    price = {"input_per_1m": 0.27, "output_per_1m": 0.85}
    assert compute_cost(price, 1000, 2000, 9.0) == pytest.approx((1000 * 0.27 + 2000 * 0.85) / 1e6)
    assert compute_cost(price, None, 10, 9.0) == 9.0
    assert compute_cost(None, 1000, 2000, 0.002) == 0.002


# ---------------------------------------------------------------- retry helpers
def test_retryable_statuses():
    assert all(is_retryable_status(s) for s in (408, 409, 429, 500, 502, 503, 504, 529))
    assert not any(is_retryable_status(s) for s in (400, 401, 403, 404, 422, 200, 301))


def test_parse_retry_after():
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after": "-3"}) == 0.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    now = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    assert parse_retry_after({"retry-after": "Tue, 14 Nov 2023 22:13:32 GMT"}, now=now) == 12.0
    assert parse_retry_after({"retry-after": "Tue, 14 Nov 2023 22:00:00 GMT"}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_is_exponential_with_bounded_jitter():
    pol = RetryPolicy(max_attempts=6, base_delay=0.5, max_delay=3.0)

    class R:
        def __init__(self, u):
            self.u = u

        def random(self):
            return self.u

    assert [pol.backoff(k, R(0.0)) for k in (1, 2, 3, 4, 5)] == [0.25, 0.5, 1.0, 1.5, 1.5]
    assert [pol.backoff(k, R(1.0)) for k in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]


# ---------------------------------------------------------------- simulated client
async def test_simulated_client_is_deterministic_and_charges_fixed_cost():
    a = build_client(parse_client_config({"kind": "simulated"}), model_name="m1", fixed_cost=0.002)
    b = build_client(parse_client_config({"kind": "simulated"}), model_name="m1", fixed_cost=0.002)
    other = build_client(parse_client_config({"kind": "simulated", "seed": 1}), model_name="m1", fixed_cost=0.002)
    c1, c2 = await a.complete("What is 2+2?"), await b.complete("What is 2+2?")
    assert isinstance(a, SimulatedClient) and isinstance(c1, Completion)
    assert c1.text == c2.text and c1.text
    assert c1.cost == 0.002 and c1.attempts == 1
    assert c1.input_tokens == 3 and c1.output_tokens == len(c1.text.split())
    assert (await other.complete("What is 2+2?")).text != c1.text
    assert (await a.complete("Another prompt")).text != c1.text
    assert (
        await build_client(parse_client_config({"kind": "simulated"}), "m2", 1.0).complete("What is 2+2?")
    ).text != c1.text
    await a.aclose()


async def test_simulated_client_failure_rate():
    always = build_client(parse_client_config({"kind": "simulated", "failure_rate": 1.0}), "m", 0.5)
    with pytest.raises(ClientError) as ei:
        await always.complete("x")
    assert ei.value.status_code == 503 and ei.value.attempts == 1
    assert "simulated failure" in str(ei.value)
    some = build_client(parse_client_config({"kind": "simulated", "failure_rate": 0.3}), "m", 0.5)
    fails = 0
    for _ in range(400):
        try:
            await some.complete("x")
        except ClientError:
            fails += 1
    assert 80 <= fails <= 160


async def test_simulated_latency():
    c = build_client(parse_client_config({"kind": "simulated", "latency_s": 0.02}), "m", 0.0)
    out = await c.complete("x")
    assert out.latency_s >= 0.02


def test_client_error_str_and_repr():
    e = ClientError("boom", 429, 3)
    assert str(e) == "boom | status 429 | 3 attempts"
    assert e.to_dict() == {"message": "boom", "status_code": 429, "attempts": 3}
    assert "boom" in repr(e)
    assert str(ClientError("no key", None, 1)) == "no key | 1 attempt"
