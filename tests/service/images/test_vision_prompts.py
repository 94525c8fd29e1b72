"""Prompts with images through the REST API: checks with a 422 and its reason, the store, and each
provider's own image form in the requests the clients send."""

from __future__ import annotations

import base64
import hashlib
import io
import json

import httpx
import respx
from PIL import Image, PngImagePlugin
from service_helpers import all_duels, campaign_body
from test_images import huge_png

from service.clients import build_client
from service.clients.config import parse_client_config
from service.clients.content import ImagePart, UserTurn


def png_bytes(color, size=(6, 4), text: dict | None = None) -> bytes:
    info = PngImagePlugin.PngInfo()
    for k, v in (text or {}).items():
        info.add_text(k, v)
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def data_url(raw: bytes, media="image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(raw).decode()}"


_noise = io.BytesIO()
Image.frombytes("L", (64, 64), bytes(range(256)) * 16).save(_noise, format="PNG")
NOISE = _noise.getvalue()
RED, BLUE = png_bytes((255, 0, 0)), png_bytes((0, 0, 255), text={"Author": "someone"})


def chat_reply(bodies):
    def answer(request):
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"choices": [{"message": {"content": "a red square"}}], "usage": {}})

    return answer


async def test_images_sent_as_openai_parts_and_named_by_hash(api, monkeypatch):
    from service.campaigns import draws

    monkeypatch.setattr(draws, "new_draw_key", lambda: "4d" * 32)  # the six duels draw both prompts
    bodies: list[dict] = []
    client = {"kind": "openai", "base_url": "http://provider.test/v1", "model": "x"}
    prompts = [
        {"id": "one", "prompt": "What colour is this?", "images": [data_url(RED)]},
        {"id": "two", "turns": [{"content": "Look.", "images": [data_url(BLUE)]}, "Which colour was it?"]},
    ]
    body = campaign_body(costs=(1.0, 1.0), clients=[client, client], judge={"kind": "human"}, prompts=prompts)
    with respx.mock(assert_all_called=False) as mock:
        mock.post("http://provider.test/v1/chat/completions").mock(side_effect=chat_reply(bodies))
        r = await api.post("/v1/campaigns", json=body)
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        for _ in range(6):
            assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
    first = {"type": "image_url", "image_url": {"url": data_url(RED)}}
    second = {"type": "image_url", "image_url": {"url": data_url(BLUE)}}
    single = [{"role": "user", "content": [{"type": "text", "text": "What colour is this?"}, first]}]
    multi = [
        {"role": "user", "content": [{"type": "text", "text": "Look."}, second]},
        {"role": "user", "content": "Which colour was it?"},
    ]
    seen = [b["messages"] for b in bodies]
    assert single in seen and multi in seen and all(m in (single, multi) for m in seen)
    duels = await all_duels(api, cid)
    shown = {d["question_id"]: d["prompt"] for d in duels}
    assert f"[image sha256:{hashlib.sha256(RED).hexdigest()}]" in shown["one"]
    assert f"[image sha256:{hashlib.sha256(BLUE).hexdigest()}]" in shown["two"]

    from service.images.store import get_image

    with api.app.state.db.read() as s:
        row = get_image(s, hashlib.sha256(BLUE).hexdigest())
        assert row is not None and bytes(row.data) == BLUE and b"someone" not in bytes(row.blind)


async def test_same_words_other_image_is_another_prompt(api):
    """The answer store's prompt hash covers the images: no answer reused across different images."""
    bodies: list[dict] = []
    client = {"kind": "openai", "base_url": "http://provider.test/v1", "model": "x"}
    with respx.mock(assert_all_called=False) as mock:
        mock.post("http://provider.test/v1/chat/completions").mock(side_effect=chat_reply(bodies))
        for raw in (RED, BLUE):
            prompts = [{"prompt": "Describe the image.", "images": [data_url(raw)]}]
            body = campaign_body(
                costs=(1.0, 1.0), clients=[client, client], judge={"kind": "human"}, prompts=prompts, answers="reuse"
            )
            r = await api.post("/v1/campaigns", json=body)
            assert r.status_code == 201, r.text
            assert (await api.post(f"/v1/campaigns/{r.json()['id']}/duels")).status_code == 201
    urls = [p["image_url"]["url"] for b in bodies for p in b["messages"][0]["content"] if p["type"] == "image_url"]
    assert data_url(RED) in urls and data_url(BLUE) in urls


async def test_bad_images_each_a_422_with_the_reason(api):
    svg = base64.b64encode(b'<svg xmlns="http://www.w3.org/2000/svg"/>').decode()
    jpeg = io.BytesIO()
    Image.new("RGB", (4, 4)).save(jpeg, format="JPEG")
    cases = [
        (data_url(NOISE[: len(NOISE) // 2]), "truncated"),
        (data_url(huge_png(50_000, 50_000)), "pixels"),
        ("data:image/svg+xml;base64," + svg, "unsupported data: URL type"),
        ("data:image/png;base64," + svg, "SVG is refused"),
        (data_url(jpeg.getvalue(), "image/png"), "the bytes are image/jpeg"),
        ("http://example.com/a.png", "remote image URLs are not fetched"),
    ]
    for url, reason in cases:
        r = await api.post("/v1/campaigns", json=campaign_body(prompts=[{"prompt": "p", "images": [url]}]))
        assert r.status_code == 422 and reason in r.text, (reason, r.text[:500])
    many = [data_url(RED)] * 9
    r = await api.post("/v1/campaigns", json=campaign_body(prompts=[{"prompt": "p", "images": many}]))
    assert r.status_code == 422 and "images" in r.text


def test_anthropic_and_gemini_forms():

    turn = UserTurn("What is it?", (ImagePart("image/png", RED),))
    b64 = base64.b64encode(RED).decode()
    anth = build_client(parse_client_config({"kind": "anthropic", "model": "claude-x"}), "m")
    _, _, body = anth.build_request("ignored", None, [turn, "And now?"])
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}},
                {"type": "text", "text": "What is it?"},
            ],
        },
        {"role": "user", "content": "And now?"},
    ]
    gem = build_client(parse_client_config({"kind": "gemini", "model": "gemini-x"}), "m")
    _, _, body = gem.build_request("ignored", None, [turn])
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "What is it?"}, {"inline_data": {"mime_type": "image/png", "data": b64}}]}
    ]


def test_campaign_file_images_relative_confined_and_checked(tmp_path):
    import pytest

    from service.campaign_files import CampaignFileError, read_campaign_file

    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "red.png").write_bytes(RED)
    (tmp_path / "bad.png").write_bytes(b"<svg/>")
    (tmp_path / "q.jsonl").write_text(
        json.dumps({"id": "a", "prompt": "Colour?", "images": ["pics/red.png"]})
        + "\n"
        + json.dumps({"id": "b", "turns": [{"content": "Look", "images": [data_url(BLUE)]}, "Again"]})
        + "\n"
    )
    camp = tmp_path / "c.yaml"
    camp.write_text("name: v\nmodels: []\nprompts: {file: q.jsonl}\n")
    body = read_campaign_file(camp)
    assert body["prompts"][0]["images"] == [data_url(RED)]
    assert body["prompts"][1]["turns"][0] == {"content": "Look", "images": [data_url(BLUE)]}
    outside = tmp_path.parent / f"{tmp_path.name}-outside.png"
    outside.write_bytes(RED)
    for ref, reason in [
        ("bad.png", "SVG is refused"),
        ("../" + outside.name, "inside this file's folder"),
        (str(outside), "inside this file's folder"),
        ("https://example.com/x.png", "remote image URLs are not fetched"),
        ("missing.png", "cannot read it"),
    ]:
        camp.write_text(f"name: v\nmodels: []\nprompts:\n  - {{prompt: p, images: ['{ref}']}}\n")
        with pytest.raises(CampaignFileError, match=reason):
            read_campaign_file(camp)
