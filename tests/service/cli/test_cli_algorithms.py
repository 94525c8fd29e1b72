"""``llmduel oracle`` and ``llmduel simulate`` as a user runs them (a real subprocess)."""

import json
import subprocess
import sys

import pytest

from algorithms import synthetic_instance


def run(*args):
    return subprocess.run([sys.executable, "-m", "service.cli", *args], capture_output=True, text=True, timeout=300)


def test_oracle_json_keys_and_values():
    r = run("oracle", "synthetic:k=4", "--delta", "0.01", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["winner"] == "arm1"
    assert {"c_star", "lower_bound", "pull_fractions", "cost_fractions"} <= set(out)
    fr = {tuple(p["pair"]): p["fraction"] for p in out["pull_fractions"]}
    assert round(fr[("arm1", "arm2")], 4) == 0.3706 and round(fr[("arm2", "arm3")], 4) == 0.6294


def test_simulate_json_on_an_instance_file(tmp_path):
    path = tmp_path / "inst.json"
    path.write_text(json.dumps(synthetic_instance(3).to_dict()))
    r = run("simulate", str(path), "--algorithm", "crr", "--delta", "0.1", "--trials", "20", "--seed", "3", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in (
        "algorithm",
        "delta",
        "trials",
        "mean_cost",
        "ci95",
        "error_rate",
        "mean_pulls",
        "lower_bound",
        "cost_over_lower_bound",
    ):
        assert key in out
    assert out["algorithm"] == "crr" and out["trials"] == 20 and out["mean_cost"] > out["lower_bound"]
    assert "simulating" in r.stderr  # progress goes to stderr, not stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (("simulate", "missing.json", "--delta", "0.1"), "not found"),
        (("simulate", "synthetic:k=4", "--delta", "1.5"), "delta"),
        (("simulate", "synthetic:k=4", "--delta", "0.1", "--trials", "0"), "--trials"),
        (("simulate", "synthetic:k=4", "--delta", "0.1", "--algorithm", "ucb"), "invalid choice"),
        (("oracle", "not-an-instance"), "unknown instance"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    r = run(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]
    assert "Traceback" not in r.stderr


def test_oracle_rejects_instance_without_condorcet_winner(tmp_path):
    path = tmp_path / "cyc.json"
    path.write_text(
        json.dumps(
            {
                "names": ["r", "p", "s"],
                "costs": [1, 1, 1],
                "preference": [[0.5, 0.6, 0.4], [0.4, 0.5, 0.6], [0.6, 0.4, 0.5]],
            }
        )
    )
    r = run("oracle", str(path))
    assert r.returncode == 2 and "no Condorcet winner" in r.stderr


def test_judge_cost_option_on_oracle_and_simulate():
    base = json.loads(run("oracle", "synthetic:k=4", "--delta", "0.01", "--json").stdout)
    r = run("oracle", "synthetic:k=4", "--delta", "0.01", "--judge-cost", "3", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["judge_cost"] == 3.0 and out["c_star"] > base["c_star"]
    r = run("simulate", "synthetic:k=3", "--delta", "0.1", "--trials", "5", "--judge-cost", "2", "--json")
    assert r.returncode == 0, r.stderr
    sim = json.loads(r.stdout)
    assert sim["judge_cost"] == 2.0 and sim["mean_cost"] >= 2.0 * sim["mean_pulls"]
    r = run("simulate", "synthetic:k=3", "--delta", "0.1", "--judge-cost", "-1")
    assert r.returncode == 2 and "--judge-cost" in r.stderr.strip().splitlines()[-1]
    assert "Traceback" not in r.stderr


def test_simulate_defaults_to_dctas_pc_and_answers_no_condorcet_winner(tmp_path):
    path = tmp_path / "rps4.json"
    path.write_text(
        json.dumps(
            {
                "names": ["r", "p", "s", "d"],
                "costs": [1, 1, 1, 1],
                "preference": [[0.5, 0.6, 0.4, 0.6], [0.4, 0.5, 0.6, 0.6], [0.6, 0.4, 0.5, 0.6], [0.4, 0.4, 0.4, 0.5]],
            }
        )
    )
    r = run("simulate", str(path), "--delta", "0.05", "--trials", "40", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["algorithm"] == "dctas-pc" and out["no_condorcet_winner_rate"] >= 0.9
    assert out["assumes_condorcet_winner"] is False and out["lower_bound"] is None
    r = run("simulate", str(path), "--delta", "0.05", "--algorithm", "dctas")
    assert r.returncode == 2 and "no Condorcet winner" in r.stderr.strip().splitlines()[-1]
    r = run("simulate", "synthetic:k=4", "--delta", "0.1", "--trials", "5", "--algorithm", "tas")
    assert r.returncode == 0 and "assumes a Condorcet winner" in r.stdout


@pytest.mark.parametrize("command", ["oracle", "simulate"])
@pytest.mark.parametrize("delta", ["5e-324", "1e-301", "nan"])
def test_a_delta_whose_threshold_is_not_finite_is_one_line_and_exit_2(command, delta):
    r = run(command, "synthetic:k=4", "--delta", delta, "--json", *(["--trials", "2"] if command == "simulate" else []))
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "delta must be in [1e-300, 1)" in r.stderr
    assert r.stdout == ""


def test_the_smallest_delta_gives_valid_json_and_costs_past_the_bound_are_refused(tmp_path):
    r = run("oracle", "synthetic:k=4", "--delta", "1e-300", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c} in the output"))
    assert out["lower_bound"] > 0
    path = tmp_path / "big.json"
    inst = synthetic_instance(4)
    path.write_text(
        json.dumps({"names": list(inst.names), "costs": [1e308, 1, 1], "preference": inst.preference.tolist()})
    )
    r = run("oracle", str(path), "--json")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "at most 1e+12" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize(
    "args",
    [
        ("oracle", "synthetic:k=4", "--delta", "0.01"),
        ("oracle", "synthetic:k=4", "--json"),
        ("simulate", "synthetic:k=3", "--delta", "0.1", "--trials", "3", "--json"),
    ],
)
def test_a_reader_that_goes_away_ends_the_command_quietly(args):
    """``llmduel ... | head -c 10``: the read end is closed before the command writes anything."""
    p = subprocess.Popen(
        [sys.executable, "-m", "service.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    p.stdout.close()  # no reader left: the command's first write to stdout fails with EPIPE
    err = p.stderr.read()
    p.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err
    assert p.returncode == 1


def test_oracle_table_columns_line_up_with_long_model_names(tmp_path):
    names = ["gpt-4o-2024-08-06-with-a-very-long-deployment-suffix", "tiny", "claude-3-5-sonnet-20241022"]
    path = tmp_path / "long.json"
    inst = synthetic_instance(4)
    path.write_text(json.dumps({"names": names, "costs": list(inst.costs), "preference": inst.preference.tolist()}))
    r = run("oracle", str(path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("pair"))
    table = lines[start:]
    assert len(table) == 4
    # every row as wide as the header, the numbers right-aligned under their headings
    assert len({len(line) for line in table}) == 1, table
    head = table[0]
    pull_end = head.index("pull fraction") + len("pull fraction")
    seen = set()
    for line in table[1:]:
        label, pull, cost = line.rsplit(maxsplit=2)
        first, second = label.strip().split(" vs ")
        assert first in names and second in names
        seen |= {first, second}
        assert line.index(pull, len(label)) + len(pull) == pull_end and line.endswith(cost)
    assert seen == set(names)


def test_simulate_says_it_compiles_only_when_the_kernel_cache_is_cold(tmp_path):
    import os

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    cmd = [sys.executable, "-m", "service.cli", "simulate", "synthetic:k=3", "--delta", "0.1", "--trials", "2"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert first.returncode == 0, first.stderr
    assert "compiling kernels (first run only)" in first.stderr
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert second.returncode == 0, second.stderr
    assert "compiling" not in second.stderr and "simulating" in second.stderr
    assert second.stdout == first.stdout


def test_simulate_takes_dctas_pc_options_and_refuses_them_elsewhere():
    base = ("simulate", "synthetic:k=4", "--delta", "0.1", "--trials", "10", "--seed", "2", "--json")
    plain = json.loads(run(*base).stdout)
    r = run(*base, "--threshold", "kk", "--stick", "1.5")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["mean_cost"] > plain["mean_cost"]  # the single-term threshold is dearer
    r = run(*base, "--algorithm", "dctas", "--threshold", "kk")
    assert r.returncode == 2 and "dctas-pc only" in r.stderr and "Traceback" not in r.stderr
    r = run(*base, "--stick", "-1")
    assert r.returncode == 2 and "--stick" in r.stderr.strip().splitlines()[-1]


def test_simulate_runs_at_the_level_asked_and_says_which():
    base = ("simulate", "search", "--delta", "0.01", "--trials", "60", "--seed", "3", "--json")
    runs = {}
    for level in (None, "product", "delta/L"):
        r = run(*base, *(("--level", level) if level else ()))
        assert r.returncode == 0, r.stderr
        runs[level] = json.loads(r.stdout)
    assert runs[None]["certificate_level"] == "product"  # the default with replacement (eleven models)
    assert runs[None]["mean_cost"] == runs["product"]["mean_cost"]
    assert runs["delta/L"]["certificate_level"] == "delta/L"
    assert runs["product"]["mean_cost"] < runs["delta/L"]["mean_cost"]  # a lower threshold, the same seeds
    assert runs["product"]["errors"] == 0
    r = run("simulate", "text", "--delta", "0.01", "--trials", "2", "--threshold", "kk", "--level", "product")
    assert r.returncode == 2 and "level product needs" in r.stderr and "Traceback" not in r.stderr
    r = run("simulate", "text", "--delta", "0.01", "--trials", "2", "--level", "delta")
    assert r.returncode == 2 and "--level" in r.stderr and "Traceback" not in r.stderr
    r = run("simulate", "text", "--delta", "0.01", "--trials", "2", "--level", "delta/L")
    assert r.returncode == 0 and "level          delta/L" in r.stdout


def test_oracle_and_simulate_take_an_instance_with_ties(tmp_path):
    from algorithms.instances import resolve_instance

    path = tmp_path / "ties.json"
    path.write_text(json.dumps(resolve_instance("genai-image-ties4").to_dict()))
    r = run("oracle", str(path), "--delta", "0.01", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["has_ties"] is True and out["c_pc_star"] >= out["c_star"] > 0
    assert out["pc_floor"] > out["pc_lower_bound"] > 0
    means = {}
    for threshold in ("betting", "mixture"):
        r = run(
            "simulate",
            str(path),
            "--delta",
            "0.05",
            "--trials",
            "30",
            "--seed",
            "2",
            "--threshold",
            threshold,
            "--json",
        )
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["instance_has_ties"] is True and out["errors"] == 0
        assert out["cost_over_pc_lower_bound"] > 0
        means[threshold] = out["mean_cost"]
    assert means["betting"] < means["mixture"]  # ties count for the betting test, not for the mixture
    r = run("simulate", str(path), "--delta", "0.05", "--trials", "30", "--seed", "2")
    assert r.returncode == 0 and "c_pc* bound" in r.stdout
    bad = resolve_instance("genai-image-ties4").to_dict()
    bad["ties"][0][1] = 0.99
    path.write_text(json.dumps(bad))
    r = run("simulate", str(path), "--delta", "0.05", "--trials", "3")
    assert r.returncode == 2 and "ties" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
