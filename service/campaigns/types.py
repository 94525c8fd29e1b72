"""What the campaign transactions hand out: plans, outcomes, replay results, domain errors.

Domain errors say what went wrong in the campaign's terms; they carry no HTTP
status (``service/api/errors.py`` maps each class to one) and have no side
effects. :class:`CampaignEnded` marks the one case where the refused request
itself ended the campaign (its webhook is due; the caller schedules it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class DomainError(Exception):
    """A request the campaign's rules refuse; ``retry_later``: it may succeed once in-flight duels settle."""

    def __init__(self, detail: str, *, retry_later: bool = False):
        super().__init__(detail)
        self.detail = detail
        self.retry_later = retry_later


class NotFound(DomainError):
    """No such campaign, duel or annotator."""


class Conflict(DomainError):
    """The request does not fit the campaign's or duel's current state."""


class CampaignEnded(Conflict):
    """The request found the campaign at an end condition and ended it (in the same transaction)."""


@dataclass(frozen=True)
class End:
    """End the campaign (``status``, ``reason``, ``limit`` as :meth:`finish` stores them), then raise ``error``
    (a decision of :mod:`service.cycle.plan` and :func:`service.money.reserve.budget_decision`)."""

    status: str
    reason: str
    limit: str | None
    error: DomainError


class Forbidden(DomainError):
    """The caller's token does not allow this."""


class Unprocessable(DomainError):
    """The request is well-formed but its content cannot be used."""


class HeldDuel(Exception):
    """Not an error: the annotator already holds its limit of duels in flight; ``duel_id`` is handed back."""

    def __init__(self, duel_id: int):
        super().__init__(f"duel {duel_id} is still waiting for this annotator")
        self.duel_id = duel_id


@dataclass
class DuelPlan:
    """What the model calls of one duel need, taken from the plan transaction."""

    campaign_id: int
    duel_id: int
    number: int
    i: int
    j: int
    a_is_i: bool
    prompt: str
    models: list[dict]
    judge: dict
    tie_policy: str
    seed: int
    prompt_index: int | None = None  # row of the prompts table (its turns and reference: prompt_extras)
    select_ms: float = 0.0
    answers: str = "fresh"  # the campaign's answer and verdict reuse settings (service/campaigns/store_settings.py)
    verdicts: str = "fresh"
    draw_key: str | None = None  # the campaign's secret key (draws.answer_secret keys simulated answers with it)
    # Store rows this duel claimed before paying for a call (model index or "judge" -> store_claims.Claim).
    claims: dict[Any, Any] = field(default_factory=dict)
    # time.monotonic() by which the model calls must return (expiry.call_deadline; None: no limit)
    deadline: float | None = None
    # when the duel's call reservation ends for good (created_at + the call expiry): its leases renew up to it
    hard_expiry: Any = None
    # Set when both models answered inside the plan transaction (instant clients):
    results: dict[int, Any] | None = None
    outcome: "DuelOutcome | None" = None

    @property
    def model_a(self) -> int:
        return self.i if self.a_is_i else self.j

    @property
    def model_b(self) -> int:
        return self.j if self.a_is_i else self.i


@dataclass
class DuelOutcome:
    duel_id: int
    status: str
    ended: bool = False  # this transaction ended the campaign (its webhook is due)
    failed: bool = False
    error: str | None = None
    view: dict | None = None  # the duel as an admin sees it, built inside the transaction


@dataclass
class ReplayResult:
    campaign_id: int
    ok: bool
    events: int
    diff: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"campaign_id": self.campaign_id, "ok": self.ok, "events": self.events, "diff": self.diff}
