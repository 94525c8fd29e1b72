"""The batch clients: OpenAI's against the fake provider's batch routes; Anthropic's and Gemini's
against their published request and result shapes (respx stands in for the remote APIs)."""

import json

import httpx
import pytest
import respx

from service.clients import build_client, parse_client_config
from service.clients.base import ClientError
from service.clients.batch import CANCELLED, ENDED, EXPIRED, FAILED, RUNNING, BatchRequest
from service.clients.batch_anthropic import key_tag
from service.clients.batch_apis import build_batch_api
from service.fake_provider import create_fake_provider_app


def requests_for(cfg, prompts):
    client = build_client(cfg, model_name="m", fixed_cost=0.0)
    out = []
    for cid, p in prompts.items():
        url, _, body = client.build_request(p, None)
        out.append(BatchRequest(cid, url, body))
    return client, out


# ---------------------------------------------------------------- OpenAI (fake provider)
async def test_openai_batches_against_the_fake_provider():
    app = create_fake_provider_app({"good": 3.0}, marker_key="k", batch_failure_rate=0.3, seed=1)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        cfg = parse_client_config({"kind": "openai", "base_url": "http://fake.test/v1", "model": "good"})
        client, reqs = requests_for(cfg, {f"d{n}-a": f"question {n}" for n in range(12)})
        api = build_batch_api(cfg, http)
        assert await api.find("camp1-round1") is None
        bid = await api.submit(reqs, "camp1-round1")
        assert await api.find("camp1-round1") == bid
        assert await api.find("other") is None
        state = await api.poll(bid)
        assert state.status == ENDED and state.final
        res = await api.results(bid, [r.custom_id for r in reqs])
        assert set(res) == {r.custom_id for r in reqs}
        ok = [r for r in res.values() if r.error is None]
        failed = [r for r in res.values() if r.error is not None]
        assert ok and failed  # the seeded failure rate hits some lines
        first = next(r for r in reqs if res[r.custom_id].error is None)
        direct = (await http.post("http://fake.test/v1/chat/completions", json=first.body)).json()
        assert client.parse_response(res[first.custom_id].data)[0] == direct["choices"][0]["message"]["content"]
        for r in ok:
            text, tin, tout = client.parse_response(r.data)
            assert text.startswith("<<fake:") and tin > 0 and tout > 0
        assert all("injected batch failure" in r.error for r in failed)
        listed = (await http.get("http://fake.test/v1/batches")).json()["data"]
        assert [b["metadata"] for b in listed] == [{"llmduel_key": "camp1-round1"}]


async def test_openai_cancel_and_unknown_batch():
    app = create_fake_provider_app({}, batch_delay_s=3600.0)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        cfg = parse_client_config({"kind": "openai", "base_url": "http://fake.test/v1", "model": "x"})
        _, reqs = requests_for(cfg, {"a": "q"})
        api = build_batch_api(cfg, http)
        bid = await api.submit(reqs, "k")
        assert (await api.poll(bid)).status == RUNNING
        await api.cancel(bid)
        assert (await api.poll(bid)).status == CANCELLED
        res = await api.results(bid, ["a"])
        assert res["a"].error is not None and "no result" in res["a"].error
        with pytest.raises(ClientError) as exc:
            await api.poll("batch_nope")
        assert exc.value.status_code == 404


# ---------------------------------------------------------------- Anthropic (published shapes)
ANTHROPIC = "https://api.anthropic.com/v1/messages/batches"


def anthropic_batch(bid, status, **kw):
    return {
        "id": bid,
        "type": "message_batch",
        "processing_status": status,
        "request_counts": {"processing": 0, "succeeded": 2, "errored": 1, "canceled": 0, "expired": 1},
        "ended_at": None,
        "created_at": "2024-08-20T18:37:24.100435Z",
        "expires_at": "2024-08-21T18:37:24.100435Z",
        "cancel_initiated_at": None,
        "results_url": f"{ANTHROPIC}/{bid}/results" if status == "ended" else None,
        **kw,
    }


def anthropic_message(text):
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


@respx.mock
async def test_anthropic_batches_follow_the_published_shapes(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    cfg = parse_client_config({"kind": "anthropic", "model": "claude-x", "params": {"max_tokens": 64}})
    client, reqs = requests_for(cfg, {"d1-a": "one", "d2-a": "two", "d3-a": "three", "d4-a": "four"})
    create = respx.post(ANTHROPIC).mock(
        return_value=httpx.Response(200, json=anthropic_batch("msgbatch_1", "in_progress"))
    )
    tag = key_tag("c7-r2")
    # results in an order other than the requests'; an errored, an expired, and a stranger's line
    lines = [
        {"custom_id": f"{tag}-d3-a", "result": {"type": "succeeded", "message": anthropic_message("third")}},
        {
            "custom_id": f"{tag}-d2-a",
            "result": {
                "type": "errored",
                "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}},
            },
        },
        {"custom_id": f"{tag}-d1-a", "result": {"type": "succeeded", "message": anthropic_message("first")}},
        {"custom_id": f"{tag}-d4-a", "result": {"type": "expired"}},
        {"custom_id": "zzzz-d9-a", "result": {"type": "succeeded", "message": anthropic_message("no")}},
    ]
    respx.get(f"{ANTHROPIC}/msgbatch_1").mock(
        side_effect=[
            httpx.Response(200, json=anthropic_batch("msgbatch_1", "in_progress")),
            httpx.Response(200, json=anthropic_batch("msgbatch_1", "ended")),
            httpx.Response(200, json=anthropic_batch("msgbatch_1", "ended")),
        ]
    )
    respx.get(f"{ANTHROPIC}/msgbatch_1/results").mock(
        return_value=httpx.Response(200, text="".join(json.dumps(x) + "\n" for x in lines))
    )
    async with httpx.AsyncClient() as http:
        api = build_batch_api(cfg, http)
        assert await api.submit(reqs, "c7-r2") == "msgbatch_1"
        sent = json.loads(create.calls[0].request.content)
        assert create.calls[0].request.headers["x-api-key"] == "sk-ant-secret"
        assert create.calls[0].request.headers["anthropic-version"] == "2023-06-01"
        assert [r["custom_id"] for r in sent["requests"]] == [f"{tag}-d{n}-a" for n in (1, 2, 3, 4)]
        first = sent["requests"][0]["params"]
        assert first["model"] == "claude-x" and first["max_tokens"] == 64
        assert first["messages"] == [{"role": "user", "content": "one"}]
        assert (await api.poll("msgbatch_1")).status == RUNNING
        assert (await api.poll("msgbatch_1")).status == ENDED
        res = await api.results("msgbatch_1", ["d1-a", "d2-a", "d3-a", "d4-a"])
    assert client.parse_response(res["d1-a"].data) == ("first", 10, 5)
    assert client.parse_response(res["d3-a"].data)[0] == "third"
    assert "errored: bad" in res["d2-a"].error and "expired" in res["d4-a"].error
    assert "secret" not in json.dumps([r.error for r in res.values()])


@respx.mock
async def test_anthropic_find_and_custom_id_limits(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    cfg = parse_client_config({"kind": "anthropic", "model": "claude-x"})
    tag = key_tag("mine")
    respx.get(ANTHROPIC).mock(
        return_value=httpx.Response(
            200,
            json={
                "data": [anthropic_batch("msgbatch_a", "in_progress"), anthropic_batch("msgbatch_b", "ended")],
                "has_more": False,
                "first_id": "msgbatch_a",
                "last_id": "msgbatch_b",
            },
        )
    )
    respx.get(f"{ANTHROPIC}/msgbatch_b/results").mock(
        return_value=httpx.Response(200, text=json.dumps({"custom_id": f"{tag}-x", "result": {"type": "expired"}}))
    )
    async with httpx.AsyncClient() as http:
        api = build_batch_api(cfg, http)
        assert await api.find("mine") == "msgbatch_b"
        assert await api.find("theirs") is None
        with pytest.raises(ValueError):
            await api.submit([BatchRequest("has space", "", {})], "k")
        with pytest.raises(ValueError):
            await api.submit([BatchRequest("x" * 60, "", {})], "k")


# ---------------------------------------------------------------- Gemini (published shapes)
GEMINI = "https://generativelanguage.googleapis.com/v1beta"


def gemini_response(text):
    return {
        "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 3, "totalTokenCount": 10},
    }


def gemini_op(state, done=False, responses=None):
    op = {
        "name": "batches/abc123",
        "metadata": {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": "models/gemini-2.5-flash",
            "displayName": "c3-r1",
            "state": state,
        },
        "done": done,
    }
    if responses is not None:
        op["response"] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
            "inlinedResponses": {"inlinedResponses": responses},
        }
    return op


@respx.mock
async def test_gemini_batches_follow_the_published_shapes(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "g-secret")
    cfg = parse_client_config({"kind": "gemini", "model": "gemini-2.5-flash", "params": {"temperature": 0}})
    client, reqs = requests_for(cfg, {"d1-b": "one", "d2-b": "two", "d3-b": "three"})
    create = respx.post(f"{GEMINI}/models/gemini-2.5-flash:batchGenerateContent").mock(
        return_value=httpx.Response(200, json=gemini_op("BATCH_STATE_PENDING"))
    )
    # responses in request order, metadata not echoed back; one request failed
    responses = [
        {"response": gemini_response("uno")},
        {"error": {"code": 8, "message": "resource exhausted"}},
        {"response": gemini_response("tres")},
    ]
    respx.get(f"{GEMINI}/batches/abc123").mock(
        side_effect=[
            httpx.Response(200, json=gemini_op("BATCH_STATE_RUNNING")),
            httpx.Response(200, json=gemini_op("BATCH_STATE_SUCCEEDED", True, responses)),
            httpx.Response(200, json=gemini_op("BATCH_STATE_SUCCEEDED", True, responses)),
        ]
    )
    cancel = respx.post(f"{GEMINI}/batches/abc123:cancel").mock(return_value=httpx.Response(200, json={}))
    respx.get(f"{GEMINI}/batches").mock(
        return_value=httpx.Response(200, json={"operations": [gemini_op("BATCH_STATE_RUNNING")]})
    )
    async with httpx.AsyncClient() as http:
        api = build_batch_api(cfg, http)
        assert await api.submit(reqs, "c3-r1") == "batches/abc123"
        req = create.calls[0].request
        assert req.headers["x-goog-api-key"] == "g-secret"
        sent = json.loads(req.content)["batch"]
        assert sent["displayName"] == "c3-r1"
        items = sent["inputConfig"]["requests"]["requests"]
        assert [i["metadata"]["key"] for i in items] == ["d1-b", "d2-b", "d3-b"]
        assert items[0]["request"]["contents"] == [{"role": "user", "parts": [{"text": "one"}]}]
        assert items[0]["request"]["generationConfig"] == {"temperature": 0}
        assert (await api.poll("batches/abc123")).status == RUNNING
        assert (await api.poll("batches/abc123")).status == ENDED
        res = await api.results("batches/abc123", ["d1-b", "d2-b", "d3-b"])
        assert await api.find("c3-r1") == "batches/abc123"
        assert await api.find("nope") is None
        await api.cancel("batches/abc123")
    assert cancel.called
    assert client.parse_response(res["d1-b"].data) == ("uno", 7, 3)
    assert client.parse_response(res["d3-b"].data)[0] == "tres"
    assert "resource exhausted" in res["d2-b"].error


@respx.mock
async def test_gemini_states_and_http_errors(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "g-secret")
    cfg = parse_client_config({"kind": "gemini", "model": "gemini-2.5-flash"})
    route = respx.get(f"{GEMINI}/batches/x")
    async with httpx.AsyncClient() as http:
        api = build_batch_api(cfg, http)
        for state, want in (
            ("BATCH_STATE_FAILED", FAILED),
            ("BATCH_STATE_EXPIRED", EXPIRED),
            ("BATCH_STATE_CANCELLED", CANCELLED),
            ("BATCH_STATE_PENDING", RUNNING),
        ):
            route.mock(return_value=httpx.Response(200, json=gemini_op(state)))
            assert (await api.poll("x")).status == want
        route.mock(return_value=httpx.Response(500, text="boom g-secret"))
        with pytest.raises(ClientError) as exc:
            await api.poll("x")
        assert exc.value.retryable and "g-secret" not in exc.value.message
        # an expired batch with no output: every request comes back as an error, none dropped
        route.mock(return_value=httpx.Response(200, json=gemini_op("BATCH_STATE_EXPIRED", True)))
        res = await api.results("x", ["a", "b"])
        assert set(res) == {"a", "b"} and all(r.error for r in res.values())


@respx.mock
async def test_gemini_results_are_matched_on_their_keys_never_on_their_position(monkeypatch):
    """The responses carry the requests' ``metadata.key`` (the published InlinedResponse): out of order,
    they still reach their request; one without a key is left unmatched (sent again), never given the
    request at its position; without any key, a list as long as the requests is matched in order."""
    monkeypatch.setenv("GEMINI_API_KEY", "g-secret")
    cfg = parse_client_config({"kind": "gemini", "model": "gemini-2.5-flash"})
    ids = ["d1-b", "d2-b", "d3-b"]
    route = respx.get(f"{GEMINI}/batches/abc123")
    async with httpx.AsyncClient() as http:
        api = build_batch_api(cfg, http)
        keyed = [
            {"response": gemini_response("tres"), "metadata": {"key": "d3-b"}},
            {"response": gemini_response("uno"), "metadata": {"key": "d1-b"}},
            {"response": gemini_response("dos?")},  # no key: its position (d3-b) would be wrong
        ]
        route.mock(return_value=httpx.Response(200, json=gemini_op("BATCH_STATE_SUCCEEDED", True, keyed)))
        res = await api.results("batches/abc123", ids)
        assert res["d1-b"].data["candidates"][0]["content"]["parts"][0]["text"] == "uno"
        assert res["d3-b"].data["candidates"][0]["content"]["parts"][0]["text"] == "tres"
        assert res["d2-b"].data is None and "no result" in res["d2-b"].error
        unkeyed = [{"response": gemini_response(t)} for t in ("uno", "dos", "tres")]
        route.mock(return_value=httpx.Response(200, json=gemini_op("BATCH_STATE_SUCCEEDED", True, unkeyed)))
        res = await api.results("batches/abc123", ids)
        assert [res[c].data["candidates"][0]["content"]["parts"][0]["text"] for c in ids] == ["uno", "dos", "tres"]
        # no keys and a response missing: which one is unknown, so none is guessed
        route.mock(return_value=httpx.Response(200, json=gemini_op("BATCH_STATE_SUCCEEDED", True, unkeyed[:2])))
        res = await api.results("batches/abc123", ids)
        assert all(r.error is not None for r in res.values())


SECRET_ECHOES = "bad request for key sk-live-9f8e7d6c5b4a3f2e1d0c9b8a, api_key=hunter2hunter2 at https://u:pw@x.test"


@respx.mock
async def test_provider_error_text_in_batches_is_masked_like_other_provider_text(monkeypatch):
    """A provider echoing the key (or another secret) in a batch's or a request's error: the text kept
    and shown has it masked (service.redaction.excerpt), for each of the three batch APIs."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-9f8e7d6c5b4a3f2e1d0c9b8a")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-live-9f8e7d6c5b4a3f2e1d0c9b8a")
    monkeypatch.setenv("GEMINI_API_KEY", "sk-live-9f8e7d6c5b4a3f2e1d0c9b8a")
    secrets_shown = ("9f8e7d6c5b4a", "hunter2", ":pw@")
    oa = "https://api.openai.com/v1"
    respx.get(f"{oa}/batches/b1").mock(
        return_value=httpx.Response(
            200, json={"id": "b1", "status": "failed", "errors": {"data": [{"message": SECRET_ECHOES}]}}
        )
    )
    respx.get(f"{oa}/batches/b2").mock(
        return_value=httpx.Response(200, json={"id": "b2", "status": "completed", "error_file_id": "fe"})
    )
    line = {"custom_id": "a", "response": None, "error": {"code": "x", "message": SECRET_ECHOES}}
    respx.get(f"{oa}/files/fe/content").mock(return_value=httpx.Response(200, text=json.dumps(line)))
    respx.get(f"{ANTHROPIC}/m1").mock(return_value=httpx.Response(200, json=anthropic_batch("m1", "ended")))
    tag = key_tag("k")
    errored = {"type": "errored", "error": {"type": "error", "error": {"type": "x", "message": SECRET_ECHOES}}}
    respx.get(f"{ANTHROPIC}/m1/results").mock(
        return_value=httpx.Response(200, text=json.dumps({"custom_id": f"{tag}-a", "result": errored}))
    )
    failed = gemini_op("BATCH_STATE_FAILED", True)
    failed["error"] = {"code": 3, "message": SECRET_ECHOES}
    item = [{"error": {"code": 3, "message": SECRET_ECHOES}, "metadata": {"key": "a"}}]
    respx.get(f"{GEMINI}/batches/g1").mock(return_value=httpx.Response(200, json=failed))
    respx.get(f"{GEMINI}/batches/g2").mock(
        return_value=httpx.Response(200, json=gemini_op("BATCH_STATE_SUCCEEDED", True, item))
    )
    texts = []
    async with httpx.AsyncClient() as http:
        openai = build_batch_api(parse_client_config({"kind": "openai", "model": "gpt-x"}), http)
        texts += [(await openai.poll("b1")).error, (await openai.results("b2", ["a"]))["a"].error]
        anthropic = build_batch_api(parse_client_config({"kind": "anthropic", "model": "claude-x"}), http)
        texts.append((await anthropic.results("m1", ["a"]))["a"].error)
        gemini = build_batch_api(parse_client_config({"kind": "gemini", "model": "gemini-2.5-flash"}), http)
        texts += [(await gemini.poll("g1")).error, (await gemini.results("g2", ["a"]))["a"].error]
    assert len(texts) == 5
    for text in texts:
        assert text and "bad request for key" in text, texts
        assert not any(s in text for s in secrets_shown), text


async def test_simulated_models_have_no_batch_api():
    async with httpx.AsyncClient() as http:
        assert build_batch_api(parse_client_config({"kind": "simulated"}), http) is None


# ---------------------------------------------------------------- a hostile provider's endless files
async def test_a_response_past_the_cap_is_cut_off_as_it_streams_not_read_whole(monkeypatch):
    """A results file (or an error body) without end is an error after the cap, read no further."""
    import service.clients.batch as batch_module

    monkeypatch.setattr(batch_module, "MAX_RESULTS_BYTES", 1_000_000)
    streamed = {"content": 0, "error": 0}

    class Endless(httpx.AsyncByteStream):
        def __init__(self, which):
            self.which = which

        async def __aiter__(self):
            while streamed[self.which] < 40_000_000:
                streamed[self.which] += 65_536
                yield b'{"custom_id": "a", "pad": "' + b"x" * 65_500 + b'"}\n'

    def handler(request):
        if request.url.path.endswith("/files/f1/content"):
            return httpx.Response(200, stream=Endless("content"))
        if request.url.path.endswith("/batches/b1"):
            return httpx.Response(200, json={"id": "b1", "status": "completed", "output_file_id": "f1"})
        return httpx.Response(500, stream=Endless("error"))

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        cfg = parse_client_config({"kind": "openai", "base_url": "http://fake.test/v1", "model": "x"})
        api = build_batch_api(cfg, http)
        with pytest.raises(ClientError) as exc:
            await api.results("b1", ["a"])
        assert "larger than 1000000 bytes" in exc.value.message
        assert streamed["content"] <= 2_000_000  # stopped at the cap, not after 40 MB
        with pytest.raises(ClientError) as exc:
            await api.poll("b2")
        assert exc.value.status_code == 500 and exc.value.retryable
        assert streamed["error"] <= 200_000


def test_a_batch_answer_is_charged_at_the_batch_price_and_an_unusable_usage_figure_is_a_fault_not_a_failure():
    """A batch result becomes what the single call would have returned: its cost at the batch price; a usage
    figure that is not a whole number of tokens in range keeps the answer (the provider billed it) with the
    fault reported, which the ledger charges at its bound (as for a single call), instead of failing the call."""
    from service.clients import Completion, build_client, parse_client_config
    from service.clients.batch import BatchResult
    from service.cycle.batch_collector import Collector

    cfg = {
        "kind": "openai",
        "base_url": "http://fake.test/v1",
        "model": "m",
        "price": {"input_per_1m": 2, "output_per_1m": 2},
        "batch_price": {"input_per_1m": 1, "output_per_1m": 1},
    }
    client = build_client(parse_client_config(cfg), model_name="m")
    collector = Collector(None, None, 1, 1, "answers", 1.0, 10.0, None)  # type: ignore[arg-type]

    def result(usage):
        choice = {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}
        return BatchResult("r1", data={"choices": [choice], "usage": usage})

    ok = collector.completion(client, result({"prompt_tokens": 10, "completion_tokens": 5}))
    assert isinstance(ok, Completion) and ok.usage_fault is None
    assert ok.cost == pytest.approx(15 * 1e-6)  # 1 USD per million tokens: the batch price, not the list's 2
    bad = collector.completion(client, result({"prompt_tokens": 1e16, "completion_tokens": 5}))
    assert isinstance(bad, Completion) and bad.text == "hello"
    assert bad.usage_fault and "prompt_tokens" in bad.usage_fault and bad.input_tokens is None


def test_a_batch_answer_keeps_the_log_probabilities_a_judge_with_verdict_probabilities_asked_for():
    """A batch line's response carries the output tokens' log probabilities as the single call's does
    (``verdict_probabilities`` sends ``logprobs`` in the batch line's body too): the batch result keeps them,
    so a batch campaign's judge scores by the labels' probabilities, not silently by the bare label."""
    from service.clients import Completion, build_client, parse_client_config
    from service.clients.batch import BatchResult
    from service.cycle.batch_collector import Collector

    client = build_client(
        parse_client_config({"kind": "openai", "base_url": "http://fake.test/v1", "model": "j"}), model_name="j"
    )
    collector = Collector(None, None, 1, 1, "verdicts", 1.0, 10.0, None)  # type: ignore[arg-type]
    top = [{"token": "A", "logprob": -0.2}, {"token": "B", "logprob": -1.9}]
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": "[[A]]"},
        "finish_reason": "stop",
        "logprobs": {"content": [{"token": "A", "logprob": -0.2, "top_logprobs": top}]},
    }
    usage = {"prompt_tokens": 10, "completion_tokens": 5}
    got = collector.completion(client, BatchResult("r1", data={"choices": [choice], "usage": usage}))
    assert isinstance(got, Completion)
    assert got.logprobs == (("A", (("A", -0.2), ("B", -1.9))),)
    # a malformed optional part reads as absent, as for a single call (the answer stands)
    choice["logprobs"] = {"content": [{"token": "A", "top_logprobs": [{"token": "A"}]}]}
    again = collector.completion(client, BatchResult("r2", data={"choices": [choice], "usage": usage}))
    assert isinstance(again, Completion) and again.text == "[[A]]" and again.logprobs is None


def test_the_calls_of_a_batch_not_sent_fail_with_the_providers_error_said_once():
    from service.cycle.batch_collector import unsent

    err = unsent(ClientError("upload refused", 500, 3))
    assert str(err) == "batch not sent or not collected: upload refused | status 500 | 3 attempts"
    assert (err.status_code, err.attempts) == (500, 3)
    assert str(unsent(TimeoutError("slow"))) == "batch not sent or not collected: slow | 1 attempt"
