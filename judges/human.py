"""Human judge: votes arrive through the API and the annotator page."""

from __future__ import annotations

from .base import Judge, Verdict


class HumanJudge(Judge):
    """``{"kind": "human"}``. Not automatic: the service leaves each duel awaiting
    a vote; :meth:`judge` must not be called."""

    kind = "human"
    automatic = False

    async def judge(self, prompt, answer_a, answer_b, *, model_a, model_b, rng=None, reference=None) -> Verdict:
        raise RuntimeError("a human judge is not automatic: duels wait for a vote via POST /v1/duels/{id}/vote")
