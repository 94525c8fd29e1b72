"""The user's path end to end, through the command line as a user types it: a live server, the
fake provider as models and LLM judge, a campaign file with 50 arena-hard style questions,
``llmduel campaign create``, ``watch`` to the end, ``export``, and ``llmduel analyze`` on the
exported battle log naming the same winner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import httpx
import numpy as np
import pytest
from conftest import ADMIN_KEY, REPO, free_port, start_fake_provider, start_live_server, stop_live_server, stop_process

from algorithms.ranking import field_win_rates
from service.campaign_files import read_campaign_file
from service.prompts import normalize_prompt

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fake_provider(tmp_path_factory):
    log_path = tmp_path_factory.mktemp("fake") / "fake.log"
    url, proc = start_fake_provider(log_path)
    # it says where it listens
    assert f"{url}/v1" in log_path.read_text()
    yield url
    stop_process(proc)


@pytest.fixture(scope="module")
def price_map_file(tmp_path_factory):
    """The server's LLMDUEL_PRICE_MAP file (LiteLLM format); a test writes its entries before it creates a campaign."""
    path = tmp_path_factory.mktemp("prices") / "prices.json"
    path.write_text("{}")
    return path


@pytest.fixture(scope="module")
def service(db_url, tmp_path_factory, price_map_file):
    server = start_live_server(
        db_url,
        tmp_path_factory.mktemp("svc") / "server.log",
        extra_env={"LLMDUEL_PRICE_MAP": str(price_map_file)},
        workers=1,
    )
    yield server
    stop_live_server(server)


def llmduel(service, *args, process=False, timeout=300):
    """``llmduel ARGS`` against ``service``, as a user types it: its exit status, stdout and stderr.

    Run in this process (``service.cli.main`` on the same argv, with the environment, stdout and stderr of a
    fresh ``llmduel``: what a warning or a log record would add to stderr is there too), which spares the
    ~55 commands of each backend a Python start each; ``process=True`` runs the real command instead."""
    env = {"LLMDUEL_URL": service.url, "LLMDUEL_API_KEY": ADMIN_KEY}
    if process:
        return subprocess.run(
            [sys.executable, "-m", "service.cli", *args],
            cwd=REPO,
            env=dict(os.environ, **env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    return _in_process(list(args), env)


def _in_process(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    import contextlib
    import io
    import logging
    import warnings
    from unittest import mock

    from service.cli import main

    out, err = io.StringIO(), io.StringIO()
    to_stderr = logging.StreamHandler(err)  # a fresh process prints WARNING and above on stderr (logging.lastResort)
    to_stderr.setLevel(logging.WARNING)
    root = logging.getLogger()
    root.addHandler(to_stderr)
    try:
        with (
            mock.patch.dict(os.environ, env),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            warnings.catch_warnings(),
        ):
            # the warnings a fresh process shows (Python's default filters), written on its stderr
            warnings.resetwarnings()
            warnings.simplefilter("default")
            for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.simplefilter("ignore", category)
            warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: err.write(
                warnings.formatwarning(message, category, filename, lineno, line)
            )
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's usage errors
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if exc.code is not None and not isinstance(exc.code, int):
                    print(exc.code, file=sys.stderr)
    finally:
        root.removeHandler(to_stderr)
    return subprocess.CompletedProcess(["llmduel", *argv], code, out.getvalue(), err.getvalue())


def write_campaign(tmp_path, fake_url: str) -> str:
    questions = []
    for n in range(50):
        turns = [{"content": f"Question {n}: explain topic {n} carefully."}]
        if n % 10 == 0:
            turns.append({"content": f"Follow-up to {n}: now give an example."})
        questions.append(
            {"question_id": f"{n:04x}deadbeef", "category": "arena-hard-v0.1", "cluster": f"c{n % 3}", "turns": turns}
        )
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "question.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    client = "{kind: openai, base_url: '" + fake_url + "/v1', model: %s}"
    (tmp_path / "campaign.yaml").write_text(
        "name: arena-hard style e2e\n"
        "delta: 0.05\n"
        "seed: 5\n"
        "models:\n"
        f"  - {{name: small, cost: 1, client: {client % 'small-q1'}}}\n"
        f"  - {{name: large, cost: 3, client: {client % 'large-q4'}}}\n"
        f"  - {{name: mid, cost: 2, client: {client % 'mid-q2'}}}\n"
        f"judge: {{kind: llm, cost: 0.5, client: {client % 'judge'}}}\n"
        "budget: 100000\n"
        "prompts: {file: data/question.jsonl}\n"
        "run: {concurrency: 4}\n"
    )
    return str(tmp_path / "campaign.yaml")


def test_campaign_file_to_exported_result(service, fake_provider, tmp_path):
    camp = write_campaign(tmp_path, fake_provider)

    r = llmduel(service, "campaign", "create", camp, "--json", process=True)  # the real command, once
    assert r.returncode == 0, r.stderr
    created = json.loads(r.stdout)
    cid = created["id"]
    assert created["n_prompts"] == 50 and created["run_started"] is True

    r = llmduel(service, "campaign", "watch", str(cid), "--interval", "0.3", "--every", "1")
    assert r.returncode == 0, r.stderr
    verdict = r.stdout.strip().splitlines()[-1]
    assert verdict.startswith("certified: large beats every other model"), r.stdout
    progress = [line for line in r.stderr.splitlines() if line.startswith("[")]
    assert progress and "certified 2/2 pairs" in progress[-1] and "leader" in progress[-1]  # periodic lines, not a tty

    r = llmduel(service, "campaign", "show", str(cid), "--json")
    view = json.loads(r.stdout)
    assert view["status"] == "certified" and view["winner"] == "large"
    r = llmduel(service, "campaign", "list")
    assert r.returncode == 0 and f"{cid}" in r.stdout and "certified" in r.stdout
    r = llmduel(service, "campaign", "forecast", str(cid), "--trials", "12", "--json")
    assert r.returncode == 0, r.stderr
    pilot = json.loads(r.stdout)
    assert pilot["basis"] == "pilot" and pilot["requested_trials"] == 12  # the flag reaches the server
    r = llmduel(service, "campaign", "forecast", str(cid), "--trials", "12")
    assert r.returncode == 0 and "median" in r.stdout, r.stdout
    r = llmduel(service, "campaign", "forecast", str(cid), "--trials", "5")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr

    out = tmp_path / "result"
    r = llmduel(service, "campaign", "export", str(cid), "--out", str(out))
    assert r.returncode == 0, r.stderr
    for name in ("certificate.json", "battles.jsonl", "matrix.csv", "ranking.csv", "ranking.json"):
        assert (out / name).is_file(), name
    cert = json.loads((out / "certificate.json").read_text())
    assert cert["winner"] == "large" and cert["duels"] == view["duels"] and cert["ended_at"]
    battles = [json.loads(line) for line in (out / "battles.jsonl").read_text().splitlines()]
    assert len(battles) == view["duels"]
    assert {b["category"] for b in battles} == {"arena-hard-v0.1"}
    assert all(b["question_id"].endswith("deadbeef") for b in battles)
    assert all(b["winner"] in ("model_a", "model_b", "tie", "tie (bothbad)") for b in battles)
    assert json.loads((out / "ranking.json").read_text())[0]["model"] == "large"
    # the audit trail: every answer (arena-hard's model_answer layout) and every judge call
    assert {p.name for p in (out / "model_answer").iterdir()} == {"small.jsonl", "large.jsonl", "mid.jsonl"}
    judgments = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert all(j["label"] for j in judgments)
    # the default orders: auto reads each duel in both orders (two calls) or in one
    per_duel = Counter(j["duel_id"] for j in judgments)
    assert len(per_duel) == view["duels"] and set(per_duel.values()) <= {1, 2}
    assert list(per_duel.values()).count(2) >= 8  # it starts in both orders
    # imported back into the same campaign: every answer is already stored, nothing new
    r = llmduel(service, "campaign", "import-answers", str(cid), str(out / "model_answer"))
    assert r.returncode == 0, r.stderr
    lines = sorted(r.stdout.splitlines())
    assert len(lines) == 3 and all(" 0 imported, " in line and " 0 with a question id" in line for line in lines), lines
    r = llmduel(service, "campaign", "import-answers", str(cid), str(out / "nothing-here"))
    assert r.returncode == 2 and "no such file or folder" in r.stderr and len(r.stderr.strip().splitlines()) == 1

    r = llmduel(service, "analyze", str(out / "battles.jsonl"), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["condorcet_winner"] == "large"

    # the dashboard's replay check agrees with the stored state after a concurrent run
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as client:
        assert client.get(f"/v1/campaigns/{cid}/replay").json()["ok"] is True


# Per-token prices (USD per token, LiteLLM's format) of the priced case's models: two from the campaign
# file's price_map, one from the server's LLMDUEL_PRICE_MAP file (whose entry for "large" the campaign's wins over).
MAP_PRICES = {"small": (1e-6, 2e-6), "large": (3e-6, 9e-6)}
FILE_PRICES = {"mid": (2e-6, 4e-6), "large": (3e-4, 9e-4)}
JUDGE_CALL_COST = 0.001
STRENGTH_SCORES = {"A>>B": 1.0, "A>B": 0.75, "A=B": 0.5, "B>A": 0.25, "B>>A": 0.0}


def _entry(price: tuple[float, float]) -> dict:
    return {"input_cost_per_token": price[0], "output_cost_per_token": price[1], "max_output_tokens": 4096}


def write_priced_campaign(tmp_path, fake_url: str, tag: str) -> str:
    """The same 50 questions; models with no cost (priced from the maps), an arena-hard style judge.

    Qualities 1, 1.5 and 2.5: large beats small by 2x or more (a strong verdict) and the
    other pairs by less (a weak one), so the duel log carries graded scores."""
    write_campaign(tmp_path, fake_url)  # the question file
    names = {"small": f"small-{tag}-q1", "mid": f"mid-{tag}-q1.5", "large": f"large-{tag}-q2.5"}
    price_map = {names[m]: _entry(p) for m, p in MAP_PRICES.items()}
    client = "{kind: openai, base_url: '" + fake_url + "/v1', model: %s}"
    verdicts = {"a": "[[A>B]]", "b": "[[B>A]]", "tie": "[[A=B]]", "a_strong": "[[A>>B]]", "b_strong": "[[B>>A]]"}
    (tmp_path / "priced.yaml").write_text(
        f"name: priced arena-hard style e2e {tag}\n"
        "delta: 0.05\n"
        "seed: 5\n"
        "models:\n"
        f"  - {{name: small, client: {client % names['small']}}}\n"
        f"  - {{name: large, client: {client % names['large']}}}\n"
        f"  - {{name: mid, client: {client % names['mid']}}}\n"
        "expected_output_tokens: 50\n"
        f"price_map: {json.dumps(price_map)}\n"
        "judge:\n"
        "  kind: llm\n"
        f"  cost: {JUDGE_CALL_COST}\n"
        "  both_orders: true\n"
        "  combine: consistent\n"
        "  client:\n"
        "    kind: openai\n"
        f"    base_url: '{fake_url}/v1'\n"
        f"    model: judge-{tag}\n"
        f"    params: {{temperature: 0, fake_verdicts: {json.dumps(verdicts)}}}\n"
        "  system_prompt: |\n"
        "    You compare two replies to the same user request. Finish with exactly one verdict label:\n"
        "    [[A>>B]] A is much better, [[A>B]] A is better, [[A=B]] about the same,\n"
        "    [[B>A]] B is better, [[B>>A]] B is much better.\n"
        "  prompt_template: |\n"
        "    <|User request|>\n"
        "    {question}\n"
        "\n"
        "    <|Reference answer (may be empty)|>\n"
        "    {reference}\n"
        "\n"
        "    <|Reply A|>\n"
        "    {answer_a}\n"
        "    <|End of reply A|>\n"
        "\n"
        "    <|Reply B|>\n"
        "    {answer_b}\n"
        "    <|End of reply B|>\n"
        "  verdict_patterns:\n"
        "    regex: ['\\[\\[([AB<>=]+)\\]\\]', '\\[([AB<>=]+)\\]']\n"
        "    ignore_case: true\n"
        f"    scores: {json.dumps(STRENGTH_SCORES)}\n"
        "budget: 100000\n"
        "prompts: {file: data/question.jsonl}\n"
        "run: {concurrency: 4}\n"
    )
    return str(tmp_path / "priced.yaml"), names


def _duel_log(client: httpx.Client, cid: int) -> list[dict]:
    duels: list[dict] = []
    while True:
        page = client.get(f"/v1/campaigns/{cid}/duels", params={"limit": 1000, "offset": len(duels)}).json()
        duels += page["items"]
        if not page["items"] or len(duels) >= page["total"]:
            return duels


def test_priced_from_the_maps_with_an_arena_hard_judge(service, fake_provider, price_map_file, tmp_path):
    tag = os.urandom(4).hex()
    camp, names = write_priced_campaign(tmp_path, fake_provider, tag)
    price_map_file.write_text(
        json.dumps({f"{m}-{tag}-q{q}": _entry(FILE_PRICES[m]) for m, q in (("mid", "1.5"), ("large", "2.5"))})
    )
    prices = {names[m]: p for m, p in {**FILE_PRICES, **MAP_PRICES}.items()}  # the campaign's map wins

    r = llmduel(service, "campaign", "create", camp, "--json")
    assert r.returncode == 0, r.stderr
    created = json.loads(r.stdout)
    cid = created["id"]
    by_name = {m["name"]: m for m in created["models"]}
    texts = [normalize_prompt(p)["text"] for p in read_campaign_file(camp)["prompts"]]
    input_tokens = sum(map(len, texts)) / len(texts) / 4  # 4 characters per token (docs/service.md, Pricing)
    for name, m in by_name.items():
        inp, out = prices[names[name]]
        assert m["cost_source"] == "derived", m
        assert m["price"]["source"] == ("file" if name == "mid" else "price_map") and m["price"]["key"] == names[name]
        assert m["price"]["input_per_1m"] == pytest.approx(inp * 1e6) and m["expected_output_tokens"] == 50
        expected = input_tokens * inp + 50 * out
        assert m["expected_input_tokens"] == pytest.approx(input_tokens, abs=0.05)
        assert m["cost"] == pytest.approx(expected, rel=1e-9) and m["derived_cost"] == pytest.approx(expected)
    assert by_name["small"]["cost"] < by_name["mid"]["cost"] < by_name["large"]["cost"]

    r = llmduel(service, "campaign", "watch", str(cid), "--interval", "0.3", "--every", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("certified: large beats every other model"), r.stdout

    r = llmduel(service, "campaign", "show", str(cid), "--json")
    view = json.loads(r.stdout)
    assert view["status"] == "certified" and view["winner"] == "large"
    assert all(m["cost_source"] == "derived" for m in view["models"])
    # the text view names the derived costs beside the observed ones
    text = llmduel(service, "campaign", "show", str(cid)).stdout
    for m in view["models"]:
        assert any(line.split()[:1] == [m["name"]] and "derived" in line for line in text.splitlines()), text

    # every answer request the provider served is charged at the map's price, and nothing else is
    served = httpx.get(fake_provider + "/v1/requests").json()["requests"]
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as client:
        duels = _duel_log(client, cid)
    charged: dict[int, list[float]] = {}
    for d in duels:
        for ch in d["charges"] or []:
            if ch["kind"] == "model" and not ch["reused"]:
                charged.setdefault(ch["model_index"], []).append(ch["amount"])
    model_spend = 0.0
    for m in view["models"]:
        inp, out = prices[names[m["name"]]]
        mine = [q for q in served if q["model"] == names[m["name"]]]
        assert mine and all(q["kind"] == "answer" for q in mine)
        bill = sum(q["prompt_tokens"] * inp + q["completion_tokens"] * out for q in mine)
        assert m["calls"] == len(mine) == len(charged[m["index"]]), (m, len(mine))
        assert sum(charged[m["index"]]) == pytest.approx(bill, rel=1e-6)
        assert m["calls"] * m["observed_cost"] == pytest.approx(bill, rel=1e-6)
        model_spend += bill
    judged = [q for q in served if q["model"] == f"judge-{tag}"]
    assert judged and all(q["kind"] == "judge" for q in judged)
    assert view["judge_spend"] == pytest.approx(len(judged) * JUDGE_CALL_COST, rel=1e-6)
    assert view["spend"] == pytest.approx(model_spend + len(judged) * JUDGE_CALL_COST, rel=1e-6)
    # the expected output tokens fit the fake answers: no model's mean charge is 2x off its derived cost
    assert view["cost_warnings"] == [], view["cost_warnings"]

    # the judge's replies were read with their strengths: graded scores in the duel log
    scores = [d["score"] for d in duels if d["counted"]]
    assert set(scores) <= set(STRENGTH_SCORES.values()), sorted(set(scores))
    assert {0.25, 0.75} & set(scores) and {0.0, 1.0} & set(scores), sorted(set(scores))
    labels = {c.get("parsed") for d in duels for c in ((d["judge"] or {}).get("calls") or [])}
    assert {"A>>B", "B>>A"} & labels and {"A>B", "B>A"} & labels, labels

    out = tmp_path / "priced-result"
    r = llmduel(service, "campaign", "export", str(cid), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "certificate.json").read_text())["winner"] == "large"
    # the exported ranking's observed cost is the view's: the mean charge of the paid calls
    for row in json.loads((out / "ranking.json").read_text()):
        m = next(m for m in view["models"] if m["name"] == row["model"])
        assert row["calls"] == m["calls"] and row["observed_cost_per_query"] == pytest.approx(
            m["observed_cost"], abs=1e-9
        )  # 9 decimals
        assert row["cost_per_query"] == m["cost"]
    # the ranking counts the graded scores as the certificate does (0.75, not 1)
    L = len(view["models"])
    W, N = np.zeros((L, L)), np.zeros((L, L))
    for d in duels:
        if d["counted"] and d["score"] is not None:
            i, j = min(d["model_a"], d["model_b"]), max(d["model_a"], d["model_b"])
            W[i, j], W[j, i] = W[i, j] + d["score"], W[j, i] + 1.0 - d["score"]
            N[i, j], N[j, i] = N[i, j] + 1, N[j, i] + 1
    rates = field_win_rates(W, N)
    for row in json.loads((out / "ranking.json").read_text()):
        m = next(m for m in view["models"] if m["name"] == row["model"])
        assert row["win_rate"] == pytest.approx(rates[m["index"]], abs=1e-4), (row, rates)
    r = llmduel(service, "analyze", str(out / "battles.jsonl"), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["condorcet_winner"] == "large"


def test_show_prints_observed_costs_and_the_cost_warning(service, fake_provider, tmp_path):
    """A fake-provider model charged per token about 3x the cost it is configured with: ``campaign show``
    prints each model's cost beside its observed mean charge and calls, and the campaign's warning."""
    tag = os.urandom(4).hex()
    # 0.001 USD per output token; a fake answer has 33 to 68 tokens, so a call costs 0.03 to 0.07 USD
    client = (
        "{kind: openai, base_url: '" + fake_provider + "/v1', model: under-" + tag + ", "
        "price: {input_per_1m: 0, output_per_1m: 1000}}"
    )
    (tmp_path / "under.yaml").write_text(
        f"name: underpriced {tag}\n"
        "seed: 3\n"
        "models:\n"
        f"  - {{name: under, cost: 0.016, client: {client}}}\n"
        "  - {name: sim1, cost: 1, client: {kind: simulated}}\n"
        "  - {name: sim2, cost: 1, client: {kind: simulated}}\n"
        "judge: {kind: simulated, preference: [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]}\n"
        "max_duels: 120\n"
        "answers: fresh\n"
        f"prompts: {json.dumps([f'question {n} of {tag}' for n in range(30)])}\n"
    )
    r = llmduel(service, "campaign", "create", str(tmp_path / "under.yaml"), "--json")
    assert r.returncode == 0, r.stderr
    cid = str(json.loads(r.stdout)["id"])
    r = llmduel(service, "campaign", "watch", cid, "--interval", "0.2")
    assert r.returncode == 0 and r.stdout.startswith("not certified: max_duels (120) reached"), (r.stdout, r.stderr)

    view = json.loads(llmduel(service, "campaign", "show", cid, "--json").stdout)
    under = view["models"][0]
    assert under["calls"] >= 10 and 2 < under["observed_cost"] / under["cost"] < 5, under
    assert len(view["cost_warnings"]) == 1 and view["cost_warnings"][0] == under["cost_warning"]
    assert "'under'" in under["cost_warning"] and "times the expected cost" in under["cost_warning"]

    r = llmduel(service, "campaign", "show", cid)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(line for line in lines if line.split()[:2] == ["models", "model"])
    assert "cost/query" in header and "observed/query" in header and "calls" in header
    row = next(line for line in lines if line.split()[:1] == ["under"]).split()
    assert float(row[1]) == pytest.approx(0.016) and row[2] == "configured"
    assert float(row[3]) == pytest.approx(under["observed_cost"], rel=1e-5) and int(row[4]) == under["calls"]
    sims = [line.split() for line in lines if line.split()[:1] in (["sim1"], ["sim2"])]
    # simulated models are charged their configured cost: observed as configured, no warning mark
    assert len(sims) == 2 and all(
        s[1:4] == ["1", "configured", "1"] and int(s[4]) >= 1 and s[5:] == ["per_call"] for s in sims
    )
    assert row[5:] == ["per_token", "!"]  # charged per token at its client's price
    assert f"  warning    {under['cost_warning']}" in lines


def test_cli_errors_are_one_line(service, tmp_path):
    bad = tmp_path / "campaign.yaml"
    (tmp_path / "q.jsonl").write_text('{"question_id": "a", "turns": [{"content": "x"}]}\n{oops\n')
    bad.write_text("name: x\nprompts: {file: q.jsonl}\n")
    r = llmduel(service, "campaign", "create", str(bad))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert f"{tmp_path / 'q.jsonl'}:2: not valid JSON" in r.stderr

    # the server's refusal (no models) is one line too, and nothing is created
    (tmp_path / "q.jsonl").write_text('{"question_id": "a", "turns": [{"content": "x"}]}\n')
    before = json.loads(llmduel(service, "campaign", "list", "--json").stdout)["total"]
    r = llmduel(service, "campaign", "create", str(bad))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "HTTP 422" in r.stderr
    r = llmduel(service, "campaign", "create", str(bad), "--dry-run")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert json.loads(llmduel(service, "campaign", "list", "--json").stdout)["total"] == before

    r = llmduel(service, "campaign", "show", "999999")
    assert r.returncode == 2 and "HTTP 404" in r.stderr and r.stderr.count("\n") == 1
    r = llmduel(service, "campaign", "continue", "1")
    assert r.returncode == 2 and "--budget" in r.stderr
    r = llmduel(service, "campaign", "show", "abc")
    assert r.returncode == 2 and "whole number" in r.stderr
    env_less = subprocess.run(
        [sys.executable, "-m", "service.cli", "campaign", "list", "--url", f"http://127.0.0.1:{free_port()}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert env_less.returncode == 2 and "cannot reach" in env_less.stderr and env_less.stderr.count("\n") == 1


SIMULATED = (
    "name: simulated {name}\n"
    "delta: 0.1\n"
    "seed: 9\n"
    "models:\n"
    "  - {{name: best, cost: 2, client: {{kind: simulated}}}}\n"
    "  - {{name: other, cost: 1, client: {{kind: simulated}}}}\n"
    "  - {{name: third, cost: 1, client: {{kind: simulated}}}}\n"
    "judge: {{kind: simulated, preference: [[0.5, 0.9, 0.9], [0.1, 0.5, 0.6], [0.1, 0.4, 0.5]]}}\n"
    "max_duels: {cap}\n"
    "prompts: [one, two, three]\n"
)


def test_continue_a_campaign_that_hit_its_duel_cap(service, tmp_path):
    camp = tmp_path / "sim.yaml"
    camp.write_text(SIMULATED.format(name="capped", cap=5))
    r = llmduel(service, "campaign", "create", str(camp), "--json")
    assert r.returncode == 0, r.stderr
    cid = str(json.loads(r.stdout)["id"])
    r = llmduel(service, "campaign", "watch", cid, "--interval", "0.2")
    assert r.returncode == 0 and r.stdout.startswith("not certified: max_duels (5) reached"), (r.stdout, r.stderr)
    r = llmduel(service, "campaign", "continue", cid, "--max-duels", "5000")
    if r.returncode == 2 and ("HTTP 405" in r.stderr or "HTTP 404" in r.stderr):
        pytest.skip("PATCH /v1/campaigns/{id} is not served by this server (API contract, prices)")
    assert r.returncode == 0, r.stderr
    r = llmduel(service, "campaign", "watch", cid, "--interval", "0.2")
    assert r.returncode == 0 and r.stdout.startswith("certified: best"), (r.stdout, r.stderr)


def test_dry_run_prints_a_forecast_and_creates_nothing(service, tmp_path):
    camp = tmp_path / "sim.yaml"
    camp.write_text(SIMULATED.format(name="forecast", cap=1000))
    before = json.loads(llmduel(service, "campaign", "list", "--json").stdout)["total"]
    r = llmduel(service, "campaign", "create", str(camp), "--dry-run")
    assert json.loads(llmduel(service, "campaign", "list", "--json").stdout)["total"] == before
    if r.returncode == 2 and ("HTTP 405" in r.stderr or "HTTP 404" in r.stderr):
        pytest.skip("POST /v1/campaigns/forecast is not served by this server (API contract, prices)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("forecast (") and "cost to certify" in r.stdout


def test_dry_run_forecasts_the_default_llm_campaign_with_every_trial(service, fake_provider, tmp_path):
    """The default LLM-judged campaign (reuse, prompts without replacement): all trials run, a real range,
    never above the every-answer-once ceiling (50 prompts x (1 + 3 + 2) + 3 pairs x 50 x c_J 1.0 = 450)."""
    camp = write_campaign(tmp_path, fake_provider)
    r = llmduel(service, "campaign", "create", camp, "--dry-run", "--trials", "30", "--json")
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)
    assert f["mode"] == "wor" and f["trials"] == f["requested_trials"] == 30 and f["ceiling"] == pytest.approx(450)
    assert f["cost"]["p10"] < f["cost"]["median"] < f["cost"]["p90"] <= 450
    assert "stopped the forecast" not in f["note"]
    r = llmduel(service, "campaign", "create", camp, "--dry-run", "--trials", "30")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("forecast (prior, 30 simulated runs of dctas-pc, delta 0.05, wor duels)"), r.stdout
    assert "ceiling           450.00 USD" in r.stdout, r.stdout
    r = llmduel(service, "campaign", "create", camp, "--trials", "30")
    assert r.returncode == 2 and "--trials goes with --dry-run" in r.stderr and "Traceback" not in r.stderr
    r = llmduel(service, "campaign", "create", camp, "--dry-run", "--trials", "5")
    assert r.returncode == 2 and "HTTP 422" in r.stderr and "Traceback" not in r.stderr


class _Tty:
    """A stderr that says it is a terminal and keeps what was written."""

    def __init__(self):
        self.parts = []

    def isatty(self):
        return True

    def write(self, text):
        self.parts.append(text)

    def flush(self):
        pass


def test_watch_draws_a_bar_on_a_terminal(service, tmp_path, monkeypatch, capsys):
    from service.cli import main

    camp = tmp_path / "sim.yaml"
    camp.write_text(SIMULATED.format(name="tty", cap=40))
    monkeypatch.setenv("LLMDUEL_URL", service.url)
    monkeypatch.setenv("LLMDUEL_API_KEY", ADMIN_KEY)
    assert main(["campaign", "create", str(camp), "--no-run", "--json"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["run_started"] is False and created["run"]["active"] is False
    cid = str(created["id"])
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as client:
        assert client.post(f"/v1/campaigns/{cid}/run", json={}).status_code == 202
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["campaign", "watch", cid, "--interval", "0.1"]) == 0
    drawn = "".join(tty.parts)
    assert drawn.startswith("\r\x1b[2K[") and drawn.endswith("\n") and "spend" in drawn and "leader" in drawn
    out = capsys.readouterr().out.strip()
    assert out.startswith("certified: best") or out.startswith("not certified")


def test_stop_a_held_campaign(service, tmp_path):
    camp = tmp_path / "sim.yaml"
    camp.write_text(SIMULATED.format(name="held", cap=100))
    r = llmduel(service, "campaign", "create", str(camp), "--no-run")
    assert r.returncode == 0 and "held (--no-run)" in r.stdout, r.stderr
    cid = r.stdout.split(":", 1)[0].split()[-1]
    r = llmduel(service, "campaign", "stop", cid)
    assert r.returncode == 0 and r.stdout.startswith(f"campaign {cid} stopped"), (r.stdout, r.stderr)
    r = llmduel(service, "campaign", "stop", cid)
    assert r.returncode == 2 and "HTTP 409" in r.stderr and r.stderr.count("\n") == 1


def test_archive_and_delete_from_the_command_line(service, fake_provider, tmp_path):
    r = llmduel(service, "campaign", "create", write_campaign(tmp_path, fake_provider), "--no-run", "--json")
    assert r.returncode == 0, r.stderr
    cid = json.loads(r.stdout)["id"]
    r = llmduel(service, "campaign", "archive", str(cid))
    assert r.stdout.strip() == f"campaign {cid}: archived (hidden from the lists)", r.stderr
    assert f"\n{cid:>5}  " not in "\n" + llmduel(service, "campaign", "list").stdout
    assert f"\n{cid:>5}  " in "\n" + llmduel(service, "campaign", "list", "--archived").stdout
    assert llmduel(service, "campaign", "unarchive", str(cid)).returncode == 0
    assert f"\n{cid:>5}  " in "\n" + llmduel(service, "campaign", "list").stdout
    r = llmduel(service, "campaign", "delete", str(cid))
    assert r.returncode == 2 and "--yes" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = llmduel(service, "campaign", "delete", str(cid), "--yes")
    assert r.returncode == 2 and "stop it first" in r.stderr  # running
    assert llmduel(service, "campaign", "stop", str(cid)).returncode == 0
    r = llmduel(service, "campaign", "delete", str(cid), "--yes")
    assert r.returncode == 0 and "stay in the stores" in r.stdout, r.stderr
    r = llmduel(service, "campaign", "show", str(cid))
    assert r.returncode == 2 and "not found" in r.stderr
