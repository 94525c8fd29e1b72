"""benchmarks/bench_field.py: a tiny seeded run; the JSON's shape, and its figures recomputed from the runs."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

from algorithms.prompt_level import PromptInstance
from algorithms.prompt_policy_sim import policy_campaign

SCRIPT = REPO / "benchmarks" / "bench_field.py"
PROTOCOLS = ("llmduel", "arena_hard", "chatbot_arena", "alpaca_eval")


def _module():
    spec = importlib.util.spec_from_file_location("bench_field", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_field"] = mod  # dataclasses look their module up
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def _run(mod, *argv: str) -> dict:
    out: list[str] = []
    mod.main(["--json", *argv], emit=out.append)
    assert len(out) == 1
    return json.loads(out[0])


def test_json_shape_and_figures_come_from_the_runs():
    mod = _module()
    argv = ("--trials", "3", "--prompts", "40", "--check", "40", "--cap", "2000", "--only", "fake-clear", "genai-arena")
    res = _run(mod, *argv)
    assert res["delta"] == 0.05
    assert [r["name"] for r in res["instances"]] == ["fake-clear", "genai-arena"]
    for r in res["instances"]:
        assert r["gap"] in ("clear", "moderate", "close")
        for p in PROTOCOLS:
            assert set(r[p]) >= {"spend", "error_rate", "trials"}
            assert r[p]["trials"] == 3
            assert 0.0 <= r[p]["error_rate"] <= 1.0
            assert r[p]["spend"] > 0
    by = {i.name: i for i in mod.instances()}
    clear = by["fake-clear"]
    assert clear.gap == "clear" and by["fake-close"].gap == "close" and by["fake-moderate"].gap == "moderate"
    row = res["instances"][0]
    # arena-hard: every model answers every prompt, L - 1 models judged against the baseline in both orders
    L, P = len(clear.names), 40
    assert row["arena_hard"]["spend"] == pytest.approx(P * sum(clear.costs) + (L - 1) * P * 2 * clear.judge_cost)
    assert row["alpaca_eval"]["spend"] == pytest.approx(P * sum(clear.costs) + (L - 1) * P * clear.judge_cost)
    # llmduel: the project's policy on the same tables and seeds gives the same mean spend
    spends = []
    for t in range(3):
        table = clear.table(P, t)
        pi = PromptInstance.from_table(clear.costs, clear.judge_cost, table)
        spends.append(policy_campaign(pi, "wor", 0.05, t, orders="auto").spend)
    assert row["llmduel"]["spend"] == pytest.approx(float(np.mean(spends)))
    parts = row["llmduel"]["breakdown"]
    assert parts["answers"] + parts["judge"] == pytest.approx(row["llmduel"]["spend"])
    assert sum(parts["answers_by_model"].values()) == pytest.approx(parts["answers"])
    assert 1.0 <= parts["calls_per_verdict"] < 2.0  # orders: auto, the service's default
    assert 0.0 <= parts["after_next_to_last_certificate"] <= row["llmduel"]["spend"]
    # seeded: a second run prints the same figures
    again = _run(mod, *argv)
    assert [{k: v for k, v in r.items()} for r in again["instances"]] == res["instances"]


def test_chatbot_arena_stops_on_separation_and_names_the_clear_winner():
    mod = _module()
    inst = {i.name: i for i in mod.instances()}["fake-clear"]
    table = inst.table(200, 0)
    winner, spend = mod.run_chatbot_arena(inst, table, np.random.default_rng(0), check=50, cap=20_000)
    assert winner == 0 and spend > 0
    # one vote (one judge call) per battle on a new (pair, prompt): with free answers, 50 battles (nearly all
    # new among 5,000 prompts) cost at most 50 calls, and more than 40 (two calls a battle would be about 100)
    free = dataclasses.replace(inst, costs=[0.0] * len(inst.names))
    _, spend = mod.run_chatbot_arena(free, free.table(5000, 0), np.random.default_rng(0), check=50, cap=50)
    assert 40 * inst.judge_cost < spend <= 50 * inst.judge_cost + 1e-12
    # a cap of one block cannot separate four models: no winner named
    winner, _ = mod.run_chatbot_arena(inst, table, np.random.default_rng(0), check=5, cap=5)
    assert winner == mod.NONE


def test_bad_arguments_exit_2():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--trials", "0"], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
