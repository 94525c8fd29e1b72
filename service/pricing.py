"""Model prices: the bundled LiteLLM-format price map, user overrides, the derived
cost per query, and the observed-versus-expected cost warning.

Where a model's per-token price comes from, first match wins:

1. its client config's ``price`` (``{"input_per_1m", "output_per_1m"}``);
2. the campaign body's ``price_map`` (LiteLLM format, see below);
3. the file named by the environment variable ``LLMDUEL_PRICE_MAP`` (same format);
4. LiteLLM's whole map: an installed ``litellm`` package's
   ``model_prices_and_context_window_backup.json`` when the package is importable,
   else the bundled copy ``service/data/litellm_prices.json`` (derived from LiteLLM
   1.109.1 by :mod:`service.data.build_price_map`; provenance in its header entry).

A map is a JSON object ``{"<model key>": {"input_cost_per_token": USD,
"output_cost_per_token": USD, "litellm_provider": str?, "max_output_tokens": int?},
...}``; other fields are ignored. A model is looked up by its provider model id
(``client.model``) under the keys :func:`candidate_keys` lists, as LiteLLM names
them: ``"<provider>/<model>"`` (``gemini/gemini-2.5-pro``, ``deepseek/deepseek-chat``),
then the bare id (``gpt-4o``, ``claude-sonnet-4-5``), then the id without a
provider prefix (``openai/gpt-4o`` -> ``gpt-4o``). The provider of an
OpenAI-compatible client is read from its ``base_url`` host (:data:`PROVIDER_HOSTS`).

The expected cost per query (:func:`expected_query_cost`, used by the allocation
when a model has no ``cost``): ``(I * input + O * output) / 1e6`` USD where ``I`` is
the mean prompt length of the campaign in characters over :data:`CHARS_PER_TOKEN`
plus the system prompt's, and ``O`` is ``expected_output_tokens`` (default
:data:`DEFAULT_EXPECTED_OUTPUT_TOKENS`).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

from .clients.config import MAX_PRICE_PER_1M, MAX_QUERY_USD, finite_number
from .data import LITELLM_PACKAGE_FILE, PRICES_FILE

PRICE_MAP_ENV = "LLMDUEL_PRICE_MAP"
#: Characters per token of the input estimate (English text with GPT/Claude tokenizers: about 4).
CHARS_PER_TOKEN = 4.0
#: Output tokens of one answer when a model or campaign does not say (a medium answer).
DEFAULT_EXPECTED_OUTPUT_TOKENS = 500
#: The cheapest expected cost a derived cost is given (USD): the policy needs costs > 0.
MIN_DERIVED_COST = 1e-9
#: The observed-cost warning: after at least this many charged calls of a model ...
COST_CHECK_MIN_CALLS = 10
#: ... its mean charge differs from the expected cost by more than this factor (either way).
COST_CHECK_FACTOR = 2.0
MAX_PRICE_MAP_ENTRIES = 10_000
#: LiteLLM's per-token prices of the providers' batch APIs (an entry's optional fields).
BATCH_FIELDS = ("input_cost_per_token_batches", "output_cost_per_token_batches")
#: The largest per-token price a map entry may give (USD per token): ``MAX_PRICE_PER_1M`` per million.
MAX_COST_PER_TOKEN = MAX_PRICE_PER_1M / 1e6

#: OpenAI-compatible hosts and LiteLLM's provider names for them.
PROVIDER_HOSTS = {
    "api.openai.com": "openai",
    "api.deepseek.com": "deepseek",
    "api.mistral.ai": "mistral",
    "api.groq.com": "groq",
    "api.together.xyz": "together_ai",
    "api.together.ai": "together_ai",
    "api.fireworks.ai": "fireworks_ai",
    "openrouter.ai": "openrouter",
    "api.x.ai": "xai",
}
_KIND_PROVIDERS = {"anthropic": "anthropic", "gemini": "gemini"}


class PriceMapError(ValueError):
    """A price map (the body's, the file's) is not usable; the message says where and why."""


@dataclass(frozen=True)
class Price:
    """A model's per-token price as USD per million tokens, and where it was found."""

    input_per_1m: float
    output_per_1m: float
    # "client" (its config), "price_map" (campaign body), "file" (LLMDUEL_PRICE_MAP),
    # "litellm" (an installed litellm package's map) or "bundled" (the copy shipped with llmduel)
    source: str
    key: str | None = None  # the map key that matched
    max_output_tokens: int | None = None  # the provider's output limit, when the map says

    def as_client_price(self) -> dict[str, float]:
        return {"input_per_1m": self.input_per_1m, "output_per_1m": self.output_per_1m}


# ---------------------------------------------------------------- maps
def normalise_price_map(
    raw: Any, where: str, max_entries: int | None = MAX_PRICE_MAP_ENTRIES, strict: bool = False
) -> dict[str, dict[str, Any]]:
    """A LiteLLM-format map checked and reduced to what pricing uses.

    Entries need ``input_cost_per_token`` and ``output_cost_per_token``
    (non-negative numbers, USD per token). Non-model keys LiteLLM keeps in its file
    (``sample_spec``) and entries that are not objects are skipped; an entry with a
    missing or invalid cost is an error naming it. ``strict`` (a campaign body's
    ``price_map``): an entry that is not an object is an error too, never skipped.
    """
    if not isinstance(raw, dict):
        raise PriceMapError(f"{where}: must be a JSON object of model entries (LiteLLM's price-map format)")
    if max_entries is not None and len(raw) > max_entries:
        raise PriceMapError(f"{where}: at most {max_entries} entries")
    out: dict[str, dict[str, Any]] = {}
    for key, entry in raw.items():
        if key == "sample_spec" or (not isinstance(entry, dict) and not strict):
            continue
        if not isinstance(entry, dict):
            raise PriceMapError(
                f"{where}[{str(key)[:80]!r}]: must be an object with input_cost_per_token and output_cost_per_token"
            )
        if not isinstance(key, str) or not key.strip() or len(key) > 300:
            raise PriceMapError(f"{where}: model keys must be non-empty strings of at most 300 characters")
        costs = {}
        for field in ("input_cost_per_token", "output_cost_per_token"):
            x = finite_number(entry.get(field))
            if x is None or x < 0 or x > MAX_COST_PER_TOKEN:
                raise PriceMapError(
                    f"{where}[{key!r}].{field}: must be a finite number in [0, {MAX_COST_PER_TOKEN:g}] "
                    f"(USD per token, at most {MAX_PRICE_PER_1M:g} USD per million tokens)"
                )
            costs[field] = x
        for field in BATCH_FIELDS:  # optional: the batch API's prices (LiteLLM's *_batches fields)
            if entry.get(field) is None:
                continue
            x = finite_number(entry.get(field))
            if x is None or x < 0 or x > MAX_COST_PER_TOKEN:
                raise PriceMapError(f"{where}[{key!r}].{field}: must be a finite number in [0, {MAX_COST_PER_TOKEN:g}]")
            costs[field] = x
        max_out = entry.get("max_output_tokens")
        out[key] = {
            **costs,
            "litellm_provider": entry.get("litellm_provider")
            if isinstance(entry.get("litellm_provider"), str)
            else None,
            "max_output_tokens": max_out
            if isinstance(max_out, int) and not isinstance(max_out, bool) and max_out > 0
            else None,
        }
    return out


@dataclass(frozen=True)
class BaseMap:
    """LiteLLM's whole price map as llmduel reads it, and where it came from.

    ``entries``: every priced model with the kept fields (:mod:`service.data.build_price_map`);
    ``tokens``: the entries with per-token prices, normalised (what a campaign's lookup uses);
    ``origin``: ``"litellm"`` (an installed ``litellm`` package's map) or ``"bundled"``,
    with ``version``, ``date``, ``source``, ``licence`` and ``path`` in ``provenance``.
    """

    entries: dict[str, dict[str, Any]]
    tokens: dict[str, dict[str, Any]]
    origin: str
    provenance: dict[str, Any]

    def describe(self) -> str:
        p = self.provenance
        if self.origin == "litellm":
            return f"the installed litellm package {p.get('version')} ({p.get('path')})"
        return f"the bundled copy of LiteLLM's map {p.get('version')} of {p.get('date')} ({p.get('licence')} licence)"


def _installed_litellm_map() -> tuple[dict[str, Any], dict[str, Any]] | None:
    """LiteLLM's map from an installed ``litellm`` package, found without importing it (the import is slow
    and may fetch the map over the network); None when the package or its map file is absent or unreadable."""
    import importlib.metadata
    import importlib.util

    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = os.path.join(folder, LITELLM_PACKAGE_FILE)
        try:
            with open(path, encoding="utf-8") as fh:
                raw = json.load(fh)
        except (OSError, ValueError, RecursionError):
            continue
        if not isinstance(raw, dict):
            continue
        try:
            version = importlib.metadata.version("litellm")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        return raw, {"source": "installed litellm package", "version": version, "path": path}
    return None


@lru_cache(maxsize=1)
def base_map() -> BaseMap:
    """The whole LiteLLM map: an installed ``litellm`` package's, else the bundled copy (read once per process)."""
    from .data.build_price_map import HEADER_KEY, derive

    installed = _installed_litellm_map()
    if installed is not None:
        derived = derive(installed[0], installed[1])
        origin = "litellm"
    else:
        derived = json.loads(resources.files("service.data").joinpath(PRICES_FILE).read_text("utf-8"))
        origin = "bundled"
    provenance = derived.pop(HEADER_KEY, None) or {}
    priced = {
        k: v
        for k, v in derived.items()
        if isinstance(v, dict) and "input_cost_per_token" in v and "output_cost_per_token" in v
    }
    tokens = normalise_price_map(priced, f"{origin} price map", max_entries=None)
    return BaseMap(derived, tokens, origin, provenance)


def bundled_map() -> dict[str, dict[str, Any]]:
    """The per-token entries of the base map (:func:`base_map`: LiteLLM's, installed or bundled)."""
    return base_map().tokens


_file_cache: dict[str, tuple[float, dict]] = {}
# The process's price map file: ``Settings.price_map`` (``LLMDUEL_PRICE_MAP``), set by the app at start.
_price_map_file: str | None = None


def set_price_map_file(path: str | None) -> None:
    """Use the file at ``path`` (``LLMDUEL_PRICE_MAP``, read by :class:`service.config.Settings`) as the user's map."""
    global _price_map_file
    _price_map_file = path or None


def file_map(path: str | None = None) -> dict[str, dict[str, Any]]:
    """The map in the configured file (``LLMDUEL_PRICE_MAP``; {} when unset); re-read when the file changes."""
    path = (_price_map_file or "") if path is None else path
    if not path.strip():
        return {}
    try:
        mtime = os.stat(path).st_mtime
    except OSError as exc:
        raise PriceMapError(f"{PRICE_MAP_ENV}: cannot read {path!r} ({exc.strerror or type(exc).__name__})") from None
    hit = _file_cache.get(path)
    if hit is not None and hit[0] == mtime:
        return hit[1]
    try:
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
    except RecursionError:  # json nests by recursion: a file nested thousands deep
        raise PriceMapError(f"{PRICE_MAP_ENV}: {path!r} is nested too deeply to be a price map") from None
    except (OSError, ValueError) as exc:
        raise PriceMapError(f"{PRICE_MAP_ENV}: {path!r} is not a readable JSON file ({type(exc).__name__})") from None
    parsed = normalise_price_map(raw, PRICE_MAP_ENV)
    _file_cache[path] = (mtime, parsed)
    return parsed


# ---------------------------------------------------------------- lookup
def provider_of(client: Mapping[str, Any]) -> str | None:
    """LiteLLM's provider name for a client config (from its kind, or an OpenAI-compatible base_url's host)."""
    kind = client.get("kind")
    if kind in _KIND_PROVIDERS:
        return _KIND_PROVIDERS[kind]
    if kind == "openai":
        host = (urlsplit(str(client.get("base_url") or "https://api.openai.com")).hostname or "").lower()
        return PROVIDER_HOSTS.get(host)
    return None


def candidate_keys(client: Mapping[str, Any]) -> list[str]:
    """The price-map keys a client's model is looked up under, most specific first."""
    model = client.get("model")
    if not isinstance(model, str) or not model.strip():
        return []
    model = model.strip()
    if client.get("kind") == "gemini" and model.startswith("models/"):
        model = model[len("models/") :]
    provider = provider_of(client)
    keys = []
    if provider is not None and not model.startswith(provider + "/"):
        keys.append(f"{provider}/{model}")
    keys.append(model)
    if "/" in model:  # "openai/gpt-4o" (LiteLLM's provider-prefixed spelling) -> "gpt-4o"
        keys.append(model.split("/", 1)[1])
    return list(dict.fromkeys(keys))


def lookup_price(client: Mapping[str, Any], price_map: Mapping[str, dict] | None = None) -> Price | None:
    """A client's price: its own ``price``, else the first map entry (user maps before the bundled one)."""
    own = client.get("price")
    if isinstance(own, dict):
        return Price(float(own["input_per_1m"]), float(own["output_per_1m"]), "client")
    keys = candidate_keys(client)
    if not keys:
        return None
    base = base_map()
    for source, entries in (("price_map", price_map or {}), ("file", file_map()), (base.origin, base.tokens)):
        for key in keys:
            entry = entries.get(key)
            if entry is not None:
                return Price(
                    input_per_1m=entry["input_cost_per_token"] * 1e6,
                    output_per_1m=entry["output_cost_per_token"] * 1e6,
                    source=source,
                    key=key,
                    max_output_tokens=entry.get("max_output_tokens"),
                )
    return None


def lookup_batch_price(client: Mapping[str, Any], price_map: Mapping[str, dict] | None = None) -> Price | None:
    """A client's per-token price on its provider's batch API, or ``None`` when none is known.

    Its own ``batch_price``; else, when its list price came from a map entry, that entry's
    ``input_cost_per_token_batches`` and ``output_cost_per_token_batches`` (both, or none). A client
    with its own ``price`` and no ``batch_price`` has no known batch price: it is charged its list
    price in a batch, never an assumed discount.
    """
    own = client.get("batch_price")
    if isinstance(own, dict):
        return Price(float(own["input_per_1m"]), float(own["output_per_1m"]), "client")
    price = lookup_price(client, price_map)
    if price is None or price.key is None:
        return None
    base = base_map()
    entries = {"price_map": price_map or {}, "file": file_map(), base.origin: base.tokens}.get(price.source) or {}
    entry = entries.get(price.key) or {}
    if all(entry.get(f) is not None for f in BATCH_FIELDS):
        i, o = (float(entry[f]) * 1e6 for f in BATCH_FIELDS)
        return Price(
            input_per_1m=i,
            output_per_1m=o,
            source=price.source,
            key=price.key,
            max_output_tokens=price.max_output_tokens,
        )
    return None


# ---------------------------------------------------------------- derived cost
def expected_input_tokens(prompts: Sequence[str], system: str | None = None) -> float:
    """The expected input tokens of one query: mean prompt characters (plus the system prompt's) / CHARS_PER_TOKEN."""
    mean_chars = sum(len(p) for p in prompts) / max(1, len(prompts))
    return (mean_chars + len(system or "")) / CHARS_PER_TOKEN


def expected_query_cost(price: Price, input_tokens: float, output_tokens: float) -> float:
    """The expected cost (USD) of one query at ``price``, at least :data:`MIN_DERIVED_COST`."""
    cost = (input_tokens * price.input_per_1m + output_tokens * price.output_per_1m) / 1e6
    return max(MIN_DERIVED_COST, cost)


def _unknown_model_message(name: str, client: Mapping[str, Any]) -> str:
    what = f"model {client.get('model')!r}" if client.get("model") else f"a {client.get('kind')!r} client"
    keys = candidate_keys(client)
    looked = f" (looked up as {', '.join(repr(k) for k in keys)})" if keys else ""
    return (
        f"models[{name!r}]: no cost and no price for {what}{looked}; give the model a 'cost' (USD per query), "
        "a client 'price' {input_per_1m, output_per_1m}, or an entry in the campaign's 'price_map' "
        f"or the {PRICE_MAP_ENV} file (LiteLLM format: input_cost_per_token, output_cost_per_token)"
    )


def resolve_model_cost(
    name: str,
    cost: float | None,
    client: dict[str, Any],
    *,
    prompts: Sequence[str],
    expected_output_tokens: int,
    price_map: Mapping[str, dict] | None = None,
    cost_source: str | None = None,
    image_input_tokens: float = 0.0,
) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """A model's expected cost per query, its client config with the price filled in, and the pricing record.

    A price found in a map is written into the client config (``client.price``) so
    the client charges per token when the provider reports usage. ``cost`` given:
    kept (``cost_source`` "configured"); else derived from the price
    (``"derived"``). Raises ``ValueError`` naming the model when neither is known.

    ``cost_source`` is the user's choice when both a ``cost`` and a price-map price are
    known: ``configured`` (the cost is used and charged per call; the map's price is not
    given to the client) or ``price_map`` (the cost is derived from the price and charged
    per token). Without a choice, a ``cost`` that disagrees with the price map's derived cost
    by more than :data:`COST_CHECK_FACTOR` either way is a ``ValueError`` asking for one.
    The record's ``charged`` says how calls are charged: ``per_token`` or ``per_call``.
    ``image_input_tokens``: the mean input tokens of a prompt's images (service/images/tokens.py),
    added to the expected input tokens.
    """
    if cost_source == "configured" and cost is None:
        raise ValueError(f"models[{name!r}]: cost_source configured needs a 'cost' (USD per query)")
    price = None if client.get("kind") == "simulated" else lookup_price(client, price_map)
    if cost_source == "price_map" and (price is None or price.source == "client"):
        raise ValueError(
            f"models[{name!r}]: cost_source price_map needs a price map entry for the model; "
            + (_unknown_model_message(name, client) if price is None else "its price is the client's own 'price'")
        )
    if cost is None and price is None:
        raise ValueError(_unknown_model_message(name, client))
    client = dict(client)
    in_tokens = expected_input_tokens(prompts, client.get("system")) + float(image_input_tokens)
    derived = expected_query_cost(price, in_tokens, expected_output_tokens) if price is not None else None
    from_map = price is not None and price.source != "client"
    if cost is not None and from_map and cost_source is None and derived is not None:
        ratio = cost / derived if derived > 0 else math.inf
        if not (1 / COST_CHECK_FACTOR <= ratio <= COST_CHECK_FACTOR):
            assert price is not None
            raise ValueError(
                f"models[{name!r}]: the configured cost {cost:.6g} USD per query disagrees with the price of "
                f"{price.key!r} in the {price.source} price map ({derived:.6g} USD per query expected at "
                f"{in_tokens:.0f} input and {expected_output_tokens} output tokens); say which one wins with "
                "cost_source: configured (the policy uses the cost and each call is charged it) or "
                "cost_source: price_map (the cost is derived from the price and calls are charged per token)"
            )
    if cost_source == "configured":
        client.pop("price", None)  # charged the configured cost per call
    elif price is not None and client.get("price") is None:
        client["price"] = price.as_client_price()
    if cost_source == "price_map":
        cost = None
    record: dict[str, Any] = {
        "cost_source": "configured" if cost is not None else "derived",
        "cost_choice": cost_source,
        "charged": "per_token" if client.get("price") is not None else "per_call",
        "price": price.as_client_price() if price is not None else None,
        "price_source": price.source if price is not None else None,
        "price_key": price.key if price is not None else None,
        "max_output_tokens": price.max_output_tokens if price is not None else None,
        "expected_input_tokens": round(in_tokens, 1),
        "expected_output_tokens": int(expected_output_tokens),
    }
    if cost is None:
        assert derived is not None
        cost = derived
        if cost > MAX_QUERY_USD:
            raise ValueError(
                f"models[{name!r}]: the cost per query derived from its price and {int(expected_output_tokens)} "
                f"expected output tokens is {cost:.6g} USD, above the bound of {MAX_QUERY_USD:g} USD per query; "
                "lower expected_output_tokens or give the model a 'cost'"
            )
    record["derived_cost"] = derived
    return float(cost), client, record


def lookup_image_price(client: Mapping[str, Any]) -> tuple[float, str, str] | None:
    """An image model's price per generated image from LiteLLM's map (``output_cost_per_image``, or
    ``input_cost_per_image`` of an ``image_generation`` entry, LiteLLM's spelling for OpenAI's image
    models), under its quality and size when ``params`` sets them: (USD, the map's origin, the key), or None."""
    base = base_map()
    params = client.get("params") or {}
    size, quality = str(params.get("size") or "").replace("x", "-x-"), params.get("quality")
    keys = []
    for key in candidate_keys(
        client
    ):  # LiteLLM lists some image models per quality and size: "hd/1024-x-1024/dall-e-3"
        if size and quality:
            keys.append(f"{quality}/{size}/{key}")
        if size:
            keys.append(f"{size}/{key}")
        keys.append(key)
    for key in keys:
        entry = base.entries.get(key) or {}
        x = entry.get("output_cost_per_image")
        if x is None and entry.get("mode") == "image_generation":  # LiteLLM's older spelling for generated images
            x = entry.get("input_cost_per_image")
        if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0:
            return float(x), base.origin, key
    return None


#: LiteLLM's per-image price fields (per generated image, per input image).
IMAGE_PRICE_FIELDS = ("output_cost_per_image", "input_cost_per_image")
_SIZE = re.compile(r"^\d+-x-\d+$")


def image_price_variants(key: str, entries: Mapping[str, dict] | None = None) -> list[dict[str, Any]]:
    """The per-image prices LiteLLM lists for ``key`` by size and quality: the entries
    ``[provider/]{quality}/{size}/{model}`` and ``[provider/]{size}/{model}`` beside ``[provider/]{model}``
    (``high/1024-x-1024/gpt-image-1``), each as ``{"key", "quality", "size", "field", "usd"}`` (size
    as ``1024x1024``, quality None when the key has none), sorted by size then quality."""
    entries = base_map().entries if entries is None else entries
    prefix, _, name = key.rpartition("/")
    head = f"{prefix}/" if prefix else ""
    out = []
    for other, entry in entries.items():
        if not (other.startswith(head) and other.endswith(f"/{name}")) or other == key:
            continue
        middle = other[len(head) : -len(name) - 1].split("/")
        if len(middle) > 2 or not _SIZE.match(middle[-1]):
            continue
        for field in IMAGE_PRICE_FIELDS:
            x = entry.get(field)
            if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0:
                quality = middle[0] if len(middle) == 2 else None
                size = middle[-1].replace("-x-", "x")
                out.append({"key": other, "quality": quality, "size": size, "field": field, "usd": float(x)})
                break
    return sorted(out, key=lambda v: (v["size"], v["quality"] or "", v["key"]))


def resolve_image_cost(name: str, cost: float | None, client: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """An image model's cost per call (one image) and its pricing record: its ``cost``, else the map's
    ``output_cost_per_image``. Charged per call (the client has no per-token ``price``)."""
    found = lookup_image_price(client)
    if cost is None and found is None:
        keys = ", ".join(repr(k) for k in candidate_keys(client))
        raise ValueError(
            f"models[{name!r}]: no cost and no price per image for {client.get('model')!r} (looked up as {keys}); "
            "give the model a 'cost' (USD per image)"
        )
    record: dict[str, Any] = {
        "cost_source": "configured" if cost is not None else "derived",
        "charged": "per_call",
        "price_per_image": found[0] if found else None,
        "price_source": found[1] if found else None,
        "price_key": found[2] if found else None,
    }
    if cost is None:
        assert found is not None
        cost = max(MIN_DERIVED_COST, found[0])
    return float(cost), record


# ---------------------------------------------------------------- observed cost
def cost_warning(name: str, expected: float, observed_mean: float | None, calls: int) -> str | None:
    """The warning when a model's observed mean charge is off its expected cost.

    Rule: at least :data:`COST_CHECK_MIN_CALLS` charged calls and a ratio
    observed/expected above :data:`COST_CHECK_FACTOR` or below its inverse. The
    allocation weighs models by the expected cost, so a wrong one makes the
    campaign pick pairs for a cost that is not the real one.
    """
    if observed_mean is None or calls < COST_CHECK_MIN_CALLS or not math.isfinite(observed_mean):
        return None
    if expected <= 0:
        return None
    ratio = observed_mean / expected
    if 1 / COST_CHECK_FACTOR <= ratio <= COST_CHECK_FACTOR:
        return None
    return (
        f"model {name!r}: the mean charge of its {calls} calls is {observed_mean:.6g} USD, "
        f"{ratio:.3g} times the expected cost per query {expected:.6g} USD used by the allocation; "
        "check its cost or price"
    )


# ---------------------------------------------------------------- one model's listing (llmduel price)
@dataclass(frozen=True)
class Listing:
    """A model's entry as ``llmduel price`` finds it: under its own name, or only under another provider's."""

    key: str
    entry: dict[str, Any]
    source: str  # "file" (LLMDUEL_PRICE_MAP), "litellm" or "bundled"
    exact: bool  # False: the model is listed only under other providers' prefixes; this is the first of them
    others: tuple[str, ...] = ()  # further listings of the same model name under other prefixes


def _same_model_elsewhere(model: str, entries: Mapping[str, dict]) -> list[str]:
    """Keys that list ``model`` under a provider prefix (``vertex_ai/claude-3-5-haiku``), chat models first."""
    tail = model.rsplit("/", 1)[-1]
    found = [k for k in entries if k != model and k.rsplit("/", 1)[-1] == tail]
    return sorted(found, key=lambda k: (entries[k].get("mode") not in (None, "chat"), k.count("/"), k))


def find_listing(model: str, path: str | None = None) -> Listing | None:
    """``model``'s entry in the user's file (``path``, ``LLMDUEL_PRICE_MAP``) or LiteLLM's map.

    Tried in order: the name itself, the name without its first ``provider/`` prefix,
    then (LiteLLM's map only) the same name under another provider's prefix.
    """
    model = model.strip()
    keys = [model] + ([model.split("/", 1)[1]] if "/" in model else [])
    base = base_map()
    for source, entries in (("file", file_map(path)), (base.origin, base.entries)):
        for key in keys:
            if key in entries:
                others = tuple(_same_model_elsewhere(key, base.entries)[:5])
                return Listing(key=key, entry=entries[key], source=source, exact=True, others=others)
    elsewhere = _same_model_elsewhere(model, base.entries)
    if elsewhere:
        return Listing(
            key=elsewhere[0],
            entry=base.entries[elsewhere[0]],
            source=base.origin,
            exact=False,
            others=tuple(elsewhere[1:6]),
        )
    return None


def close_names(model: str, path: str | None = None, n: int = 6) -> list[str]:
    """Model names near ``model`` (difflib), for an unknown model's error."""
    import difflib

    names = list(file_map(path)) + list(base_map().entries)
    near = difflib.get_close_matches(model, names, n=n, cutoff=0.6)
    tail = model.rsplit("/", 1)[-1]
    if len(near) < n:  # the same name without, or with another, provider prefix
        tails = {k.rsplit("/", 1)[-1]: k for k in names}
        near += [
            tails[t] for t in difflib.get_close_matches(tail, list(tails), n=n, cutoff=0.75) if tails[t] not in near
        ]
    return near[:n]
