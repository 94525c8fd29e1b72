"""llmduel.algorithms: the mathematics of cost-aware best-LLM identification by duels.

Pure, dependency-light numerics (numpy, scipy, numba): instances, the oracle
(lower bound and optimal allocations), GLR statistics and thresholds, the
sampling policies (DCTAS and the baselines TAS, CRR, DCTAC, DPCA) behind one
step-wise interface, and a fast simulator. No I/O, no web, no database.
"""

import importlib
from typing import TYPE_CHECKING, Any

# Where each public name lives. Imported on first use (PEP 562), so that a light import such as
# ``algorithms.vocabulary`` (the CLI's, a web page's) does not load numba and compile nothing it needs.
_HOMES = {
    "HybridPolicy": "hybrid",
    "Instance": "instance",
    "InstanceError": "instance",
    "synthetic_instance": "instance",
    "OracleResult": "oracle",
    "PCResult": "oracle",
    "lower_bound": "oracle",
    "pc_lower_bound": "oracle",
    "plugin_lower_bound": "oracle",
    "plugin_pc_lower_bound": "oracle",
    "solve_oracle": "oracle",
    "solve_pc_oracle": "oracle",
    "ALGORITHMS": "policies",
    "NoPairAvailable": "policies",
    "Policy": "policies",
    "PolicyError": "policies",
    "make_policy": "policies",
    "policy_from_state": "policies",
    "beta": "thresholds",
    "calibration_C": "thresholds",
}

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'algorithms' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


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
