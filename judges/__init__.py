"""Judges: where a duel's preference comes from.

```python
from service.judging import build_judge, parse_judge_config   # configs as pydantic models

judge = build_judge(parse_judge_config(cfg), model_names=[...], tie_policy="drop", http=None)
judge.automatic        # False for human judges
verdict = await judge.judge(prompt, answer_a, answer_b, model_a=i, model_b=j, rng=rng, reference=None)
```

Kinds: ``human``, ``simulated`` (preference matrix), ``llm`` (a judge model
given by the caller as a :class:`JudgeModel`), ``jury`` (several LLM judges combined). See docs/clients-and-judges.md.
"""

from __future__ import annotations

from .base import CHOICES, TIE_POLICIES, Completion, Judge, JudgeModel, ModelCallError, Verdict
from .human import HumanJudge
from .jury import JuryJudge
from .llm import LLMJudge
from .simulated import SimulatedJudge

__all__ = [
    "CHOICES",
    "TIE_POLICIES",
    "Completion",
    "HumanJudge",
    "Judge",
    "JudgeModel",
    "JuryJudge",
    "LLMJudge",
    "ModelCallError",
    "SimulatedJudge",
    "Verdict",
]
