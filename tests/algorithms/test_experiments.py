"""Battle-log reading, preference building, `analyze`, and `reproduce` on reduced trials."""

import csv
import gzip
import json

import numpy as np
import pytest

from algorithms.research import battles
from algorithms.research.battles import (
    BattleLogError,
    build_preference,
    count_battles,
    iter_battles,
    largest_complete_subset,
    load_preference,
    sniff_format,
)
from service.cli import main as cli_main

# A: beats B 3-1 (+1 tie, +1 both-bad), beats C 2-0; B beats C 1-1 with 2 ties; D met only A.
RECORDS = (
    [{"model_a": "A", "model_b": "B", "winner": "model_a"}] * 2
    + [{"model_a": "B", "model_b": "A", "winner": "model_b"}]
    + [{"model_a": "A", "model_b": "B", "winner": "model_b"}]
    + [{"model_a": "A", "model_b": "B", "winner": "tie"}, {"model_a": "B", "model_b": "A", "winner": "tie (bothbad)"}]
    + [{"model_a": "C", "model_b": "A", "winner": "model_b"}] * 2
    + [{"model_a": "B", "model_b": "C", "winner": "model_a"}, {"model_a": "B", "model_b": "C", "winner": "model_b"}]
    + [{"model_a": "C", "model_b": "B", "winner": "tie"}] * 2
    + [{"model_a": "A", "model_b": "D", "winner": "model_a"}]
    + [{"model_a": "A", "model_b": "A", "winner": "tie"}, {"model_a": "A", "model_b": "B", "winner": "??"}]
)


def write_log(tmp_path, fmt, records=RECORDS, name=None):
    path = tmp_path / (name or f"log.{fmt}")
    if fmt == "csv":
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["model_a", "model_b", "winner", "anony"])
            w.writeheader()
            for r in records:
                w.writerow({"anony": "True", **r})
    elif fmt == "json":
        path.write_text(json.dumps(records, indent=2))
    elif fmt == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl"])
def test_counts_are_the_same_in_every_format(tmp_path, fmt):
    path = write_log(tmp_path, fmt)
    assert sniff_format(str(path)) == fmt
    bc = count_battles(str(path))
    assert bc.names == ["A", "B", "C", "D"]
    W = bc.wins
    assert W[0, 1] == 3 and W[1, 0] == 1 and W[0, 2] == 2 and W[2, 0] == 0
    assert W[1, 2] == 1 and W[2, 1] == 1 and W[0, 3] == 1
    assert bc.ties[0, 1] == 1 and bc.bothbad[0, 1] == 1 and bc.ties[1, 2] == 2
    assert bc.stats["skipped_self"] == 1 and bc.stats["skipped_invalid"] == 1
    assert bc.stats["rows"] == len(RECORDS) and bc.stats["used"] == len(RECORDS) - 2


def test_tie_policies_and_largest_complete_subset(tmp_path):
    bc = count_battles(str(write_log(tmp_path, "jsonl")))
    drop = build_preference(bc, "drop")
    assert drop.names == ["A", "B", "C"] and drop.excluded == ["D"]
    assert drop.preference[0, 1] == pytest.approx(3 / 4)
    assert drop.preference[1, 2] == pytest.approx(1 / 2)
    assert drop.counts[0, 1] == 4
    half = build_preference(bc, "half")
    assert half.preference[0, 1] == pytest.approx(4 / 6)  # 3 + 0.5 + 0.5 of 6
    assert half.preference[1, 2] == pytest.approx(2 / 4)
    assert half.counts[1, 2] == 4
    assert np.allclose(half.preference + half.preference.T, 1.0)
    # min comparisons: A-C has 2 decisive comparisons, B-C 2 (drop) -> with 3 only A-B survives
    m3 = build_preference(bc, "drop", min_comparisons=3)
    assert m3.names == ["A", "B"]
    # the same threshold under "half" keeps B-C (4 comparisons) but not A-C (2)
    assert len(build_preference(bc, "half", min_comparisons=3).names) == 2
    with pytest.raises(BattleLogError, match="fewer than two"):
        build_preference(bc, "drop", min_comparisons=5)
    with pytest.raises(BattleLogError, match="tie policy"):
        build_preference(bc, "coin")


def test_largest_complete_subset_exact_and_greedy():
    # two triangles {0,1,2} and {2,3,4,5} where the second is a 4-clique
    A = np.zeros((6, 6), dtype=bool)
    for c in ([0, 1, 2], [2, 3, 4, 5]):
        for i in c:
            for j in c:
                A[i, j] = True
    assert largest_complete_subset(A) == ([2, 3, 4, 5], "exact")
    keep, method = largest_complete_subset(A, budget=1)
    assert method == "greedy" and all(A[i, j] for i in keep for j in keep)


def test_json_array_is_streamed_in_chunks(tmp_path, monkeypatch):
    """A tiny chunk size forces objects to straddle chunk boundaries."""
    monkeypatch.setattr(battles, "_CHUNK", 7)
    path = write_log(tmp_path, "json")
    recs = list(iter_battles(str(path)))
    assert recs == RECORDS


def test_json_array_reader_does_not_read_the_whole_file(tmp_path, monkeypatch):
    path = write_log(tmp_path, "json", records=RECORDS * 200)
    monkeypatch.setattr(battles, "_CHUNK", 256)
    it = iter_battles(str(path))
    first = next(it)
    assert first == RECORDS[0]
    it.close()
    read = []

    class Spy:
        def __init__(self, f):
            self.f = f

        def read(self, n):
            s = self.f.read(n)
            read.append(len(s))
            return s

    with open(path) as f:
        gen = battles._iter_json_array(Spy(f))
        next(gen)
    assert sum(read) <= 512 < path.stat().st_size


def test_gzip_and_malformed_logs(tmp_path):
    raw = write_log(tmp_path, "jsonl")
    gz = tmp_path / "log.jsonl.gz"
    with gzip.open(gz, "wb") as f:
        f.write(raw.read_bytes())
    assert count_battles(str(gz)).wins[0, 1] == 3
    bad = tmp_path / "bad.json"
    bad.write_text('[{"model_a": "A", "model_b": "B", "winner": "model_a"}, {"model_a": ')
    with pytest.raises(BattleLogError, match="invalid JSON"):
        list(iter_battles(str(bad)))
    nocol = tmp_path / "nocol.csv"
    nocol.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(BattleLogError, match="lacks column"):
        list(iter_battles(str(nocol)))
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(BattleLogError, match="empty"):
        sniff_format(str(empty))
    with pytest.raises(BattleLogError, match="no usable battles"):
        load_preference(str(write_log(tmp_path, "csv", records=[{"model_a": "A", "model_b": "B", "winner": "x"}])))


def test_filters(tmp_path):
    recs = RECORDS + [{"model_a": "A", "model_b": "B", "winner": "model_b", "anony": False}]
    path = write_log(tmp_path, "jsonl", records=[{"anony": True, **r} for r in RECORDS] + recs[-1:])
    assert count_battles(str(path), anony_only=True).wins[1, 0] == 1
    assert count_battles(str(path)).wins[1, 0] == 2
    p = load_preference(str(path), exclude="^D$")
    assert p.names == ["A", "B", "C"] and p.excluded == []


# ----------------------------------------------------------------------------- analyze


def test_analyze_log_json(tmp_path, capsys):
    path = write_log(tmp_path, "csv")
    assert cli_main(["analyze", str(path), "--json", "--tie-policy", "half"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["models"] == ["A", "B", "C"] and rep["excluded_models"] == ["D"]
    assert rep["condorcet_winner"] == "A"
    assert rep["tie_policy"] == "half"
    assert set(rep["assumptions"]) == {"LNM", "TO", "SST", "gamma-RST", "MST", "WST", "STI", "GIA", "CW"}
    for v in rep["assumptions"].values():
        assert isinstance(v["holds"], bool) and "example" in v
    assert rep["preference"][0][1] == pytest.approx(4 / 6)
    assert rep["counts"][0][1] == 6
    bt = rep["bradley_terry"]
    assert bt["ranking"][0] == "A"
    assert bt["ratings"]["A"]["lower"] < bt["ratings"]["A"]["rating"] < bt["ratings"]["A"]["upper"]


def test_analyze_instance_file_and_text_output(tmp_path, capsys):
    inst = {
        "names": ["x", "y", "z"],
        "costs": [1, 1, 1],
        "preference": [[0.5, 0.6, 0.4], [0.4, 0.5, 0.6], [0.6, 0.4, 0.5]],
    }
    path = tmp_path / "cyc.json"
    path.write_text(json.dumps(inst))
    assert cli_main(["analyze", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["kind"] == "instance" and rep["condorcet_winner"] is None
    assert rep["assumptions"]["CW"]["holds"] is False and rep["assumptions"]["WST"]["holds"] is False
    assert cli_main(["analyze", str(path)]) == 0
    text = capsys.readouterr().out
    assert "Condorcet winner: none" in text and "WST" in text


@pytest.mark.parametrize(
    "args, msg",
    [
        (["analyze", "/nonexistent/log.csv"], "no such file"),
        (["analyze", "__BAD__", "--json"], "no such file or builtin"),
    ],
)
def test_analyze_errors_are_one_line_exit_2(args, msg, capsys):
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err


def test_analyze_bad_instance_and_bad_log(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"names": ["a", "b"], "costs": [1, 1], "preference": [[0.5, 0.9], [0.9, 0.5]]}))
    assert cli_main(["analyze", str(bad)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    log = tmp_path / "log.csv"
    log.write_text("model_a,model_b,winner\nA,B,model_a\n")
    assert cli_main(["analyze", str(log), "--min-comparisons", "2"]) == 2
    assert "fewer than two" in capsys.readouterr().err


# ----------------------------------------------------------------------------- reproduce


def test_reproduce_synthetic_reduced(tmp_path, capsys):
    out = tmp_path / "syn"
    rc = cli_main(["reproduce", "synthetic", "--trials", "12", "--ks", "1,4,19", "--out", str(out)])
    assert rc == 0
    for f in ("results.csv", "results.json", "pull_fractions.md", "cost_vs_k.png", "cost_vs_k.svg"):
        assert (out / f).stat().st_size > 0, f
    assert (out / "cost_vs_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (out / "cost_vs_k.svg").read_bytes()[:2000]
    res = json.loads((out / "results.json").read_text())
    assert res["delta"] == 0.01 and res["trials"] == 12
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert len(rows) == 3 * 6  # the paper's five and dctas-pc, reported beside them
    assert {r["algorithm"] for r in rows} == {"dctas", "tas", "crr", "dctac", "dpca", "dctas-pc"}
    by = {(int(r["k"]), r["algorithm"]): r for r in rows}
    for r in rows:
        assert int(r["trials"]) == 12 and float(r["mean_cost"]) > 0 and float(r["ci95"]) >= 0
        assert float(r["mean_cost"]) >= float(r["lower_bound"])
    # k = 1: equal costs, same seeds -> DCTAS and TAS make the same decisions
    assert by[(1, "dctas")]["mean_cost"] == by[(1, "tas")]["mean_cost"]
    # k = 19: the cost-aware allocation is clearly cheaper than round robin and than TAS
    assert float(by[(19, "dctas")]["mean_cost"]) < float(by[(19, "crr")]["mean_cost"])
    assert float(by[(19, "dctas")]["mean_cost"]) < float(by[(19, "dctac")]["mean_cost"])
    # the pull-fraction table, exactly as in the paper (Table 1)
    pf = res["pull_fractions_k4"]
    assert [round(x, 4) for x in pf["cost_aware"]] == [0.3706, 0.0, 0.6294]
    assert [round(x, 4) for x in pf["cost_unaware"]] == [0.5720, 0.4280, 0.0]
    md = (out / "pull_fractions.md").read_text()
    assert "| 1 and 2 | 0.5720 | 0.5720 | 0.3706 | 0.3706 |" in md
    assert "| 1 and 3 | 0.4280 | 0.4280 | 0.0000 | 0.0000 |" in md
    assert "| 2 and 3 | 0.0000 | 0.0000 | 0.6294 | 0.6294 |" in md


def test_reproduce_realworld_reduced(tmp_path, capsys):
    out = tmp_path / "rw"
    rc = cli_main(
        [
            "reproduce",
            "realworld",
            "--trials",
            "4",
            "--chunk",
            "2",
            "--instances",
            "text,genai-image",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert res["delta"] == 1e-10 and res["cap_factor"] == 10
    rows = {(r["instance"], r["algorithm"]): r for r in res["rows"]}
    assert len(rows) == 12  # 2 instances x (the paper's five + dctas-pc)
    table2 = (out / "table2.md").read_text()
    assert "dctas-pc (not from the paper) (ours)" in table2 and "dctas-pc (not from the paper) (paper)" not in table2
    for r in res["rows"]:
        assert r["status"] in ("ok", "left_out", "lower_bound")
        assert r["mean_cost"] > 0 and r["ci997"] >= 0
        if r["status"] == "ok":
            assert r["trials"] == 4 and r["cut"] == 0 and r["errors"] == 0
        assert r["ci997"] == pytest.approx(r["ci95"] * 2.9677379253417833 / 1.959963984540054)
    # DPCA on the text instance costs far more than 10x DCTAS: left out, decided on the first chunk
    dpca = rows[("text", "dpca")]
    assert dpca["status"] == "left_out" and dpca["trials"] == 2 and dpca["ratio_to_dctas"] > 10
    # round robin is clearly more expensive than DCTAS
    assert rows[("text", "crr")]["ratio_to_dctas"] > 2
    # equal costs: DCTAS and TAS are the same algorithm (same seeds -> same costs)
    assert rows[("genai-image", "tas")]["mean_cost"] == rows[("genai-image", "dctas")]["mean_cost"]
    t2 = (out / "table2.md").read_text()
    assert "text (paper T2T)" in t2 and "21.5 ± 0.9" in t2 and "- (>" in t2
    t3 = (out / "table3.md").read_text()
    assert "| genai-image |  |" in t3 and "0.0%" in t3 and "5.7%" in t3
    assert {r["instance"] for r in res["table3"]} == {"text", "genai-image"}


@pytest.mark.parametrize(
    "args, msg",
    [
        (["reproduce"], "needs an experiment"),
        (["reproduce", "realworld", "--instances", "nope", "--trials", "1"], "unknown instance"),
        (["reproduce", "synthetic", "--trials", "0"], "--trials"),
        (["reproduce", "synthetic", "--ks", "0"], "--ks"),
        (["reproduce", "realworld", "--algorithms", "foo"], "--algorithms"),
    ],
)
def test_reproduce_bad_input(args, msg, capsys):
    with pytest.raises(SystemExit) if msg.startswith("--") else _nullcontext() as exc:
        rc = cli_main(args)
    code = exc.value.code if msg.startswith("--") else rc
    assert code == 2
    err = capsys.readouterr().err
    assert msg in err and err.strip().count("\n") == 0


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_reproduce_out_must_be_a_directory(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert cli_main(["reproduce", "synthetic", "--trials", "1", "--ks", "1", "--out", str(f)]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_oracle_reduction_of_dctas_against_tas():
    from algorithms import synthetic_instance
    from algorithms.oracle import solve_oracle
    from algorithms.research.reproduce import allocation_cost_rate, oracle_reduction_pct

    inst = synthetic_instance(19.0)
    aware = solve_oracle(inst)
    # the cost-aware oracle allocation costs exactly c* per unit of log(1/delta)
    assert allocation_cost_rate(inst, aware.pull_fractions) == pytest.approx(aware.c_star)
    assert oracle_reduction_pct(synthetic_instance(1.0)) == pytest.approx(0.0, abs=1e-9)
    assert oracle_reduction_pct(synthetic_instance(4.0)) == pytest.approx(3.94, abs=0.01)
    assert oracle_reduction_pct(synthetic_instance(19.0)) == pytest.approx(33.08, abs=0.01)
