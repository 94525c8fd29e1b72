"""LiteLLM's whole price map: the build script that derives the bundled copy, reading an installed
``litellm`` package's map instead, campaign lookups in it, and ``llmduel price MODEL``."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from service import pricing
from service.clients.config import validate_client_config
from service.data import build_price_map

SHARED_MAP = REPO.parent / "shared" / "data" / "prices" / "litellm_model_prices_1.109.1.json"
BUNDLED = REPO / "service" / "data" / "litellm_prices.json"

SAMPLE = {
    "sample_spec": {"input_cost_per_token": 0.0, "mode": "one of: chat, embedding"},
    "chat-model": {
        "input_cost_per_token": 1e-6,
        "output_cost_per_token": 2e-6,
        "cache_read_input_token_cost": 1e-7,
        "litellm_provider": "acme",
        "mode": "chat",
        "max_input_tokens": 1000,
        "max_output_tokens": 500,
        "supports_vision": True,
    },
    "acme/search-model": {
        "input_cost_per_token": 1e-6,
        "output_cost_per_token": 1e-6,
        "search_context_cost_per_query": {"search_context_size_low": 0.005, "search_context_size_high": "n/a"},
        "mode": "chat",
    },
    "acme/per-request": {"input_cost_per_request": 0.01, "mode": "search"},
    "acme/painter": {"output_cost_per_image": 0.04, "litellm_provider": "acme", "mode": "image_generation"},
    "acme/no-price": {"mode": "chat", "max_output_tokens": 10},
    "acme/negative": {"input_cost_per_token": -1, "output_cost_per_token": "free"},
}


def llmduel(*args: str, env: dict | None = None, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "LLMDUEL_PRICE_MAP"}
    full.update(env or {})
    if pythonpath is not None:
        full["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args], cwd=REPO, env=full, capture_output=True, text=True, timeout=120
    )


# ---------------------------------------------------------------- the build script
def test_build_keeps_only_the_fields_llmduel_reads_with_provenance(tmp_path):
    src = tmp_path / "litellm_model_prices_9.8.7.json"
    src.write_text(json.dumps(SAMPLE))
    out = tmp_path / "prices.json"
    code = build_price_map.main([str(src), "--out", str(out), "--date", "2026-01-02"])
    assert code == 0
    text = out.read_text()
    derived = json.loads(text)
    header = derived.pop(build_price_map.HEADER_KEY)
    assert header["version"] == "9.8.7" and header["date"] == "2026-01-02" and header["licence"] == "MIT"
    assert "litellm" in header["source"].lower() and header["entries"] == 4 and len(header["input_sha256"]) == 64
    assert set(derived) == {"chat-model", "acme/search-model", "acme/per-request", "acme/painter"}
    assert derived["chat-model"] == {
        "input_cost_per_token": 1e-6,
        "output_cost_per_token": 2e-6,
        "litellm_provider": "acme",
        "mode": "chat",
        "max_output_tokens": 500,
    }
    assert derived["acme/search-model"]["search_context_cost_per_query"] == {"search_context_size_low": 0.005}
    assert derived["acme/painter"]["output_cost_per_image"] == 0.04
    assert len(text.splitlines()) == 1 + 5 + 1  # one entry per line between the braces
    # gzip when asked, and a clear exit 2 for a file that is not a map or has no version
    assert build_price_map.main([str(src), "--out", str(tmp_path / "p.json.gz")]) == 0
    assert (tmp_path / "p.json.gz").read_bytes()[:2] == b"\x1f\x8b"
    bad = tmp_path / "prices.json.txt"
    bad.write_text("[1, 2]")
    assert build_price_map.main([str(bad), "--version", "1.0.0"]) == 2
    assert build_price_map.main([str(tmp_path / "nope.json"), "--version", "1.0.0"]) == 2
    assert build_price_map.main([str(tmp_path / "prices.json")]) == 2  # no version in the name


def test_the_bundled_copy_is_the_script_output_on_litellm_1_109_1():
    header = json.loads(BUNDLED.read_text())[build_price_map.HEADER_KEY]
    assert header["version"] == "1.109.1" and header["licence"] == "MIT" and header["entries"] > 4000
    assert BUNDLED.stat().st_size < 1_000_000
    if not SHARED_MAP.is_file():
        pytest.skip(f"{SHARED_MAP} is not here to rebuild from")
    assert header["input_sha256"] == hashlib.sha256(SHARED_MAP.read_bytes()).hexdigest()
    provenance = {k: header[k] for k in ("source", "version", "date", "licence", "derived_by", "input_sha256")}
    rebuilt = build_price_map.dumps_map(build_price_map.derive(json.loads(SHARED_MAP.read_text()), provenance))
    assert rebuilt == BUNDLED.read_text()


# ---------------------------------------------------------------- lookups in the whole map
@pytest.mark.parametrize(
    "client, key, prices",
    [
        ({"kind": "anthropic", "model": "claude-haiku-4-5"}, "claude-haiku-4-5", (1.0, 5.0)),
        ({"kind": "openai", "model": "vertex_ai/gemini-2.0-flash"}, "vertex_ai/gemini-2.0-flash", (0.15, 0.6)),
        (
            {"kind": "openai", "model": "mistral-large-latest", "base_url": "https://api.mistral.ai/v1"},
            "mistral/mistral-large-latest",
            (0.5, 1.5),
        ),
    ],
)
def test_campaign_lookups_find_models_of_the_whole_map(client, key, prices):
    p = pricing.lookup_price(validate_client_config(client))
    assert p is not None and p.key == key and p.source == "bundled"
    assert (p.input_per_1m, p.output_per_1m) == (pytest.approx(prices[0]), pytest.approx(prices[1]))
    assert pricing.base_map().origin == "bundled" and len(pricing.bundled_map()) > 3000


def _fake_litellm(root: Path, version: str = "9.9.9") -> None:
    """A litellm 'package' whose import would fail: llmduel must read its map file without importing it."""
    pkg = root / "litellm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('llmduel must not import litellm')\n")
    (pkg / "model_prices_and_context_window_backup.json").write_text(
        json.dumps(
            {
                "sample_spec": {"mode": "one of: chat"},
                "house-model": {"input_cost_per_token": 3e-6, "output_cost_per_token": 7e-6, "mode": "chat"},
                "gpt-4o": {"input_cost_per_token": 9e-6, "output_cost_per_token": 9e-6, "litellm_provider": "openai"},
            }
        )
    )
    dist = root / f"litellm-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: litellm\nVersion: {version}\n")


def test_an_installed_litellm_package_map_is_read_instead_of_the_bundled_copy(tmp_path):
    _fake_litellm(tmp_path / "site")
    r = llmduel("price", "house-model", "--json", pythonpath=tmp_path / "site")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["price_source"] == "litellm" and out["origin"]["version"] == "9.9.9"
    assert out["origin"]["path"].endswith("litellm/model_prices_and_context_window_backup.json")
    assert out["input_per_1m"] == pytest.approx(3.0)
    r = llmduel("price", "gpt-4o", pythonpath=tmp_path / "site")
    assert "9 USD per 1M tokens" in r.stdout and "installed litellm package 9.9.9" in r.stdout
    # a campaign's lookup uses the same map and says so
    code = (
        "from service.pricing import lookup_price; "
        "p = lookup_price({'kind': 'openai', 'model': 'house-model'}); print(p.source, p.key, p.input_per_1m)"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["litellm", "house-model", "3.0"], r.stderr


# ---------------------------------------------------------------- llmduel price
@pytest.mark.parametrize(
    "model, key, exact",
    [
        ("claude-haiku-4-5", "claude-haiku-4-5", True),
        ("vertex_ai/gemini-2.0-flash", "vertex_ai/gemini-2.0-flash", True),
        ("mistral/mistral-large-latest", "mistral/mistral-large-latest", True),
        ("claude-3-5-haiku", "vertex_ai/claude-3-5-haiku", False),  # LiteLLM 1.109.1 lists it under vertex_ai only
    ],
)
def test_price_command_finds_the_named_models(model, key, exact):
    r = llmduel("price", model, "--json", "--input-tokens", "1000", "--output-tokens", "200")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["key"] == key and out["listed_under_own_name"] is exact
    entry = pricing.base_map().entries[key]
    assert out["input_per_1m"] == pytest.approx(entry["input_cost_per_token"] * 1e6)
    expected = 1000 * entry["input_cost_per_token"] + 200 * entry["output_cost_per_token"]
    assert out["cost_per_query"] == pytest.approx(expected)
    assert out["origin"] == {
        "source": "bundled",
        "version": "1.109.1",
        "date": "2026-11-24",
        "licence": "MIT",
        "path": None,
    }
    text = llmduel("price", model).stdout
    assert f"key        {key}" in text and "per query" in text and "LiteLLM's model price map 1.109.1 (MIT)" in text
    assert ("not listed under its own name" in text) is (not exact)


def test_price_command_shows_fees_and_image_prices():
    out = json.loads(llmduel("price", "gpt-4o-search-preview", "--json").stdout)
    assert out["search_fees_per_query"]["search_context_size_medium"] > 0 and out["output_tokens"] == 500
    text = llmduel("price", "dall-e-3").stdout
    assert "USD per image" in text and "per query  - (no per-token prices)" in text


def test_price_command_shows_an_image_models_prices_by_size_and_quality():
    # the top-level gpt-image-1 entry has no per-image price; LiteLLM lists them per quality and size
    out = json.loads(llmduel("price", "gpt-image-1", "--json").stdout)
    assert out["key"] == "gpt-image-1" and out["image_prices"] == {}
    entries = pricing.base_map().entries
    by = {(v["quality"], v["size"]): v for v in out["image_prices_by_variant"]}
    assert len(by) == 9 and {q for q, _ in by} == {"low", "medium", "high"}
    low = by[("low", "1024x1024")]
    assert low["key"] == "low/1024-x-1024/gpt-image-1" and low["field"] == "input_cost_per_image"
    assert low["usd"] == entries["low/1024-x-1024/gpt-image-1"]["input_cost_per_image"]
    assert by[("high", "1536x1024")]["usd"] == entries["high/1536-x-1024/gpt-image-1"]["input_cost_per_image"]
    text = llmduel("price", "gpt-image-1").stdout
    assert f"image      {low['usd']:.6g} USD per image, quality low, size 1024x1024" in text
    assert text.count("USD per image") == 9
    # a text model has none
    assert json.loads(llmduel("price", "gpt-4o", "--json").stdout)["image_prices_by_variant"] == []


def test_price_command_user_map_wins_and_unknown_models_get_close_names(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"claude-haiku-4-5": {"input_cost_per_token": 2e-6, "output_cost_per_token": 4e-6}}))
    r = llmduel("price", "claude-haiku-4-5", "--json", env={"LLMDUEL_PRICE_MAP": str(path)})
    out = json.loads(r.stdout)
    assert out["price_source"] == "file" and out["origin"] == {"source": "file", "path": str(path)}
    assert out["input_per_1m"] == pytest.approx(2.0)

    r = llmduel("price", "gpt-4o-mni")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "no price for 'gpt-4o-mni'" in r.stderr and "gpt-4o-mini" in r.stderr
    r = llmduel("price", "zzqx-nothing-like-it")
    assert r.returncode == 2 and "close names" not in r.stderr and r.stderr.count("\n") == 1
    for bad in (["--input-tokens", "-3"], ["--output-tokens", "many"]):
        r = llmduel("price", "gpt-4o", *bad)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    path.write_text("{not json")
    r = llmduel("price", "gpt-4o", env={"LLMDUEL_PRICE_MAP": str(path)})
    assert r.returncode == 2 and "LLMDUEL_PRICE_MAP" in r.stderr and r.stderr.count("\n") == 1
