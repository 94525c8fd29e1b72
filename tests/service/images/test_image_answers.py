"""Image models (``output: image``) end to end on the fake provider: its images route, the image store,
the vision judge and the certificate; the request forms of OpenAI's images API and Gemini's image output."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re

import httpx
import pytest
import respx
from PIL import Image
from service_helpers import all_duels, campaign_body

from service.clients import build_client, parse_client_config
from service.fake_images import read_marker

BASE = "http://fake.test/v1"
NAME = re.compile(r"\[image sha256:([0-9a-f]{64})\]")


def _image_model(name: str, model: str, cost: float, size: str = "64x64") -> dict:
    client = {"kind": "openai", "base_url": BASE, "model": model, "params": {"size": size}}
    return {"name": name, "cost": cost, "output": "image", "client": client}


def _body(tag: str, **extra) -> dict:
    body = {
        "name": f"text to image {tag}",
        "models": [
            _image_model("sketchy", f"{tag}-sketch-q1", 0.02, "48x48"),
            _image_model("painter", f"{tag}-paint-q4", 0.04),
            _image_model("middling", f"{tag}-mid-q2", 0.03),
        ],
        "prompts": ["A lighthouse at dusk.", "A red bicycle.", "A bowl of lemons.", "A fox in snow."],
        "judge": {"kind": "llm", "client": {"kind": "openai", "base_url": BASE, "model": "fake-judge"}, "cost": 0.001},
        "seed": 3,
        "delta": 0.1,
        "budget": 100.0,
    }
    body.update(extra)
    return body


async def test_text_to_image_campaign_certifies_the_best_image_model(api, fake):
    r = await api.post("/v1/campaigns", json=_body("t2i"))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(400):
        d = await api.post(f"/v1/campaigns/{cid}/duels")
        if d.status_code != 201:
            break
        assert d.json()["status"] == "judged", (d.json().get("error"), d.json().get("judge"))
    c = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert c["status"] == "certified" and c["winner"] == "painter", (c["status"], c.get("winner"))
    duels = await all_duels(api, cid)
    judged = [d for d in duels if d["status"] == "judged"]
    assert judged and all(NAME.fullmatch(d["answer_a"]) and NAME.fullmatch(d["answer_b"]) for d in judged)
    # each model is charged its price per image (a reused answer nothing), the judge its cost per call
    model_charges = {
        (ch["model_index"], ch["amount"])
        for d in duels
        for ch in d["charges"]
        if ch["kind"] == "model" and ch["amount"]
    }
    assert model_charges <= {(0, 0.02), (1, 0.04), (2, 0.03)}
    # the judge saw both images (the blind copies, as image parts), never the model names
    prov = fake.state.provider
    judged_requests = [q for q in prov.requests if q.get("kind") == "judge"]
    assert judged_requests and all(q["first"] and q["second"] for q in judged_requests)
    # the stored image holds the provider's text chunk; its blind copy does not, and has the same pixels
    from service.images.store import get_image

    h = NAME.fullmatch(judged[0]["answer_a"]).group(1)
    with api.app.state.db.read() as s:
        row = get_image(s, h)
        raw, blind = bytes(row.data), bytes(row.blind)
    assert b"fake provider, model" in raw and b"model" not in blind and b"tEXt" not in blind
    assert hashlib.sha256(raw).hexdigest() == h
    assert Image.open(io.BytesIO(raw)).convert("RGB").tobytes() == Image.open(io.BytesIO(blind)).tobytes()
    assert read_marker(blind) is not None
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"] is True
    # the judge bias report: the larger image (the stronger models draw at 64 x 64) won its duels with "sketchy"
    bias = (await api.get(f"/v1/campaigns/{cid}/judge-bias")).json()
    sized = bias["larger_image_wins"]
    assert sized["of"] > 0 and sized["rate"] == 1.0, bias
    assert bias["longer_wins"]["of"] == 0  # image answers' names are all the same length
    # the export writes every image the battle log names, as stored, by its hash
    export = (await api.get(f"/v1/campaigns/{cid}/export")).json()
    battles = [json.loads(line) for line in export["files"]["battles.jsonl"].splitlines()]
    named = {b[f"image_{side}"] for b in battles for side in "ab"}
    assert named and {f"images/{h}.png" for h in named} == set(export["images"])
    assert all(hashlib.sha256(base64.b64decode(b)).hexdigest() in n for n, b in export["images"].items())


async def test_image_answers_are_paid_once_under_reuse(api, fake):
    body = _body("reuse", answers="reuse", prompts=["A lighthouse at dusk."], prompt_sampling="with_replacement")
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(6):
        assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
    images = [q for q in fake.state.provider.requests if q.get("kind") == "image" and q["model"].startswith("reuse-")]
    assert len(images) == 3  # one image per model for the one prompt, reused in later duels
    duels = await all_duels(api, cid)
    paid = [ch for d in duels for ch in d["charges"] if ch["kind"] == "model" and ch["amount"]]
    assert len(paid) == 3


@pytest.mark.parametrize(
    "model,reason",
    [
        ({"client": {"kind": "anthropic", "model": "claude"}}, "output: image needs an openai client"),
        ({"client": {"kind": "openai", "base_url": BASE, "model": "x", "params": {"n": 2}}}, "params.n"),
        ({"client": {"kind": "openai", "base_url": BASE, "model": "no-such-image-model"}, "cost": None}, "per image"),
    ],
)
async def test_bad_image_models_are_422(api, model, reason):
    entry = {"name": "img", "cost": 0.01, "output": "image", **model}
    if entry["cost"] is None:
        entry.pop("cost")
    body = campaign_body(costs=(0.01, 0.01), judge={"kind": "human"})
    body["models"][0] = entry
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 422 and reason in r.text, r.text


def _png(color=(1, 2, 3)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(out, format="PNG")
    return out.getvalue()


async def test_openai_and_gemini_image_requests():
    png = _png()
    b64 = base64.b64encode(png).decode()
    seen: dict[str, dict] = {}

    def openai(request):
        seen["openai"] = json.loads(request.content)
        return httpx.Response(200, json={"created": 1, "data": [{"b64_json": b64}]})

    def gemini(request):
        seen["gemini"] = json.loads(request.content)
        parts = [{"text": "here"}, {"inlineData": {"mimeType": "image/png", "data": b64}}]
        return httpx.Response(200, json={"candidates": [{"content": {"parts": parts}}]})

    with respx.mock() as mock:
        mock.post("https://api.openai.com/v1/images/generations").mock(side_effect=openai)
        mock.post("https://g.test/v1beta/models/gemini-2.5-flash-image:generateContent").mock(side_effect=gemini)
        o = build_client(
            parse_client_config({"kind": "openai", "model": "dall-e-3", "params": {"size": "1024x1024"}}),
            "o",
            0.04,
            output="image",
        )
        g = build_client(
            parse_client_config(
                {
                    "kind": "gemini",
                    "base_url": "https://g.test/v1beta",
                    "model": "gemini-2.5-flash-image",
                    "api_key_env": None,
                }
            ),
            "g",
            0.039,
            output="image",
        )
        a, b = await o.complete("a cat"), await g.complete("a cat")
        await o.aclose()
        await g.aclose()
    name = f"[image sha256:{hashlib.sha256(png).hexdigest()}]"
    assert a.text == name and a.image == png and a.cost == 0.04
    assert b.text == name and b.image == png and b.cost == 0.039
    assert seen["openai"] == {
        "model": "dall-e-3",
        "prompt": "a cat",
        "response_format": "b64_json",
        "size": "1024x1024",
    }
    assert seen["gemini"]["generationConfig"]["responseModalities"] == ["TEXT", "IMAGE"]


async def test_a_broken_image_answer_fails_the_call():
    bad = base64.b64encode(_png()[:30]).decode()
    with respx.mock() as mock:
        mock.post("http://x.test/v1/images/generations").mock(
            return_value=httpx.Response(200, json={"data": [{"b64_json": bad}]})
        )
        c = build_client(
            parse_client_config({"kind": "openai", "base_url": "http://x.test/v1", "model": "m"}),
            "m",
            0.01,
            output="image",
        )
        with pytest.raises(Exception, match="the image is refused"):
            await c.complete("p")
        await c.aclose()


async def test_an_anthropic_judge_is_shown_the_images_in_its_own_form():
    """The judge's rendered template names the images; its provider receives them as image blocks (the
    blind copies, in order of appearance) and the text names them [image 1], [image 2], ..."""
    from service.images.judge import VisionJudgeClient
    from service.judging import build_judge, parse_judge_config

    q, a, b = _png((9, 9, 9)), _png((200, 0, 0)), _png((0, 200, 0))
    names = {hashlib.sha256(x).hexdigest(): x for x in (q, a, b)}
    h_q, h_a, h_b = list(names)
    bodies: list[dict] = []

    def reply(request):
        bodies.append(json.loads(request.content))
        return httpx.Response(
            200, json={"content": [{"type": "text", "text": "[[A]]"}], "usage": {"input_tokens": 9, "output_tokens": 2}}
        )

    cfg = parse_judge_config(
        {"kind": "llm", "orders": "one", "client": {"kind": "anthropic", "model": "claude", "api_key_env": None}}
    )
    judge = build_judge(cfg, ["x", "y"], images=lambda hs: {h: ("image/png", names[h]) for h in hs if h in names})
    assert isinstance(judge.client, VisionJudgeClient)
    with respx.mock() as mock:
        mock.post("https://api.anthropic.com/v1/messages").mock(side_effect=reply)
        verdict = await judge.judge(
            f"Draw it.\n[image sha256:{h_q}]",
            f"[image sha256:{h_a}]",
            f"[image sha256:{h_b}]",
            model_a="x",
            model_b="y",
        )
    assert verdict.choice == "a"
    blocks = bodies[0]["messages"][0]["content"]
    images = [bl for bl in blocks if bl["type"] == "image"]
    assert [base64.b64decode(bl["source"]["data"]) for bl in images] == [q, a, b]
    text = "".join(bl.get("text", "") for bl in blocks)
    assert "[image 1]" in text and "[image 3]" in text and "sha256" not in text
    assert text.index("[image 2]") < text.index("[image 3]")  # answer A's image before answer B's


def test_the_judge_bound_counts_the_images_it_is_shown():
    from service.images.tokens import worst_image_tokens
    from service.money.bounds import judge_bound_nusd

    client = {"kind": "openai", "model": "gpt-4o", "price": {"input_per_1m": 1.0, "output_per_1m": 1.0}}
    client["params"] = {"max_tokens": 10}
    judge = {"kind": "llm", "client": client, "orders": "one"}
    text = judge_bound_nusd(judge, "Draw it.")
    with_prompt_image = judge_bound_nusd(judge, "Draw it.\n[image sha256:" + "0" * 64 + "]")
    with_answers = judge_bound_nusd(judge, "Draw it.", image_answers=True)
    worst = worst_image_tokens(client)  # at 1 USD per 1M tokens a token costs 1,000 nano-USD
    assert with_prompt_image - text >= worst * 1000 and with_answers - text >= 2 * worst * 1000


async def test_an_image_model_replaced_by_another_stays_an_image_model(api, fake):
    r = await api.post("/v1/campaigns", json=_body("swap"))
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    for _ in range(3):
        assert (await api.post(f"/v1/campaigns/{cid}/duels")).status_code == 201
    new = _image_model("etcher", "swap-etch-q3", 0.025)
    r = await api.post(f"/v1/campaigns/{cid}/models/sketchy/replace", json={"model": new})
    assert r.status_code == 200, r.text
    assert r.json()["campaign"]["models"][3]["name"] == "etcher"
    seen = []
    for _ in range(12):
        d = await api.post(f"/v1/campaigns/{cid}/duels")
        if d.status_code != 201:
            break
        d = d.json()
        assert d["status"] == "judged", d.get("error")
        if 3 in (d["model_a"], d["model_b"]):
            seen.append(d["answer_a"] if d["model_a"] == 3 else d["answer_b"])
    assert seen and all(NAME.fullmatch(a) for a in seen)


async def test_an_annotator_reads_images_by_slot_never_by_hash(api, fake):
    """Reused answers carry the same hash in every duel, so a hash would tell an annotator that two duels
    show the same model's answer: annotators read ``[image a]``, ``[image b]`` and ``[image p1]`` (the
    slots of the voting page's image URLs); the admin keeps the hashes."""
    prompt_image = "data:image/png;base64," + base64.b64encode(_png()).decode()
    body = _body("slots", judge={"kind": "human"}, prompts=[{"prompt": "Paint this.", "images": [prompt_image]}])
    r = await api.post("/v1/campaigns", json=body)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    link = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "ann"})).json()
    ann = {"Authorization": f"Bearer {link['token']}"}
    mine = await api.post(f"/v1/campaigns/{cid}/duels", headers=ann)
    assert mine.status_code == 201, mine.text
    for view in (mine.json(), (await api.get(f"/v1/duels/{mine.json()['id']}", headers=ann)).json()):
        assert "sha256" not in str(view) and not re.search(r"[0-9a-f]{64}", str(view)), view
        assert (view["answer_a"], view["answer_b"]) == ("[image a]", "[image b]")
        assert "[image p1]" in view["prompt"]
    admin_view = (await api.get(f"/v1/duels/{mine.json()['id']}")).json()
    assert NAME.fullmatch(admin_view["answer_a"]) and NAME.search(admin_view["prompt"])
    token = link["token"]
    for slot in ("a", "b", "p1"):
        got = await api.get(f"/annotate/{token}/images/{mine.json()['id']}/{slot}")
        assert got.status_code == 200 and got.content.startswith(b"\x89PNG"), (slot, got.status_code)
    assert (await api.get(f"/annotate/{token}/images/{mine.json()['id']}/p2")).status_code == 404
