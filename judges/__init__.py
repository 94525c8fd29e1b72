"""Judges: where a duel's preference comes from.

```python
from judges import build_judge, validate_judge_config, Verdict

judge = build_judge(cfg, model_names=[...], tie_policy="drop", http=None)
judge.automatic        # False for human judges
verdict = await judge.judge(prompt, answer_a, answer_b, model_a=i, model_b=j, rng=rng)
```

Kinds: ``human``, ``simulated`` (preference matrix), ``llm`` (a judge model
through service.clients). See docs/clients-and-judges.md.
"""

from __future__ import annotations

from typing import Any

from .base import CHOICES, TIE_POLICIES, Judge, Verdict
from .config import JUDGE_KINDS, validate_judge_config
from .human import HumanJudge
from .simulated import SimulatedJudge

__all__ = [
    "CHOICES",
    "JUDGE_KINDS",
    "TIE_POLICIES",
    "HumanJudge",
    "Judge",
    "SimulatedJudge",
    "Verdict",
    "build_judge",
    "validate_judge_config",
]


def build_judge(
    cfg: dict[str, Any],
    model_names: list[str],
    tie_policy: str = "drop",
    http: Any = None,
    **options: Any,
) -> Judge:
    """Build a judge for a campaign with models ``model_names``.

    ``cfg`` is validated with :func:`validate_judge_config`. ``http`` is an
    optional shared ``httpx.AsyncClient`` for an LLM judge; ``options`` (``sleep``,
    ``rng``) are passed to its model client (tests).
    """
    if tie_policy not in TIE_POLICIES:
        raise ValueError(f"tie_policy: must be one of {list(TIE_POLICIES)}, got {tie_policy!r}")
    cfg = validate_judge_config(cfg, n_models=len(model_names))
    kind = cfg["kind"]
    if kind == "human":
        return HumanJudge(cfg, model_names, tie_policy)
    if kind == "simulated":
        return SimulatedJudge(cfg, model_names, tie_policy)
    from .llm import LLMJudge

    return LLMJudge(cfg, model_names, tie_policy, http=http, **options)
