"""The fake OpenAI-compatible provider: in-process (ASGI) and over real HTTP."""

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
import uvicorn

from judges.llm import render_judge_prompt
from service.clients import ClientError, parse_client_config
from service.clients import build_client as build_client_from_model
from service.fake_provider import (
    add_fake_provider_parser,
    create_fake_provider_app,
    parse_quality_options,
    quality_from_name,
)
from service.judging import build_judge as build_judge_from_model
from service.judging import parse_judge_config


def build_client(cfg, *args, **kw):
    return build_client_from_model(parse_client_config(cfg), *args, **kw)


def build_judge(cfg, *args, **kw):
    return build_judge_from_model(parse_judge_config(cfg), *args, **kw)


BASE = "http://fake.test/v1"


async def no_sleep(s):
    pass


@pytest.fixture
async def asgi():
    """(http client bound to a fresh in-process app, the app)."""
    app = create_fake_provider_app({"champion": 5.0, "zero": 0.0}, timeout_sleep_s=0.5)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        yield http, app


def client(http, model, **cfg):
    base = {"kind": "openai", "base_url": BASE, "model": model}
    base.update(cfg)
    return build_client(base, model_name=model, fixed_cost=0.01, http=http, sleep=no_sleep)


def test_quality_options():
    assert quality_from_name("good-q3") == 3.0
    assert quality_from_name("weak_q0.5") == 0.5
    assert quality_from_name("plain", default=2.0) == 2.0
    assert quality_from_name("q3-not-suffix") == 1.0
    assert parse_quality_options(["a=1", "org/model:v2=2.5"]) == {"a": 1.0, "org/model:v2": 2.5}
    for bad in (["a"], ["=1"], ["a=x"], ["a=-1"], ["a=nan"]):
        with pytest.raises(ValueError, match="--quality"):
            parse_quality_options(bad)


async def test_answers_are_deterministic_with_usage(asgi):
    http, app = asgi
    c = client(http, "m1-q2")
    a1, a2 = await c.complete("What is the capital of France?"), await c.complete("What is the capital of France?")
    assert a1.text == a2.text and a1.text.startswith("<<fake:") and "m1" not in a1.text
    assert a1.input_tokens == 8  # ceil(30 chars / 4)
    assert a1.output_tokens == -(-len(a1.text) // 4)
    assert (await c.complete("Another question")).text != a1.text
    assert (await client(http, "m2").complete("What is the capital of France?")).text != a1.text
    priced = client(http, "m1-q2", price={"input_per_1m": 1e6, "output_per_1m": 0})
    assert (await priced.complete("What is the capital of France?")).cost == 8.0
    assert app.state.provider.stats["answers"] == 5


async def test_raw_response_shape_models_and_bad_requests(asgi):
    http, _ = asgi
    r = await http.post(
        f"{BASE}/chat/completions",
        json={
            "model": "x",
            "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}],
            "max_tokens": 3,
        },
    )
    body = r.json()
    assert r.status_code == 200 and body["object"] == "chat.completion" and body["model"] == "x"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 3 and body["usage"]["prompt_tokens"] == 3
    assert body["usage"]["total_tokens"] == 6
    ids = [m["id"] for m in (await http.get(f"{BASE}/models")).json()["data"]]
    assert ids == ["champion", "x", "zero"]
    for payload in (
        {"messages": [{"role": "user", "content": "x"}]},
        {"model": "x", "messages": []},
        {"model": "x", "messages": [{"role": "user", "content": "x"}], "stream": True},
        [1],
    ):
        r = await http.post(f"{BASE}/chat/completions", json=payload)
        assert r.status_code == 400 and "message" in r.json()["error"]
    r = await http.post(f"{BASE}/chat/completions", content=b"{nope")
    assert r.status_code == 400


async def test_fake_judge_prefers_the_stronger_model_in_both_orders(asgi):
    http, app = asgi
    q = "Explain recursion."
    strong = (await client(http, "champion").complete(q)).text
    weak = (await client(http, "weak-q1").complete(q)).text
    judge = build_judge(
        {"kind": "llm", "client": {"kind": "openai", "base_url": BASE, "model": "judge"}},
        ["weak-q1", "champion"],
        http=http,
    )
    v = await judge.judge(q, weak, strong, model_a=0, model_b=1)
    assert v.choice == "b" and v.detail["consistent"] is True and v.error is None
    v = await judge.judge(q, strong, weak, model_a=1, model_b=0)
    assert v.choice == "a"
    equal = (await client(http, "other-q5").complete(q)).text
    assert (await judge.judge(q, strong, equal, model_a=0, model_b=1)).choice == "tie"
    assert app.state.provider.stats["judgements"] == 6


async def test_bradley_terry_judge_is_order_consistent_and_noisy():
    app = create_fake_provider_app(judge_mode="bradley-terry")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        judge = build_judge(
            {"kind": "llm", "client": {"kind": "openai", "base_url": BASE, "model": "fake-judge"}},
            ["a", "b"],
            http=http,
        )
        strong_c, weak_c = client(http, "s-q3"), client(http, "w-q1")
        wins = 0
        for k in range(40):
            q = f"question {k}"
            s, w = (await strong_c.complete(q)).text, (await weak_c.complete(q)).text
            v = await judge.judge(q, s, w, model_a=0, model_b=1)
            assert v.detail["consistent"] is True  # both orders always agree
            wins += v.choice == "a"
        assert 20 <= wins <= 39  # p = 3/4, but not always


async def test_fake_judge_without_markers_calls_it_even(asgi):
    http, _ = asgi
    judge = build_judge(
        {"kind": "llm", "client": {"kind": "openai", "base_url": BASE, "model": "fake-judge"}}, ["a", "b"], http=http
    )
    v = await judge.judge("q", "plain answer one", "plain answer two", model_a=0, model_b=1)
    assert v.choice == "tie" and v.detail["consistent"] is True and v.error is None


async def test_injected_faults(asgi):
    http, _ = asgi
    with pytest.raises(ClientError) as ei:
        await client(http, "m-fault-500", max_attempts=3).complete("x")
    assert ei.value.status_code == 500 and ei.value.attempts == 3

    delays = []

    async def rec(s):
        delays.append(s)

    c = build_client(
        {"kind": "openai", "base_url": BASE, "model": "m-fault-429", "max_attempts": 2}, "m", 0.0, http=http, sleep=rec
    )
    with pytest.raises(ClientError) as ei:
        await c.complete("x")
    assert ei.value.status_code == 429 and delays == [1.0]

    with pytest.raises(ClientError, match="malformed JSON"):
        await client(http, "m-fault-badjson").complete("x")

    flaky = await client(http, "m-fault-flaky").complete("x")
    assert flaky.attempts == 2 and flaky.text.startswith("<<fake:")
    # (timeouts need a real socket: see test_timeout_over_real_http)


async def test_api_key_is_required_when_configured(monkeypatch):
    monkeypatch.setenv("FAKE_KEY_FOR_TEST", "fk-123")
    app = create_fake_provider_app(api_key="fk-123")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        ok = await client(http, "m", api_key_env="FAKE_KEY_FOR_TEST").complete("x")
        assert ok.text
        with pytest.raises(ClientError) as ei:
            await client(http, "m").complete("x")
        assert ei.value.status_code == 401 and ei.value.attempts == 1


def test_cli_parser_registration():
    import argparse

    parser = argparse.ArgumentParser()
    add_fake_provider_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["fake-provider", "--port", "9999", "--quality", "a=2", "--quality", "b=1", "--judge-mode", "bradley-terry"]
    )
    assert args.port == 9999 and args.host == "127.0.0.1" and args.quality == ["a=2", "b=1"]
    assert args.judge_mode == "bradley-terry" and callable(args.handler)
    args = parser.parse_args(["fake-provider", "--quality", "oops"])
    assert args.handler(args) == 2  # bad option: exit code 2, server not started


# ---------------------------------------------------------------- real HTTP
@pytest.fixture(scope="module")
def live_server():
    app = create_fake_provider_app({"champion": 5.0}, timeout_sleep_s=2.0)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}/v1", app
    server.should_exit = True
    thread.join(5)
    sock.close()


async def test_over_real_http_models_and_judge(live_server):
    base, app = live_server
    q = "Name a prime number."
    cfg = {"kind": "openai", "base_url": base, "price": {"input_per_1m": 1.0, "output_per_1m": 2.0}}
    strong = build_client({**cfg, "model": "champion"}, "champion", 0.0)
    weak = build_client({**cfg, "model": "weak-q1"}, "weak", 0.0)
    a, b = await asyncio.gather(strong.complete(q), weak.complete(q))
    assert a.text.startswith("<<fake:") and "champion" not in a.text
    assert a.cost == pytest.approx((a.input_tokens * 1 + a.output_tokens * 2) / 1e6) and a.cost > 0
    judge = build_judge({"kind": "llm", "client": {**cfg, "model": "judge"}}, ["champion", "weak"])
    v = await judge.judge(q, b.text, a.text, model_a=1, model_b=0)
    assert v.choice == "b" and v.cost > 0
    calls = v.detail["calls"]
    assert v.cost == pytest.approx(sum(c["cost"] for c in calls)) and len(calls) == 2
    for c in (strong, weak, judge):
        await c.aclose()
    async with httpx.AsyncClient() as http:
        r = await http.get(f"{base}/models")
        assert {"champion", "weak-q1", "judge"} <= {m["id"] for m in r.json()["data"]}


async def test_timeout_over_real_http(live_server):
    base, _ = live_server
    c = build_client(
        {"kind": "openai", "base_url": base, "model": "m-fault-timeout", "timeout_s": 0.1, "max_attempts": 2},
        "m",
        0.0,
        sleep=no_sleep,
    )
    t0 = time.monotonic()
    with pytest.raises(ClientError, match="timed out") as ei:
        await c.complete("x")
    assert ei.value.attempts == 2 and ei.value.status_code is None
    # The client gave up after its two 0.1 s timeouts; it did not wait for the answer (2 s away);
    # the margin is for a loaded machine.
    assert time.monotonic() - t0 < 1.5
    await c.aclose()


def test_module_entry_point_serves(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.fake_provider", "--port", str(port), "--quality", "x=2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ},
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                r = httpx.post(
                    f"http://127.0.0.1:{port}/v1/chat/completions",
                    timeout=2,
                    json={"model": "x", "messages": [{"role": "user", "content": "hi"}]},
                )
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "fake provider did not start"
                time.sleep(0.1)
        assert r.status_code == 200
        assert r.json()["choices"][0]["message"]["content"].startswith("<<fake:")
    finally:
        proc.terminate()
        proc.wait(10)


async def test_campaign_over_fake_provider_certifies_the_condorcet_winner():
    """Policy + fake models + fake LLM judge, without the service: the highest
    quality model is certified (a Condorcet winner by construction)."""
    from algorithms import make_policy

    app = create_fake_provider_app()
    names, costs = ["small-q1", "large-q4", "medium-q2"], [1.0, 3.0, 2.0]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        models = [client(http, n) for n in names]
        judge = build_judge(
            {"kind": "llm", "client": {"kind": "openai", "base_url": BASE, "model": "judge"}}, names, http=http
        )
        policy = make_policy("dctas", costs=costs, delta=0.05)
        duels = 0
        while not policy.should_stop() and duels < 1000:
            i, j = policy.next_pair(pending=[])
            prompt = f"prompt {duels}"
            a, b = await asyncio.gather(models[i].complete(prompt), models[j].complete(prompt))
            v = await judge.judge(prompt, a.text, b.text, model_a=i, model_b=j)
            assert v.choice in ("a", "b") and v.detail["consistent"]
            policy.record(i, j, 1.0 if v.choice == "a" else 0.0)
            duels += 1
        assert policy.should_stop() and policy.recommendation() == 1


# ---------------------------------------------------------------- judging without reading the prompt
STRENGTH_TEMPLATE = (
    "Compare.\n== Q ==\n{question}\n== ONE ==\n{answer_a}\n== TWO ==\n{answer_b}\n"
    "Say [[A>>B]], [[A>B]], [[A=B]], [[B>A]] or [[B>>A]]."
)
STRENGTH_VERDICTS = {"a": "[[A>B]]", "b": "[[B>A]]", "tie": "[[A=B]]", "a_strong": "[[A>>B]]", "b_strong": "[[B>>A]]"}


def strength_judge(http, **kw):
    return build_judge(
        {
            "kind": "llm",
            "client": {
                "kind": "openai",
                "base_url": BASE,
                "model": "fake-judge",
                "params": {"fake_verdicts": STRENGTH_VERDICTS},
            },
            "system_prompt": "Grade two answers.",
            "prompt_template": STRENGTH_TEMPLATE,
            "verdict_patterns": {
                "regex": r"\[\[([AB<>=]+)\]\]",
                "scores": {"A>>B": 1.0, "A>B": 0.75, "A=B": 0.5, "B>A": 0.25, "B>>A": 0.0},
            },
            **kw,
        },
        ["x", "y"],
        http=http,
    )


async def test_fake_judge_answers_a_custom_template_with_strengths(asgi):
    http, app = asgi
    q = "Explain recursion."
    champion = (await client(http, "champion").complete(q)).text  # quality 5
    good = (await client(http, "good-q4").complete(q)).text
    weak = (await client(http, "weak-q1").complete(q)).text
    judge = strength_judge(http)
    v = await judge.judge(q, good, champion, model_a=0, model_b=1)  # 4 vs 5: a weak win of b in both orders
    assert (v.choice, v.score) == ("b", pytest.approx(0.25)) and v.detail["consistent"], v.detail
    assert [c["parsed"] for c in v.detail["calls"]] == ["B>A", "A>B"]
    v = await judge.judge(q, champion, weak, model_a=1, model_b=0)  # 5 vs 1: strong
    assert (v.choice, v.score) == ("a", pytest.approx(1.0))
    v = await judge.judge(q, weak, weak, model_a=1, model_b=0)
    assert v.choice == "tie"
    assert app.state.provider.stats["judgements"] == 6


async def test_fake_answers_name_no_model_and_markers_are_opaque(asgi):
    http, app = asgi
    a1 = (await client(http, "champion").complete("p1")).text
    a2 = (await client(http, "champion").complete("p2")).text
    assert "champion" not in a1 + a2 and "quality" not in a1
    assert a1.split(">>")[0] != a2.split(">>")[0]  # one model, two different markers
    # a marker written by another provider (another key) is not readable: no markers -> a tie
    other = create_fake_provider_app({"champion": 5.0}, marker_key="other")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=other)) as http2:
        foreign = (await client(http2, "champion").complete("p1")).text
    weak = (await client(http, "weak-q1").complete("p1")).text
    provider = app.state.provider
    assert "[[C]]" in provider.judge(f"{foreign}\n{weak}")
    assert "[[B]]" in provider.judge(f"{weak}\n{a1}")
    assert "[[A]]" in provider.judge(f"xx {a1} yy {weak} zz {a2}")  # the first two markers count


async def test_a_model_not_named_judge_answers_even_a_judge_prompt(asgi):
    http, _ = asgi
    prompt = render_judge_prompt("q", "<<fake:" + "0" * 36 + ">> a", "b")
    r = await http.post(
        f"{BASE}/chat/completions", json={"model": "plain-q2", "messages": [{"role": "user", "content": prompt}]}
    )
    text = r.json()["choices"][0]["message"]["content"]
    assert text.startswith("<<fake:") and "[[" not in text
    r = await http.post(
        f"{BASE}/chat/completions",
        json={"model": "fake-judge", "messages": [{"role": "user", "content": "x"}], "fake_verdicts": {"win": "W"}},
    )
    assert r.status_code == 400 and "fake_verdicts" in r.json()["error"]["message"]


def _public_answer(model: str, prompt: str) -> tuple[str, str]:
    """What anyone could compute from a model's name and a prompt before the texts were keyed:
    the marker's nonce (hex) and the words after the marker (the former sha256 formula)."""
    import hashlib

    from service.fake_provider import _VOCAB

    def digest(*parts: str) -> bytes:
        return hashlib.sha256("\x00".join(parts).encode()).digest()

    d = digest(model, prompt)
    words = [_VOCAB[(d[1 + i % 30] + 7 * i) % len(_VOCAB)] for i in range(8 + d[0] % 24)]
    return digest("nonce", model, prompt)[:6].hex(), " ".join(words) + "."


def test_guessing_model_names_does_not_recompute_the_fake_answers(monkeypatch):
    from service.fake_provider import FakeProvider

    names = ["gpt-large-q3", "small-model-q1"]
    prompts = [f"Question {n}: how many legs has a spider?" for n in range(24)]
    provider = FakeProvider(marker_key="deployment secret")
    recomputed = 0
    for prompt in prompts:
        for model in names:
            text = provider.answer(model, prompt)
            token, words = text[len("<<fake:") :].split(">> ", 1)
            for guess in names:  # the adversary tries every name it guessed
                nonce, public_words = _public_answer(guess, prompt)
                recomputed += words == public_words or token.startswith(nonce)
    assert recomputed == 0
    # Deterministic under one secret (a judge served by another process can share it), different under another.
    assert FakeProvider(marker_key="deployment secret").answer(names[0], prompts[0]) == provider.answer(
        names[0], prompts[0]
    )
    assert FakeProvider(marker_key="other").answer(names[0], prompts[0]) != provider.answer(names[0], prompts[0])
    # Without a secret, each process draws its own.
    assert FakeProvider().answer(names[0], prompts[0]) != FakeProvider().answer(names[0], prompts[0])


def test_the_fake_provider_reads_its_secret_from_llmduel_fake_secret(tmp_path, monkeypatch):
    from conftest import start_fake_provider, stop_process

    from service.fake_provider import FakeProvider

    monkeypatch.setenv("LLMDUEL_FAKE_SECRET", "shared between two processes")
    url, proc = start_fake_provider(tmp_path / "fake.log")
    try:
        r = httpx.post(
            url + "/v1/chat/completions",
            timeout=10,
            json={"model": "m-q2", "messages": [{"role": "user", "content": "hi there"}]},
        )
    finally:
        stop_process(proc)
    text = r.json()["choices"][0]["message"]["content"]
    assert text == FakeProvider(marker_key="shared between two processes").answer("m-q2", "hi there")
