"""Base class of the HTTP model clients: request, retries, errors, cost."""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import logging
import os
import random
import time
from typing import Any, Awaitable, Callable

import httpx

from ..egress import EgressDenied
from ..redaction import excerpt, redact
from .base import ClientError, Completion, ModelClient, compute_cost
from .config import output_token_limit
from .ratelimit import RateLimiter, check_still_wanted, estimated_tokens, quota_of
from .retry import RetryPolicy, is_retryable_status, parse_retry_after
from .usage import UsageError, parse_tokens

log = logging.getLogger("llmduel.clients")

USER_AGENT = "llmduel/0.1"


class ResponseShapeError(ValueError):
    """A 2xx response whose JSON is not what the provider documents."""


class HTTPModelClient(ModelClient):
    """Subclasses say how to build the request and read the response."""

    provider = "?"

    def __init__(
        self,
        config: Any,
        model_name: str,
        fixed_cost: float,
        http: httpx.AsyncClient | None = None,
        *,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
        rng: random.Random | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        super().__init__(config, model_name, fixed_cost)
        self._limiter = limiter  # shared rpm/tpm (service/clients/ratelimit.py); used when the config sets them
        self._http = http
        self._owns_http = http is None
        self._sleep = sleep or asyncio.sleep
        self._rng = rng or random.Random()
        self.retry = RetryPolicy(
            max_attempts=config.max_attempts,
            base_delay=config.backoff_base_s,
            max_delay=config.backoff_max_s,
            max_retry_after=config.max_retry_after_s,
        )

    # -- provider specifics -------------------------------------------------
    @abc.abstractmethod
    def build_request(
        self, prompt: str, api_key: str | None, turns: list[str] | None = None
    ) -> tuple[str, dict[str, str], dict[str, Any]]:
        """Return (url, headers, json body); ``turns``: user messages sent in order instead of ``prompt``."""

    def parse_logprobs(self, data: Any) -> Any:
        """The output tokens' log probabilities in the response (:attr:`Completion.logprobs`), or None:
        the provider returned none (Anthropic never does) or in a shape this client does not read."""
        return None

    @abc.abstractmethod
    def parse_response(self, data: Any) -> tuple[Any, ...]:
        """Return (text, input tokens, output tokens), and an image model's image bytes after them;
        raise ResponseShapeError."""

    # -- machinery -----------------------------------------------------------
    def _api_key(self) -> str | None:
        env = self.config.api_key_env
        if env is None:
            return None
        key = os.environ.get(env)
        if not key:
            raise ClientError(
                f"environment variable {env} is not set (API key for model {self.model_name!r})",
                None,
                attempts=0,
            )
        return key

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self.config.timeout_s)
            self._owns_http = True
        return self._http

    @staticmethod
    def _redact(text: str, key: str | None) -> str:
        """The key and any fragment of it masked (service.redaction, the one rule)."""
        return redact(text, (key,)) if key else text

    def _error_message(self, resp: httpx.Response, key: str | None = None) -> str:
        """The status and a short masked excerpt of the body (service.redaction.excerpt): an
        error body may come from any server the base_url names, and is shown in the duel."""
        try:
            data = resp.json()
        except ValueError:
            detail = resp.text[:2000]
        else:
            err = data.get("error") if isinstance(data, dict) else None
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                detail = err["message"][:2000]
            elif isinstance(err, str):
                detail = err[:2000]
            else:
                detail = str(data)[:2000]
        detail = excerpt(detail, (key,) if key else ())
        msg = f"{self.provider} returned HTTP {resp.status_code}"
        msg = f"{msg}: {detail}" if detail else msg
        if resp.status_code in (401, 403):  # say where the key came from, never the key
            env = self.config.api_key_env
            msg += (
                f" (the API key is read from the environment variable {env}: check it on the server)"
                if env
                else " (no API key was sent: set api_key_env to the environment variable that holds it)"
            )
        return msg

    def call_deadline_s(self) -> float:
        """The call's hard deadline (seconds): every attempt's ``timeout_s`` plus, between attempts, the
        longest wait the client may take (``backoff_max_s`` or a ``Retry-After`` up to
        ``max_retry_after_s``). Waits for a rate-limit slot count against it too."""
        c = self.config
        n = self.retry.max_attempts
        return n * float(c.timeout_s) + (n - 1) * max(float(c.backoff_max_s), float(c.max_retry_after_s))

    async def complete(self, prompt: str, turns: list[str] | None = None) -> Completion:
        key = self._api_key()
        deadline = self.call_deadline_s()
        try:
            try:
                # the whole call, retries, backoff and rate-limit waits included, ends by its hard deadline
                async with asyncio.timeout(deadline):
                    completion = await self._complete(prompt, key, turns)
            except TimeoutError:
                raise ClientError(
                    f"{self.provider} call passed its hard deadline of {deadline:g}s "
                    "(max_attempts x timeout_s plus the longest waits between attempts; "
                    "rate-limit waits included)",
                    None,
                    self.retry.max_attempts,
                ) from None
        except ClientError as exc:
            exc.message = self._redact(exc.message, key)
            exc.args = (exc.message,)
            raise
        if key:  # a provider echoing the key or pieces of it: never store or show them
            text = self._redact(completion.text, key)
            if text != completion.text:
                completion = dataclasses.replace(completion, text=text)
        return completion

    async def _complete(self, prompt: str, key: str | None, turns: list[str] | None = None) -> Completion:
        url, headers, body = self.build_request(prompt, key, turns) if turns else self.build_request(prompt, key)
        headers = {"user-agent": USER_AGENT, **headers}
        http = self._client()
        timeout = self.config.timeout_s
        quota = quota_of(self.config, key) if self._limiter is not None else None
        if quota:
            cfg = self.config.model_dump(mode="json")
            tokens = estimated_tokens(prompt, turns, output_token_limit(cfg), cfg)
        else:
            tokens = 0
        attempt = 0
        while True:
            attempt += 1
            retry_after: float | None = None
            if attempt > 1:  # a retry after a backoff: not when the call's campaign ended meanwhile
                await check_still_wanted(attempt - 1)
            slot = await self._limiter.acquire(quota, tokens) if quota and self._limiter else None
            t0 = time.perf_counter()
            try:
                # timeout_s is each attempt's total deadline (headers and body), not only httpx's per-read
                # timeout: a provider trickling a byte every few seconds is cut at timeout_s
                async with asyncio.timeout(timeout):
                    resp = await http.post(url, headers=headers, json=body, timeout=timeout)
            except TimeoutError:
                err = ClientError(
                    f"{self.provider} timed out after {timeout:g}s (the attempt's total deadline)",
                    None,
                    attempt,
                    retryable=True,
                )
            except httpx.TimeoutException as exc:
                err = ClientError(
                    f"{self.provider} timed out after {timeout:g}s ({type(exc).__name__})",
                    None,
                    attempt,
                    retryable=True,
                )
            except httpx.TransportError as exc:
                err = ClientError(
                    f"{self.provider} connection error: {type(exc).__name__}: {excerpt(str(exc), (key,) if key else ())}",
                    None,
                    attempt,
                    retryable=True,
                )
            except EgressDenied as exc:  # LLMDUEL_ALLOWED_HOSTS, checked again at the connection
                raise ClientError(f"{self.provider} not called: {exc.message}", None, attempt) from None
            else:
                latency = time.perf_counter() - t0
                status = resp.status_code
                if 200 <= status < 300:
                    completion = self._completion(resp, latency, attempt)
                    if slot is not None and self._limiter is not None:
                        used = None
                        if completion.input_tokens is not None or completion.output_tokens is not None:
                            used = (completion.input_tokens or 0) + (completion.output_tokens or 0)
                        await self._limiter.settle(slot, used)
                    return completion
                retryable = is_retryable_status(status)
                err = ClientError(self._error_message(resp, key), status, attempt, retryable=retryable)
                if retryable:
                    retry_after = parse_retry_after(resp.headers)
                if status == 429 and quota is not None and self._limiter is not None:
                    # every worker on this credential waits, not only this one
                    await self._limiter.block(quota, retry_after if retry_after is not None else 1.0)

            if not err.retryable:
                raise err
            if attempt >= self.retry.max_attempts:
                err.message = f"gave up after {attempt} attempts: {err.message}"
                raise err
            if retry_after is not None:
                if retry_after > self.retry.max_retry_after:
                    err.message = (
                        f"{err.message} (server asked to retry after {retry_after:.0f}s, "
                        f"more than max_retry_after_s={self.retry.max_retry_after:g})"
                    )
                    raise err
                delay = retry_after
            else:
                delay = self.retry.backoff(attempt, self._rng)
            log.warning(
                "model %r: attempt %d/%d failed (%s), retrying in %.2fs",
                self.model_name,
                attempt,
                self.retry.max_attempts,
                f"status {err.status_code}" if err.status_code else err.message,
                delay,
            )
            await self._sleep(delay)

    def _completion(self, resp: httpx.Response, latency: float, attempt: int) -> Completion:
        try:
            data = resp.json()
        except ValueError:
            raise ClientError(
                f"{self.provider} returned malformed JSON: {excerpt(resp.text[:2000])!r}",
                resp.status_code,
                attempt,
            ) from None
        try:
            (text, tin, tout, image, more, billed), usage_fault, logprobs = read_response(self, data)
        except SHAPE_ERRORS as exc:
            raise ClientError(
                f"{self.provider} returned an unexpected response: {exc}",
                resp.status_code,
                attempt,
            ) from None
        fixed = self.fixed_cost * billed
        cost = compute_cost(price.model_dump() if (price := self.config.price) else None, tin, tout, fixed)
        return Completion(
            text=text,
            input_tokens=tin,
            output_tokens=tout,
            cost=cost,
            latency_s=latency,
            attempts=attempt,
            usage_fault=usage_fault,
            image=image,
            more_images=more,
            logprobs=logprobs,
        )

    async def aclose(self) -> None:
        if self._owns_http and self._http is not None:
            await self._http.aclose()
            self._http = None


#: What a client's ``parse_response`` raises for a response of the wrong shape (ValueError: ResponseShapeError).
SHAPE_ERRORS = (ValueError, KeyError, IndexError, TypeError, AttributeError)


def read_response(client: Any, data: Any) -> tuple[tuple[Any, Any, Any, bytes | None, tuple, int], str | None, Any]:
    """What a single call and a batch's result line both read of a provider's response:
    (:func:`parsed_answer`, the usage fault or None, the log probabilities or None). An unusable usage
    figure is a fault and the answer stands (read again without it); a malformed optional log
    probabilities part counts as absent; a response of the wrong shape raises one of :data:`SHAPE_ERRORS`."""
    usage_fault = None
    try:
        parsed = client.parse_response(data)
    except UsageError as exc:  # the answer stands; its usage is a provider fault the ledger charges
        usage_fault = str(exc)
        parsed = client.parse_response(without_usage(data))
    try:
        logprobs = client.parse_logprobs(data)
    except (TypeError, ValueError, AttributeError, KeyError):  # a malformed optional part: as if absent
        logprobs = None
    return parsed_answer(parsed), usage_fault, logprobs


def parsed_answer(parsed: tuple[Any, ...]) -> tuple[Any, Any, Any, bytes | None, tuple, int]:
    """``(text, input tokens, output tokens, image, further images, images billed)`` of what a
    client's ``parse_response`` returned: three values for text, four for one image, six for an
    image call of several images (service/clients/images.py: the images billed include any the
    checks refused, so the per-image price is charged for each)."""
    text, tin, tout = parsed[:3]
    image = parsed[3] if len(parsed) > 3 else None
    more = tuple(parsed[4]) if len(parsed) > 4 else ()
    billed = int(parsed[5]) if len(parsed) > 5 else 1 + len(more)
    return text, tin, tout, image, more, billed


def without_usage(data: Any) -> Any:
    """``data`` without its usage figures (OpenAI's and Anthropic's ``usage``, Gemini's ``usageMetadata``)."""
    if not isinstance(data, dict):
        return data
    return {k: v for k, v in data.items() if k not in ("usage", "usageMetadata")}


def _token(v: Any, field: str) -> int | None:
    """A reported token count, bounded (:func:`.usage.parse_tokens`); raises its ``UsageError`` (a
    ``ValueError``) for a figure that is not a whole number in range."""
    return parse_tokens(v, field)
