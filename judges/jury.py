"""A jury: several LLM judges (jurors) judge each duel; their verdicts combine into one.

Each juror is an :class:`~judges.llm.LLMJudge` with its own model, template and orders; the
jurors are asked concurrently. ``combine``:

- ``majority``: each juror votes for the answer its score favours (a tie is no vote); the
  answer with more votes wins (score 1 or 0), equal votes make a tie (1/2);
- ``mean``: the mean of the jurors' scores of answer ``a`` (graded; its side is the choice).

A juror that fails (a call error or no readable verdict) makes the jury's verdict a judge
error (``choice=None``), as a failed call does for one judge: a verdict from part of the jury
would be another judge. The cost is the sum of the jurors' calls. ``detail["calls"]`` lists
every call with its ``juror``; ``detail["jurors"]`` each juror's choice, score and whether it
agrees with the jury's choice.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .base import Judge, Verdict
from .llm import LLMJudge, choice_of

JURY_RULES = ("majority", "mean")


def combine_jury(scores_a: list[float], rule: str) -> float:
    """The jurors' scores of answer ``a`` -> the jury's score (see the module docstring)."""
    if rule == "mean":
        return sum(scores_a) / len(scores_a)
    if rule != "majority":
        raise ValueError(f"combine must be one of {JURY_RULES}, got {rule!r}")
    votes_a = sum(1 for s in scores_a if choice_of(s) == "a")
    votes_b = sum(1 for s in scores_a if choice_of(s) == "b")
    return 1.0 if votes_a > votes_b else 0.0 if votes_b > votes_a else 0.5


class JuryJudge(Judge):
    """``{"kind": "jury", "judges": [llm judge configs...], "combine": "majority" | "mean"}``."""

    kind = "jury"
    automatic = True

    def __init__(self, config, model_names, tie_policy="drop", *, jurors: list[LLMJudge], names: list[str]):
        super().__init__(config, model_names, tie_policy)
        if len(jurors) < 2 or len(jurors) != len(names):
            raise ValueError("a jury needs at least 2 jurors, each with a name")
        self.rule = str(config.get("combine", "majority"))
        if self.rule not in JURY_RULES:
            raise ValueError(f"combine must be one of {JURY_RULES}, got {self.rule!r}")
        self.jurors = list(jurors)
        self.names = list(names)

    async def judge(self, prompt, answer_a, answer_b, *, model_a, model_b, rng=None, reference=None) -> Verdict:
        verdicts = await asyncio.gather(
            *(
                j.judge(prompt, answer_a, answer_b, model_a=model_a, model_b=model_b, rng=rng, reference=reference)
                for j in self.jurors
            )
        )
        cost = float(sum(v.cost for v in verdicts))
        calls = [
            {**c, "juror": name} for name, v in zip(self.names, verdicts) for c in (v.detail or {}).get("calls", [])
        ]
        jurors = [
            {"name": name, "choice": v.choice, "score_a": v.score, "cost": v.cost, "error": v.error}
            for name, v in zip(self.names, verdicts)
        ]
        detail: dict[str, Any] = {"jury": self.rule, "calls": calls, "jurors": jurors}
        failed = [(name, v.error) for name, v in zip(self.names, verdicts) if v.choice is None or v.score is None]
        if failed:
            msg = "; ".join(f"juror {name}: {err or 'no verdict'}" for name, err in failed)
            return Verdict(None, cost, detail, error=msg)
        score = combine_jury([float(v.score) for v in verdicts if v.score is not None], self.rule)
        choice = choice_of(score)
        for rec in jurors:
            rec["agrees"] = rec["choice"] == choice
        detail["score_a"] = score
        return Verdict(choice, cost, detail, score=score)

    async def aclose(self) -> None:
        for j in self.jurors:
            await j.aclose()
