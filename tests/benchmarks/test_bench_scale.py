"""benchmarks/bench_scale.py at its tiny size on SQLite: a real server, its JSON figures and replays."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO


def test_tiny_run_prints_every_figure():
    p = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_scale.py"), "--tiny", "--backends", "sqlite", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    (res,) = out["results"]
    assert res["backend"] == "sqlite" and res["replay_ok"] is True
    assert set(res["duels_per_s"]) == {"4", "8"} and all(v > 0 for v in res["duels_per_s"].values())
    assert res["ratio_to_smallest"]["4"] == 1.0
    assert set(res["server_cpu_ms_per_duel"]) == {"4", "8"} and all(
        v > 0 for v in res["server_cpu_ms_per_duel"].values()
    )
    v = res["views"]
    assert v["models"] == 20 and v["duels"] == 100
    assert v["view_bytes"] < v["view_pairs_bytes"]  # above 16 models the view summarises its pairs
    assert v["dashboard_bytes"] > 0 and v["export_bytes"] > 0 and res["server_rss_mb"] > 0
    assert v["dashboard_first_cpu_s"] > 0
    bad = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_scale.py"), "--models", "1,8"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
