"""Wire format of the HTTP clients (respx), errors, retries and Retry-After."""

import json
import logging
import time
from email.utils import formatdate

import httpx
import pytest
import respx

from service.clients import ClientError, build_client, parse_client_config

KEY = "sk-test-SECRET-0123456789"


class FixedRng:
    def __init__(self, u=0.5):
        self.u = u

    def random(self):
        return self.u


class SleepRecorder:
    def __init__(self):
        self.delays = []

    async def __call__(self, s):
        self.delays.append(s)


@pytest.fixture
def key_env(monkeypatch):
    monkeypatch.setenv("LLMDUEL_TEST_KEY", KEY)
    return "LLMDUEL_TEST_KEY"


@pytest.fixture
def sleep():
    return SleepRecorder()


def make(cfg, sleep, rng=None, fixed_cost=0.01, http=None):
    return build_client(
        parse_client_config(cfg),
        model_name="cand",
        fixed_cost=fixed_cost,
        http=http,
        sleep=sleep,
        rng=rng or FixedRng(0.5),
    )


OPENAI_OK = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-x",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris."}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
}


def openai_cfg(env, **kw):
    cfg = {
        "kind": "openai",
        "base_url": "https://llm.test/v1",
        "model": "gpt-x",
        "api_key_env": env,
        "params": {"temperature": 0.7, "max_tokens": 64},
        "price": {"input_per_1m": 0.27, "output_per_1m": 0.85},
    }
    cfg.update(kw)
    return cfg


# ---------------------------------------------------------------- openai
@respx.mock
async def test_openai_request_shape_auth_usage_and_cost(key_env, sleep):
    route = respx.post("https://llm.test/v1/chat/completions").mock(return_value=httpx.Response(200, json=OPENAI_OK))
    client = make(openai_cfg(key_env, system="Be brief."), sleep)
    out = await client.complete("Capital of France?")
    req = route.calls.last.request
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.headers["content-type"] == "application/json"
    assert json.loads(req.content) == {
        "model": "gpt-x",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}],
        "temperature": 0.7,
        "max_tokens": 64,
    }
    assert out.text == "Paris."
    assert (out.input_tokens, out.output_tokens, out.attempts) == (12, 3, 1)
    assert out.cost == pytest.approx((12 * 0.27 + 3 * 0.85) / 1e6)
    assert out.latency_s >= 0 and sleep.delays == []
    await client.aclose()


@respx.mock
async def test_openai_without_key_env_sends_no_auth_and_falls_back_to_fixed_cost(sleep):
    body = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}],
                }
            }
        ]
    }
    route = respx.post("http://localhost:8000/v1/chat/completions").mock(return_value=httpx.Response(200, json=body))
    client = make(
        {
            "kind": "openai",
            "base_url": "http://localhost:8000/v1",
            "model": "llama",
            "price": {"input_per_1m": 1, "output_per_1m": 1},
        },
        sleep,
        fixed_cost=0.003,
    )
    out = await client.complete("hi")
    assert "authorization" not in route.calls.last.request.headers
    assert out.text == "Hello"
    assert out.input_tokens is None and out.output_tokens is None
    assert out.cost == 0.003  # no usage reported -> fixed per-query cost


async def test_missing_env_var_is_a_clear_client_error(monkeypatch, sleep):
    monkeypatch.delenv("LLMDUEL_ABSENT_KEY", raising=False)
    client = make(openai_cfg("LLMDUEL_ABSENT_KEY"), sleep)
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post("https://llm.test/v1/chat/completions")
        with pytest.raises(ClientError) as ei:
            await client.complete("x")
        assert not route.called
    assert "LLMDUEL_ABSENT_KEY" in ei.value.message and "not set" in ei.value.message
    assert ei.value.status_code is None


@respx.mock
async def test_4xx_is_not_retried_and_secret_is_redacted(key_env, sleep, caplog):
    route = respx.post("https://llm.test/v1/chat/completions").mock(
        return_value=httpx.Response(401, json={"error": {"message": f"Incorrect API key provided: {KEY}"}})
    )
    client = make(openai_cfg(key_env), sleep)
    with caplog.at_level(logging.DEBUG), pytest.raises(ClientError) as ei:
        await client.complete("x")
    err = ei.value
    assert route.call_count == 1 and sleep.delays == []
    assert err.status_code == 401 and err.attempts == 1
    assert "Incorrect API key" in err.message
    assert f"environment variable {key_env}" in err.message  # where the key came from, never the key
    for text in (str(err), repr(err), err.message, repr(err.args), repr(client), caplog.text):
        assert KEY not in text


@respx.mock
async def test_a_401_without_a_configured_key_says_to_set_api_key_env(sleep):
    respx.post("https://llm.test/v1/chat/completions").mock(return_value=httpx.Response(401, json={"error": "no key"}))
    with pytest.raises(ClientError) as ei:
        await make(openai_cfg(None), sleep).complete("x")
    assert ei.value.status_code == 401 and "set api_key_env" in ei.value.message, ei.value.message


@respx.mock
async def test_429_retry_after_seconds_is_honoured(key_env, sleep):
    route = respx.post("https://llm.test/v1/chat/completions").mock(
        side_effect=[
            httpx.Response(429, headers={"Retry-After": "7"}, json={"error": {"message": "rate limited"}}),
            httpx.Response(200, json=OPENAI_OK),
        ]
    )
    out = await make(openai_cfg(key_env), sleep).complete("x")
    assert route.call_count == 2 and out.attempts == 2 and out.text == "Paris."
    assert sleep.delays == [7.0]


@respx.mock
async def test_429_retry_after_http_date_is_honoured(key_env, sleep):
    date = formatdate(time.time() + 30, usegmt=True)
    respx.post("https://llm.test/v1/chat/completions").mock(
        side_effect=[
            httpx.Response(429, headers={"Retry-After": date}),
            httpx.Response(200, json=OPENAI_OK),
        ]
    )
    await make(openai_cfg(key_env), sleep).complete("x")
    assert len(sleep.delays) == 1 and 27.0 <= sleep.delays[0] <= 30.0


@respx.mock
async def test_retry_after_beyond_limit_fails_at_once(key_env, sleep):
    route = respx.post("https://llm.test/v1/chat/completions").mock(
        return_value=httpx.Response(429, headers={"Retry-After": "3600"})
    )
    with pytest.raises(ClientError) as ei:
        await make(openai_cfg(key_env, max_retry_after_s=60), sleep).complete("x")
    assert route.call_count == 1 and sleep.delays == []
    assert ei.value.status_code == 429 and "3600" in ei.value.message


@respx.mock
async def test_500_is_retried_with_exponential_backoff_then_succeeds(key_env, sleep):
    route = respx.post("https://llm.test/v1/chat/completions").mock(
        side_effect=[
            httpx.Response(500, text="Internal error"),
            httpx.Response(503, text="overloaded"),
            httpx.Response(200, json=OPENAI_OK),
        ]
    )
    # base 1s, equal jitter with u=0.5 -> 0.75 * d
    out = await make(openai_cfg(key_env, backoff_base_s=1.0), sleep).complete("x")
    assert route.call_count == 3 and out.attempts == 3
    assert sleep.delays == [0.75, 1.5]


@respx.mock
@pytest.mark.parametrize("status", [408, 409, 502, 504])
async def test_other_retryable_statuses(key_env, sleep, status):
    route = respx.post("https://llm.test/v1/chat/completions").mock(
        side_effect=[httpx.Response(status), httpx.Response(200, json=OPENAI_OK)]
    )
    out = await make(openai_cfg(key_env), sleep).complete("x")
    assert route.call_count == 2 and out.attempts == 2 and len(sleep.delays) == 1


@respx.mock
async def test_tries_are_bounded_and_error_reports_attempts(key_env, sleep):
    route = respx.post("https://llm.test/v1/chat/completions").mock(
        return_value=httpx.Response(500, json={"error": {"message": "boom"}})
    )
    with pytest.raises(ClientError) as ei:
        await make(
            openai_cfg(key_env, max_attempts=3, backoff_base_s=2.0, backoff_max_s=3.0), sleep, rng=FixedRng(1.0)
        ).complete("x")
    assert route.call_count == 3
    assert sleep.delays == [2.0, 3.0]  # 2*1, min(3, 2*2)
    err = ei.value
    assert err.attempts == 3 and err.status_code == 500 and "boom" in err.message
    assert "3 attempts" in str(err)


@respx.mock
async def test_timeout_is_retried_then_reported(key_env, sleep):
    route = respx.post("https://llm.test/v1/chat/completions").mock(side_effect=httpx.ReadTimeout("read timed out"))
    with pytest.raises(ClientError) as ei:
        await make(openai_cfg(key_env, max_attempts=2, timeout_s=5), sleep).complete("x")
    assert route.call_count == 2 and len(sleep.delays) == 1
    assert ei.value.status_code is None and ei.value.attempts == 2
    assert "timed out" in ei.value.message


@respx.mock
async def test_connection_error_is_retried(key_env, sleep):
    route = respx.post("https://llm.test/v1/chat/completions").mock(
        side_effect=[httpx.ConnectError("connection refused"), httpx.Response(200, json=OPENAI_OK)]
    )
    out = await make(openai_cfg(key_env), sleep).complete("x")
    assert route.call_count == 2 and out.attempts == 2


@respx.mock
async def test_timeout_value_is_passed_to_httpx(key_env, sleep):
    route = respx.post("https://llm.test/v1/chat/completions").mock(return_value=httpx.Response(200, json=OPENAI_OK))
    await make(openai_cfg(key_env, timeout_s=12.5), sleep).complete("x")
    assert route.calls.last.request.extensions["timeout"]["read"] == 12.5


@respx.mock
@pytest.mark.parametrize(
    "resp, needle",
    [
        (httpx.Response(200, text="{not json"), "malformed JSON"),
        (httpx.Response(200, json={"choices": []}), "unexpected response"),
        (httpx.Response(200, json=[1, 2]), "unexpected response"),
        (httpx.Response(200, json={"choices": [{"message": {"content": 5}}]}), "unexpected response"),
    ],
)
async def test_malformed_success_responses_fail_without_retry(key_env, sleep, resp, needle):
    route = respx.post("https://llm.test/v1/chat/completions").mock(return_value=resp)
    with pytest.raises(ClientError) as ei:
        await make(openai_cfg(key_env), sleep).complete("x")
    assert route.call_count == 1 and needle in ei.value.message and ei.value.attempts == 1


async def test_shared_http_client_is_used_and_not_closed(key_env, sleep):
    with respx.mock:
        respx.post("https://llm.test/v1/chat/completions").mock(return_value=httpx.Response(200, json=OPENAI_OK))
        async with httpx.AsyncClient() as http:
            client = make(openai_cfg(key_env), sleep, http=http)
            await client.complete("x")
            await client.aclose()
            assert not http.is_closed
            await client.complete("y")  # still usable


# ---------------------------------------------------------------- anthropic
ANTHROPIC_OK = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": "Bonjour"},
        {"type": "text", "text": " !"},
    ],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 20, "output_tokens": 5, "cache_read_input_tokens": 4},
}


@respx.mock
async def test_anthropic_wire_format(key_env, sleep):
    route = respx.post("https://api.anthropic.com/v1/messages").mock(
        return_value=httpx.Response(200, json=ANTHROPIC_OK)
    )
    client = make(
        {
            "kind": "anthropic",
            "model": "claude-x",
            "api_key_env": key_env,
            "system": "Answer in French.",
            "params": {"temperature": 0.1},
            "price": {"input_per_1m": 3, "output_per_1m": 15},
        },
        sleep,
    )
    out = await client.complete("Say hello")
    req = route.calls.last.request
    assert req.headers["x-api-key"] == KEY
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in req.headers
    assert json.loads(req.content) == {
        "model": "claude-x",
        "max_tokens": 1024,
        "system": "Answer in French.",
        "messages": [{"role": "user", "content": "Say hello"}],
        "temperature": 0.1,
    }
    assert out.text == "Bonjour !"
    assert (out.input_tokens, out.output_tokens) == (24, 5)
    assert out.cost == pytest.approx((24 * 3 + 5 * 15) / 1e6)


@respx.mock
async def test_anthropic_max_tokens_param_and_v1_base_url(key_env, sleep):
    route = respx.post("https://proxy.test/v1/messages").mock(return_value=httpx.Response(200, json=ANTHROPIC_OK))
    await make(
        {
            "kind": "anthropic",
            "model": "claude-x",
            "api_key_env": key_env,
            "base_url": "https://proxy.test/v1",
            "params": {"max_tokens": 77},
        },
        sleep,
    ).complete("x")
    assert json.loads(route.calls.last.request.content)["max_tokens"] == 77


@respx.mock
async def test_anthropic_529_overloaded_is_retried_and_400_is_not(key_env, sleep):
    err = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    route = respx.post("https://api.anthropic.com/v1/messages").mock(
        side_effect=[httpx.Response(529, json=err), httpx.Response(200, json=ANTHROPIC_OK)]
    )
    out = await make({"kind": "anthropic", "model": "claude-x", "api_key_env": key_env}, sleep).complete("x")
    assert route.call_count == 2 and out.attempts == 2

    bad = {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too big"}}
    respx.post("https://api.anthropic.com/v1/messages").mock(return_value=httpx.Response(400, json=bad))
    with pytest.raises(ClientError) as ei:
        await make({"kind": "anthropic", "model": "claude-x", "api_key_env": key_env}, sleep).complete("x")
    assert ei.value.status_code == 400 and ei.value.attempts == 1
    assert "max_tokens: too big" in ei.value.message


# ---------------------------------------------------------------- gemini
GEMINI_OK = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [{"text": "thinking...", "thought": True}, {"text": "Hola"}, {"text": " mundo"}],
            },
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 8,
        "candidatesTokenCount": 2,
        "thoughtsTokenCount": 10,
        "totalTokenCount": 20,
    },
}

GEMINI_URL = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"


@respx.mock
async def test_gemini_wire_format(key_env, sleep):
    route = respx.post(GEMINI_URL).mock(return_value=httpx.Response(200, json=GEMINI_OK))
    client = make(
        {
            "kind": "gemini",
            "model": "models/gemini-2.5-flash",
            "api_key_env": key_env,
            "system": "Spanish only.",
            "params": {
                "temperature": 0.2,
                "maxOutputTokens": 50,
                "safetySettings": [{"category": "X", "threshold": "BLOCK_NONE"}],
            },
            "price": {"input_per_1m": 0.3, "output_per_1m": 2.5},
        },
        sleep,
    )
    out = await client.complete("Say hello")
    req = route.calls.last.request
    assert req.headers["x-goog-api-key"] == KEY
    assert "key=" not in str(req.url) and KEY not in str(req.url)
    assert json.loads(req.content) == {
        "contents": [{"role": "user", "parts": [{"text": "Say hello"}]}],
        "systemInstruction": {"parts": [{"text": "Spanish only."}]},
        "generationConfig": {"temperature": 0.2, "maxOutputTokens": 50},
        "safetySettings": [{"category": "X", "threshold": "BLOCK_NONE"}],
    }
    assert out.text == "Hola mundo"
    assert (out.input_tokens, out.output_tokens) == (8, 12)
    assert out.cost == pytest.approx((8 * 0.3 + 12 * 2.5) / 1e6)


@respx.mock
async def test_gemini_blocked_prompt_and_errors(key_env, sleep):
    cfg = {"kind": "gemini", "model": "gemini-2.5-flash", "api_key_env": key_env}
    route = respx.post(GEMINI_URL).mock(
        side_effect=[
            httpx.Response(200, json={"promptFeedback": {"blockReason": "SAFETY"}}),
            httpx.Response(
                429,
                headers={"Retry-After": "2"},
                json={"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}},
            ),
            httpx.Response(
                403, json={"error": {"code": 403, "message": "API key not valid", "status": "PERMISSION_DENIED"}}
            ),
        ]
    )
    with pytest.raises(ClientError) as ei:
        await make(cfg, sleep).complete("x")
    assert "blocked: SAFETY" in ei.value.message and route.call_count == 1

    with pytest.raises(ClientError) as ei:
        await make(cfg, sleep).complete("x")
    assert route.call_count == 3 and sleep.delays == [2.0]
    assert ei.value.status_code == 403 and ei.value.attempts == 2 and "API key not valid" in ei.value.message
