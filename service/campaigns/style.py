"""A campaign's ranking with the answers' style held fixed, beside the raw one (docs/service.md,
*Style control*; the model and its assumptions: :mod:`algorithms.style_control`).

Pure: the judged duels that :class:`.results.Results` reads in, a JSON-safe dict out. Only
counted duels with both answers stored as text take part; a campaign with fewer than
:data:`MIN_DUELS` of them gets no fit (``None`` figures and a note).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from algorithms.style_control import FEATURES, fit_style_controlled, style_counts

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


def answer_style(answer_a: str | None, answer_b: str | None) -> list[int]:
    """The style features of a duel's two answers as ``duels.answer_style`` stores them: answer a's
    :data:`algorithms.style_control.FEATURES`, then answer b's (whole counts)."""
    return [int(x) for x in (*style_counts(answer_a), *style_counts(answer_b))]


def _stored_style(d: dict[str, Any]) -> tuple[list, list] | None:
    """The features of answers a and b stored with the duel (``style``), None when it has none (lists: the
    report makes one array of them all)."""
    stored = d.get("style")
    if not isinstance(stored, list) or len(stored) != 2 * len(FEATURES):
        return None
    k = len(FEATURES)
    return stored[:k], stored[k:]


class StyleRows:
    """The counted duels with both answers as text, gathered duel by duel (:meth:`add`): their models, scores
    and the style features of both answers (four numbers each, not the text: those stored with the duel,
    ``style``, else counted from its answers)."""

    def __init__(self) -> None:
        self.i: list[int] = []
        self.j: list[int] = []
        self.score: list[float] = []
        self.feat_i: list[Any] = []  # each a list or an array of the features
        self.feat_j: list[Any] = []

    def add(self, d: dict[str, Any]) -> None:
        if not d["counted"] or d["score"] is None:
            return
        stored = _stored_style(d)
        feat_a: Any
        feat_b: Any
        if stored is not None:
            feat_a, feat_b = stored
        elif d.get("answer_a") is None or d.get("answer_b") is None:
            return
        else:
            feat_a, feat_b = style_counts(d["answer_a"]), style_counts(d["answer_b"])
        a_is_i = d["a"] == d["model_i"]
        self.i.append(d["model_i"])
        self.j.append(d["b"] if a_is_i else d["a"])
        self.score.append(float(d["score"]))
        self.feat_i.append(feat_a if a_is_i else feat_b)
        self.feat_j.append(feat_b if a_is_i else feat_a)

    def report(self, names: list[str]) -> dict[str, Any]:
        return _report(self, names)


def style_report(names: list[str], duels: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``{"duels", "raw", "controlled", "coefficients", "leader_raw", "leader_controlled", "note"}``."""
    rows = StyleRows()
    for d in duels:
        rows.add(d)
    return rows.report(names)


def _report(rows: StyleRows, names: list[str]) -> dict[str, Any]:
    n = len(rows.score)
    out: dict[str, Any] = {"duels": n, "raw": [], "controlled": [], "coefficients": {}}
    if n < MIN_DUELS:
        out.update(
            leader_raw=None,
            leader_controlled=None,
            note=f"style control needs at least {MIN_DUELS} counted duels with both answers ({n} so far)",
        )
        return out
    i, j, score = np.array(rows.i), np.array(rows.j), np.array(rows.score)
    raw = fit_style_controlled(i, j, score, len(names))
    controlled = fit_style_controlled(
        i,
        j,
        score,
        len(names),
        np.array(rows.feat_i, dtype=float),
        np.array(rows.feat_j, dtype=float),
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
