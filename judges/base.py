"""Shared types of the judges: :class:`Verdict` and the :class:`Judge` base."""

from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol

from algorithms.vocabulary import Choice, TiePolicy

CHOICES: tuple[str, ...] = tuple(c.value for c in Choice)
TIE_POLICIES: tuple[str, ...] = tuple(p.value for p in TiePolicy)


class ModelCallError(Exception):
    """A judge model's call that failed for good; model clients raise a subclass.

    ``status_code`` is the last HTTP status (``None`` when there was none) and
    ``attempts`` the number of tries made.
    """

    status_code: int | None = None
    attempts: int = 1


class Completion(Protocol):
    """What a judge needs from one answer of its model."""

    text: str
    cost: float
    input_tokens: int | None
    output_tokens: int | None
    attempts: int
    latency_s: float


class JudgeModel(Protocol):
    """The judge model an LLM judge is given by its caller (a model client):
    ``complete`` raises :class:`ModelCallError` when the call fails for good."""

    async def complete(self, prompt: str) -> Completion: ...

    async def aclose(self) -> None: ...


@dataclass
class Verdict:
    """The outcome of one judgement.

    ``choice`` is ``"a"``, ``"b"`` (the answers as shown), ``"tie"``,
    ``"both_bad"`` or ``None`` when the judge failed (then ``error`` says why and
    the duel is not a vote). ``cost`` is what the judgement cost in USD (always
    charged, also on error). ``detail`` is JSON-safe: raw outputs, parsed verdicts.
    ``score`` is the score of answer ``a`` in [0, 1] when the judge grades its
    verdicts (an LLM judge with strengths, e.g. 0.75 for a weak win); ``None``
    means the plain 1 (``a``) or 0 (``b``). A tie (score 1/2) has ``choice="tie"``.
    """

    choice: str | None
    cost: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    score: float | None = None

    def __post_init__(self) -> None:
        if self.choice is not None and self.choice not in CHOICES:
            raise ValueError(f"Verdict.choice must be one of {CHOICES} or None, got {self.choice!r}")
        if self.score is not None and not 0.0 <= self.score <= 1.0:
            raise ValueError(f"Verdict.score must be in [0, 1], got {self.score!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Judge(abc.ABC):
    """Decides which of two answers is better.

    ``automatic`` is False for judges that need a person (the duel then waits for
    a vote through the API).
    """

    kind: str = "?"
    automatic: bool = True

    def __init__(self, config: dict[str, Any], model_names: list[str], tie_policy: str = "drop"):
        self.config = config
        self.model_names = list(model_names)
        self.tie_policy = tie_policy

    @abc.abstractmethod
    async def judge(
        self,
        prompt: str,
        answer_a: str,
        answer_b: str,
        *,
        model_a: int,
        model_b: int,
        rng: Any = None,
        reference: str | None = None,
    ) -> Verdict:
        """Judge ``answer_a`` (by model index ``model_a``) against ``answer_b``.

        ``reference`` is the prompt's reference answer, when it has one (judges
        that do not use it ignore it)."""

    async def aclose(self) -> None:
        """Release resources."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} kind={self.kind!r} models={len(self.model_names)}>"
