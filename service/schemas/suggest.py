"""'Did you mean' for unknown keys: the known key closest to a misspelt one.

A campaign file with ``delat: 0.1`` or a judge with ``templat:`` is refused (every schema
forbids extra keys); this module finds what the user probably meant by walking the
pydantic model along the error's location (fields, lists, dictionaries, and the
``kind``-tagged unions whose tag pydantic writes into the location) and comparing the
unknown key with the known keys of the model it lands on (``difflib``, ratio >= 0.6).
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel


def _members(tp: Any) -> list[Any]:
    """The concrete types inside ``tp``: Annotated, Optional, unions and containers unwrapped."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _members(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(tp) for m in _members(arg)]
    return [tp]


def _keys(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _tag_of(model: type[BaseModel]) -> str | None:
    """The ``kind`` literal a tagged-union member carries, if any."""
    info = model.model_fields.get("kind")
    if info is None:
        return None
    args = typing.get_args(info.annotation)
    return str(args[0]) if len(args) == 1 else None


def _step(tp: Any, part: str | int) -> Any | None:
    """The type found one location step below ``tp`` (None when it cannot be followed)."""
    for m in _members(tp):
        origin = typing.get_origin(m)
        if origin in (list, tuple, Sequence) and isinstance(part, int):
            return typing.get_args(m)[0]
        if origin is dict and isinstance(part, str):
            return typing.get_args(m)[1]
        if isinstance(m, type) and issubclass(m, BaseModel) and isinstance(part, str):
            fields = {info.alias or name: info for name, info in m.model_fields.items()}
            if part in fields:
                return fields[part].annotation
    tagged = [m for m in _members(tp) if isinstance(m, type) and issubclass(m, BaseModel) and _tag_of(m) == part]
    return tagged[0] if tagged else None


def did_you_mean(model: type[BaseModel], loc: Sequence[str | int]) -> str | None:
    """The known key closest to the unknown key at the end of ``loc`` inside ``model``, or None.

    ``loc`` is a pydantic error location relative to ``model`` (without FastAPI's ``"body"``).
    """
    if not loc or not isinstance(loc[-1], str):
        return None
    tp: Any = model
    for part in loc[:-1]:
        tp = _step(tp, part)
        if tp is None:
            return None
    known = [k for m in _members(tp) if isinstance(m, type) and issubclass(m, BaseModel) for k in _keys(m)]
    close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
    return close[0] if close else None
