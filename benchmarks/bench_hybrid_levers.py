"""The plug-in test's constants against its measured ratios: each lever moved alone, same seeds.

    .venv/bin/python benchmarks/bench_hybrid_levers.py --trials 300 --prior wide --alloc mean --json

The hybrid policy with the calibrated and the graded judge at ``human_rate="active"`` on the
4-model instance of :func:`algorithms.hybrid_sim.hybrid_instance` (delta 0.05, ``--seed``), human
votes over humans-only dctas-pc's (default test, same seeds), as ``benchmarks/bench_hybrid.py``'s
``active_human_votes_ratio`` and ``graded_active_human_votes_ratio``. Each lever sets one constant of
:mod:`algorithms.hybrid` (the plug-in test, docs/algorithms.md *Hybrid*: ``CAP`` of (H7), ``F0`` and
``G0`` of (H6), ``W0`` and ``V0`` of (H8), the wide gap prior's ends ``PG_LO``/``PG_HI``) or the active
rule's ``floor``, in a fresh process with its own numba cache, so the kernels compile with that value.
``--prior`` is the policy's gap prior (``wide``: 0.018 to 0.26, which the ``PG_*`` levers move; ``narrow``:
0.034 to 0.26, the default); ``--alloc`` the estimate its pairs are chosen on (``strata``, the default, H10;
``mean``: the mean of H1, as before H10).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: (name, constants); ``floor`` is the policy's option, the others module constants
LEVERS: list[tuple[str, dict]] = [
    ("default", {}),
    ("floor 0.05", {"floor": 0.05}),
    ("floor 0.15", {"floor": 0.15}),
    ("CAP 0.5", {"CAP": 0.5}),
    ("CAP 0.85", {"CAP": 0.85}),
    ("G0 4", {"G0": 4.0}),
    ("G0 25", {"G0": 25.0}),
    ("F0 3", {"F0": 3.0}),
    ("F0 20", {"F0": 20.0}),
    ("W0 3", {"W0": 3.0}),
    ("W0 20", {"W0": 20.0}),
    ("gaps from 0.164", {"PG_LO": 5}),
    ("gaps to 0.027", {"PG_HI": 13}),
    ("gaps to 0.034", {"PG_HI": 12}),
    ("gaps to 0.043", {"PG_HI": 11}),
]

_CHILD = """
import json, sys
import algorithms.hybrid as hy
cfg, trials, seed, base = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
prior, alloc = sys.argv[5], sys.argv[6]
for k, v in cfg.items():
    if k != "floor":
        setattr(hy, k, v)
hy.HY_GAP, hy.HY_GLPI = hy._gap_tables()
hy.HY_GLPI_NARROW = hy._gap_tables(hy.PG_HI_NARROW)[1]
from algorithms.hybrid_sim import calibrated_judge, graded_judge, hybrid_instance, run_hybrid
out = {}
for judge in (calibrated_judge(), graded_judge()):
    r = run_hybrid(
        hybrid_instance(), judge, 0.05, trials, seed, human_rate="active", floor=cfg.get("floor", 0.1), prior=prior,
        alloc=alloc,
    )
    out[judge.name] = {"ratio": r["mean_human_votes"] / base, "errors": r["errors"]}
print(json.dumps(out))
"""


def run(trials: int, seed: int, prior: str, alloc: str = "strata") -> dict:
    sys.path.insert(0, ROOT)
    from algorithms.hybrid_sim import hybrid_instance, run_humans_only_default

    base = run_humans_only_default(hybrid_instance(), 0.05, trials, seed)["mean_human_votes"]
    rows = []
    for name, cfg in LEVERS:
        with tempfile.TemporaryDirectory(prefix="levers") as cache:
            env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=ROOT)
            args = [sys.executable, "-c", _CHILD, json.dumps(cfg), str(trials), str(seed), repr(base), prior, alloc]
            res = subprocess.run(args, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
        rows.append({"lever": name, "set": cfg, **json.loads(res.stdout.strip().splitlines()[-1])})
    return {
        "trials": trials,
        "seed": seed,
        "prior": prior,
        "alloc": alloc,
        "humans_only_default_votes": base,
        "levers": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prior", choices=("wide", "narrow"), default="wide", help="the policy's gap prior")
    ap.add_argument("--alloc", choices=("strata", "mean"), default="strata", help="the estimate pairs are chosen on")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    if a.trials < 1:
        ap.error("need --trials >= 1")
    t0 = time.time()
    out = run(a.trials, a.seed, a.prior, a.alloc)
    out["seconds"] = round(time.time() - t0, 1)
    if a.json:
        print(json.dumps(out, indent=1))
        return
    for r in out["levers"]:
        cal, gr = r["calibrated"], r["graded"]
        print(f"{r['lever']:18s} calibrated {cal['ratio']:.3f} ({cal['errors']} errors)  graded {gr['ratio']:.3f}")


if __name__ == "__main__":
    main()
