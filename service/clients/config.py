"""A model's ``client`` config: one pydantic model per ``kind``, validated once at the boundary.

``ClientConfig`` is the discriminated union (on ``kind``) of
:class:`SimulatedClientConfig`, :class:`OpenAIClientConfig`,
:class:`AnthropicClientConfig` and :class:`GeminiClientConfig`. The API body
(``service.schemas.ModelSpec.client``) is typed with it, so ``/openapi.json``
shows every field with its description; :func:`parse_client_config` validates a
plain dict (a stored row, a test) into the same models. ``model_dump(mode="json")``
is what the database stores (every default filled in); it parses back unchanged,
and so do rows stored before these models existed.

Errors name the field (``client.base_url: must be an http:// or https:// URL``);
values that might be secrets are never echoed back.

The cost bound of one call (:func:`call_cost_bound`) reads the stored JSON, as the
campaign rules do. Prices are an optional per-token override here; nothing in this
module looks prices up.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from algorithms.vocabulary import JudgeKind

KINDS = ("simulated", "openai", "anthropic", "gemini")

DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
}
# openai-compatible servers (vLLM, Ollama, llama.cpp) often need no key: no default.
DEFAULT_API_KEY_ENVS = {
    "openai": None,
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}
DEFAULT_ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_ANTHROPIC_MAX_TOKENS = 1024
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_URL = re.compile(r"^https?://[^\s/]+")

# ---------------------------------------------------------------- money bounds
# The ledger counts integer nano-USD in int64 columns (max ~9.2e18 nano-USD, ~9.2e9 USD). These
# bounds keep every configured amount, and every sum the budget forms from them, far inside it
# (docs/reliability.md, Limits): one query, one judge call, one vote fee or one call's cap at most
# MAX_QUERY_USD; a per-token price at most MAX_PRICE_PER_1M USD per million tokens (1 USD a token).
MAX_QUERY_USD = 1e6
MAX_PRICE_PER_1M = 1e6

#: The most images one call of an image model may ask for (``params.n``; OpenAI's images API takes 1 to 10).
MAX_IMAGES_PER_CALL = 10


def image_count_problem(kind: Any, n: Any) -> str | None:
    """What is wrong with ``params.n`` of an image model (``output: image``) of client ``kind``, or None."""
    if kind != "openai":
        return "several images per call need an openai client (the images route); Gemini answers one image a call"
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_IMAGES_PER_CALL:
        return f"must be a whole number of images from 1 to {MAX_IMAGES_PER_CALL}"
    return None


def split_image_count(cfg: Any) -> tuple[Any, int | None]:
    """An image model's client config without ``params.n`` and that count (None when absent).

    ``n`` is refused on text clients (it would be billed n answers of which a duel shows one) and
    set by the client (:class:`ClientConfig`); an image model's calls may ask for several images
    (service/campaigns/spares.py), so its ``n`` is checked here and put back after validation."""
    params = cfg.get("params") if isinstance(cfg, dict) else None
    if not isinstance(params, dict) or "n" not in params:
        return cfg, None
    rest = dict(params)
    n = rest.pop("n")
    problem = image_count_problem(cfg.get("kind"), n)
    if problem:
        raise ValueError(f"params.n: {problem}")
    return {**cfg, "params": rest}, n


def images_per_call(cfg: Any) -> int:
    """How many images one call of a client config (stored JSON) asks for: ``params.n`` of an openai
    config (refused on its text models, so only an image model's has it), else 1."""
    if not isinstance(cfg, dict) or cfg.get("kind") != "openai":
        return 1
    n = (cfg.get("params") or {}).get("n", 1)
    return n if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_IMAGES_PER_CALL else 1


# ---------------------------------------------------------------- value checks
def finite_number(v: Any) -> float | None:
    """``v`` as a finite float, or ``None`` (bools, strings, NaN, inf, huge ints)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        x = float(v)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def number_in(lo: float, hi: float, *, lo_open: bool = False, what: str = "") -> BeforeValidator:
    """A strict check of a float field: a finite number (no bool, no string) in [lo, hi] or (lo, hi]."""

    def check(v: Any) -> float:
        x = finite_number(v)
        if x is None:
            raise ValueError(f"must be a finite number{what}, got {type(v).__name__}")
        if x < lo or x > hi or (lo_open and x == lo):
            raise ValueError(f"must be in {'(' if lo_open else '['}{lo:g}, {hi:g}]{what}, got {x:g}")
        return x

    return BeforeValidator(check)


def money(what: str, hi: float = MAX_QUERY_USD) -> BeforeValidator:
    """A finite amount in [0, ``hi``] (``what`` says its unit); ``None`` passes to the type.

    The message names the bound, never the value (``must be a number in [0, 1e+06] (USD per query)``).
    """

    def check(v: Any) -> Any:
        if v is None:
            return v
        x = finite_number(v)
        if x is None or x < 0 or x > hi:
            raise ValueError(f"must be a finite number in [0, {hi:g}] ({what})")
        return x

    return BeforeValidator(check)


def int_in(lo: int, hi: int) -> BeforeValidator:
    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"must be an integer, got {type(v).__name__}")
        if v < lo or v > hi:
            raise ValueError(f"must be between {lo} and {hi}, got {v}")
        return v

    return BeforeValidator(check)


def optional_int_in(lo: int, hi: int) -> BeforeValidator:
    """:func:`int_in` that also takes null."""
    inner = int_in(lo, hi).func

    def check(v: Any) -> int | None:
        return None if v is None else inner(v)  # type: ignore[call-arg]

    return BeforeValidator(check)


def strict_str(what: str, *, non_empty: bool = False) -> BeforeValidator:
    def check(v: Any) -> Any:
        if v is None:
            return v
        if not isinstance(v, str) or (non_empty and not v.strip()):
            raise ValueError(f"must be {'a non-empty' if non_empty else 'a'} string ({what})")
        return v

    return BeforeValidator(check)


def strict_bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError("must be true or false")
    return v


# ---------------------------------------------------------------- error messages
def format_validation_error(exc: ValidationError, prefix: str) -> str:
    """The first error of ``exc`` as one line ``prefix.field: message``.

    Discriminator tags that pydantic puts in an error's location (``openai`` in
    ``('openai', 'base_url')``) are left out. A message starting with ``.`` or
    ``[`` continues the path (``[0][1]: must be a number`` under ``preference``).
    Input values are never included (they may be secrets).
    """
    err = exc.errors(include_input=False, include_url=False)[0]
    loc = list(err.get("loc", ()))
    typ = err.get("type", "")
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif str(part) not in _ALL_TAGS:  # no field has a kind's name
            path += f".{part}" if path else str(part)
    ctx = err.get("ctx") or {}
    msg = str(err.get("msg", "invalid value"))
    if typ == "value_error":
        msg = str(ctx.get("error", msg.removeprefix("Value error, ")))
        if msg.startswith((".", "[")):
            return path + msg
        if _SUBPATH.match(msg):  # "params.n: ..." from a model-level check: a field of that model
            return f"{path}.{msg}" if path else msg
    elif typ in ("union_tag_invalid", "union_tag_not_found"):
        tags = ctx.get("expected_tags", "")
        got = ctx.get("tag")
        return f"{path}.kind: must be one of [{tags}]" + (f", got {got!r}" if got is not None else " (missing)")
    elif typ == "extra_forbidden":
        msg = "unknown field"
    elif typ == "missing":
        msg = "is required"
    elif typ in ("dict_type", "model_type", "model_attributes_type"):
        msg = "must be an object"
    return f"{path}: {msg}"


# a message that starts with a field path ("params.n: ...", "scores.A>B: ...") names where it applies
_SUBPATH = re.compile(r"^[A-Za-z_]\w*(?:[.\[][^:\s]*)?: ")
_ALL_TAGS = set(KINDS) | {k.value for k in JudgeKind}  # no config field is named like a kind


# ---------------------------------------------------------------- the models
class Price(BaseModel):
    """Per-token prices of a model (USD per million tokens)."""

    model_config = ConfigDict(extra="forbid")

    input_per_1m: Annotated[float, money("USD per million tokens", MAX_PRICE_PER_1M)] = Field(
        description="USD per million input (prompt) tokens.", ge=0, le=MAX_PRICE_PER_1M, examples=[0.27]
    )
    output_per_1m: Annotated[float, money("USD per million tokens", MAX_PRICE_PER_1M)] = Field(
        description="USD per million output (completion) tokens.", ge=0, le=MAX_PRICE_PER_1M, examples=[0.85]
    )

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, v: Any) -> Any:
        if isinstance(v, Price):
            return v
        if not isinstance(v, dict):
            raise ValueError('must be an object like {"input_per_1m": 0.27, "output_per_1m": 0.85}')
        unknown = set(v) - {"input_per_1m", "output_per_1m"}
        if unknown:
            raise ValueError(f"unknown field(s) {sorted(unknown)}; expected input_per_1m and output_per_1m")
        return v


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SimulatedClientConfig(_Config):
    """Offline answers: deterministic text from (model name, prompt, seed), the model's fixed cost."""

    kind: Literal["simulated"] = Field(description="Offline simulated model (no network).")
    seed: Annotated[int, int_in(-(2**63), 2**63 - 1)] = Field(
        0, description="Seed of the simulated text and failure draws."
    )
    failure_rate: Annotated[float, number_in(0.0, 1.0)] = Field(
        0.0, ge=0, le=1, description="Probability that a call fails (HTTP 503 equivalent), for fault tests."
    )
    latency_s: Annotated[float, number_in(0.0, 60.0)] = Field(
        0.0, ge=0, le=60, description="Seconds each call waits before answering."
    )


class _HTTPClientConfig(_Config):
    """Fields shared by the HTTP providers."""

    _reserved_params: ClassVar[frozenset[str]] = frozenset()

    kind: str = Field(description="The provider.")
    base_url: str = Field(description="Base URL of the API (http:// or https://; a trailing slash is dropped).")
    model: Annotated[str, strict_str("the provider's model id", non_empty=True)] = Field(
        description="The provider's model id.", examples=["deepseek-chat"]
    )
    api_key_env: str | None = Field(
        None,
        description="NAME of the environment variable holding the API key (never the key itself); "
        "null for servers that need no key.",
        examples=["OPENAI_API_KEY"],
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra request parameters merged into the request body (temperature, max_tokens, ...).",
        examples=[{"temperature": 0.7, "max_tokens": 1024}],
    )
    price: Price | None = Field(
        None,
        description="Per-token prices; when set and the provider reports usage, a call is charged its "
        "token cost instead of the model's fixed cost.",
    )
    batch_price: Price | None = Field(
        None,
        description="Per-token prices on the provider's batch API (a batch campaign's calls); when absent, "
        "a batch campaign fills it from the price map's input_cost_per_token_batches and "
        "output_cost_per_token_batches, and a model without them is charged its list price in a batch.",
    )
    max_cost_per_query: Annotated[float | None, money("USD; the most one call can cost")] = Field(
        None,
        ge=0,
        le=MAX_QUERY_USD,
        description="Upper bound (USD) of one call's charge (an image model's: of one image, times params.n), "
        "used by budget reservations.",
    )
    system: Annotated[str | None, strict_str("a system prompt")] = Field(
        None, description="System prompt sent with every call."
    )
    timeout_s: Annotated[float, number_in(0.0, 3600.0, lo_open=True)] = Field(
        60.0,
        gt=0,
        le=3600,
        description=(
            "Total deadline of one HTTP attempt, headers and body (seconds). The call as a whole, retries, "
            "backoff and waits for a rate-limit slot included, has a hard deadline of max_attempts x timeout_s "
            "+ (max_attempts - 1) x max(backoff_max_s, max_retry_after_s)."
        ),
    )
    max_attempts: Annotated[int, int_in(1, 10)] = Field(
        4, ge=1, le=10, description="Tries per call (retries on 429, 5xx, timeouts, connection errors)."
    )
    backoff_base_s: Annotated[float, number_in(0.0, 60.0)] = Field(
        0.5, ge=0, le=60, description="First backoff delay (seconds; doubles per retry, with jitter)."
    )
    backoff_max_s: Annotated[float, number_in(0.0, 600.0)] = Field(
        20.0, ge=0, le=600, description="Largest backoff delay (seconds)."
    )
    max_retry_after_s: Annotated[float, number_in(0.0, 3600.0)] = Field(
        60.0, ge=0, le=3600, description="Longest Retry-After the client waits for; longer fails the call."
    )
    rpm: Annotated[int | None, optional_int_in(1, 10**7)] = Field(
        None,
        ge=1,
        le=10**7,
        description="Requests per minute allowed on this credential (base URL and API key), shared by every "
        "worker and campaign through the database; null: no limit of llmduel's own (docs/clients-and-judges.md).",
        examples=[500],
    )
    tpm: Annotated[int | None, optional_int_in(1, 10**10)] = Field(
        None,
        ge=1,
        le=10**10,
        description="Tokens per minute (input plus output) allowed on this credential, shared like rpm; a request "
        "counts its input estimate plus its max_tokens until the provider reports its usage.",
        examples=[200000],
    )

    @model_validator(mode="before")
    @classmethod
    def _before(cls, v: Any) -> Any:
        if isinstance(v, dict):
            if "api_key" in v or "key" in v:
                # Deliberately do not echo the value: it is probably a secret.
                raise ValueError(
                    "api_key: keys are not accepted in the config; put the key in an environment "
                    "variable and name that variable in 'api_key_env'"
                )
            v = dict(v)
            if v.get("params") is None:
                v["params"] = {}
        return v

    @model_validator(mode="after")
    def _after(self) -> "_HTTPClientConfig":
        reserved = set(self.params) & self._reserved_params
        if reserved:
            raise ValueError(f"params.{sorted(reserved)[0]}: is set by the client and cannot be overridden")
        if self.batch_price is not None:  # the reservations bound a call at its list price
            if self.price is None:
                raise ValueError("batch_price: needs the list 'price' too")
            if (
                self.batch_price.input_per_1m > self.price.input_per_1m
                or self.batch_price.output_per_1m > self.price.output_per_1m
            ):
                raise ValueError("batch_price: may not exceed the list 'price'")
        return self


def _api_key_env_check(v: Any) -> Any:
    if v is not None and (not isinstance(v, str) or not _ENV_NAME.match(v)):
        # Not echoed: people paste the key itself here by mistake.
        raise ValueError(
            "must be the NAME of an environment variable (letters, digits, underscore), not the key itself"
        )
    return v


def _params_check(v: Any) -> Any:
    if v is not None and not isinstance(v, dict):
        raise ValueError("must be an object of extra request parameters")
    return v


#: The message for a URL that carries a user name or password (they would be sent as Basic auth).
URL_CREDENTIALS = "credentials in URLs are not accepted"


def url_problem(url: str) -> str | None:
    """What is wrong with an http(s) address the server will call, or None. The URL itself is
    never part of the message (it may hold a secret)."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return "must not contain spaces, line breaks or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError above 65535 or not a number
    except ValueError:
        return "must be an http:// or https:// URL with a valid host and a port from 1 to 65535"
    if parts.scheme.lower() not in ("http", "https") or not url.lower().startswith(("http://", "https://")):
        return "must be an http:// or https:// URL"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return URL_CREDENTIALS
    if not parts.hostname:
        return "must be an http:// or https:// URL with a host"
    if port == 0:
        return "must have a port from 1 to 65535"
    return None


def _url_check(v: Any) -> Any:
    if not isinstance(v, str) or not _URL.match(v):
        raise ValueError("must be an http:// or https:// URL")
    problem = url_problem(v)
    if problem == URL_CREDENTIALS:
        raise ValueError(f"{URL_CREDENTIALS}; use api_key_env")
    if problem:
        raise ValueError(problem)
    return v.rstrip("/")


ApiKeyEnv = Annotated[str | None, BeforeValidator(_api_key_env_check)]
Params = Annotated[dict[str, Any], BeforeValidator(_params_check)]
BaseURL = Annotated[str, BeforeValidator(_url_check)]


class OpenAIClientConfig(_HTTPClientConfig):
    """Any OpenAI-compatible chat-completions server (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp, ...)."""

    _reserved_params: ClassVar[frozenset[str]] = frozenset({"model", "messages", "stream", "n"})
    kind: Literal["openai"] = Field(description="OpenAI-compatible `POST {base_url}/chat/completions`.")
    base_url: BaseURL = Field(DEFAULT_BASE_URLS["openai"], description="Base URL, up to and including /v1.")
    api_key_env: ApiKeyEnv = Field(
        DEFAULT_API_KEY_ENVS["openai"],
        description="NAME of the environment variable holding the key (sent as a Bearer token); "
        "null (default) for servers that need no key.",
        examples=["OPENAI_API_KEY"],
    )
    params: Params = Field(
        default_factory=dict,
        description="Extra body fields (temperature, max_tokens, max_completion_tokens, ...); "
        "model, messages, stream and n are set by the client.",
        examples=[{"temperature": 0.7, "max_tokens": 1024}],
    )


class AnthropicClientConfig(_HTTPClientConfig):
    """Anthropic Messages API."""

    _reserved_params: ClassVar[frozenset[str]] = frozenset({"model", "messages", "stream", "system"})
    kind: Literal["anthropic"] = Field(description="Anthropic `POST {base_url}/v1/messages`.")
    base_url: BaseURL = Field(DEFAULT_BASE_URLS["anthropic"], description="Base URL of the Messages API.")
    api_key_env: ApiKeyEnv = Field(
        DEFAULT_API_KEY_ENVS["anthropic"], description="NAME of the environment variable holding the key."
    )
    params: Params = Field(
        default_factory=dict,
        description=f"Extra body fields (max_tokens defaults to {DEFAULT_ANTHROPIC_MAX_TOKENS}, temperature, "
        "...); model, messages, stream and system are set by the client.",
        examples=[{"max_tokens": 1024}],
    )
    anthropic_version: Annotated[str, strict_str("like '2023-06-01'", non_empty=True)] = Field(
        DEFAULT_ANTHROPIC_VERSION, description="The anthropic-version header."
    )


class GeminiClientConfig(_HTTPClientConfig):
    """Google Gemini generateContent."""

    _reserved_params: ClassVar[frozenset[str]] = frozenset({"contents", "systemInstruction", "system_instruction"})
    kind: Literal["gemini"] = Field(description="Gemini `POST {base_url}/models/{model}:generateContent`.")
    base_url: BaseURL = Field(DEFAULT_BASE_URLS["gemini"], description="Base URL of the Gemini API.")
    api_key_env: ApiKeyEnv = Field(
        DEFAULT_API_KEY_ENVS["gemini"],
        description="NAME of the environment variable holding the key (sent in the x-goog-api-key header).",
    )
    params: Params = Field(
        default_factory=dict,
        description="Generation parameters (temperature, maxOutputTokens, ... go to generationConfig; "
        "safetySettings, tools, ... stay top-level); contents and systemInstruction are set by the client.",
        examples=[{"temperature": 0.2, "maxOutputTokens": 1024}],
    )


HTTPClientConfig = Annotated[
    OpenAIClientConfig | AnthropicClientConfig | GeminiClientConfig,
    Field(discriminator="kind"),
]
ClientConfig = Annotated[
    SimulatedClientConfig | OpenAIClientConfig | AnthropicClientConfig | GeminiClientConfig,
    Field(discriminator="kind"),
]
AnyClientConfig = SimulatedClientConfig | OpenAIClientConfig | AnthropicClientConfig | GeminiClientConfig
_CLIENT_ADAPTER: TypeAdapter[AnyClientConfig] = TypeAdapter(ClientConfig)


def parse_client_config(cfg: Any, prefix: str = "client", output: str = "text") -> AnyClientConfig:
    """A client config (dict, e.g. a stored row) as its validated model; ``output``: the model
    entry's (an image model's config may ask for several images, ``params.n``).

    Raises ``ValueError`` with one line naming the field, e.g.
    ``client.model: is required``.
    """
    if isinstance(cfg, BaseModel):
        return cfg  # type: ignore[return-value]
    if not isinstance(cfg, dict):
        raise ValueError(f"{prefix}: must be an object with a 'kind' field")
    n = None
    if output == "image":
        try:
            cfg, n = split_image_count(cfg)
        except ValueError as exc:
            raise ValueError(f"{prefix}.{exc}") from None
    try:
        parsed = _CLIENT_ADAPTER.validate_python(cfg)
    except ValidationError as exc:
        raise ValueError(format_validation_error(exc, prefix)) from None
    if n is not None:
        parsed.params["n"] = n  # type: ignore[union-attr]
    return parsed


def client_json(cfg: AnyClientConfig) -> dict[str, Any]:
    """What the database stores for a client config (every default filled in)."""
    return cfg.model_dump(mode="json")


def validate_client_config(cfg: Any) -> dict[str, Any]:
    """Check a client config and return its stored JSON form (a new dict, defaults filled in).

    The same as ``client_json(parse_client_config(cfg))``; raises ``ValueError`` naming the field.
    """
    return client_json(parse_client_config(cfg))


# ---------------------------------------------------------------- cost upper bound
# Tokens a chat template adds around the messages (role markers, separators).
TEMPLATE_OVERHEAD_TOKENS = 256


def output_token_limit(cfg: dict[str, Any]) -> int | None:
    """The configured maximum of output tokens of one call (stored JSON), or ``None`` when unset."""
    params = cfg.get("params") or {}
    kind = cfg.get("kind")
    if kind == "anthropic":
        v = params.get("max_tokens", DEFAULT_ANTHROPIC_MAX_TOKENS)
    elif kind == "gemini":
        gen = params.get("generationConfig") or params.get("generation_config") or {}
        v = params.get("maxOutputTokens", gen.get("maxOutputTokens") if isinstance(gen, dict) else None)
    else:
        v = params.get("max_completion_tokens", params.get("max_tokens"))
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        return None
    return v


def call_cost_bound(
    cfg: dict[str, Any],
    fixed_cost: float,
    input_bytes: int,
    *,
    max_output_tokens: int | None = None,
    image_tokens: int = 0,
) -> float | None:
    """An upper bound (USD) of what one call of a client config (stored JSON) can be charged.

    A call is charged its per-token cost when the config has ``price`` and the
    provider reports usage, else ``fixed_cost``. Without ``price`` the bound is that fixed charge.
    With ``price``: ``max_cost_per_query`` when set, else
    ``(I * input_per_1m + max_tokens * output_per_1m) / 1e6`` where the input
    token count is bounded by ``I = input_bytes + bytes(system) +
    TEMPLATE_OVERHEAD_TOKENS + image_tokens`` (a token of a byte-level tokenizer covers at least
    one UTF-8 byte; ``image_tokens`` bounds the images' tokens, service/images/tokens.py). The
    output-token limit is the config's (``params.max_tokens`` and the like), else
    ``max_output_tokens`` (the provider's limit from the price map, :mod:`service.pricing`).
    ``None`` when neither a cap nor a limit is known.

    An image model's call of ``params.n`` images (:func:`images_per_call`) is bounded at ``n`` times
    one image's bound in every form: ``fixed_cost``, ``max_cost_per_query`` and the output-token
    limit are per image (like the model's ``cost``), and the input is counted once per image too (a
    server may bill each image's request apart), so the bound covers ``n`` images' worth of tokens.
    """
    n = images_per_call(cfg)  # an image model's cost, cap and token limit are per image
    fixed = max(0.0, float(fixed_cost)) * n
    price = cfg.get("price")
    if cfg.get("kind") == "simulated" or price is None:
        return fixed
    cap = cfg.get("max_cost_per_query")
    if cap is not None:
        return max(fixed, float(cap) * n)
    max_tokens = output_token_limit(cfg)
    if max_tokens is None:
        max_tokens = max_output_tokens
    if max_tokens is None:
        return None
    system = cfg.get("system") or ""
    in_tokens = int(input_bytes) + len(system.encode("utf-8")) + TEMPLATE_OVERHEAD_TOKENS + int(image_tokens)
    bound = (in_tokens * float(price["input_per_1m"]) + max_tokens * float(price["output_per_1m"])) / 1e6
    return max(fixed, bound * n)
