"""What an annotator may see and hold: the duels handed to it, and the duel handed back at its limit."""

from __future__ import annotations

from typing import Any, Iterable

#: Default of ``max_pending_per_annotator``: one duel in flight per annotator.
DEFAULT_MAX_PENDING_PER_ANNOTATOR = 1


ANNOTATOR_LABEL_PREFIX = "annotator:"  # service.auth.Principal.label of an annotator


def annotator_owns(requested_by: str | None, label: str) -> bool:
    """An annotator reads and votes only on the duels handed to it (``requested_by`` its label);
    never on another annotator's, the admin's, a background run's or one the judge settled alone.
    Every other id is the same 404 as a missing one, so no 404 tells which duels went to humans."""
    return requested_by == label


def held_duel(inflight: Iterable[Any], label: str, limit: int) -> int | None:
    """The duel to hand back instead of a new one, or None when the annotator may start one.

    ``inflight``: the campaign's live in-flight duels (``id``, ``requested_by``). An
    annotator holding ``limit`` of them gets its oldest one again (same duel, no new
    charge); under the limit it gets a new duel.
    """
    own = sorted(int(r.id) for r in inflight if r.requested_by == label)
    return own[0] if len(own) >= max(1, int(limit)) else None
