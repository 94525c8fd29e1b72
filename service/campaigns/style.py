"""A campaign's ranking with the answers' style held fixed, beside the raw one (docs/service.md,
*Style control*; the model and its assumptions: :mod:`algorithms.style_control`).

Pure: the judged duels that :class:`.results.Results` reads in, a JSON-safe dict out. Only
counted duels with both answers stored as text take part; a campaign with fewer than
:data:`MIN_DUELS` of them gets no fit (``None`` figures and a note).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from algorithms.style_control import fit_style_controlled, style_counts

MIN_DUELS = 20


def _rows(fit: Any, names: list[str]) -> list[dict[str, Any]]:
    order = np.argsort(-fit.ratings, kind="stable")
    return [
        {
            "rank": r + 1,
            "model": names[m],
            "rating": round(float(fit.ratings[m]), 1),
            "lower": round(float(fit.lower[m]), 1),
            "upper": round(float(fit.upper[m]), 1),
        }
        for r, m in enumerate(order)
    ]


def style_report(names: list[str], duels: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"duels", "raw", "controlled", "coefficients", "leader_raw", "leader_controlled", "note"}``."""
    rows = [d for d in duels if d["counted"] and d["score"] is not None and d.get("answer_a") is not None]
    rows = [d for d in rows if d.get("answer_b") is not None]
    out: dict[str, Any] = {"duels": len(rows), "raw": [], "controlled": [], "coefficients": {}}
    if len(rows) < MIN_DUELS:
        out.update(
            leader_raw=None,
            leader_controlled=None,
            note=f"style control needs at least {MIN_DUELS} counted duels with both answers ({len(rows)} so far)",
        )
        return out
    i = np.array([d["model_i"] for d in rows])
    j = np.array([d["b"] if d["a"] == d["model_i"] else d["a"] for d in rows])
    text_i = [d["answer_a"] if d["a"] == d["model_i"] else d["answer_b"] for d in rows]
    text_j = [d["answer_b"] if d["a"] == d["model_i"] else d["answer_a"] for d in rows]
    score = np.array([float(d["score"]) for d in rows])
    raw = fit_style_controlled(i, j, score, len(names))
    controlled = fit_style_controlled(
        i,
        j,
        score,
        len(names),
        np.array([style_counts(t) for t in text_i]),
        np.array([style_counts(t) for t in text_j]),
    )
    out["raw"], out["controlled"] = _rows(raw, names), _rows(controlled, names)
    out["coefficients"] = {
        f: {"gamma": round(g, 4), "se": round(controlled.gamma_se[f], 4)} for f, g in controlled.gamma.items()
    }
    out["leader_raw"], out["leader_controlled"] = out["raw"][0]["model"], out["controlled"][0]["model"]
    same = out["leader_raw"] == out["leader_controlled"]
    out["note"] = (
        f"{out['leader_raw']} leads with and without style control"
        if same
        else f"{out['leader_raw']} leads the raw ranking, {out['leader_controlled']} once style (length and "
        "Markdown) is held fixed: the judge may reward style"
    ) + "; descriptive (Wald intervals at this sample size), not part of the certificate"
    return out
