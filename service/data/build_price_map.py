"""Derive the bundled price map from LiteLLM's model price map.

``python -m service.data.build_price_map PATH [--version V] [--date YYYY-MM-DD] [--out FILE]``

PATH is LiteLLM's ``model_prices_and_context_window.json`` (in the litellm wheel as
``litellm/model_prices_and_context_window_backup.json``). The output keeps, for each
model that has at least one price, only the fields llmduel reads (:data:`KEPT`), and
a header entry :data:`HEADER_KEY` with the provenance: source, version, date,
licence, the command that built it, the SHA-256 of the input and the entry count.
The version is read from a file name like ``..._1.109.1.json`` unless ``--version``
says it; the date is the day of the derivation unless ``--date`` says it. The
output has one entry per line, and is gzip-compressed when the name ends in ``.gz``. Run it again on a newer map to update the bundled copy
(docs/clients-and-judges.md, *Prices*).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import hashlib
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

HEADER_KEY = "_llmduel_provenance"
#: Fields kept: per-token prices (and their batch-API prices), per-request and search fees, per-image prices, and
#: what describes the model.
PRICE_FIELDS = (
    "input_cost_per_token",
    "output_cost_per_token",
    "input_cost_per_request",
    "input_cost_per_query",
    "input_cost_per_image",
    "output_cost_per_image",
    "input_cost_per_token_batches",
    "output_cost_per_token_batches",
)
SEARCH_FIELD = "search_context_cost_per_query"  # {search_context_size_low|medium|high: USD}
DESCRIPTIVE = ("litellm_provider", "mode", "max_output_tokens")
KEPT = PRICE_FIELDS + (SEARCH_FIELD,) + DESCRIPTIVE
SOURCE = "LiteLLM model_prices_and_context_window.json (https://github.com/BerriAI/litellm)"
LICENCE = "MIT"
DEFAULT_OUT = Path(__file__).resolve().parent / "litellm_prices.json"


def _price(x: Any) -> float | None:
    """A non-negative finite number, else None (LiteLLM's sample entry holds descriptions in some fields)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) and x >= 0 else None


def compact_entry(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The kept fields of one model entry, or None when it has no price llmduel can use."""
    out: dict[str, Any] = {}
    for field in PRICE_FIELDS:
        x = _price(entry.get(field))
        if x is not None:
            out[field] = x
    search = entry.get(SEARCH_FIELD)
    if isinstance(search, dict):
        tiers = {k: v for k, v in ((k, _price(v)) for k, v in search.items() if isinstance(k, str)) if v is not None}
        if tiers:
            out[SEARCH_FIELD] = tiers
    if not out:
        return None
    for field in ("litellm_provider", "mode"):
        if isinstance(entry.get(field), str):
            out[field] = entry[field]
    max_out = entry.get("max_output_tokens")
    if isinstance(max_out, int) and not isinstance(max_out, bool) and max_out > 0:
        out["max_output_tokens"] = max_out
    return out


def derive(raw: dict[str, Any], provenance: dict[str, Any]) -> dict[str, Any]:
    """The compact map: the header first, then the models in key order."""
    models = {}
    for key in sorted(raw):
        entry = raw[key]
        if key == "sample_spec" or not isinstance(entry, dict) or not isinstance(key, str) or not key.strip():
            continue
        kept = compact_entry(entry)
        if kept is not None:
            models[key] = kept
    header = dict(provenance, entries=len(models), fields=list(KEPT))
    return {HEADER_KEY: header, **models}


def dumps_map(out: dict[str, Any]) -> str:
    """One entry per line (readable diffs when the map is rebuilt), compact within a line."""
    lines = [json.dumps(k) + ":" + json.dumps(v, separators=(",", ":")) for k, v in out.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def version_from_name(path: Path) -> str | None:
    m = re.search(r"(\d+\.\d+\.\d+)\.json$", path.name)
    return m.group(1) if m else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m service.data.build_price_map", description=__doc__.split("\n\n")[0])
    p.add_argument("path", metavar="PATH", help="LiteLLM's model price map (JSON)")
    p.add_argument("--version", default=None, help="LiteLLM version of the map (default: from the file name)")
    p.add_argument("--date", default=None, help="date of the copy, YYYY-MM-DD (default: today, UTC)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help=f"output file; .gz compresses (default {DEFAULT_OUT.name})")
    args = p.parse_args(argv)
    path = Path(args.path)
    try:
        data = path.read_bytes()
        raw = json.loads(data)
    except (OSError, ValueError) as exc:
        print(f"build_price_map: cannot read {path} as JSON ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    if not isinstance(raw, dict):
        print(f"build_price_map: {path} is not a JSON object of model entries", file=sys.stderr)
        return 2
    version = args.version or version_from_name(path)
    if version is None:
        print("build_price_map: give --version (it is not in the file name)", file=sys.stderr)
        return 2
    provenance = {
        "source": SOURCE,
        "version": version,
        "date": args.date or dt.datetime.now(dt.timezone.utc).date().isoformat(),
        "licence": LICENCE,
        "derived_by": f"python -m service.data.build_price_map {path.name}",
        "input_sha256": hashlib.sha256(data).hexdigest(),
    }
    out = derive(raw, provenance)
    text = dumps_map(out)
    target = Path(args.out)
    if target.suffix == ".gz":
        target.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    else:
        target.write_text(text, encoding="utf-8")
    print(f"{target}: {out[HEADER_KEY]['entries']} models from LiteLLM {version} ({target.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
