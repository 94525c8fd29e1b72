"""``llmduel price MODEL [--json] [--input-tokens N] [--output-tokens N]``: a model's prices, offline.

Looks the model up as a campaign would (:mod:`service.pricing`): the file named by
``LLMDUEL_PRICE_MAP`` first, then LiteLLM's map (an installed ``litellm`` package's,
else the copy bundled with llmduel). Prints the per-token prices, the fees per request
or search and the prices per image when the map has them, the derived cost per query
for the given token counts, and where the figures came from. An unknown model is a
one-line error with close names, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from service.cli.args import CLIError

#: Input tokens of one query when --input-tokens is not given (a medium prompt).
DEFAULT_INPUT_TOKENS = 500
_FEES = ("input_cost_per_request", "input_cost_per_query")
_IMAGES = ("input_cost_per_image", "output_cost_per_image")


def _tokens(flag: str):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a whole number of tokens, got {text!r}") from None
        if not 0 <= v <= 10**8:
            raise argparse.ArgumentTypeError(f"{flag} must be between 0 and 100000000, got {v}")
        return v

    return parse


def price_report(model: str, input_tokens: int, output_tokens: int, path: str | None) -> dict[str, Any]:
    from service import pricing

    try:
        found = pricing.find_listing(model, path)
        if found is None:
            near = pricing.close_names(model, path)
            hint = f"; close names: {', '.join(near)}" if near else ""
            raise CLIError(f"no price for {model!r} in LiteLLM's map or LLMDUEL_PRICE_MAP{hint}")
    except pricing.PriceMapError as exc:
        raise CLIError(str(exc)) from None
    e = found.entry
    base = pricing.base_map()
    file_map = pricing.file_map(path) if found.source == "file" else {}
    origin = (
        {"source": "file", "path": path}
        if found.source == "file"
        else {"source": base.origin, **{k: base.provenance.get(k) for k in ("version", "date", "licence", "path")}}
    )
    per_token = "input_cost_per_token" in e and "output_cost_per_token" in e
    fees = {k: e[k] for k in _FEES if k in e}
    cost = None
    if per_token:
        cost = (input_tokens * e["input_cost_per_token"] + output_tokens * e["output_cost_per_token"]) + sum(
            fees.values()
        )
    return {
        "model": model,
        "key": found.key,
        "listed_under_own_name": found.exact,
        "also_listed_as": list(found.others),
        "provider": e.get("litellm_provider"),
        "mode": e.get("mode"),
        "input_per_1m": e["input_cost_per_token"] * 1e6 if per_token else None,
        "output_per_1m": e["output_cost_per_token"] * 1e6 if per_token else None,
        "fees_per_request": fees,
        "search_fees_per_query": e.get("search_context_cost_per_query") or {},
        "image_prices": {k: e[k] for k in _IMAGES if k in e},
        "image_prices_by_variant": pricing.image_price_variants(
            found.key, file_map if found.source == "file" else base.entries
        ),
        "max_output_tokens": e.get("max_output_tokens"),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cost_per_query": cost,
        "price_source": found.source,
        "origin": origin,
    }


def format_report(r: dict[str, Any]) -> str:
    o = r["origin"]
    if o["source"] == "file":
        where = f"LLMDUEL_PRICE_MAP file {o['path']}"
    elif o["source"] == "litellm":
        where = f"the installed litellm package {o.get('version')} ({o.get('path')})"
    else:
        where = f"LiteLLM's model price map {o.get('version')} ({o.get('licence')}), bundled copy of {o.get('date')}"
    lines = [f"model      {r['model']}"]
    if r["listed_under_own_name"]:
        lines.append(f"key        {r['key']}")
    else:
        lines.append(f"key        {r['key']}  (not listed under its own name; the price of this listing)")
    lines.append(f"provider   {r['provider'] or '-'}, mode {r['mode'] or '-'}")
    if r["input_per_1m"] is not None:
        lines.append(f"input      {r['input_per_1m']:.6g} USD per 1M tokens")
        lines.append(f"output     {r['output_per_1m']:.6g} USD per 1M tokens")
    for k, v in r["fees_per_request"].items():
        lines.append(f"fee        {v:.6g} USD per request ({k})")
    for k, v in r["search_fees_per_query"].items():
        lines.append(f"search     {v:.6g} USD per query with {k.replace('_', ' ')} (not in the cost below)")
    for k, v in r["image_prices"].items():
        lines.append(f"image      {v:.6g} USD per image ({k})")
    for v in r["image_prices_by_variant"]:
        quality = f"quality {v['quality']}, " if v["quality"] else ""
        lines.append(f"image      {v['usd']:.6g} USD per image, {quality}size {v['size']} ({v['key']}, {v['field']})")
    if r["cost_per_query"] is not None:
        fees = " + fees" if r["fees_per_request"] else ""
        lines.append(
            f"per query  {r['cost_per_query']:.6g} USD for {r['input_tokens']} input + "
            f"{r['output_tokens']} output tokens{fees}"
        )
    else:
        lines.append("per query  - (no per-token prices)")
    lines.append(f"source     {where}")
    if r["also_listed_as"]:
        lines.append(f"also as    {', '.join(r['also_listed_as'])}")
    return "\n".join(lines) + "\n"


def cmd_price(args: argparse.Namespace) -> int:
    from service.pricing import DEFAULT_EXPECTED_OUTPUT_TOKENS, PRICE_MAP_ENV

    if not args.model.strip():
        raise CLIError("MODEL must be a model name, e.g. claude-haiku-4-5")
    out_tokens = DEFAULT_EXPECTED_OUTPUT_TOKENS if args.output_tokens is None else args.output_tokens
    report = price_report(args.model, args.input_tokens, out_tokens, os.environ.get(PRICE_MAP_ENV) or None)
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(report))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "price",
        help="a model's per-token prices and cost per query, from LiteLLM's map (offline)",
        description="A model's prices as a campaign would find them: the LLMDUEL_PRICE_MAP file, then LiteLLM's "
        "map (an installed litellm package's, else the copy bundled with llmduel). See docs/clients-and-judges.md.",
    )
    p.add_argument("model", metavar="MODEL", help="the model id, as LiteLLM names it (claude-haiku-4-5, mistral/...)")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.add_argument(
        "--input-tokens",
        type=_tokens("--input-tokens"),
        default=DEFAULT_INPUT_TOKENS,
        help=f"input tokens of one query (default {DEFAULT_INPUT_TOKENS})",
    )
    p.add_argument(
        "--output-tokens",
        type=_tokens("--output-tokens"),
        default=None,
        help="output tokens of one query (default 500, as for a campaign)",
    )
    p.set_defaults(handler=cmd_price)
