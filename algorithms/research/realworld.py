"""Builders of the real-world dueling instances from the shared public data.

The paper (Section 5.2, Appendix C) used Chatbot Arena preference matrices that were
printed only as images. These builders derive the closest instances from the public
data in ``../shared/data`` (see its README) and record how, in each instance's
``provenance``:

========================  ==============  =================================================
name                      kind            source
========================  ==============  =================================================
``search``                empirical       Search Arena win-rate matrix (ties excluded), 11
                                          models with a published price (gemini-2.0-flash-
                                          grounding has no search fee in the price map)
``search-no-gemini``      empirical       the same without gemini-2.5-pro-grounding (then
                                          sonar-reasoning-pro-high is the Condorcet winner,
                                          as PPL Reasoning Pro is in the paper)
``text``                  rating-implied  LMArena text leaderboard (``full``), the paper's
                                          five models
``vision``                rating-implied  LMArena vision leaderboard (``full``), the four
                                          models the paper names
``image``                 rating-implied  LMArena text-to-image leaderboard (``full``), all
                                          eight models (the paper's A-H were eight)
``genai-image``           empirical       GenAI-Arena human battles (2024-02-20), the six
                                          text-to-image models, ties dropped
========================  ==============  =================================================

Rating-implied: ``P(i beats j) = 1 / (1 + 10^((R_j - R_i)/400))`` from the leaderboard's
Bradley-Terry ratings, hence totally ordered (and SST, STI, GIA, LNM all hold), which
the paper's empirical matrices were not.

Costs (USD per query, the paper's convention):

* text and vision: output price per 1M tokens x 1,000 generated tokens per query
  (LMArena's price table, ``prices_2025-05-06.json``);
* search: high-tier per-request search fee + 1,000 input and 1,000 output tokens at the
  per-token prices (LiteLLM 1.109.1 price map: "1,000 requests correspond to about 1M
  input and output tokens");
* images: price per image (LMArena's price table);
* GenAI-Arena: the six research models have no per-image price in the shared tables,
  so every model costs 1 (one image); on this instance DCTAS and TAS coincide.

The paper's figures label text and vision costs "per 1M tokens" and search costs "per
1,000 requests", yet its Table 2 totals are of the order of USD per query; with
different matrices and model sets the absolute totals are not comparable anyway, so
the reproduction compares ratios (to DCTAS, DCTAS against TAS).

Rebuild the package data with ``python -m algorithms.research.realworld``; ``--check``
verifies that the committed files match a rebuild.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path
from typing import Callable

import numpy as np

from algorithms.bradley_terry import elo_to_preference, fit_bradley_terry
from algorithms.research.battles import build_preference, count_battles

__all__ = [
    "default_data_dir",
    "BUILDERS",
    "PAPER_COLUMN",
    "build_search",
    "build_text",
    "build_vision",
    "build_image",
    "build_genai_image",
    "build_all",
    "INSTANCE_DIR",
]

INSTANCE_DIR = Path(__file__).resolve().parent / "instances"

TOKENS_PER_QUERY = 1000

#: instance -> the paper's Table 2 column it stands for (None: not in the paper)
PAPER_COLUMN = {
    "image": "T2I",
    "text": "T2T",
    "vision": "Vision",
    "search-no-gemini": "Search",
    "search": None,
    "genai-image": None,
}


def default_data_dir() -> Path:
    """``$LLMDUEL_SHARED_DATA`` or ``<project>/../shared/data``."""
    env = os.environ.get("LLMDUEL_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"


def _read_json(path: Path):
    with open(path, "r", encoding="utf-8") as f:
        return json.load(f)


def _read_square_csv(path: Path) -> tuple[list[str], np.ndarray]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    cols = rows[0][1:]
    names = [r[0] for r in rows[1:]]
    if names != cols:
        raise ValueError(f"{path}: row and column models differ")
    M = np.array([[float(x) for x in r[1:]] for r in rows[1:]])
    return names, M


def _arena_prices(data: Path) -> dict[str, dict]:
    return {e["model_api_name"]: e for e in _read_json(data / "arena_catalog" / "prices_2025-05-06.json")}


def _instance(names, costs, P, provenance, **extra) -> dict:
    P = np.asarray(P, dtype=float)
    d = {
        "names": list(names),
        "costs": [float(c) for c in costs],
        "preference": [[float(x) for x in row] for row in P],
    }
    d.update(extra)
    d["provenance"] = provenance
    return d


# ------------------------------------------------------------------------ search

#: Search Arena model -> (LiteLLM price key, the paper's display name or None)
SEARCH_PRICES = {
    "sonar-reasoning-pro-high": ("perplexity/sonar-reasoning-pro", "PPL Reasoning Pro"),
    "gemini-2.5-pro-grounding": ("gemini/gemini-2.5-pro", None),
    "sonar-pro-high": ("perplexity/sonar-pro", "PPL Sonar Pro"),
    "sonar-reasoning": ("perplexity/sonar-reasoning", "PPL Reasoning"),
    "sonar-pro": ("perplexity/sonar-pro", None),
    "sonar": ("perplexity/sonar", "PPL Sonar"),
    "gemini-2.5-flash-grounding": ("gemini/gemini-2.5-flash", None),
    "gemini-2.0-flash-grounding": (None, None),  # no search fee in LiteLLM 1.109.1
    "gpt-4o-search-high": ("gpt-4o-search-preview", "GPT 4O Search High"),
    "gpt-4o-search-high-loc": ("gpt-4o-search-preview", None),
    "gpt-4o-search": ("gpt-4o-search-preview", None),
    "gpt-4o-mini-search": ("gpt-4o-mini-search-preview", None),
}


def _search_cost(entry: dict) -> float:
    fee = entry.get("search_context_cost_per_query", {}).get("search_context_size_high")
    if fee is None:
        raise KeyError("no high-tier search fee")
    return float(fee) + TOKENS_PER_QUERY * (
        float(entry["input_cost_per_token"]) + float(entry["output_cost_per_token"])
    )


def build_search(data: Path | None = None, include_gemini: bool = True) -> dict:
    """Empirical Search Arena instance (costs from LiteLLM, high search tier)."""
    data = Path(data or default_data_dir())
    names, P = _read_square_csv(data / "search_arena" / "winrate_noties.csv")
    _, counts = _read_square_csv(data / "search_arena" / "battle_counts_incl_ties.csv")
    asym = float(np.max(np.abs(P + P.T - 1.0)))
    P = (P + (1.0 - P.T)) / 2.0  # the PDF's 2-decimal rounding breaks p_ij + p_ji = 1 in two pairs
    litellm = _read_json(data / "prices" / "litellm_model_prices_1.109.1.json")
    keep, costs, price_rows, dropped = [], [], {}, {}
    for i, n in enumerate(names):
        key, _ = SEARCH_PRICES.get(n, (None, None))
        if not include_gemini and n == "gemini-2.5-pro-grounding":
            dropped[n] = "left out on purpose (the 'without gemini-2.5-pro-grounding' variant)"
            continue
        if key is None or key not in litellm:
            dropped[n] = "no per-request search fee in the LiteLLM 1.109.1 price map"
            continue
        e = litellm[key]
        keep.append(i)
        costs.append(_search_cost(e))
        price_rows[n] = {
            "litellm_key": key,
            "search_fee_high_usd": e["search_context_cost_per_query"]["search_context_size_high"],
            "input_usd_per_token": e["input_cost_per_token"],
            "output_usd_per_token": e["output_cost_per_token"],
        }
    ix = np.ix_(keep, keep)
    sel = [names[i] for i in keep]
    prov = {
        "kind": "empirical",
        "source": "LMArena Search Arena (lmarena/search-arena @a377a050, scripts/plots/pairwise_winrates.pdf "
        "and battle_count_pairwise.pdf; CC-BY-4.0), read from ../shared/data/search_arena/",
        "date": "not stated in the shared data (repository commit a377a050, 2025)",
        "derivation": (
            "P[i][j] = empirical win rate of row over column with ties excluded (2 decimals). "
            f"Symmetrised as (P + 1 - P^T)/2 (largest |p_ij + p_ji - 1| was {asym:.2f}, from rounding). "
            "Models without a published per-request search fee are left out."
        ),
        "cost": "USD per query = high-tier search fee + 1,000 input tokens + 1,000 output tokens "
        "(LiteLLM model price map 1.109.1, ../shared/data/prices/)",
        "prices": {n: price_rows[n] for n in sel},
        "left_out": dropped,
        "paper_names": {n: SEARCH_PRICES[n][1] for n in sel if SEARCH_PRICES[n][1]},
        "counts_note": "counts = battles behind each cell, ties included",
        "built_by": "algorithms.research.realworld.build_search",
    }
    return _instance(sel, costs, P[ix], prov, counts=counts[ix].astype(int).tolist(), cost_unit="USD per query")


# ------------------------------------------------------------------------ rating-implied

TEXT_MODELS = {
    "llama-4-maverick-03-26-experimental": "LLAMA 4 Maverick",
    "deepseek-r1": "DeepSeek R1",
    "deepseek-v3": "DeepSeek V3",
    "gemini-2.0-flash-001": "Gemini 2.0 Flash",
    "gemma-3-27b-it": "Gemma 3 27b",
}

VISION_MODELS = {
    "gemini-2.5-pro-exp-03-25": "Gemini 2.5 Pro Exp",
    "gemini-2.0-flash-001": "Gemini 2.0 Flash",
    "gemini-1.5-pro-002": "Gemini 1.5 Pro",
    "claude-3-7-sonnet-20250219": "Claude 3.7 Sonnet",
}


def _rating_implied(data: Path, board: str, models: dict[str, str] | None, per: str) -> dict:
    lb_path = data / "arena_catalog" / f"leaderboard-{board}_2025-04-24.json"
    full = _read_json(lb_path)["full"]
    prices = _arena_prices(data)
    names = list(models) if models is not None else sorted(m for m in full if m in prices)
    missing = [m for m in names if m not in full or m not in prices]
    if missing:
        raise ValueError(f"{board}: no rating or price for {missing}")
    names.sort(key=lambda m: -full[m]["rating"])
    R = np.array([full[m]["rating"] for m in names])
    P = elo_to_preference(R)
    if per == "token":
        costs = [float(prices[m]["output_token_price"]) * TOKENS_PER_QUERY / 1e6 for m in names]
        cost_txt = (
            "USD per query = output price per 1M tokens x 1,000 generated tokens "
            "(LMArena price table prices_2025-05-06.json)"
        )
        unit = "USD per query"
    else:
        costs = [float(prices[m]["output_token_price"]) for m in names]
        cost_txt = "USD per image (LMArena price table prices_2025-05-06.json)"
        unit = "USD per image"
    prov = {
        "kind": "rating-implied",
        "source": f"LMArena leaderboard '{board}', category 'full' (lmarena/arena-catalog @ca6b34297), "
        f"../shared/data/arena_catalog/{lb_path.name}",
        "date": "2025-04-24 (ratings); 2025-05-06 (prices)",
        "derivation": "P[i][j] = 1 / (1 + 10^((R_j - R_i)/400)) from the leaderboard's Bradley-Terry "
        "(Elo-scale) ratings R. Totally ordered by construction, unlike the paper's "
        "empirical matrices.",
        "cost": cost_txt,
        "prices": {
            m: {
                "input_usd_per_1M": prices[m]["input_token_price"],
                "output_usd_per_1M": prices[m]["output_token_price"],
                "price_source": prices[m]["price_source"],
            }
            for m in names
        },
        "built_by": f"algorithms.research.realworld (leaderboard {board})",
    }
    if models is not None:
        prov["paper_names"] = {m: models[m] for m in names}
    ratings = {
        m: {"rating": full[m]["rating"], "q025": full[m]["rating_q025"], "q975": full[m]["rating_q975"]} for m in names
    }
    return _instance(names, costs, P, prov, ratings=ratings, cost_unit=unit)


def build_text(data: Path | None = None) -> dict:
    """Text-to-text: the paper's five models, rating-implied (text leaderboard)."""
    d = _rating_implied(Path(data or default_data_dir()), "text", TEXT_MODELS, "token")
    d["provenance"]["built_by"] = "algorithms.research.realworld.build_text"
    return d


def build_vision(data: Path | None = None) -> dict:
    """Vision: the four models the paper names, rating-implied (vision leaderboard)."""
    d = _rating_implied(Path(data or default_data_dir()), "vision", VISION_MODELS, "token")
    d["provenance"]["built_by"] = "algorithms.research.realworld.build_vision"
    d["provenance"]["note"] = (
        "The paper names Gemini 2.5 Pro Exp, Gemini 2.0 Flash, Gemini 1.5 Pro and "
        "Claude 3.7 Sonnet; any further models of its vision set are unknown."
    )
    return d


def build_image(data: Path | None = None) -> dict:
    """Text-to-image: the image leaderboard's eight models, rating-implied, USD per image."""
    d = _rating_implied(Path(data or default_data_dir()), "image", None, "image")
    d["provenance"]["built_by"] = "algorithms.research.realworld.build_image"
    d["provenance"]["note"] = (
        "The paper's eight anonymised models A-H are not identifiable; the 2025-04-24 "
        "image leaderboard has exactly eight models, all priced."
    )
    return d


# ------------------------------------------------------------------------ GenAI-Arena

GENAI_LOG = ("genai_arena", "battles_20240220.csv")


def _short_genai(name: str) -> str:
    s = name
    if s.startswith("imagenhub_"):
        s = s[len("imagenhub_") :]
    if s.endswith("_generation"):
        s = s[: -len("_generation")]
    return s


def build_genai_image(data: Path | None = None, tie_policy: str = "drop") -> dict:
    """Empirical text-to-image instance from the GenAI-Arena battle log (unit costs)."""
    data = Path(data or default_data_dir())
    path = data.joinpath(*GENAI_LOG)
    bc = count_battles(str(path), model_filter=lambda m: m.endswith("_generation"))
    pdata = build_preference(bc, tie_policy=tie_policy, min_comparisons=1)
    order = np.argsort(-np.nansum(pdata.preference, axis=1), kind="stable")
    names = [pdata.names[i] for i in order]
    ix = np.ix_(order, order)
    P, N, W = pdata.preference[ix], pdata.counts[ix], pdata.wins[ix]
    bt = fit_bradley_terry(W, [_short_genai(n) for n in names])
    prov = {
        "kind": "empirical",
        "source": "GenAI-Arena human battles (TIGER-AI-Lab/GenAI-Arena, arena_elo/clean_battle_20240220.json, "
        "history commit e4e4637; Apache-2.0/MIT), ../shared/data/genai_arena/battles_20240220.csv",
        "date": "2024-02-20",
        "derivation": (
            f"Battles between the six *_generation models (text-to-image); image-editing battles and one "
            f"self-battle ignored. Tie policy '{tie_policy}' ({'tie and tie (bothbad) not counted' if tie_policy == 'drop' else 'each tie is half a win per side'}). "
            "P[i][j] = wins of i over j / comparisons. Models sorted by row sum."
        ),
        "cost": "1 per image for every model: the shared price tables have no per-image price for these "
        "research models, so costs are equal (DCTAS and TAS then coincide)",
        "log_stats": {k: v for k, v in pdata.stats.items()},
        "original_names": {_short_genai(n): n for n in names},
        "built_by": "algorithms.research.realworld.build_genai_image",
    }
    return _instance(
        [_short_genai(n) for n in names],
        [1.0] * len(names),
        P,
        prov,
        counts=N.astype(int).tolist() if tie_policy == "drop" else N.tolist(),
        wins=W.tolist(),
        tie_policy=tie_policy,
        bradley_terry={n: round(float(r), 2) for n, r in zip(bt.names, bt.ratings)},
        cost_unit="image (equal costs)",
    )


#: the four GenAI-Arena generation models below the top two (PlayGroundV2, PixArtAlpha): 33% ties
GENAI_TIES4 = ("SDXL", "SDXLTurbo", "OpenJourney", "LCM")


def build_genai_image_ties(data: Path | None = None, models: tuple[str, ...] | None = None) -> dict:
    """GenAI-Arena text-to-image with its ties: the mean score (half a win per tie) and a ``ties`` matrix.

    ``ties[i][j]`` is the fraction of i-j battles voted ``tie`` or ``tie (bothbad)``;
    ``preference[i][j]`` = (wins of i + ties / 2) / battles. ``models`` (short names) keeps a subset.
    """
    data = Path(data or default_data_dir())
    path = data.joinpath(*GENAI_LOG)
    bc = count_battles(str(path), model_filter=lambda m: m.endswith("_generation"))
    if models is not None:
        full = {_short_genai(n): n for n in bc.names}
        bc = bc.subset([full[m] for m in models])
    pdata = build_preference(bc, tie_policy="half", min_comparisons=1)
    order = np.argsort(-np.nansum(pdata.preference, axis=1), kind="stable")
    names = [pdata.names[i] for i in order]
    ix_log = [bc.names.index(n) for n in names]
    ix = np.ix_(order, order)
    P, N = pdata.preference[ix], pdata.counts[ix]
    T = (bc.ties + bc.bothbad)[np.ix_(ix_log, ix_log)]
    ties = np.where(N > 0, T / np.where(N > 0, N, 1.0), 0.0)
    np.fill_diagonal(ties, 0.0)
    off = ~np.eye(len(names), dtype=bool)
    share = float(T[off].sum() / N[off].sum())
    subset = "all six *_generation models" if models is None else f"the generation models {', '.join(models)}"
    prov = {
        "kind": "empirical",
        "source": "GenAI-Arena human battles (TIGER-AI-Lab/GenAI-Arena, arena_elo/clean_battle_20240220.json, "
        "history commit e4e4637; Apache-2.0/MIT), ../shared/data/genai_arena/battles_20240220.csv",
        "date": "2024-02-20",
        "derivation": (
            f"Battles between {subset} (text-to-image). A 'tie' or 'tie (bothbad)' vote is a tie. "
            "ties[i][j] = tie votes of the pair / its battles; P[i][j] = (wins of i + ties / 2) / battles "
            f"(the mean score). Share of ties over all pairs: {share:.3f}. Models sorted by row sum."
        ),
        "cost": "1 per image for every model (no per-image prices for these research models)",
        "original_names": {_short_genai(n): n for n in names},
        "built_by": "algorithms.research.realworld.build_genai_image_ties",
    }
    return _instance(
        [_short_genai(n) for n in names],
        [1.0] * len(names),
        P,
        prov,
        ties=[[float(x) for x in row] for row in ties],
        counts=N.tolist(),
        tie_share=round(share, 4),
        cost_unit="image (equal costs)",
    )


BUILDERS: dict[str, Callable[[Path | None], dict]] = {
    "search": lambda d=None: build_search(d, include_gemini=True),
    "search-no-gemini": lambda d=None: build_search(d, include_gemini=False),
    "text": build_text,
    "vision": build_vision,
    "image": build_image,
    "genai-image": build_genai_image,
    "genai-image-ties": build_genai_image_ties,
    "genai-image-ties4": lambda d=None: build_genai_image_ties(d, GENAI_TIES4),
}


def build_all(data: Path | None = None) -> dict[str, dict]:
    """All builtin instances, name -> instance dict."""
    return {name: fn(data) for name, fn in BUILDERS.items()}


def dumps(instance: dict) -> str:
    """Canonical JSON text of an instance (what the package data files contain)."""
    return json.dumps(instance, indent=1, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m algorithms.research.realworld",
        description="Rebuild the real-world instance files from ../shared/data.",
    )
    ap.add_argument("--data", default=None, help="shared data directory (default: ../shared/data)")
    ap.add_argument("--out", default=str(INSTANCE_DIR), help="output directory (default: the package data)")
    ap.add_argument("--check", action="store_true", help="only check that the files match a rebuild")
    a = ap.parse_args(argv)
    data = Path(a.data) if a.data else default_data_dir()
    if not data.is_dir():
        print(f"error: shared data directory not found: {data}", file=sys.stderr)
        return 2
    out = Path(a.out)
    bad = 0
    for name, inst in build_all(data).items():
        p = out / f"{name}.json"
        text = dumps(inst)
        if a.check:
            same = p.is_file() and json.loads(p.read_text()) == json.loads(text)
            print(f"{name}: {'ok' if same else 'DIFFERS'}")
            bad += not same
        else:
            out.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            print(f"wrote {p}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
