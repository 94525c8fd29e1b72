"""Real-world instances: package data, provenance, rebuild from ../shared/data, GenAI-Arena Condorcet winner."""

import json

import numpy as np
import pytest

from algorithms import Instance
from algorithms.assumptions import check_assumptions
from algorithms.research.analyze import analyze_source
from algorithms.research.instances import builtin_instance_names, load_builtin_instance
from algorithms.research.realworld import BUILDERS, default_data_dir, dumps

DATA = default_data_dir()
needs_data = pytest.mark.skipif(not (DATA / "README.md").is_file(), reason="../shared/data not available")

WINNERS = {
    "search": "gemini-2.5-pro-grounding",
    "search-no-gemini": "sonar-reasoning-pro-high",
    "text": "llama-4-maverick-03-26-experimental",
    "vision": "gemini-2.5-pro-exp-03-25",
    "image": "imagen-3.0-generate-002",
    "genai-image": "PlayGroundV2",
    "genai-image-ties": "PlayGroundV2",
    "genai-image-ties4": "SDXL",
}


def test_builtin_names_and_unknown_name():
    assert builtin_instance_names() == [
        "search",
        "search-no-gemini",
        "text",
        "vision",
        "image",
        "genai-image",
        "genai-image-ties",
        "genai-image-ties4",
    ]
    with pytest.raises(KeyError, match="unknown builtin"):
        load_builtin_instance("nope")


@pytest.mark.parametrize("name", list(WINNERS))
def test_builtin_instance_is_valid_with_provenance(name):
    d = load_builtin_instance(name)
    inst = Instance.from_dict(d)
    assert inst.names[inst.condorcet_winner] == WINNERS[name]
    prov = d["provenance"]
    for key in ("kind", "source", "date", "derivation", "cost"):
        assert prov.get(key), (name, key)
    assert prov["kind"] in ("empirical", "rating-implied")
    assert all(c > 0 for c in d["costs"])
    assert d["cost_unit"]


def test_rating_implied_instances_are_totally_ordered():
    for name in ("text", "vision", "image"):
        d = load_builtin_instance(name)
        assert d["provenance"]["kind"] == "rating-implied"
        r = check_assumptions(d["preference"], d["names"])
        assert all(v["holds"] for v in r.values()), name
        R = np.array([d["ratings"][n]["rating"] for n in d["names"]])
        P = np.asarray(d["preference"])
        assert P[0, 1] == pytest.approx(1 / (1 + 10 ** ((R[1] - R[0]) / 400)))


def test_search_instance_matches_the_papers_assumption_profile():
    """Paper, Appendix C, Search column: only TO, gamma-RST, WST and CW hold."""
    d = load_builtin_instance("search-no-gemini")
    assert d["provenance"]["kind"] == "empirical"
    r = check_assumptions(d["preference"], d["names"])
    holds = {k for k, v in r.items() if v["holds"]}
    assert holds == {"TO", "gamma-RST", "WST", "CW"}
    assert 0 < r["gamma-RST"]["gamma"] < 1
    assert "gemini-2.5-pro-grounding" not in d["names"]
    assert "gemini-2.0-flash-grounding" in d["provenance"]["left_out"]


def test_cost_conventions():
    text = load_builtin_instance("text")
    c = dict(zip(text["names"], text["costs"]))
    assert c["deepseek-r1"] == pytest.approx(2.19 / 1000)  # $2.19 per 1M output tokens, 1,000 tokens per query
    assert c["gemma-3-27b-it"] == pytest.approx(0.07 / 1000)
    img = dict(zip(*(load_builtin_instance("image")[k] for k in ("names", "costs"))))
    assert img["ideogram-v2"] == pytest.approx(0.08) and img["flux-1-dev-fp8"] == pytest.approx(0.014)
    s = dict(zip(*(load_builtin_instance("search")[k] for k in ("names", "costs"))))
    # high-tier search fee + 1,000 input + 1,000 output tokens
    assert s["sonar"] == pytest.approx(0.012 + 1000 * (1e-6 + 1e-6))
    assert s["sonar-reasoning-pro-high"] == pytest.approx(0.014 + 1000 * (2e-6 + 8e-6))
    assert s["gpt-4o-search-high"] == pytest.approx(0.025 + 1000 * (2.5e-6 + 1e-5))
    assert set(load_builtin_instance("genai-image")["costs"]) == {1.0}


@needs_data
@pytest.mark.parametrize("name", list(BUILDERS))
def test_package_data_matches_a_rebuild_from_shared_data(name):
    built = json.loads(dumps(BUILDERS[name](DATA)))
    assert built == load_builtin_instance(name)


@needs_data
@pytest.mark.parametrize("tie_policy", ["drop", "half"])
def test_genai_arena_log_has_playgroundv2_as_condorcet_winner(tie_policy):
    rep = analyze_source(str(DATA / "genai_arena" / "battles_20240220.csv"), tie_policy=tie_policy)
    assert rep["condorcet_winner"] == "imagenhub_PlayGroundV2_generation"
    assert rep["assumptions"]["CW"]["holds"] is True
    assert len(rep["models"]) == 6 and all(m.endswith("_generation") for m in rep["models"])
    assert len(rep["excluded_models"]) == 7  # the image-editing models never met the generation models
    assert rep["log"]["rows"] == 2061 and rep["log"]["skipped_self"] == 1
    assert rep["bradley_terry"]["ranking"][0] == "imagenhub_PlayGroundV2_generation"
    assert rep["tie_policy"] == tie_policy
    total = np.asarray(rep["counts"]).sum() / 2
    assert total < (rep["log"]["decisive"] if tie_policy == "drop" else rep["log"]["used"])


@needs_data
def test_genai_arena_counts_match_the_log_totals():
    drop = analyze_source(str(DATA / "genai_arena" / "battles_20240220.csv"), include="_generation$")
    half = analyze_source(str(DATA / "genai_arena" / "battles_20240220.csv"), include="_generation$", tie_policy="half")
    assert drop["excluded_models"] == [] and half["excluded_models"] == []
    lg = drop["log"]
    assert lg["used"] + lg["skipped_self"] == 1978  # the README: 1,978 text-to-image battles (one is a self-battle)
    assert np.sum(drop["counts"]) / 2 == lg["decisive"]
    assert np.sum(half["counts"]) / 2 == lg["used"]
    # half-ties pull every preference towards 1/2
    Pd, Ph = np.asarray(drop["preference"]), np.asarray(half["preference"])
    assert np.all(np.abs(Ph - 0.5) <= np.abs(Pd - 0.5) + 1e-12)
