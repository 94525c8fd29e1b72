"""Shared types of the model clients: :class:`Completion`, :class:`ClientError`
and the :class:`ModelClient` base class.

Secrets: a client only ever holds the *name* of the environment variable that
carries its API key (``api_key_env``). The key is read at call time, used for one
request and dropped; it never appears in a ``repr``, an exception or a log line.
"""

from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass
from typing import Any

from judges.base import ModelCallError


@dataclass(frozen=True)
class Completion:
    """One answer of a model.

    ``input_tokens``/``output_tokens`` are ``None`` when the provider did not
    report usage. ``cost`` is the USD actually charged for the call: the real
    cost from the configured per-token prices when both prices and usage are
    known, otherwise the model's fixed per-query cost. ``latency_s`` is the
    duration of the successful HTTP attempt; ``attempts`` counts every try,
    including the successful one. ``usage_fault``: the provider reported a usage
    figure that is not a whole number of tokens in range (``1e16``, ``-5``, ``NaN``, a
    string): the sentence naming it; the token counts are then ``None`` and the ledger
    charges the call its bound and pauses the campaign (a provider fault).
    """

    text: str
    input_tokens: int | None
    output_tokens: int | None
    cost: float
    latency_s: float
    attempts: int = 1
    usage_fault: str | None = None
    #: an image model's answer (``output: image``): the image's bytes, ``text`` its name; the caller
    #: stores the bytes in the image store (service/clients/images.py)
    image: bytes | None = dataclasses.field(default=None, repr=False, compare=False)
    #: the further images of a call that asked for several (``params.n``): (name, bytes) each; once the
    #: caller stored them, ``spares`` holds their names (service/campaigns/spares.py)
    more_images: tuple[tuple[str, bytes], ...] = dataclasses.field(default=(), repr=False, compare=False)
    spares: tuple[str, ...] = dataclasses.field(default=(), repr=False, compare=False)
    #: the provider's log probabilities of the output tokens when it returned them (asked by a judge with
    #: ``verdict_probabilities``): one ``(token, ((alternative, logprob), ...))`` per output token, None if none
    logprobs: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] | None = dataclasses.field(
        default=None, repr=False, compare=False
    )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in ("image", "more_images", "spares", "logprobs"):
            out.pop(key, None)
        return out


class ClientError(ModelCallError):
    """A model call that failed for good (after the retries it deserved).

    ``message`` says what went wrong, ``status_code`` is the last HTTP status
    (``None`` for connection errors, timeouts and local problems such as a missing
    API key variable), ``attempts`` the number of tries made. Messages never
    contain API keys.
    """

    def __init__(
        self,
        message: str,
        status_code: int | None = None,
        attempts: int = 1,
        *,
        retryable: bool = False,
    ) -> None:
        self.message = message
        self.status_code = status_code
        self.attempts = attempts
        self.retryable = retryable
        super().__init__(message)

    def __str__(self) -> str:
        parts = [self.message]
        if self.status_code is not None:
            parts.append(f"status {self.status_code}")
        parts.append(f"{self.attempts} attempt{'s' if self.attempts != 1 else ''}")
        return " | ".join(parts)

    def __repr__(self) -> str:
        return f"ClientError({self.message!r}, status_code={self.status_code!r}, attempts={self.attempts!r})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "status_code": self.status_code,
            "attempts": self.attempts,
        }


def compute_cost(
    price: dict[str, float] | None,
    input_tokens: int | None,
    output_tokens: int | None,
    fixed_cost: float,
) -> float:
    """Real cost from per-1M-token prices when prices and usage are known,
    else the fixed per-query cost."""
    if price is None or input_tokens is None or output_tokens is None:
        return float(fixed_cost)
    return (input_tokens * float(price["input_per_1m"]) + output_tokens * float(price["output_per_1m"])) / 1_000_000.0


class ModelClient(abc.ABC):
    """Base class: ``await complete(prompt)`` -> :class:`Completion`.

    ``config`` is the validated config model of the client's kind
    (:mod:`service.clients.config`)."""

    kind: str = "?"

    def __init__(self, config: Any, model_name: str, fixed_cost: float) -> None:
        self.config = config
        self.model_name = model_name
        self.fixed_cost = float(fixed_cost)

    @abc.abstractmethod
    async def complete(self, prompt: str, turns: list[str] | None = None) -> Completion:
        """Answer ``prompt``; raise :class:`ClientError` on failure.

        ``turns``: the user turns of a multi-turn prompt (``prompt`` is then their
        rendering, service/prompts.py); HTTP clients send them as consecutive user
        messages of one call.
        """

    async def aclose(self) -> None:
        """Release resources (HTTP connections the client opened itself)."""

    async def __aenter__(self) -> "ModelClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        # Never includes secrets: the config holds only the env var *name*.
        model = getattr(self.config, "model", None)
        extra = f", model={model!r}" if model else ""
        return f"<{type(self).__name__} {self.model_name!r} kind={self.kind!r}{extra}>"
