"""The lines ``llmduel campaign show`` prints for a hybrid judge (the view's ``hybrid`` object)."""

from __future__ import annotations

from typing import Any


def hybrid_lines(c: dict[str, Any]) -> list[str]:
    """Human votes used against the humans-alone estimate, the judge-human agreement, a warning."""
    h = c.get("hybrid")
    if not h:
        return []
    rate = h["human_rate"] if h["human_rate"] == "active" else f"{float(h['human_rate']):g}"
    alone = h.get("human_votes_alone_estimate")
    rows = [
        f"  humans     {h['human_votes']} votes"
        + (f" ({h['human_votes_waiting']} waiting)" if h.get("human_votes_waiting") else "")
        + f", human_rate {rate}"
        + (f"; humans alone would have needed about {alone}" if alone is not None else "")
    ]
    ag = h.get("agreement") or {}
    if ag.get("decisive_votes"):
        lo, hi = ag["interval"]
        rows.append(
            f"  agreement  judge and humans agree on {ag['agreeing']} of {ag['decisive_votes']} decisive votes "
            f"({ag['rate']:.0%}; {ag['confidence']:.0%} Wilson interval {lo:.2f} to {hi:.2f})"
        )
    if h.get("agreement_warning"):
        rows.append(f"  warning    {h['agreement_warning']}")
    return rows
