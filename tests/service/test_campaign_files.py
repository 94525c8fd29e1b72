"""Campaign files and prompt files (service/campaign_files.py): every format, and bad input named by file and line."""

from __future__ import annotations

import json

import pytest

from service.campaign_files import CampaignFileError, read_campaign_file, read_prompt_file
from service.prompts import normalize_prompt, render_turns


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_arena_hard_jsonl(tmp_path):
    lines = [
        {"question_id": "abc1", "category": "arena-hard-v0.1", "cluster": "x", "turns": [{"content": "Q one"}]},
        {"question_id": 7, "category": "math", "turns": [{"content": "T1"}, {"content": "T2"}]},
        {"uid": "u3", "category": "hard_prompt", "prompt": "v2 style"},
        {"id": "x4", "prompt": "plain", "reference": "ref"},
    ]
    p = write(
        tmp_path,
        "q.jsonl",
        "\n".join(json.dumps(x) for x in lines[:2]) + "\n\n" + "\n".join(json.dumps(x) for x in lines[2:]),
    )
    items = read_prompt_file(p)
    assert items == [
        {"id": "abc1", "turns": ["Q one"], "category": "arena-hard-v0.1"},
        {"id": "7", "turns": ["T1", "T2"], "category": "math"},
        {"id": "u3", "prompt": "v2 style", "category": "hard_prompt"},
        {"id": "x4", "prompt": "plain", "reference": "ref"},
    ]
    rows = [normalize_prompt(i) for i in items]
    assert rows[0] == {
        "text": "Q one",
        "qid": "abc1",
        "category": "arena-hard-v0.1",
        "turns": None,
        "reference": None,
        "images": None,
    }
    assert rows[1]["turns"] == ["T1", "T2"] and rows[1]["text"] == render_turns(["T1", "T2"])
    assert "T1" in rows[1]["text"] and "T2" in rows[1]["text"]
    assert normalize_prompt("just text")["text"] == "just text"


def test_csv_json_and_text(tmp_path):
    c = write(tmp_path, "q.csv", 'id,prompt,category\nq1,"Hello, world",greet\nq2,"multi\nline",\n')
    assert read_prompt_file(c) == [
        {"id": "q1", "prompt": "Hello, world", "category": "greet"},
        {"id": "q2", "prompt": "multi\nline"},
    ]
    j = write(tmp_path, "q.json", json.dumps(["a", {"id": "b", "prompt": "B"}]))
    assert read_prompt_file(j) == ["a", {"id": "b", "prompt": "B"}]
    t = write(tmp_path, "q.txt", "first prompt\nsecond line\n\n\nsecond prompt\n\n")
    assert read_prompt_file(t) == ["first prompt\nsecond line", "second prompt"]


@pytest.mark.parametrize(
    "name,text,where,words",
    [
        ("b.jsonl", '{"id": "a", "prompt": "x"}\n{not json}\n', "b.jsonl:2:", "not valid JSON"),
        ("b.jsonl", '{"id": "a", "prompt": "x"}\n\n{"id": "b"}\n', "b.jsonl:3:", "no 'prompt' or 'turns'"),
        ("b.jsonl", '{"id": "a", "turns": []}\n', "b.jsonl:1:", "'turns' must be a non-empty list"),
        ("b.jsonl", '{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', "b.jsonl:2:", "already used"),
        ("b.jsonl", "[1, 2]\n", "b.jsonl:1:", "expected a JSON object"),
        ("b.csv", "id,text\n1,hello\n", "b.csv:1:", "no 'prompt' column"),
        ("b.csv", "id,prompt\n1,hello\n2,\n", "b.csv:3:", "empty 'prompt'"),
        ("b.csv", "id,prompt\n1,hello,extra\n", "b.csv:2:", "more fields"),
        ("b.txt", "\n\n  \n", "b.txt", "no prompts"),
    ],
)
def test_bad_prompt_files(tmp_path, name, text, where, words):
    p = write(tmp_path, name, text)
    with pytest.raises(CampaignFileError) as exc:
        read_prompt_file(p)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(str(tmp_path / where.split(":")[0])) and where in msg
    assert words in msg


def test_bad_encoding_and_missing(tmp_path):
    p = tmp_path / "b.jsonl"
    p.write_bytes(b'{"prompt": "ok"}\n{"prompt": "\xff"}\n')
    with pytest.raises(CampaignFileError, match=r"b.jsonl:2: not valid UTF-8"):
        read_prompt_file(p)
    with pytest.raises(CampaignFileError, match="no such file"):
        read_prompt_file(tmp_path / "nope.jsonl")


def test_campaign_file_yaml_with_prompt_file(tmp_path):
    (tmp_path / "data").mkdir()
    write(tmp_path, "data/q.jsonl", '{"question_id": "q1", "turns": [{"content": "hi"}]}\n')
    camp = write(
        tmp_path,
        "camp.yaml",
        "name: demo\ndelta: 0.05\nmodels:\n  - {name: a, cost: 1, client: {kind: simulated}}\n"
        "  - {name: b, cost: 1, client: {kind: simulated}}\njudge: {kind: human}\nprompts: {file: data/q.jsonl}\n",
    )
    body = read_campaign_file(camp)
    assert body["name"] == "demo" and body["prompts"] == [{"id": "q1", "turns": ["hi"]}]
    assert body["models"][0] == {"name": "a", "cost": 1, "client": {"kind": "simulated"}}
    # the body is a valid API body
    from service.schemas import CampaignCreate

    assert CampaignCreate.model_validate(body).prompts[0].id == "q1"


@pytest.mark.parametrize(
    "text,words",
    [
        ("name: [unclosed\n", "camp.yaml:2: not valid YAML"),
        ("- a\n- b\n", "expected a mapping"),
        ("name: x\n", "no 'prompts'"),
        ("name: x\nprompts: {file: missing.jsonl}\n", "missing.jsonl: no such file"),
        ("name: x\nprompts: {path: q.jsonl}\n", "'prompts' must be a list or"),
        ("name: x\nprompts: [{id: 1}]\n", "prompts[0]: no 'prompt' or 'turns'"),
    ],
)
def test_bad_campaign_files(tmp_path, text, words):
    camp = write(tmp_path, "camp.yaml", text)
    with pytest.raises(CampaignFileError) as exc:
        read_campaign_file(camp)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_yaml_prices_without_a_dot_are_numbers(tmp_path):
    """``1e-6`` is a float in JSON and YAML 1.2; PyYAML's YAML 1.1 would read it as the string '1e-6'."""
    camp = write(
        tmp_path,
        "c.yaml",
        "name: p\nprompts: [x]\nmodels: []\n"
        "price_map: {house: {input_cost_per_token: 1e-6, output_cost_per_token: 2.5E-06}}\n"
        "budget: 1e3\ntags: [1e3x, '1e-6', 0x10, 1_000, .5, -2.5e2]\n",
    )
    body = read_campaign_file(camp)
    assert body["price_map"]["house"] == {"input_cost_per_token": 1e-6, "output_cost_per_token": 2.5e-6}
    assert body["budget"] == 1000.0 and isinstance(body["budget"], float)
    assert body["tags"] == ["1e3x", "1e-6", 16, 1000, 0.5, -250.0]  # infinities are refused (test_campaign_file_limits)
