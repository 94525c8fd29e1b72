"""The score of a verdict under the campaign's tie policy."""

from __future__ import annotations

from algorithms.vocabulary import Choice, TiePolicy

from .draws import tie_coin


def score_of(
    choice: str,
    *,
    model_i: int,
    model_a: int,
    model_b: int,
    tie_policy: str,
    seed: int,
    number: int,
    score_a: float | None = None,
    draw_key: str | None = None,
) -> float | None:
    """The score of model_i for a verdict under the campaign's tie policy (None: not counted).

    A win is 1 or 0; a graded verdict (an LLM judge with strengths) gives
    ``score_a``, the score of answer ``a`` in [0, 1], instead (its side decides the
    choice, so ``a`` has ``score_a > 1/2``). A tie or "both bad" counts half under
    ``half``, a fair coin (:func:`tie_coin`, keyed by the campaign's draw key) under
    ``random``, nothing under ``drop``.
    """
    if choice in (Choice.A, Choice.B):
        if score_a is not None and 0.0 <= score_a <= 1.0 and (score_a > 0.5) == (choice == Choice.A):
            return float(score_a) if model_a == model_i else 1.0 - float(score_a)
        winner = model_a if choice == Choice.A else model_b
        return 1.0 if winner == model_i else 0.0
    if tie_policy == TiePolicy.HALF:
        return 0.5
    if tie_policy == TiePolicy.RANDOM:
        return 1.0 if tie_coin(seed, number, draw_key) else 0.0
    return None
