"""Offline client: deterministic answers, fixed cost, optional injected failures."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import random
import time

from .base import ClientError, Completion, ModelClient

_WORDS = (
    "the answer depends on context but in short we can say that a careful "
    "reading of the question shows several useful points first consider the "
    "simplest case then generalise step by step until the result is clear "
    "therefore overall this approach is correct efficient and easy to verify"
).split()

_instances = itertools.count()


def simulated_text(model_name: str, prompt: str, seed: int = 0, secret: bytes | None = None) -> str:
    """The deterministic answer of ``model_name`` to ``prompt`` under ``seed``.

    The text does not contain the model's name (annotators must not learn which model
    answered; docs/reliability.md, Blinding): it is a word salad drawn from a hash
    of the three. With ``secret`` (a campaign's, :func:`service.campaigns.draws.answer_secret`)
    the hash is HMAC-SHA256 under it, so someone who guesses the names, the seed and the
    prompt still cannot recompute the texts and tell the models apart.
    """
    message = f"{model_name}\x00{seed}\x00{prompt}".encode()
    if secret:
        digest = hmac.new(secret, message, hashlib.sha256).digest()
    else:
        digest = hashlib.sha256(message).digest()
    n_words = 12 + digest[0] % 29
    words = [_WORDS[digest[1 + i % 31] * (i + 1) % len(_WORDS)] for i in range(n_words)]
    return " ".join(words).capitalize() + "."


def count_tokens(text: str) -> int:
    """A rough, deterministic token count (whitespace words, at least 1)."""
    return max(1, len(text.split()))


class SimulatedClient(ModelClient):
    """``{"kind": "simulated", "seed": 0, "failure_rate": 0.0, "latency_s": 0.0}``.

    The text is a function of (model name, prompt, seed), keyed with ``secret``; the cost is the model's
    fixed per-query cost. With ``failure_rate > 0`` each call fails with that
    probability (a :class:`ClientError` with status 503, 1 attempt); the draws come
    from a per-instance generator seeded from (model, seed, instance number).
    """

    kind = "simulated"

    def __init__(self, config, model_name, fixed_cost, secret: bytes | None = None):
        super().__init__(config, model_name, fixed_cost)
        self.secret = secret  # keys the texts (the campaign's answer secret); None: plain hash
        self.seed = config.seed
        self.failure_rate = config.failure_rate
        self.latency_s = config.latency_s
        self._rng = random.Random(f"{model_name}|{self.seed}|{next(_instances)}")

    @property
    def instant(self) -> bool:
        """True when an answer needs no waiting: :meth:`complete_now` may be used."""
        return self.latency_s <= 0

    async def complete(self, prompt: str, turns: list[str] | None = None) -> Completion:
        start = time.perf_counter()
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        return self.complete_now(prompt, start)

    def complete_now(self, prompt: str, start: float | None = None) -> Completion:
        """The answer without the simulated latency (synchronous; no I/O).

        The service calls it inside the duel's plan transaction when both models
        are instant, which saves a transaction per duel (see docs/reliability.md).
        """
        if start is None:
            start = time.perf_counter()
        if self.failure_rate > 0 and self._rng.random() < self.failure_rate:
            raise ClientError("simulated failure", status_code=503, attempts=1)
        text = simulated_text(self.model_name, prompt, self.seed, self.secret)
        return Completion(
            text=text,
            input_tokens=count_tokens(prompt),
            output_tokens=count_tokens(text),
            cost=self.fixed_cost,
            latency_s=time.perf_counter() - start,
            attempts=1,
        )
