"""llmduel.algorithms: the mathematics of cost-aware best-LLM identification by duels.

Pure, dependency-light numerics (numpy, scipy, numba): instances, the oracle
(lower bound and optimal allocations), GLR statistics and thresholds, the
sampling policies (DCTAS and the baselines TAS, CRR, DCTAC, DPCA) behind one
step-wise interface, and a fast simulator. No I/O, no web, no database.
"""

from .hybrid import HybridPolicy
from .instance import Instance, InstanceError, synthetic_instance
from .oracle import (
    OracleResult,
    PCResult,
    lower_bound,
    pc_lower_bound,
    plugin_lower_bound,
    plugin_pc_lower_bound,
    solve_oracle,
    solve_pc_oracle,
)
from .policies import ALGORITHMS, NoPairAvailable, Policy, PolicyError, make_policy, policy_from_state
from .thresholds import beta, calibration_C

__all__ = [
    "ALGORITHMS",
    "HybridPolicy",
    "Instance",
    "InstanceError",
    "NoPairAvailable",
    "OracleResult",
    "PCResult",
    "Policy",
    "PolicyError",
    "beta",
    "calibration_C",
    "lower_bound",
    "make_policy",
    "pc_lower_bound",
    "plugin_lower_bound",
    "plugin_pc_lower_bound",
    "policy_from_state",
    "solve_oracle",
    "solve_pc_oracle",
    "synthetic_instance",
]
