"""``benchmarks/bench_load.py --baseline REF [--rounds N]``: the baseline's tree, the verdict, the errors.

The load itself needs PostgreSQL and minutes of CPU (it is a benchmark, run by hand); these
tests check the parts that decide *which code* the baseline runs, and that a bad ref is a
one-line error with exit 2.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from conftest import REPO

SCRIPT = REPO / "benchmarks" / "bench_load.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_load_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout


def test_bad_baseline_ref_is_a_one_line_error_with_exit_2():
    p = subprocess.run(
        [sys.executable, str(SCRIPT), "--baseline", "no-such-ref-for-bench"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no-such-ref-for-bench" in lines[0] and "not a commit" in lines[0]
    assert "Traceback" not in p.stderr


def test_baseline_worktree_holds_the_ref_and_is_removed(tmp_path):
    bench = _bench()
    has_parent = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "HEAD~1"], cwd=REPO, capture_output=True)
    ref = "HEAD~1" if has_parent.returncode == 0 else "HEAD"  # a shallow clone has one commit
    expected = _git("rev-parse", f"{ref}^{{commit}}").strip()
    tree, sha = bench.baseline_worktree(ref, tmp_path)
    try:
        assert sha == expected
        # the checkout is the ref's tree, not the working tree: same commit, same file bytes
        assert (
            subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True, check=True
            ).stdout.strip()
            == expected
        )
        readme_at_ref = subprocess.run(
            ["git", "show", f"{expected}:README.md"], cwd=REPO, capture_output=True, check=True
        ).stdout
        assert (tree / "README.md").read_bytes() == readme_at_ref
        assert str(tree) in _git("worktree", "list")
    finally:
        bench.remove_worktree(tree)
    assert not tree.exists()
    assert str(tree) not in _git("worktree", "list")


def test_cpu_ratio_is_over_the_loaded_phases_only():
    bench = _bench()

    def target(cpu: dict[str, float], votes: dict[str, int]):
        t = bench.Target("t", REPO, "", "", "")
        for key in cpu:
            sh = bench.Shared(0)
            sh.accepted = {1: {"votes": votes[key], "decisive": votes[key]}}
            t.results[key] = (sh, 1.0, (cpu[key], 0.0, None))
        return t

    base = target({"solo": 100.0, "saturation": 4.0, "paced": 2.0}, {"solo": 1, "saturation": 1000, "paced": 1000})
    same = target({"solo": 1.0, "saturation": 4.0, "paced": 2.0}, {"solo": 1, "saturation": 1000, "paced": 1000})
    worse = target({"solo": 1.0, "saturation": 6.0, "paced": 2.0}, {"solo": 1, "saturation": 1000, "paced": 1000})
    assert bench.cpu_per_vote_ms(base, ("saturation", "paced")) == 3.0  # (4 + 2) s / 2000 votes
    assert bench.compare(base, same) == 1.0  # the solo phase's cost does not count
    assert abs(bench.compare(base, worse) - 8 / 6) < 1e-12
    assert bench.cpu_verdict([bench.compare(base, worse)]) is False  # 1.33 > 1.25
    # several rounds: the verdict is on the median, so one slow round does not decide it
    assert bench.cpu_verdict([1.0, 8 / 6, 1.1]) is True
    assert bench.cpu_verdict([1.3, 8 / 6, 1.1]) is False


def test_rounds_need_a_baseline():
    p = subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", "2"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 2 and "--rounds needs --baseline" in p.stderr
