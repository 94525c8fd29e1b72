"""Shared pieces of the API schemas: size limits, text and JSON checks, the field types."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from service.clients.config import MAX_QUERY_USD
from service.images.checks import MAX_IMAGE_BYTES, check_data_url
from service.names import check_name

MAX_MODELS = 256
MAX_PROMPTS = 100_000
MAX_PROMPT_CHARS = 200_000
MAX_JSON_DEPTH = 12
# Amounts the int64 nano-USD ledger holds with room to spare (service/money/budget.py,
# LEDGER_CAP_NUSD ~ 4.6e9 USD): a budget above 1e9 USD, or a cost per query above MAX_QUERY_USD
# (1e6 USD, service/clients/config.py), is refused with 422 (docs/reliability.md, Limits).
MAX_USD = 1e9


def check_text(value: str) -> str:
    """Reject text that no database can store (NUL, lone surrogates)."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (no lone surrogates)") from None
    return value


def check_json_safe(value: Any, path: str = "", depth: int = 0) -> Any:
    """Walk a JSON value: text must be storable, numbers finite, nesting bounded."""
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{path or 'value'}: nested too deeply")
    if isinstance(value, str):
        try:
            check_text(value)
        except ValueError as exc:
            raise ValueError(f"{path or 'value'}: {exc}") from None
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path or 'value'}: numbers must be finite")
    elif isinstance(value, dict):
        for k, v in value.items():
            check_json_safe(k, path, depth + 1)
            check_json_safe(v, f"{path}.{k}" if path else str(k), depth + 1)
    elif isinstance(value, list):
        for n, v in enumerate(value):
            check_json_safe(v, f"{path}[{n}]", depth + 1)
    return value


def check_image_url(value: str) -> str:
    """A ``data:`` URL of an accepted image (service/images/checks.py); the refusal's reason is the 422's."""
    check_data_url(value)
    return value


# A prompt's image: a data: URL (PNG, JPEG, WebP, GIF) within the limits of service/images/checks.py.
ImageURL = Annotated[str, Field(max_length=MAX_IMAGE_BYTES * 4 // 3 + 100), AfterValidator(check_image_url)]

SafeText = Annotated[str, AfterValidator(check_text)]
# Visible, without invisible or control characters (service/names.py).
Name = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(check_text), AfterValidator(check_name)]
PromptText = Annotated[str, Field(min_length=1, max_length=MAX_PROMPT_CHARS), AfterValidator(check_text)]
# At least one nano-USD (the ledger's unit: a smaller budget would be stored as 0), at most MAX_USD.
USD = Annotated[float, Field(ge=1e-9, le=MAX_USD, allow_inf_nan=False)]
QueryUSD = Annotated[float, Field(ge=1e-9, le=MAX_QUERY_USD, allow_inf_nan=False)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorOut(BaseModel):
    detail: Any
