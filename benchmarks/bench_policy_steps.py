"""The longest in-process work of a plan or vote transaction at many models: one policy call
(``next_pair``, ``record``, ``should_stop``), the checkpoint (snapshot and its JSON) and a restore.

PostgreSQL sees the transaction idle while the process does this work, so it bounds from below
the service's idle-in-transaction limit (docs/reliability.md, Run ownership):

    .venv/bin/python benchmarks/bench_policy_steps.py --models 256 --steps 300
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from algorithms.vocabulary import ALGORITHMS
from service.campaigns.policy_cache import new_policy, policy_snapshot, restore_policy, warm_policies


def _timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def measure(algorithm: str, models: int, steps: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    policy, created = _timed(new_policy, algorithm, list(rng.uniform(0.5, 2.0, size=models)), 0.01)
    worst = dict.fromkeys(("next_pair", "record", "should_stop"), 0.0)
    for _ in range(steps):
        (i, j), t = _timed(lambda: policy.next_pair(pending=[]))
        worst["next_pair"] = max(worst["next_pair"], t)
        _, t = _timed(policy.record, i, j, float(rng.random() < 0.5))
        worst["record"] = max(worst["record"], t)
        _, t = _timed(policy.should_stop)
        worst["should_stop"] = max(worst["should_stop"], t)
    snapshot, t_snapshot = _timed(policy_snapshot, policy)
    blob, t_json = _timed(json.dumps, snapshot[0])
    _, t_restore = _timed(lambda: restore_policy(json.loads(blob)))
    return {
        "algorithm": algorithm,
        "created_s": created,
        **{f"worst_{k}_s": v for k, v in worst.items()},
        "checkpoint_s": t_snapshot + t_json,
        "state_mb": len(blob) / 1e6,
        "restore_s": t_restore,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=256)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    warm_policies()  # the service loads the compiled kernels at start, before any transaction
    print(f"load average {os.getloadavg()[0]:.1f}; {args.models} models, {args.steps} steps", flush=True)
    for algorithm in args.algorithms.split(","):
        r = measure(algorithm, args.models, args.steps, args.seed)
        print(
            f"{r['algorithm']:9s} worst call {max(r['worst_next_pair_s'], r['worst_record_s'], r['worst_should_stop_s']):.3f} s"
            f"  checkpoint {r['checkpoint_s']:.2f} s ({r['state_mb']:.1f} MB)  restore {r['restore_s']:.2f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
