"""Reading a campaign's stored model and judge configs: the stored form of a config, how many
orders the judge reads, whether the models answer with images."""

from __future__ import annotations

from typing import Any, Sequence


def stored(config: Any) -> Any:
    """A config as the campaign row stores it: a client or judge config model becomes its JSON
    (``model_dump(mode="json")``); stored JSON passes unchanged. The rules read the stored form."""
    return config.model_dump(mode="json") if hasattr(config, "model_dump") else config


def image_answers(models: Sequence[dict]) -> bool:
    """Whether some of a campaign's models answer with images (``output: image``): its judge sees them."""
    return any(m.get("output") == "image" for m in models)


def judge_orders(judge: dict) -> int:
    """How many calls an LLM judge makes per duel at most: one per order, two with ``orders: both``
    and ``orders: auto`` (the default: each duel in one or both orders), one with ``orders: one``; a
    row stored before ``orders`` existed says it by ``both_orders``."""
    judge = stored(judge)
    if judge.get("kind") == "hybrid":  # hybrid hook: the automatic judge's calls
        return judge_orders(judge["llm"])
    if judge.get("kind") == "jury":  # every juror's calls
        return sum(judge_orders(j) for j in judge.get("judges") or [])
    if "orders" in judge:
        return 1 if judge["orders"] == "one" else 2
    return 2 if judge.get("both_orders", True) else 1


def judges_both_orders(judge: dict) -> bool:
    """Every verdict reads both orders: an LLM judge with ``orders: both``, a jury whose every
    juror has it. Such a verdict is the mirror of the mirrored duel's (stored once per unordered pair)."""
    judge = stored(judge)
    if judge.get("kind") == "hybrid":  # hybrid hook
        return judges_both_orders(judge["llm"])
    if judge.get("kind") == "jury":
        return all(judges_both_orders(j) for j in judge.get("judges") or [])
    if "orders" in judge:
        return judge["orders"] == "both"
    return judge_orders(judge) == 2
