"""A provider's reported token counts, parsed with bounds before anything is charged.

The ledger (:mod:`service.money.ledger`) charges from these figures; the clients parse
them here, so a negative, fractional, non-finite or absurdly large count is a failed call
with a clear error, never an overflow (docs/reliability.md, *Ledger*).
"""

from __future__ import annotations

import math
from typing import Any

#: The largest token count a provider may report for one call (no model reads or
#: writes a trillion tokens in one call); above it the figure is refused.
MAX_USAGE_TOKENS = 10**12


class UsageError(ValueError):
    """A usage figure that is not a whole number of tokens in ``[0, MAX_USAGE_TOKENS]``."""


def parse_tokens(value: Any, field: str) -> int | None:
    """A provider's token count (``field`` names it in the error); ``None`` when it is absent.

    Raises :class:`UsageError` for a value that is not a whole number in ``[0, MAX_USAGE_TOKENS]``.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"usage {field} = {value!r:.40} is not a number of tokens")
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"usage {field} = {value!r} is not a finite number of tokens")
    if value < 0:
        raise UsageError(f"usage {field} = {value!r} is negative")
    if value > MAX_USAGE_TOKENS:
        raise UsageError(f"usage {field} = {value:.6g} tokens is absurdly large (more than {MAX_USAGE_TOKENS:.0e})")
    if isinstance(value, float) and not value.is_integer():
        raise UsageError(f"usage {field} = {value!r} is not a whole number of tokens")
    return int(value)
