"""A pair of models as stored (``model_i < model_j``), the in-flight pairs as the policy reads them, and the
policy's next pair as stored."""

from __future__ import annotations

from typing import Any, Iterable


def ordered_pair(i: int, j: int) -> tuple[int, int]:
    """A pair as stored: ``model_i < model_j``."""
    i, j = int(i), int(j)
    return (j, i) if i > j else (i, j)


def pending_pairs(inflight: Iterable[Any]) -> list[list[int]]:
    """The in-flight duels' pairs, as the policy's ``pending`` argument."""
    return [[int(r.model_i), int(r.model_j)] for r in inflight]


def next_pair(policy: Any, pending: list[list[int]]) -> tuple[int, int]:
    """The ``policy``'s next pair given the ``pending`` ones (:func:`pending_pairs`), as stored."""
    return ordered_pair(*policy.next_pair(pending=pending))
