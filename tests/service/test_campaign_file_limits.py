"""Hostile campaign files: alias bombs, deep nesting, non-finite numbers, YAML-only types, oversized
files and prompt files outside the campaign file's folder are refused with one line and exit 2
(service/campaign_files.py, ``llmduel campaign create``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO

from service import campaign_files
from service.campaign_files import CampaignFileError, read_campaign_file
from service.cli import main

HEAD = (
    "name: hostile\n"
    "models:\n"
    "  - {name: a, cost: 1, client: {kind: simulated}}\n"
    "  - {name: b, cost: 1, client: {kind: simulated}}\n"
    "judge: {kind: human}\n"
)


def _alias_bomb() -> str:
    """The "billion laughs" in YAML: nine levels of nine aliases, 9**9 strings once expanded."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, 9):
        lines.append(f"l{n}: &l{n} [" + ",".join([f"*l{n - 1}"] * 9) + "]")
    return "\n".join(lines) + "\nprompts: *l8\n"


def _create(capsys, path, *extra) -> tuple[int, str]:
    code = main(["campaign", "create", str(path), "--url", "http://127.0.0.1:9", *extra])
    return code, capsys.readouterr().err


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("llmduel: error: "), err
    return err


def test_the_alias_bomb_is_refused_in_one_line_with_exit_2(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb())
    assert len(bomb.read_bytes()) < 700
    # a subprocess with a generous guard: on the old parser this ran for minutes and took gigabytes
    r = subprocess.run(
        [sys.executable, "-m", "service.cli", "campaign", "create", str(bomb), "--url", "http://127.0.0.1:9"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert "aliases are expanded" in _one_line(r.stderr) and "bomb.yaml:" in r.stderr


def test_campaign_commands_start_without_the_mathematics(tmp_path):
    """``llmduel campaign ...`` registers only its own parser: numba and scipy (seconds of start-up
    on a busy machine) are not imported, so a hostile file is refused at once."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb())
    code = (
        "import sys\n"
        "from service.cli import main\n"
        f"rc = main(['campaign', 'create', {str(bomb)!r}])\n"
        "print(rc, sorted(m for m in ('numba', 'scipy', 'algorithms') if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.stdout.split("\n")[0] == "2 []", (r.stdout, r.stderr)
    assert "aliases are expanded" in _one_line(r.stderr)


@pytest.mark.parametrize(
    "name,text,words",
    [
        ("nan.yaml", HEAD + "budget: .nan\nprompts: [x]\n", "must be finite"),
        ("inf.yaml", HEAD + "budget: .inf\nprompts: [x]\n", "must be finite"),
        ("big.yaml", HEAD + "budget: 1e400\nprompts: [x]\n", "must be finite"),
        ("neg.yaml", HEAD + "budget: -.Inf\nprompts: [x]\n", "must be finite"),
        ("nan.json", '{"name": "x", "budget": NaN, "prompts": ["x"]}', "must be finite"),
        ("big.json", '{"name": "x", "budget": 1e400, "prompts": ["x"]}', "must be finite"),
        ("deep.yaml", "name: x\nprompts: " + "[" * 200 + "]" * 200 + "\n", "nested more than 64 levels"),
        ("many.yaml", "a: &a x\nb: [" + ",".join(["*a"] * 1001) + "]\nprompts: [x]\n", "more than 1000 YAML aliases"),
        ("self.yaml", "a: &a [*a]\nprompts: [x]\n", "refers to its own anchor"),
        ("bin.yaml", HEAD + "prompts: [!!binary aGVsbG8=]\n", "a bytes value"),
        ("set.yaml", HEAD + "prompts: [x]\nseed: !!set {1: null}\n", "a set value"),
        ("dup.yaml", HEAD + "budget: 1\nprompts: [x]\nbudget: 1000\n", "the key 'budget' is given twice"),
        (
            "dupdeep.yaml",
            HEAD + "prompts: [x]\nrun: {concurrency: 1, concurrency: 2}\n",
            "the key 'concurrency' is given twice",
        ),
    ],
)
def test_hostile_values_are_one_line_and_exit_2(tmp_path, capsys, name, text, words):
    path = tmp_path / name
    path.write_text(text)
    code, err = _create(capsys, path)
    assert code == 2, err
    assert words in _one_line(err) and name in err


def test_a_file_over_the_size_limit_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(campaign_files, "MAX_FILE_BYTES", 1000)
    path = tmp_path / "big.yaml"
    path.write_text(HEAD + "prompts: [" + ", ".join(["hello"] * 300) + "]\n")
    code, err = _create(capsys, path)
    assert code == 2 and "larger than" in _one_line(err)


def test_anchors_and_dates_still_read_as_before(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(
        "name: 2024-01-01\n"
        "sim: &sim {kind: simulated}\n"
        "models:\n  - {name: a, cost: 1e-6, client: *sim}\n  - {name: b, cost: 1, client: *sim}\n"
        "judge: {kind: human}\nprompts: [x]\n"
    )
    body = read_campaign_file(path)
    assert body["name"] == "2024-01-01"  # a date stays the text it was (no datetime, which JSON cannot carry)
    assert body["models"][0]["client"] == {"kind": "simulated"} and body["models"][0]["cost"] == 1e-6
    json.dumps(body, allow_nan=False)


@pytest.fixture
def layout(tmp_path):
    """campaigns/camp.yaml beside campaigns/data/q.jsonl; secret.txt one folder up."""
    folder = tmp_path / "campaigns"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "q.jsonl").write_text('{"id": "q1", "prompt": "inside"}\n')
    (tmp_path / "secret.txt").write_text("top secret line\n")
    return folder


def _camp(folder, file: str):
    path = folder / "camp.yaml"
    path.write_text(HEAD + f"prompts: {{file: {json.dumps(file)}}}\n")
    return path


@pytest.mark.parametrize("kind", ["parent", "absolute", "symlink"])
def test_prompt_files_outside_the_folder_are_refused(layout, capsys, kind):
    secret = layout.parent / "secret.txt"
    if kind == "parent":
        file = "../secret.txt"
    elif kind == "absolute":
        file = str(secret)
    else:
        (layout / "data" / "link.txt").symlink_to(secret)
        file = "data/link.txt"
    camp = _camp(layout, file)
    code, err = _create(capsys, camp)
    assert code == 2, err
    assert "--allow-outside-prompts" in _one_line(err) and "top secret" not in err
    with pytest.raises(CampaignFileError, match="allow-outside-prompts"):
        read_campaign_file(camp)
    # the explicit opt-in reads it
    assert read_campaign_file(camp, allow_outside_prompts=True)["prompts"] == ["top secret line"]


def test_the_cli_flag_lets_an_outside_prompt_file_through(layout, capsys):
    camp = _camp(layout, "../secret.txt")
    code, err = _create(capsys, camp, "--allow-outside-prompts")
    # the file was read; the command got as far as the (unreachable) server
    assert code == 2 and "cannot reach" in _one_line(err)


def test_prompt_files_inside_the_folder_resolve_against_it(layout, monkeypatch, tmp_path):
    camp = _camp(layout, "data/q.jsonl")
    monkeypatch.chdir(tmp_path)  # not the campaign file's folder
    assert read_campaign_file(camp)["prompts"] == [{"id": "q1", "prompt": "inside"}]
    # a relative path that leaves and re-enters the folder stays inside
    camp = _camp(layout, "../campaigns/data/q.jsonl")
    assert read_campaign_file(camp)["prompts"] == [{"id": "q1", "prompt": "inside"}]


@pytest.mark.parametrize(
    "judge, run, message",
    [
        ("{kind: human}", "{concurrency: 2}", "needs an automatic judge; this judge is human"),
        ("{kind: human}", "{concurrency: 0}", "needs an automatic judge"),
        ("{kind: simulated, preference: [[0.5, 0.6], [0.4, 0.5]]}", "{concurrency: 0}", "run.concurrency"),
        ("{kind: simulated, preference: [[0.5, 0.6], [0.4, 0.5]]}", "{max_duels: many}", "run.max_duels"),
    ],
)
def test_a_run_block_is_never_ignored(tmp_path, capsys, judge, run, message):
    """A ``run:`` block is checked whatever the judge: a bad value is one line and exit 2, and a
    human judge, which has no background run, refuses one (it was silently ignored)."""
    path = tmp_path / "run.yaml"
    path.write_text(HEAD.replace("judge: {kind: human}", f"judge: {judge}") + f"prompts: [hi]\nrun: {run}\n")
    code, err = _create(capsys, path)
    assert code == 2 and message in _one_line(err), err
