"""Key fragments echoed by a provider never reach the database, the API, the dashboard
or annotators (service/redaction.py: any run of >= 8 characters of a configured key)."""

from __future__ import annotations

import json
import secrets

import httpx
import respx
from conftest import ADMIN_KEY
from service_helpers import all_duels
from sqlalchemy import text

from service.redaction import MASK, MIN_FRAGMENT, configured_keys, redact, redact_json

KEY = "sk-test-" + secrets.token_urlsafe(30)


def leaked_fragments(blob: str, key: str = KEY) -> list[str]:
    return [key[i : i + MIN_FRAGMENT] for i in range(len(key) - MIN_FRAGMENT + 1) if key[i : i + MIN_FRAGMENT] in blob]


# ---------------------------------------------------------------- the rule
def test_fragments_of_eight_or_more_characters_are_masked():
    k = "sk-ABCDEFGHIJKLMNOP1234"
    assert redact(f"x {k} y", [k]) == f"x {MASK} y"
    assert redact("frag DEFGHIJK end", [k]) == f"frag {MASK} end"
    assert redact("frag DEFGHIJ end", [k]) == "frag DEFGHIJ end"  # 7 characters: kept
    assert redact("FGHIJKLMxx and NOP1234!", [k]) == f"{MASK}xx and NOP1234!"
    assert redact("sk-ABCDEFGH...KLMNOP1234", [k]) == f"{MASK}...{MASK}"
    assert redact("ABCDEFGHIJKL" * 3, [k]) == MASK  # repeated fragments form one run
    assert redact("a short key: abc, abcd", ["abc"]) == f"a short key: {MASK}, {MASK}d"
    assert redact_json({"raw": ["x CDEFGHIJKL y"], "CDEFGHIJ": 1}, [k]) == {"raw": [f"x {MASK} y"], MASK: 1}
    assert redact("nothing here", []) == "nothing here"


def test_configured_keys_are_found_at_any_depth(monkeypatch):
    monkeypatch.setenv("K_ONE", "first-secret-value")
    monkeypatch.setenv("K_TWO", "second-secret-value")
    models = [{"client": {"kind": "openai", "api_key_env": "K_ONE"}}, {"client": {"kind": "simulated"}}]
    judge = {"kind": "llm", "client": {"kind": "openai", "api_key_env": "K_TWO"}}
    assert configured_keys(models, judge, extra=("admin-key-123", None)) == (
        "admin-key-123",
        "first-secret-value",
        "second-secret-value",
    )


# ---------------------------------------------------------------- end to end
def _chat(content: str) -> httpx.Response:
    return httpx.Response(
        200,
        json={"choices": [{"message": {"content": content}}], "usage": {"prompt_tokens": 3, "completion_tokens": 5}},
    )


def _provider(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    model, prompt = body["model"], body["messages"][-1]["content"]
    if model == "echo":  # pieces of the key it received, cut and rearranged
        return _chat(f"You sent {KEY[5:17]}, then {KEY[-10:]}; also {KEY[12:20]}{KEY[:9]}!")
    if model == "fail":
        return httpx.Response(400, json={"error": {"message": f"bad key ...{KEY[4:16]}... check {KEY[-9:]}"}})
    if model == "judge":
        return _chat(f"Because {KEY[10:30]} looked better. [[A]]")
    return _chat(f"A plain answer to {prompt[:20]}.")


def _client(model: str) -> dict:
    return {"kind": "openai", "base_url": "http://echo.test/v1", "model": model, "api_key_env": "ECHO_KEY"}


def _body(name, models, judge=None) -> dict:
    return {
        "name": name,
        "models": [{"name": n, "cost": 0.001, "client": _client(m)} for n, m in models],
        "prompts": ["What is two plus two?"],
        "judge": judge or {"kind": "human"},
    }


async def test_echoed_key_fragments_are_masked_everywhere(api, db_url, monkeypatch):
    monkeypatch.setenv("ECHO_KEY", KEY)
    seen: list[str] = []
    with respx.mock(assert_all_called=False) as mock:
        mock.post("http://echo.test/v1/chat/completions").mock(side_effect=_provider)
        human = (await api.post("/v1/campaigns", json=_body("echo human", [("e1", "echo"), ("p", "plain")]))).json()
        failing = (await api.post("/v1/campaigns", json=_body("echo fail", [("e1", "echo"), ("f", "fail")]))).json()
        judge = {"kind": "llm", "client": _client("judge"), "cost": 0.0}
        judged = (
            await api.post("/v1/campaigns", json=_body("echo judge", [("e1", "echo"), ("p", "plain")], judge))
        ).json()
        cids = [human["id"], failing["id"], judged["id"]]

        token = (await api.post(f"/v1/campaigns/{cids[0]}/annotators", json={})).json()["token"]
        ann = {"Authorization": f"Bearer {token}"}
        r = await api.post(f"/v1/campaigns/{cids[0]}/duels", headers=ann)
        assert r.status_code == 201, r.text
        assert MASK in r.json()["answer_a"] + r.json()["answer_b"]  # the echo was there, masked
        seen.append(r.text)
        page = await api.get(f"/annotate/{token}")
        seen.append(page.text)
        r = await api.post(f"/v1/campaigns/{cids[1]}/duels")
        assert r.status_code == 201 and r.json()["status"] == "failed", r.text
        assert MASK in r.json()["error"], r.json()["error"]
        r = await api.post(f"/v1/campaigns/{cids[2]}/duels")
        assert r.status_code == 201 and r.json()["status"] == "judged", r.text
        assert MASK in json.dumps(r.json()["judge"])
        seen.append(r.text)

    for cid in cids:
        seen.append(json.dumps(await all_duels(api, cid)))
        seen.append((await api.get(f"/v1/campaigns/{cid}")).text)
        dash = await api.get(f"/campaigns/{cid}", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        assert dash.status_code == 200
        seen.append(dash.text)
    db = api.app.state.db
    with db.engine.connect() as conn:
        for table in ("duels", "campaigns", "charges"):
            seen.append(json.dumps([list(map(str, row)) for row in conn.execute(text(f"SELECT * FROM {table}"))]))
    blob = "\n".join(seen)
    assert "You sent" in blob and "bad key" in blob and "looked better" in blob  # the texts were stored and shown
    assert leaked_fragments(blob) == []
