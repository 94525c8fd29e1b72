"""The store keys: what identifies "the same answer" and "the same verdict" in the answer and verdict
stores (:mod:`.stores`; docs/reuse.md, docs/service.md "Answer and verdict reuse").

Content-addressed: a key is a hash of what changes the output (a model's generation config and the
prompt; an LLM judge's config, the prompt with its reference answer, the two answers' texts and,
for a one-order judge, the order they are shown in), never of a campaign, so every campaign that
needs the same thing finds it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from algorithms.vocabulary import Choice, JudgeKind

#: Client fields that do not change what a model answers: left out of the store key.
#: Every other field (kind, base_url, model, params such as temperature and
#: max_tokens, system prompt, and any field added later) is part of it.
NON_OUTPUT_CLIENT_FIELDS = frozenset(
    {
        "api_key_env",
        "price",
        "max_cost_per_query",
        "timeout_s",
        "max_attempts",
        "backoff_base_s",
        "backoff_max_s",
        "max_retry_after_s",
        "failure_rate",
        "latency_s",
    }
)
#: Judge fields that do not change a verdict (its price).
NON_OUTPUT_JUDGE_FIELDS = frozenset({"cost", "fee", "price", "verdicts"})


def _sha(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def prompt_hash(prompt: str) -> str:
    return _sha("prompt", prompt)


def text_hash(text: str) -> str:
    return _sha("text", text)


def generation_config(client: dict) -> dict:
    """The part of a client config that changes the output (the store key's material)."""
    return {k: v for k, v in sorted(dict(client or {}).items()) if k not in NON_OUTPUT_CLIENT_FIELDS}


def model_key(model: dict) -> str | None:
    """The hash of a model's generation config, or None when its answers are never stored.

    Simulated clients are not stored: they have no provider to pay, compute their
    answers locally inside the plan transaction, and their configured cost stands
    for a per-query price (the paper's cost model).
    """
    client = dict(model.get("client") or {})
    if client.get("kind") in (None, "simulated"):
        return None
    if model.get("output") == "image":  # an image model's answers are not the same client's text answers
        return _sha("model", "image", _canonical(generation_config(client)))
    return _sha("model", _canonical(generation_config(client)))


def answer_key(mkey: str, phash: str) -> str:
    return _sha("answer", mkey, phash)


def judge_key(judge: dict) -> str | None:
    """The hash of an LLM judge's config (client generation config, template, orders), else None."""
    if judge.get("kind") == JudgeKind.JURY:  # the jurors' keys (in order) and the rule that combines them
        keys = [judge_key({**j, "kind": JudgeKind.LLM}) for j in judge.get("judges") or []]
        return _sha("jury", str(judge.get("combine", "majority")), *[k or "" for k in keys])
    if judge.get("kind") != JudgeKind.LLM:
        return None
    # ``orders`` is stored beside its older spelling ``both_orders`` (always equal): hashing only
    # the latter keeps the keys of verdicts stored before ``orders`` existed
    material = {k: v for k, v in sorted(judge.items()) if k not in NON_OUTPUT_JUDGE_FIELDS and k != "orders"}
    material["client"] = generation_config(judge.get("client") or {})
    from ..stored_config import judge_orders

    material["both_orders"] = judge_orders(judge) == 2
    if judge.get("orders") == "auto":  # its verdicts read one or both orders: not a both-orders judge's
        material["orders"] = "auto"
    return _sha("judge", _canonical(material))


def verdict_order(judge: dict, answer_a: str, answer_b: str) -> tuple[str, str, bool, str]:
    """How a duel's verdict is asked for and stored: (first, second, swapped, order).

    A judge that sees both orders gives the mirror verdict for the mirror
    presentation, so its verdict is stored once per unordered pair, in a canonical
    order (``order = "both"``, first = the answer with the smaller hash); a one-order
    judge's verdict is stored per presentation order (``order = "ab"``).
    ``swapped``: the stored order is the duel's (b, a).
    """
    swapped, order = stored_order(judge, text_hash(answer_a), text_hash(answer_b))
    return (answer_b, answer_a, True, order) if swapped else (answer_a, answer_b, False, order)


def stored_order(judge: dict, hash_a: str, hash_b: str) -> tuple[bool, str]:
    """The rule of :func:`verdict_order` on the answers' text hashes: (swapped, order)."""
    from ..stored_config import judges_both_orders

    if judges_both_orders(judge):
        return hash_b < hash_a, "both"
    return False, "ab"


def verdict_key(jkey: str, phash: str, first: str, second: str, *, order: str) -> str:
    return verdict_key_of_hashes(jkey, phash, text_hash(first), text_hash(second), order=order)


def verdict_key_of_hashes(jkey: str, phash: str, first_hash: str, second_hash: str, *, order: str) -> str:
    """:func:`verdict_key` from the answers' :func:`text_hash` values."""
    return _sha("verdict", jkey, phash, first_hash, second_hash, order)


def verdict_question(prompt: str, reference: str | None) -> str:
    """What a verdict's prompt hash covers: the question and, when the prompt has one, its reference
    answer (the judge reads it, so it is part of the key)."""
    return prompt if reference is None else f"{prompt}\x00reference\x00{reference}"


def duel_verdict_key(judge: dict, prompt: str, reference: str | None, *, hash_a: str, hash_b: str) -> str:
    """The verdict-store key of a duel whose answers shown as a and b have text hashes ``hash_a`` and
    ``hash_b`` (the key :meth:`.calls.Calls.verdict` asks for; see :func:`verdict_order`)."""
    swapped, order = stored_order(judge, hash_a, hash_b)
    first, second = (hash_b, hash_a) if swapped else (hash_a, hash_b)
    jkey = judge_key(judge)
    assert jkey is not None  # called for judges whose verdicts are stored (stores_verdicts)
    return verdict_key_of_hashes(jkey, prompt_hash(verdict_question(prompt, reference)), first, second, order=order)


def mirror(choice: str | None) -> str | None:
    """A verdict seen from the other side (a <-> b; ties and "both bad" unchanged)."""
    if choice == Choice.A:
        return str(Choice.B)
    if choice == Choice.B:
        return str(Choice.A)
    return choice
