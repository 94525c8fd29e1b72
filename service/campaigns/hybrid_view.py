"""What a hybrid campaign's view shows (docs/service.md, *Hybrid judge*): human votes used, the
human votes humans alone would have needed (estimated), and how often the automatic judge agrees
with the humans (a Wilson interval), with a warning below chance."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import func, select

from algorithms.hybrid import N_, NH, SY, SY2
from algorithms.vocabulary import DuelStatus

from ..models import Campaign, Duel
from ..stored_config import stored
from . import hybrid, policy_log
from .annotator_access import ANNOTATOR_LABEL_PREFIX

#: The confidence of the agreement interval.
AGREEMENT_CONFIDENCE = 0.95
#: Decisive human votes needed before a below-chance agreement is warned about.
WARN_MIN_VOTES = 10
#: The variance of a score in [0, 1] at most (a vote for either side at even odds): the prior of
#: a pair's human-score variance (:func:`human_variance`).
HUMAN_VAR_PRIOR = 0.25
DECISIVE = ("a", "b")


def wilson(k: int, n: int, confidence: float = AGREEMENT_CONFIDENCE) -> tuple[float, float] | None:
    """Wilson's score interval for a proportion ``k / n`` (None when ``n == 0``)."""
    if n <= 0:
        return None
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def agreement_warning(agree: int, decisive: int) -> str | None:
    """The warning of a judge that agrees with the humans less often than chance: set when, on at
    least :data:`WARN_MIN_VOTES` decisive votes, the whole Wilson interval of its agreement rate lies
    below 1/2 (a rate merely under 1/2 is what a judge at chance shows on about 4 samples in 10 of
    10 votes)."""
    interval = wilson(agree, decisive)
    if interval is None or decisive < WARN_MIN_VOTES or interval[1] >= 0.5:
        return None
    return (
        f"the automatic judge agrees with the humans on {agree} of {decisive} decisive votes "
        f"({agree / decisive:.0%}, {AGREEMENT_CONFIDENCE:.0%} interval {interval[0]:.2f} to {interval[1]:.2f}): "
        "below chance. The certificate stays valid, but this judge saves no human votes; check its prompt "
        "and answer order"
    )


def human_variance(xs: list[float]) -> float:
    """A pair's per-vote variance of human scores: the sample variance shrunk toward
    :data:`HUMAN_VAR_PRIOR` with the weight of one vote (two agreeing votes are not a variance of 0,
    which would say humans alone need no votes at all)."""
    if not xs:
        return HUMAN_VAR_PRIOR
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) + HUMAN_VAR_PRIOR) / (len(xs) + 1)


def humans_alone_estimate(state: dict, human_var: dict[int, float]) -> int | None:
    """Human votes a humans-only test would have needed for the same evidence: per pair, its duels
    times ``Var(H) / Var(Y)`` (the per-duel variance of a human vote over that of the hybrid
    estimate Y), summed. ``human_var``: the pairs' variances of human scores (pair index ->
    :func:`human_variance`). The ratio is at most 1: with ``h = H - 1/2``, ``u = J - 1/2``,
    ``E[(Y - 1/2)^2] = E[h^2] + E[(h - lambda u)^2] (1/pi - 1)``, so ``Var(Y) >= Var(H)`` (a sample
    ratio above 1 is noise). A pair without human votes counts 0: its ``Y`` so far are the judge's
    predictions only (``1/2`` exactly while ``lambda`` is 0), whose spread measures the judge, not
    the humans."""
    stats = state.get("stats") if isinstance(state, dict) else None
    if not stats:
        return None
    total = 0.0
    for k, row in enumerate(stats):
        n = float(row[N_])
        if row[NH] < 1:  # only the judge's predictions so far: no evidence about the humans
            continue
        if n < 2:
            total += n
            continue
        mean = row[SY] / n
        var_y = max(row[SY2] / n - mean * mean, 1e-12)
        var_h = human_var.get(k, HUMAN_VAR_PRIOR)
        total += n * min(var_h / var_y, 1.0)  # Var(Y) >= Var(H): a duel is worth one human vote at most
    return int(round(total))


def human_voted(campaign_id: int) -> tuple:
    """The conditions of a duel with a human vote: judged, not by the automatic judge alone
    (an annotator's vote, or the admin's, each charged the fee)."""
    return (
        Duel.campaign_id == campaign_id,
        Duel.status == DuelStatus.JUDGED,
        Duel.judged_by.is_not(None),
        Duel.judged_by != hybrid.JUDGED_BY_JUDGE,
    )


def summary_for(s, c: Campaign, admin: bool) -> dict[str, Any]:
    """What a hybrid campaign's view adds: the ``hybrid`` object for the admin; for an annotator,
    ``votes_counted`` is the human votes (the judge's verdicts are not votes)."""
    if admin:
        return {"hybrid": summary(s, c)}
    n = s.execute(
        select(func.count(Duel.id)).where(
            *human_voted(c.id),
        )
    ).scalar_one()
    return {"votes_counted": int(n)}


def summary(s, c: Campaign) -> dict[str, Any]:
    """The ``hybrid`` object of a hybrid campaign's view (read in session ``s``)."""
    judge = stored(c.judge)
    rows = s.execute(
        select(Duel.model_i, Duel.model_j, Duel.choice, Duel.score, Duel.judge_detail).where(
            *human_voted(c.id),
        )
    ).all()
    waiting = s.execute(
        select(func.count(Duel.id)).where(
            Duel.campaign_id == c.id,
            Duel.status == DuelStatus.PENDING,
            Duel.requested_by.like(f"{ANNOTATOR_LABEL_PREFIX}%"),
        )
    ).scalar_one()
    decisive = agree = 0
    scores: dict[int, list[float]] = {}
    L = len(c.models)
    for r in rows:
        h = hybrid.detail_of(r.judge_detail) or {}
        if r.choice in DECISIVE and h.get("judge_choice") in DECISIVE:
            decisive += 1
            agree += h["judge_choice"] == r.choice
        if r.score is not None:
            i, j = int(r.model_i), int(r.model_j)
            k = i * L - i * (i + 1) // 2 + (j - i - 1)  # canonical pair order (i < j)
            scores.setdefault(k, []).append(float(r.score))
    human_var = {k: human_variance(xs) for k, xs in scores.items()}
    interval = wilson(agree, decisive)
    rate = agree / decisive if decisive else None
    return {
        "human_rate": judge.get("human_rate"),
        "fee_per_vote": float((judge.get("human") or {}).get("fee_per_vote") or 0.0),
        "human_votes": len(rows),
        "human_votes_waiting": int(waiting),
        "human_votes_alone_estimate": humans_alone_estimate(policy_log.stored_state(s, c.id), human_var),
        "agreement": {
            "decisive_votes": decisive,
            "agreeing": agree,
            "rate": rate,
            "interval": list(interval) if interval else None,
            "confidence": AGREEMENT_CONFIDENCE,
        },
        "agreement_warning": agreement_warning(agree, decisive),
    }
