"""Storing a duel's answers: what both calls' results mean for the duel and the ledger.

Pure functions: :func:`settle_answers` turns the two results (a completion, a stored
answer, or the exception that ended the call) into charge rows, the duel's answer
columns and its failure; :func:`after_answers` decides the duel's next status.
The caller cleans and masks the answers before it takes the campaign's lock (it
takes a while for a long answer).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from algorithms.vocabulary import IN_FLIGHT, DuelStatus

from ..campaigns import stores
from ..campaigns.leases import ORPHAN_REQUESTER
from ..campaigns.types import DuelPlan
from ..clients import ClientError, Completion
from ..models import from_nusd
from ..money import ledger
from ..plain_values import finite_or_none
from ..redaction import redact
from ..stored_text import MAX_ERROR_CHARS, clean_text


def settle_answers(plan: DuelPlan, results: dict[int, Any], now: dt.datetime, keys: tuple[str, ...]):
    """What both calls' results mean for the duel.

    ``keys``: the secrets the stored text must not contain (service.redaction). Returns
    (charges, total, fields, error, faults): the charge rows (without
    ``duel_id``) for what the answers cost (:func:`ledger.model_charge`: at most
    each call's bound), their sum in nano-USD, the duel's answer columns, the
    failure message (None when both answered) and the provider faults (the
    models whose reported usage exceeded their bound: the duel fails).
    """
    errors: list[str] = []
    faults: dict[int, str] = {}
    charges: list[dict] = []
    info: dict[int, dict] = {}
    for idx in (plan.i, plan.j):
        res = results[idx]
        name = plan.models[idx]["name"]
        if isinstance(res, stores.Stored):  # reused: a zero-cost ledger row naming the charge that paid
            info[idx] = {
                "model": name,
                "input_tokens": res.input_tokens,
                "output_tokens": res.output_tokens,
                "cost": 0.0,
                "reused_answer": res.id,
            }
            charges.append(stores.reuse_charge(plan.campaign_id, "model", idx, res, now))
        elif isinstance(res, Completion):
            charge = ledger.model_charge(plan.models[idx], plan.prompt, res)
            amount = charge.amount_nusd
            info[idx] = {
                "model": name,
                "input_tokens": res.input_tokens,
                "output_tokens": res.output_tokens,
                "cost": from_nusd(amount),
                "latency_s": finite_or_none(res.latency_s),
                "attempts": res.attempts,
                **charge.detail(),
            }
            if charge.fault is not None:
                faults[idx] = charge.fault
                errors.append(f"provider fault: {charge.fault}")
            if amount:
                charges.append(
                    {
                        "campaign_id": plan.campaign_id,
                        "kind": "model",
                        "model_index": idx,
                        "amount_nusd": amount,
                        "created_at": now,
                        "detail": {
                            "input_tokens": res.input_tokens,
                            "output_tokens": res.output_tokens,
                            **charge.detail(),
                        },
                    }
                )
        else:
            message = redact(_error_text(res), keys)
            info[idx] = {"model": name, "error": message}
            errors.append(f"model {name!r}: {message}")
    total = sum(ch["amount_nusd"] for ch in charges)
    fields: dict[str, Any] = {"completion_a": info.get(plan.model_a), "completion_b": info.get(plan.model_b)}
    error = None
    if errors:
        error = clean_text("; ".join(errors), MAX_ERROR_CHARS)
    else:
        fields.update(
            answer_a=redact(clean_text(results[plan.model_a].text), keys),
            answer_b=redact(clean_text(results[plan.model_b].text), keys),
            answered_at=now,
        )
    return charges, total, fields, error, faults


def after_answers(status: str, requested_by: str | None, error: str | None) -> tuple[str, str | None, bool]:
    """(the duel's status once its answers are stored, the error to store on it (None: leave it),
    whether it failed now: ``duels_failed`` + 1).

    A duel of a run taken over (an orphan) is paid for but never counted: expired. A failure
    is stored on the duel, and fails it if it is still in flight; answers make a calling duel
    pending (its verdict's wait starts). A duel no longer in flight keeps its status.
    """
    if requested_by == ORPHAN_REQUESTER and status in IN_FLIGHT:
        return DuelStatus.EXPIRED, None, False
    if error is not None:
        return (DuelStatus.FAILED, error, True) if status in IN_FLIGHT else (status, error, False)
    if status == DuelStatus.CALLING:
        return DuelStatus.PENDING, None, False
    return status, None, False


def late_error(lost_nusd: int) -> str:
    """The duel's error when its calls returned after its hard deadline (nothing of them is charged)."""
    return f"its calls returned after the duel's hard deadline; {lost_nusd / 1e9:.9g} USD not charged"


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc)
    # Unexpected exceptions: the type only (their text might carry request details).
    return f"unexpected {type(exc).__name__} in the model client"
