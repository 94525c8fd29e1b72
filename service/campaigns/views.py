"""Pure helpers of the campaign and duel views (what each caller may see, JSON forms, diffs)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from .rules import jsonable

ADMIN_DUEL_FIELDS = ("model_a", "model_b", "model_a_name", "model_b_name", "score", "judged_by", "judge", "charges")


def duel_view_for(view: dict, admin: bool) -> dict:
    """Annotators do not see which model is behind which answer (nor the judge's notes)."""
    if admin:
        return view
    return {k: v for k, v in view.items() if k not in ADMIN_DUEL_FIELDS}


def jsonable_report(view: dict) -> dict:
    """A campaign view as plain JSON (datetimes as ISO strings)."""
    out = {}
    for k, v in view.items():
        out[k] = v.isoformat() if isinstance(v, dt.datetime) else v
    return jsonable(out)


def json_diff(stored: Any, replayed: Any, path: str = "") -> list[str]:
    """Human-readable differences between two JSON values."""
    if isinstance(stored, dict) and isinstance(replayed, dict):
        out: list[str] = []
        for key in sorted(set(stored) | set(replayed), key=str):
            p = f"{path}.{key}" if path else str(key)
            if key not in stored:
                out.append(f"{p}: missing in stored state (replayed {replayed[key]!r})")
            elif key not in replayed:
                out.append(f"{p}: missing in replayed state (stored {stored[key]!r})")
            else:
                out.extend(json_diff(stored[key], replayed[key], p))
        return out
    if isinstance(stored, list) and isinstance(replayed, list) and len(stored) == len(replayed):
        out = []
        for n, (a, b) in enumerate(zip(stored, replayed)):
            out.extend(json_diff(a, b, f"{path}[{n}]"))
        return out
    if stored != replayed:
        return [f"{path or '<root>'}: stored {stored!r} != replayed {replayed!r}"]
    return []
