"""The fake provider's OpenAI Batch API routes (files, batches, listing, cancel, delay, failures)."""

import json

import httpx
import pytest

from service.fake_batches import parse_multipart
from service.fake_provider import add_fake_provider_parser, create_fake_provider_app

BASE = "http://fake.test/v1"


def line(cid, model, text):
    body = {"model": model, "messages": [{"role": "user", "content": text}]}
    return {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body}


async def upload(http, lines):
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    r = await http.post(f"{BASE}/files", data={"purpose": "batch"}, files={"file": ("in.jsonl", data)})
    assert r.status_code == 200, r.text
    return r.json()


async def make_batch(http, lines, metadata=None):
    f = await upload(http, lines)
    r = await http.post(
        f"{BASE}/batches",
        json={
            "input_file_id": f["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "metadata": metadata or {},
        },
    )
    assert r.status_code == 200, r.text
    return r.json()


def jsonl(text):
    return [json.loads(x) for x in text.splitlines() if x.strip()]


@pytest.fixture
async def fake(request):
    options = getattr(request, "param", {})
    app = create_fake_provider_app({"good": 3.0, "bad": 1.0}, marker_key="k", **options)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        yield http, app


async def test_batch_answers_match_direct_calls_by_custom_id(fake):
    http, app = fake
    lines = [line(f"r{n}", "good" if n % 2 else "bad", f"question {n}") for n in range(5)]
    b = await make_batch(http, lines, {"llmduel_key": "c1-r1-answers"})
    assert b["status"] == "in_progress" and b["request_counts"]["total"] == 5
    assert b["metadata"] == {"llmduel_key": "c1-r1-answers"}
    done = (await http.get(f"{BASE}/batches/{b['id']}")).json()
    assert done["status"] == "completed"
    assert done["request_counts"] == {"total": 5, "completed": 5, "failed": 0}
    assert done["error_file_id"] is None
    out = jsonl((await http.get(f"{BASE}/files/{done['output_file_id']}/content")).text)
    assert [o["custom_id"] for o in out] != [x["custom_id"] for x in lines]  # not in input order
    by_id = {o["custom_id"]: o for o in out}
    for x in lines:  # the same text as a direct call of the same body
        direct = (await http.post(f"{BASE}/chat/completions", json=x["body"])).json()
        got = by_id[x["custom_id"]]["response"]
        assert got["status_code"] == 200
        assert got["body"]["choices"][0]["message"]["content"] == direct["choices"][0]["message"]["content"]
        assert got["body"]["usage"] == direct["usage"]
    reqs = (await http.get(f"{BASE}/requests")).json()["requests"]
    assert [r.get("batch") for r in reqs[:5]] == [b["id"]] * 5
    # the input file is readable too
    inp = jsonl((await http.get(f"{BASE}/files/{b['input_file_id']}/content")).text)
    assert inp == lines


@pytest.mark.parametrize("fake", [{"batch_delay_s": 3600.0}], indirect=True)
async def test_delay_keeps_batch_in_progress_and_cancel_ends_it(fake):
    http, app = fake
    b = await make_batch(http, [line("a", "good", "q")])
    again = (await http.get(f"{BASE}/batches/{b['id']}")).json()
    assert again["status"] == "in_progress" and again["output_file_id"] is None
    r = await http.post(f"{BASE}/batches/{b['id']}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert (await http.get(f"{BASE}/batches/{b['id']}")).json()["status"] == "cancelled"
    assert (await http.post(f"{BASE}/batches/{b['id']}/cancel")).status_code == 400
    assert (await http.get(f"{BASE}/requests")).json()["requests"] == []  # nothing answered


@pytest.mark.parametrize("fake", [{"batch_failure_rate": 0.5, "seed": 3}], indirect=True)
async def test_failures_go_to_the_error_file(fake):
    http, _ = fake
    lines = [line(f"r{n}", "good", f"q{n}") for n in range(40)]
    b = await make_batch(http, lines)
    done = (await http.get(f"{BASE}/batches/{b['id']}")).json()
    counts = done["request_counts"]
    assert counts["total"] == 40 and counts["completed"] + counts["failed"] == 40
    assert 5 < counts["failed"] < 35
    out = jsonl((await http.get(f"{BASE}/files/{done['output_file_id']}/content")).text)
    err = jsonl((await http.get(f"{BASE}/files/{done['error_file_id']}/content")).text)
    assert len(out) == counts["completed"] and len(err) == counts["failed"]
    assert {o["custom_id"] for o in out} | {e["custom_id"] for e in err} == {x["custom_id"] for x in lines}
    assert all(e["response"] is None and e["error"]["code"] == "server_error" for e in err)


async def test_listing_newest_first_with_pages(fake):
    http, _ = fake
    ids = [(await make_batch(http, [line("x", "good", f"q{n}")], {"k": str(n)}))["id"] for n in range(3)]
    page = (await http.get(f"{BASE}/batches", params={"limit": 2})).json()
    assert [b["id"] for b in page["data"]] == ids[::-1][:2] and page["has_more"] is True
    rest = (await http.get(f"{BASE}/batches", params={"limit": 2, "after": page["last_id"]})).json()
    assert [b["id"] for b in rest["data"]] == [ids[0]] and rest["has_more"] is False


async def test_bad_input_is_a_4xx(fake):
    http, _ = fake
    r = await http.post(f"{BASE}/files", data={"purpose": "fine-tune"}, files={"file": ("a", b"{}")})
    assert r.status_code == 400 and "purpose" in r.json()["error"]["message"]
    r = await http.post(f"{BASE}/files", json={"purpose": "batch"})
    assert r.status_code == 400
    dup = [line("same", "good", "a"), line("same", "good", "b")]
    f = await upload(http, dup)
    body = {"input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    r = await http.post(f"{BASE}/batches", json=body)
    assert r.status_code == 400 and "duplicate custom_id" in r.json()["error"]["message"]
    f = await upload(http, [line("a", "good", "x")])
    for bad in (
        {"input_file_id": "file-nope"},
        {"completion_window": "1h"},
        {"endpoint": "/v1/embeddings"},
        {"metadata": {f"k{n}": "v" for n in range(17)}},
        {"metadata": {"k": 3}},
    ):
        r = await http.post(f"{BASE}/batches", json={**body, "input_file_id": f["id"], **bad})
        assert r.status_code == 400, bad
    f = await upload(http, [{"custom_id": "a", "method": "GET", "url": "/v1/chat/completions", "body": {}}])
    r = await http.post(f"{BASE}/batches", json={**body, "input_file_id": f["id"]})
    assert r.status_code == 400
    assert (await http.get(f"{BASE}/batches/batch_nope")).status_code == 404
    assert (await http.get(f"{BASE}/files/file-nope/content")).status_code == 404
    assert (await http.get(f"{BASE}/batches", params={"limit": "x"})).status_code == 400
    r = await http.post(f"{BASE}/batches", content=b"not json")
    assert r.status_code == 400


async def test_a_refused_line_goes_to_the_error_file_with_its_response(fake):
    http, _ = fake
    b = await make_batch(http, [line("ok", "good", "q"), line("bad", "fault-500", "q")])
    done = (await http.get(f"{BASE}/batches/{b['id']}")).json()
    assert done["request_counts"] == {"total": 2, "completed": 1, "failed": 1}
    err = jsonl((await http.get(f"{BASE}/files/{done['error_file_id']}/content")).text)
    assert err[0]["custom_id"] == "bad" and err[0]["response"]["status_code"] == 500


async def test_batch_routes_need_the_key_when_the_provider_has_one():
    app = create_fake_provider_app({}, api_key="sekret")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
        assert (await http.get(f"{BASE}/batches")).status_code == 401
        ok = await http.get(f"{BASE}/batches", headers={"authorization": "Bearer sekret"})
        assert ok.status_code == 200 and ok.json()["data"] == []


def test_multipart_parser_and_cli_flags():
    import argparse

    form = parse_multipart(
        "multipart/form-data; boundary=XX",
        b'--XX\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        b'--XX\r\nContent-Disposition: form-data; name="file"; filename="f.jsonl"\r\n\r\n{"a":1}\n\r\n--XX--\r\n',
    )
    assert form["purpose"] == (None, b"batch") and form["file"] == ("f.jsonl", b'{"a":1}\n')
    with pytest.raises(ValueError):
        parse_multipart("application/json", b"{}")
    p = argparse.ArgumentParser()
    add_fake_provider_parser(p.add_subparsers())
    args = p.parse_args(["fake-provider", "--batch-delay", "2.5", "--batch-failure-rate", "0.1"])
    assert args.batch_delay == 2.5 and args.batch_failure_rate == 0.1
    with pytest.raises(ValueError):
        create_fake_provider_app({}, batch_failure_rate=1.5)
    with pytest.raises(ValueError):
        create_fake_provider_app({}, batch_delay_s=float("nan"))


async def test_an_images_batch_answers_each_line_as_the_images_route_does(fake):
    """``endpoint: /v1/images/generations`` (OpenAI's Batch API takes it): each line is answered by the images
    route (a PNG as b64_json), listed with its batch; a line whose url is not the batch's endpoint is a 400."""
    http, app = fake
    images = "/v1/images/generations"
    lines = [
        {"custom_id": f"i{n}", "method": "POST", "url": images, "body": {"model": "good", "prompt": f"a fox {n}"}}
        for n in range(3)
    ]
    f = await upload(http, lines)
    body = {"input_file_id": f["id"], "endpoint": images, "completion_window": "24h"}
    b = (await http.post(f"{BASE}/batches", json=body)).json()
    assert b["endpoint"] == images
    done = (await http.get(f"{BASE}/batches/{b['id']}")).json()
    assert done["status"] == "completed" and done["request_counts"]["completed"] == 3
    out = jsonl((await http.get(f"{BASE}/files/{done['output_file_id']}/content")).text)
    assert {x["custom_id"] for x in out} == {"i0", "i1", "i2"}
    assert all(x["response"]["body"]["data"][0]["b64_json"] for x in out)
    asked = app.state.provider.requests
    assert [q["kind"] for q in asked] == ["image"] * 3 and {q["batch"] for q in asked} == {b["id"]}
    mixed = await upload(http, [lines[0], line("c", "good", "q")])  # one endpoint per batch
    r = await http.post(f"{BASE}/batches", json={**body, "input_file_id": mixed["id"]})
    assert r.status_code == 400 and images in r.json()["error"]["message"]
