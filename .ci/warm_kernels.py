"""Fill numba's on-disk kernel cache (``cache=True``) before the tests run.

A fresh clone has no cache: every process that needs a kernel before some process has written it
compiles it again (5-10 s of CPU for the policy kernels, as much for the simulators), and the first
servers the tests start all do at once. ``.ci/run`` runs this in the background while the lint and
type checks use one core, and waits for it before pytest. Best effort: a call that fails here is
compiled by the tests as before (its error is printed, the exit code stays 0).
"""

from __future__ import annotations

import traceback


def _warm() -> None:
    from algorithms.hybrid import HybridPolicy
    from algorithms.hybrid_sim import calibrated_judge, hybrid_instance, run_humans_only, run_hybrid
    from algorithms.instances import resolve_instance
    from algorithms.simulator import simulate
    from algorithms.vocabulary import ALGORITHMS
    from service.campaigns.policy_cache import warm_policies

    steps = [("policies", warm_policies)]
    instance = resolve_instance("synthetic:k=3")
    for algorithm in ALGORITHMS:
        steps.append((f"simulate {algorithm}", lambda a=algorithm: simulate(instance, a, 0.1, 1)))
    hybrid = hybrid_instance()
    steps.append(("hybrid", lambda: run_hybrid(hybrid, calibrated_judge(), 0.1, 1, seed=0)))
    steps.append(("hybrid active", lambda: run_hybrid(hybrid, calibrated_judge(), 0.1, 1, seed=0, human_rate="active")))
    steps.append(("humans only", lambda: run_humans_only(hybrid, 0.1, 1, seed=0)))
    for rate in (0.2, "active"):
        steps.append(
            (f"hybrid policy {rate}", lambda r=rate: _hybrid_policy(HybridPolicy([1.0, 2.0, 3.0], 0.1, human_rate=r)))
        )
    for name, step in steps:
        try:
            step()
        except Exception:  # best effort: the tests compile what is missing
            print(f"warm_kernels: {name} failed:\n{traceback.format_exc()}")


def _hybrid_policy(policy) -> None:
    """A few duels of the service's hybrid policy (a hybrid campaign's next pair and record)."""
    for n in range(12):
        i, j = policy.next_pair()
        pi = policy.human_probability(i, j, 1.0)
        policy.record(i, j, 1.0, float(n % 2) if n % 3 else None, pi)
    policy.recommendation()


if __name__ == "__main__":
    _warm()
