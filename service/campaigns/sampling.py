"""Sampling prompts without replacement: when a campaign may, the secret prompt order each pair
follows, the next free position and the order in which judged duels enter the policy
(docs/reuse.md, "In the service")."""

from __future__ import annotations

from typing import Any, Iterable

from algorithms.vocabulary import Algorithm, JudgeKind, PromptSampling, Reuse, TiePolicy

from .draws import keyed_uniform

#: The tie policy under which every judged duel is counted as a fixed value, so the population of
#: a pair's outcomes is the whole prompt set (with ``drop`` it is the unknown set of decisive
#: prompts; with ``random`` a tie's coin is a fresh draw, not a fixed value of the prompt).
WOR_TIE_POLICIES = (TiePolicy.HALF,)


def wor_refusal(algorithm: str, answers: str, judge_kind: str | None, tie_policy: str | None) -> str | None:
    """Why a campaign cannot sample its prompts without replacement, or None when it can.

    ``tie_policy`` None: not given (it then defaults to ``half``). docs/reuse.md, "In the service".
    """
    if algorithm != Algorithm.DCTAS_PC:
        return (
            f"prompt_sampling without_replacement needs algorithm dctas-pc (its pairwise certificates run the "
            f"without-replacement test), got {algorithm}"
        )
    if answers != Reuse.REUSE:
        return (
            "prompt_sampling without_replacement needs answers: reuse (each model answers each prompt once, so a "
            "pair's outcome on a prompt is a fixed value)"
        )
    if judge_kind == "hybrid":  # hybrid hook
        return "prompt_sampling without_replacement is not supported with a hybrid judge (its test samples with replacement)"
    if judge_kind == JudgeKind.HUMAN:
        return (
            "prompt_sampling without_replacement needs an automatic judge (llm or simulated); human-judged "
            "campaigns sample with replacement"
        )
    if tie_policy == TiePolicy.RANDOM:
        return (
            "prompt_sampling without_replacement needs tie_policy half, got random (a tie's coin is drawn anew "
            "for each duel, but the exact without-replacement test treats every outcome as a fixed value of its "
            "prompt, so it would certify the coin: two identical models named winner over each other)"
        )
    if tie_policy is not None and tie_policy not in WOR_TIE_POLICIES:
        return (
            f"prompt_sampling without_replacement needs tie_policy half, got {tie_policy} (with drop the "
            "population of decisive prompts is unknown, so the without-replacement test cannot be set up)"
        )
    return None


def resolve_prompt_sampling(
    requested: str,
    tie_policy: str | None,
    *,
    algorithm: str,
    answers: str,
    verdicts: str,
    judge_kind: str | None,
) -> tuple[str, str]:
    """The stored (prompt_sampling, tie_policy) of a new campaign; ValueError (a 422) for an invalid pair.

    ``auto`` gives without_replacement exactly when it is allowed (:func:`wor_refusal`), the judge is
    an LLM judge and ``verdicts`` is reuse; else with_replacement. An absent ``tie_policy`` is
    ``half`` under without_replacement and ``drop`` otherwise.
    """
    refusal = wor_refusal(algorithm, answers, judge_kind, tie_policy)
    if requested == PromptSampling.WITHOUT_REPLACEMENT:
        if refusal is not None:
            raise ValueError(refusal)
        sampling = PromptSampling.WITHOUT_REPLACEMENT
    elif requested == PromptSampling.AUTO:
        wor = refusal is None and judge_kind in (JudgeKind.LLM, JudgeKind.JURY) and verdicts == Reuse.REUSE
        sampling = PromptSampling.WITHOUT_REPLACEMENT if wor else PromptSampling.WITH_REPLACEMENT
    else:
        sampling = PromptSampling.WITH_REPLACEMENT
    if tie_policy is None:
        half = sampling == PromptSampling.WITHOUT_REPLACEMENT or judge_kind == "hybrid"  # hybrid hook
        tie_policy = TiePolicy.HALF if half else TiePolicy.DROP
    return str(sampling), str(tie_policy)


def is_wor(prompt_sampling: str | None) -> bool:
    """The campaign samples its prompts without replacement (rows made before the setting: with)."""
    return prompt_sampling == PromptSampling.WITHOUT_REPLACEMENT


def prompt_permutation(draw_key: str, n_prompts: int) -> list[int]:
    """The campaign's secret permutation of its prompt indices, shared by all pairs.

    Prompt indices sorted by HMAC-SHA256 of ``"perm:{index}"`` under the draw key (ties,
    which have probability about ``n_prompts**2 / 2**257``, by index). Never shown by any
    route: whoever knew it could tell which prompt a pair's next duel uses.
    """
    return sorted(range(n_prompts), key=lambda k: (keyed_uniform(draw_key, f"perm:{k}"), k))


def free_position(occupied: Iterable[int], n_prompts: int) -> int | None:
    """The lowest position of a pair not judged and not in flight (``occupied``), or None."""
    taken = set(int(q) for q in occupied)
    for q in range(n_prompts):
        if q not in taken:
            return q
    return None


def next_in_order(recorded: int, held: dict[int, Any]) -> list[Any]:
    """The held duels of one pair that may enter the policy now, in position order.

    ``recorded``: how many of the pair's outcomes the policy has (positions 0 .. recorded-1);
    ``held``: position -> duel judged but not yet recorded. The run of consecutive positions
    from ``recorded`` is released; a gap (an earlier position still in flight or re-issued)
    keeps the later ones held.
    """
    out = []
    q = recorded
    while q in held:
        out.append(held[q])
        q += 1
    return out
