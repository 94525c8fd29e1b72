"""``llmduel analyze SOURCE``: structure of a preference matrix, from an instance or a battle log.

SOURCE is an instance JSON file, a builtin instance name (``search``, ``text``, ...),
or a battle log in the FastChat / LMArena format (CSV, JSON array or JSON Lines with
``model_a``, ``model_b``, ``winner``). From a log the preference matrix is built by
:mod:`algorithms.research.battles` (tie policy, minimum comparisons per pair, largest
fully-compared subset of models), Bradley-Terry ratings with confidence intervals are
fitted (:mod:`algorithms.bradley_terry`), and the structural assumptions of the
paper's Appendix C are checked (:mod:`algorithms.assumptions`).

The report (``--json``) has the keys ``source``, ``kind`` (``instance`` or
``battle_log``), ``models``, ``condorcet_winner`` (name or null), ``assumptions``
(key -> ``{"holds", "example", "name", ...}``), ``preference``, and when counts are
known ``counts``, ``wins`` and ``bradley_terry``; for logs also ``tie_policy``,
``min_comparisons``, ``excluded_models``, ``subset_method`` and ``log``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from algorithms.assumptions import ASSUMPTIONS, check_assumptions
from algorithms.bradley_terry import fit_bradley_terry

__all__ = ["AnalyzeError", "analyze_source", "format_report"]


class AnalyzeError(ValueError):
    """Bad SOURCE or options (one-line message)."""


def _instance_report(d: dict, source: str, ci_level: float) -> dict:
    from algorithms.instance import Instance, InstanceError

    try:
        inst = Instance.from_dict(d, require_condorcet=False)
    except InstanceError as e:
        raise AnalyzeError(f"{source}: {e}") from None
    names = list(inst.names)
    P = np.asarray(inst.preference, dtype=float)
    rep: dict[str, Any] = {
        "source": source,
        "kind": "instance",
        "models": names,
        "costs": [float(c) for c in inst.costs],
    }
    prov = d.get("provenance")
    if prov is not None:
        rep["provenance"] = prov
    rep.update(_structure(P, names))
    counts = d.get("counts")
    if counts is not None:
        N = np.asarray(counts, dtype=float)
        if N.shape != P.shape:
            raise AnalyzeError(f"{source}: counts must be {P.shape[0]}x{P.shape[0]}")
        W = np.asarray(d["wins"], dtype=float) if "wins" in d else P * N
        rep["counts"] = N.tolist()
        rep["wins"] = W.tolist()
        rep["bradley_terry"] = fit_bradley_terry(W, names, ci_level=ci_level).to_dict()
        if "wins" not in d:
            rep["bradley_terry"]["note"] = "wins reconstructed as preference x counts"
    return rep


def _structure(P: np.ndarray, names: list[str]) -> dict:
    a = check_assumptions(P, names)
    return {
        "condorcet_winner": a["CW"].get("winner") if a["CW"]["holds"] else None,
        "assumptions": a,
        "preference": [[float(x) for x in row] for row in P],
    }


def analyze_source(
    source: str,
    *,
    tie_policy: str = "drop",
    min_comparisons: int = 1,
    include: str | None = None,
    exclude: str | None = None,
    anony_only: bool = False,
    fmt: str | None = None,
    ci_level: float = 0.95,
) -> dict:
    """Build the analysis report for ``source`` (see the module docstring)."""
    from algorithms.research.battles import BattleLogError, load_preference, sniff_format
    from algorithms.research.instances import builtin_instance_names, load_builtin_instance

    if not (0 < ci_level < 1):
        raise AnalyzeError("--ci-level must be in (0, 1)")
    if not os.path.exists(source):
        if source in builtin_instance_names():
            return _instance_report(load_builtin_instance(source), source, ci_level)
        raise AnalyzeError(
            f"no such file or builtin instance: {source} (builtin: {', '.join(builtin_instance_names())})"
        )
    if os.path.isdir(source):
        raise AnalyzeError(f"{source} is a directory")
    try:
        kind = fmt or sniff_format(source)
        if kind == "instance":
            with open(source, encoding="utf-8") as f:
                try:
                    d = json.load(f)
                except json.JSONDecodeError as e:
                    raise AnalyzeError(f"{source}: invalid JSON ({e.msg} at line {e.lineno})") from None
            return _instance_report(d, source, ci_level)
        pdata = load_preference(
            source,
            fmt=kind,
            tie_policy=tie_policy,
            min_comparisons=min_comparisons,
            include=include,
            exclude=exclude,
            anony_only=anony_only,
        )
    except BattleLogError as e:
        raise AnalyzeError(str(e)) from None
    rep: dict[str, Any] = {"source": source, "kind": "battle_log", "format": kind, "models": pdata.names}
    rep.update(_structure(pdata.preference, pdata.names))
    d = pdata.to_dict()
    for k in ("counts", "wins", "tie_policy", "min_comparisons", "excluded_models", "subset_method", "log"):
        rep[k] = d[k]
    rep["bradley_terry"] = fit_bradley_terry(pdata.wins, pdata.names, ci_level=ci_level).to_dict()
    return rep


def _example_text(key: str, r: dict) -> str:
    ex = r.get("example")
    if key == "STI" and not r.get("applicable", True):
        return "not applicable: no total order"
    if ex is None:
        if key == "gamma-RST":
            return f"largest gamma = {r['gamma']:.4g}"
        if key == "CW":
            return f"winner: {r['winner']}"
        if key == "GIA":
            return f"identifiable arm: {r['arm']}"
        return ""
    parts = [f"{k}={v}" for k, v in ex.items() if k in ("i", "j", "k")]
    extra = " (exact tie)" if ex.get("tie") else ""
    return "violated at " + ", ".join(parts) + extra


def format_report(rep: dict) -> str:
    """Human-readable text of a report."""
    names = rep["models"]
    L = len(names)
    w = max(8, max(len(n) for n in names))
    out = [
        f"source: {rep['source']} ({rep['kind']}{', ' + rep['format'] if 'format' in rep else ''})",
        f"models ({L}): {', '.join(names)}",
    ]
    if rep.get("excluded_models"):
        out.append(f"excluded (not compared with every other model): {', '.join(rep['excluded_models'])}")
    if "log" in rep:
        lg = rep["log"]
        out.append(
            f"battles: {lg['rows']} rows, {lg['used']} used ({lg['decisive']} decisive, {lg['tie']} tie, "
            f"{lg['tie (bothbad)']} tie (bothbad)); tie policy: {rep['tie_policy']}; "
            f"min comparisons per pair: {rep['min_comparisons']}"
        )
    out.append("")
    out.append("preference P[row beats column]" + (" (comparisons)" if "counts" in rep else "") + ":")
    idx = [str(i) for i in range(L)]
    out.append(" " * (w + 4) + " ".join(f"{c:>7}" for c in idx))
    for i, n in enumerate(names):
        cells = []
        for j in range(L):
            p = rep["preference"][i][j]
            cells.append("      -" if i == j else ("    nan" if p != p else f"{p:7.3f}"))
        line = f"{i:>2} {n:<{w}} " + " ".join(cells)
        if "counts" in rep:
            line += "   (" + ", ".join(str(int(round(c))) for c in rep["counts"][i]) + ")"
        out.append(line)
    out.append("")
    cw = rep["condorcet_winner"]
    out.append(f"Condorcet winner: {cw if cw is not None else 'none'}")
    out.append("")
    out.append("assumptions (paper, Appendix C):")
    for key, r in rep["assumptions"].items():
        mark = "holds" if r["holds"] else ("n/a  " if key == "STI" and not r.get("applicable", True) else "fails")
        out.append(f"  {key:<10} {ASSUMPTIONS[key]:<40} {mark}  {_example_text(key, r)}")
    bt = rep.get("bradley_terry")
    if bt:
        out.append("")
        out.append(
            f"Bradley-Terry ratings (Elo scale, mean {bt['base']:g}, {100 * bt['ci_level']:g}% Wald CI"
            + ("" if bt["mle_exists"] else f"; MLE does not exist, ridge l2={bt['l2']:.3g}")
            + "):"
        )
        for n in bt["ranking"]:
            r = bt["ratings"][n]
            out.append(f"  {n:<{w}} {r['rating']:8.1f}  [{r['lower']:8.1f}, {r['upper']:8.1f}]")
    return "\n".join(out) + "\n"
