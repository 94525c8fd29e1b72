"""Upper bounds of what a call may be charged (nano-USD): the amounts a duel reserves.

A model call's bound is its price times its token limits (:func:`model_bound_nusd`), a judge's the
same over the longest answers it can be shown (:func:`judge_bound_nusd`); a campaign with a budget
needs both to exist and to stay within the ledger's bounds (:func:`unbounded_cost_reason`,
:func:`excessive_cost_reason`). Pure functions over stored configs.
"""

from __future__ import annotations

import math
import string
from typing import Sequence

from ..stored_config import judge_orders, stored
from ..stored_text import MAX_ANSWER_BYTES
from .budget import LEDGER_CAP_NUSD
from .costs import cost_nusd, vote_fee_nusd


def _ceil_nusd(usd: float) -> int:
    """``usd`` rounded up to whole nano-USD, saturated at ``LEDGER_CAP_NUSD`` (NaN too): a bound that
    large (only in rows stored before the money bounds, docs/reliability.md, Limits) fits no budget,
    so the duel is refused for its budget instead of the request failing."""
    x = float(usd) * 1e9
    return int(math.ceil(x)) if x < LEDGER_CAP_NUSD else LEDGER_CAP_NUSD


def model_bound_nusd(model: dict, prompt: str) -> int | None:
    """An upper bound of one model call's charge on ``prompt`` (nano-USD), or ``None``.

    See :func:`service.clients.config.call_cost_bound`; the input is the prompt's UTF-8 bytes and its
    images' tokens (:func:`prompt_image_tokens`), the output limit the client's or, for a price from a price map, the provider's (``pricing.max_output_tokens``).
    """
    from service.clients.config import call_cost_bound

    image_tokens = prompt_image_tokens(model, prompt)
    client = stored(model["client"])
    limit = (model.get("pricing") or {}).get("max_output_tokens")
    b = call_cost_bound(
        client,
        float(model["cost"]),
        len(prompt.encode("utf-8")),
        max_output_tokens=limit,
        image_tokens=image_tokens,
    )
    return None if b is None else _ceil_nusd(b)


def prompt_image_tokens(model: dict, prompt: str) -> int:
    """An upper bound of the input tokens of ``prompt``'s images for ``model``: each image named in the
    prompt text counts the most one of the campaign's images costs the model (``image_tokens``, stored
    at creation by its provider's rule, service/images/tokens.py); a row stored without it counts the
    most any accepted image can cost."""
    from service.images.tokens import prompt_image_count, worst_image_tokens

    n = prompt_image_count(prompt)
    if n == 0:
        return 0
    per = model.get("image_tokens")
    if not isinstance(per, int) or isinstance(per, bool) or per < 0:
        per = worst_image_tokens(stored(model["client"]))
    return n * per


def judge_bound_nusd(judge: dict, prompt: str, reference: str | None = None, image_answers: bool = False) -> int | None:
    """An upper bound of a duel's judge charge (nano-USD), or ``None``.

    A simulated judge charges nothing, a human judge its ``fee_per_vote``. An LLM
    judge makes one call per order (:func:`judge_orders`); each call's input is
    its system prompt and its template with the question, the reference answer and
    both answers, bounded by ``MAX_ANSWER_BYTES`` per answer, and the images it is shown: the
    prompt's and, with ``image_answers``, each answer's, at the most one image can cost the judge.
    """
    return _judge_bound(stored(judge), prompt, reference, image_answers)


def _judge_bound(judge: dict, prompt: str, reference: str | None, image_answers: bool) -> int | None:
    """:func:`judge_bound_nusd` of a judge in its stored form (its jurors and a hybrid's automatic judge are too)."""
    kind = judge.get("kind")
    if kind == "jury":  # the sum of the jurors' bounds
        bounds = [_judge_bound(j, prompt, reference, image_answers) for j in judge.get("judges") or []]
        return None if any(b is None for b in bounds) else sum(b for b in bounds if b is not None)
    if kind == "hybrid":  # hybrid hook: the automatic judge's bound plus one human fee
        b = _judge_bound(judge["llm"], prompt, reference, image_answers)
        return None if b is None else b + cost_nusd((judge.get("human") or {}).get("fee_per_vote") or 0.0)
    if kind == "human":
        return vote_fee_nusd(judge)
    if kind != "llm":
        return 0
    from judges.llm import JUDGE_TEMPLATE, render_judge_prompt
    from service.clients.config import call_cost_bound

    template = judge.get("prompt_template") or JUDGE_TEMPLATE
    rendered = render_judge_prompt(prompt, "", "", reference, template)
    fixed = len(rendered.encode("utf-8")) + len((judge.get("system_prompt") or "").encode("utf-8"))
    # each answer field may appear more than once in a template
    n_answers = sum(1 for _, name, _, _ in string.Formatter().parse(template) if name in ("answer_a", "answer_b"))
    input_bytes = fixed + max(2, n_answers) * MAX_ANSWER_BYTES
    # the judge sees the prompt's images and, with image models, each answer as an image (service/images/judge.py)
    from service.images.tokens import prompt_image_count, worst_image_tokens

    shown = prompt_image_count(prompt) + (max(2, n_answers) if image_answers else 0)
    image_tokens = shown * worst_image_tokens(judge["client"]) if shown else 0
    usd = call_cost_bound(judge["client"], float(judge.get("cost", 0.0)), input_bytes, image_tokens=image_tokens)
    if usd is None:
        return None
    return judge_orders(judge) * _ceil_nusd(usd)


def unbounded_cost_reason(models: Sequence[dict], judge: dict) -> str | None:
    """Why no cost bound can be derived for a campaign with a budget, or ``None`` if it can."""
    for m in models:
        if model_bound_nusd(m, "") is None:
            return (
                f"models[{m.get('name')!r}]: with a budget, a client with per-token prices needs "
                "params.max_tokens (or the provider's output-token limit) or max_cost_per_query, "
                "so the budget can reserve an upper bound of each call's cost"
            )
    if judge_bound_nusd(judge, "") is None:
        return (
            "judge.client: with a budget, a judge client with per-token prices needs params.max_tokens "
            "(or the provider's output-token limit) or max_cost_per_query"
        )
    return None


def excessive_cost_reason(models: Sequence[dict], judge: dict) -> str | None:
    """Why a model's or the judge's per-call cost bound (an empty prompt; for the judge the longest
    answers) exceeds ``MAX_QUERY_USD``, or ``None``: a bound from a price and an output-token limit
    (``params.max_tokens``) must stay one the int64 ledger can reserve (docs/reliability.md, Limits)."""
    from service.clients.config import MAX_QUERY_USD

    cap = _ceil_nusd(MAX_QUERY_USD)
    for m in models:
        b = model_bound_nusd(m, "")
        if b is not None and b > cap:
            return (
                f"models[{m.get('name')!r}]: one call can cost up to {b / 1e9:.6g} USD (price x output-token "
                f"limit), above the bound of {MAX_QUERY_USD:g} USD per call; lower params.max_tokens or set "
                "max_cost_per_query"
            )
    b = judge_bound_nusd(judge, "")
    if b is not None and b > judge_orders(judge) * cap:
        return (
            f"judge.client: one judge call can cost up to {b / judge_orders(judge) / 1e9:.6g} USD (price x the "
            f"longest answers and output-token limit), above the bound of {MAX_QUERY_USD:g} USD per call; "
            "lower params.max_tokens or set max_cost_per_query"
        )
    return None
