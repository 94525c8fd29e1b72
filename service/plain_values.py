"""Plain values: JSON types from values that may hold numpy scalars and arrays, and finite floats.

Pure functions, no I/O: the policy snapshots and the stored JSON columns go through :func:`jsonable`.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


def jsonable(value: Any) -> Any:
    """Plain JSON types (numpy scalars and arrays become floats/ints/lists).

    The result equals ``json.loads(json.dumps(value))`` (with numpy values converted);
    the common shapes (dicts with string keys, lists, tuples, numbers, strings, None,
    numpy values) are converted directly, which is several times faster than the JSON
    round trip on the policy snapshots written with every vote; anything else takes the
    round trip.
    """
    try:
        return _plain(value)
    except _NotPlain:
        return json.loads(json.dumps(value, default=_np_default))


class _NotPlain(Exception):
    """A value :func:`_plain` leaves to the JSON round trip."""


_NUMBER_TYPES = frozenset((int, float))


def _plain(v: Any) -> Any:
    t = type(v)
    if t is str or t is int or t is float or t is bool or v is None:
        return v
    if t is dict:
        out = {}
        for k, x in v.items():
            if type(k) is not str:
                raise _NotPlain  # json turns keys into strings in its own way (1 -> "1", True -> "true")
            out[k] = _plain(x)
        return out
    if t is list or t is tuple:
        if _NUMBER_TYPES.issuperset(map(type, v)):  # the policy state's long rows: one pass in C
            return list(v)
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, np.generic):
        return _plain(v.item())
    if isinstance(v, str):  # StrEnum members: their value, as json.dumps writes it
        return str.__str__(v)
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    raise _NotPlain


def _np_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def finite_or_none(x: Any) -> float | None:
    """``float(x)`` when it is a finite number, else None."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None
