"""The models a campaign disabled or replaced while it ran, read from ``campaigns.model_changes``
(written by :mod:`service.cycle.model_changes`): which models are active, how many the campaign
started with, and each model's status for the views."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DISABLE, REPLACE = "disable", "replace"
#: What the campaign view shows of each change.
CHANGE_FIELDS = ("action", "model", "reason", "at", "seq", "added")


def disabled_models(changes: Sequence[dict] | None) -> set[int]:
    """Indices of the disabled (or replaced) models."""
    return {int(e["index"]) for e in changes or ()}


def active_models(n_models: int, changes: Sequence[dict] | None) -> list[int]:
    """Indices of the models still compared, in order."""
    off = disabled_models(changes)
    return [m for m in range(n_models) if m not in off]


def initial_model_count(n_models: int, changes: Sequence[dict] | None) -> int:
    """How many models the campaign was created with (replacements append theirs)."""
    return n_models - sum(1 for e in changes or () if e.get("added"))


def model_status(names: Sequence[str], changes: Sequence[dict] | None) -> list[dict[str, Any]]:
    """Per model, ``{"name", "status": "active" | "disabled", "reason", "replaced_by", "replaces"}``."""
    out: list[dict[str, Any]] = [{"name": n, "status": "active"} for n in names]
    for e in changes or ():
        m = int(e["index"])
        out[m].update(status="disabled", reason=e.get("reason"), disabled_at=e.get("at"))
        added = e.get("added")
        if added:
            out[m]["replaced_by"] = added["name"]
            if int(added["index"]) < len(out):
                out[int(added["index"])]["replaces"] = names[m]
    return out
