"""Simulated judge: winners drawn from a preference matrix."""

from __future__ import annotations

import random
from typing import Any

from .base import Judge, Verdict


class SimulatedJudge(Judge):
    """``{"kind": "simulated", "preference": [[...]], "tie_prob": 0.0}``.

    ``preference[i][j]`` is the probability that model ``i`` beats model ``j``
    (matrix in the order of the campaign's models). Each judgement uses the
    given ``rng``: with ``tie_prob > 0`` one draw first decides a tie; then one
    draw ``u`` gives ``"a"`` iff ``u < preference[model_a][model_b]``. With
    ``tie_prob == 0`` it is exactly one Bernoulli draw per duel, as in the
    simulator. Costs nothing.
    """

    kind = "simulated"

    def __init__(self, config, model_names, tie_policy="drop"):
        super().__init__(config, model_names, tie_policy)
        self.preference = [[float(x) for x in row] for row in config["preference"]]
        self.tie_prob = float(config.get("tie_prob", 0.0))
        self._own_rng = random.Random(0)

    async def judge(self, prompt, answer_a, answer_b, *, model_a, model_b, rng: Any = None, reference=None) -> Verdict:
        rng = rng if rng is not None else self._own_rng
        n = len(self.preference)
        if not (0 <= model_a < n and 0 <= model_b < n) or model_a == model_b:
            return Verdict(
                None,
                0.0,
                {"model_a": model_a, "model_b": model_b},
                error=f"bad model indices ({model_a}, {model_b}) for {n} models",
            )
        p = self.preference[model_a][model_b]
        detail: dict[str, Any] = {"p": p}
        if self.tie_prob > 0:
            u_tie = float(rng.random())
            detail["u_tie"] = u_tie
            if u_tie < self.tie_prob:
                return Verdict("tie", 0.0, detail)
        u = float(rng.random())
        detail["u"] = u
        return Verdict("a" if u < p else "b", 0.0, detail)
