"""The ledger: the one place that decides what a model or judge call is charged.

Every charge row a campaign writes (a duel's answers, a pre-generated answer, an
LLM judge's verdict) takes its amount from :func:`model_charge` or
:func:`judge_charge`; the clients parse a provider's usage figures with
:func:`service.clients.usage.parse_tokens`. Its invariants (docs/reliability.md, *Ledger*):

1. **Usage figures are bounded.** A token count is a whole number in
   ``[0, MAX_USAGE_TOKENS]`` (:mod:`service.clients.usage`): a JSON integer, or a float with an integral value.
   Anything else (negative, fractional, ``1e16``, ``1e400`` which JSON reads as
   infinity, ``NaN``, a string, a boolean) raises :class:`UsageError`, which the
   client records on the answer (``Completion.usage_fault``): the call is a
   provider fault, charged its bound (:func:`usage_fault_charge`), the figure kept
   in the fault's sentence, the campaign paused; never an ``OverflowError``, never
   an amount the int64 ledger cannot hold, never a free call.
2. **A call is charged at most its bound.** The bound is what the budget
   reserved for the call (:func:`service.money.bounds.model_bound_nusd`,
   :func:`service.money.bounds.judge_bound_nusd`: the price's ceiling
   ``max_cost_per_query``, or the request's ``max_tokens`` at the per-token
   price). A reported usage above it (a cost above the bound, or, without a
   ``max_cost_per_query``, more output tokens than the request's own
   ``max_tokens``) is a *provider fault*: the call
   is charged the bound, the reported figure is stored beside the charge and on
   the duel, and the caller pauses the campaign with :attr:`CallCharge.fault` as
   the reason.
3. **Without a derivable bound** (a campaign without a budget whose client has
   per-token prices but no ``max_tokens``), a call is charged at most
   ``MAX_CALL_NUSD``; with at most ``2**14`` calls in flight, a spend that stopped
   below ``budget.LEDGER_CAP_NUSD = 2**62`` cannot pass ``2**63 - 1``.
4. Amounts are non-negative Python ints (nano-USD); a reported cost that is
   missing, negative or NaN counts 0, an infinite one is above every bound.
5. **A reservation is released only when its call can no longer be charged**
   (enforced by the transactions, docs/reliability.md): a run take-over keeps the
   reservations of the old owner's duels until their expiry, and a result that
   arrives after its duel expired or its pre-generation hold lapsed is not charged.

The ledger is pure: it computes amounts and reasons, the transactions write them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..models import from_nusd
from ..stored_config import stored
from . import budget
from .bounds import judge_bound_nusd, model_bound_nusd
from .costs import cost_nusd

#: The most a call without a derivable bound is charged (2**48 nano-USD, about 281,475 USD).
MAX_CALL_NUSD = 2**48


@dataclass(frozen=True)
class CallCharge:
    """What one call (or one judgement's calls) is charged.

    ``amount_nusd``: the charge; ``reported_nusd``: what the reported usage would
    cost; ``bound_nusd``: the call's bound (``None``: none derivable); ``fault``:
    the provider fault (a sentence naming the model and the figure), or ``None``.
    """

    amount_nusd: int
    reported_nusd: int
    bound_nusd: int | None
    fault: str | None = None

    def detail(self) -> dict[str, Any]:
        """What a charge row and the duel keep of a faulty call (empty for a normal one)."""
        if self.fault is None:
            return {}
        return {
            "provider_fault": self.fault,
            "reported_cost": from_nusd(self.reported_nusd),
            "bound": from_nusd(self.bound_nusd) if self.bound_nusd is not None else None,
        }


def _usd(nusd: int) -> str:
    return f"{nusd / 1e9:.6g} USD"


def _reported_nusd(cost: Any) -> int:
    """A reported cost in nano-USD: an infinite or huge cost (a price times a lying usage) counts as
    ``2**62`` (above every bound), a missing, negative or NaN cost as 0."""
    try:
        v = float(cost)
    except (TypeError, ValueError):
        return 0
    if math.isnan(v) or v <= 0:
        return 0
    if math.isinf(v) or v * 1e9 >= budget.LEDGER_CAP_NUSD:
        return budget.LEDGER_CAP_NUSD
    return cost_nusd(v)


def capped(reported_cost: Any, bound_nusd: int | None, who: str, over_tokens: str | None = None) -> CallCharge:
    """The charge of a call that reported ``reported_cost`` (USD) against its bound.

    ``over_tokens``: a sentence when the reported output tokens exceed the request's
    own limit (a fault even when the cost stays under the bound). ``who`` names the
    model or judge in the fault.
    """
    reported = _reported_nusd(reported_cost)
    cap = bound_nusd if bound_nusd is not None else MAX_CALL_NUSD
    if reported <= cap and over_tokens is None:
        return CallCharge(reported, reported, bound_nusd)
    if reported > cap:
        what = f"a cost of {_usd(reported)}, above its bound of {_usd(cap)}"
        if over_tokens is not None:
            what = f"{over_tokens} and {what}"
    else:
        what = str(over_tokens)
    return CallCharge(min(reported, cap), reported, bound_nusd, f"{who} reported {what}; charged at most the bound")


def _over_limit(client: dict, output_tokens: Any) -> str | None:
    """A sentence when ``output_tokens`` exceeds the request's own output-token limit (an image model's
    limit is per image: ``params.n`` images a call may report ``n`` times it)."""
    from service.clients.config import images_per_call, output_token_limit

    if client.get("kind") == "simulated" or not isinstance(output_tokens, int):
        return None
    if client.get("max_cost_per_query") is not None:  # the price's ceiling is the bound (hidden reasoning tokens)
        return None
    limit = output_token_limit(client)
    n = images_per_call(client)
    if limit is None or output_tokens <= limit * n:
        return None
    per = f" per image x {n} images" if n > 1 else ""
    return f"{output_tokens} output tokens for a request with max_tokens {limit}{per}"


def usage_fault_charge(bound_nusd: int | None, who: str, usage_fault: str) -> CallCharge:
    """The charge of a call whose reported usage was unusable (``usage_fault`` names the figure): its bound
    (``MAX_CALL_NUSD`` without one), as a provider fault."""
    cap = bound_nusd if bound_nusd is not None else MAX_CALL_NUSD
    return CallCharge(
        cap, cap, bound_nusd, f"{who} reported an unusable usage figure ({usage_fault}); charged the bound"
    )


def model_charge(model: dict, prompt: str, completion: Any) -> CallCharge:
    """The charge of model ``model``'s answer ``completion`` (a client ``Completion``) to ``prompt``."""
    over = _over_limit(stored(model["client"]), completion.output_tokens)
    bound = model_bound_nusd(model, prompt)
    who = f"model {model['name']!r}"
    if fault := getattr(completion, "usage_fault", None):
        return usage_fault_charge(bound, who, str(fault))
    return capped(completion.cost, bound, who, over)


def usage_faulted(detail: dict | None) -> bool:
    """Whether a judgement's calls (its ``detail``) include one whose usage figure was unusable."""
    calls = (detail or {}).get("calls") or []
    return any(isinstance(call, dict) and call.get("usage_fault") for call in calls)


def judge_charge(
    judge: dict, prompt: str, reference: str | None, *, cost: Any, detail: dict | None, image_answers: bool = False
) -> CallCharge:
    """The charge of a judgement (``cost``: the sum of its calls, ``detail``: the judge's record of them;
    ``image_answers``: the campaign's models answer with images, :func:`stored_config.image_answers`)."""
    judge = stored(judge)
    bound = judge_bound_nusd(judge, prompt, reference, image_answers) if judge.get("kind") == "llm" else None
    over = None
    if judge.get("kind") == "llm":
        model = judge["client"].get("model") or judge["client"].get("kind")
        for call in (detail or {}).get("calls") or []:
            if isinstance(call, dict):
                if call.get("usage_fault"):
                    return usage_fault_charge(bound, f"judge model {model!r}", str(call["usage_fault"]))
                over = over or _over_limit(judge["client"], call.get("output_tokens"))
        return capped(cost, bound, f"judge model {model!r}", over)
    return capped(cost, bound, "the judge")


def fault_reason(fault: str) -> str:
    """The end reason of a campaign paused on a provider fault (this module decides the fault)."""
    return f"paused on a provider fault: {fault}; fix the provider, then continue with PATCH"


#: The detail key of a charge for a call sent before its campaign ended whose answer arrived after
#: the end: the only charges dated after a campaign's ``ended_at`` (a call still queued at the
#: end is never sent: service.clients.ratelimit.SEND_GUARD).
LATE = "late"


def mark_late(detail: dict | None, ended: bool) -> dict | None:
    """``detail`` with ``late: true`` when the campaign had ``ended`` before the charge (else as is)."""
    return {**(detail or {}), LATE: True} if ended else detail
