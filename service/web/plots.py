"""Server-side plots as inline SVG strings (no chart library, no JavaScript).

Every function returns a :class:`markupsafe.Markup` holding one ``<svg>``
element. All text that reaches the SVG goes through :func:`esc`. Colours and
sizes are presentation attributes (not ``style``), so the pages' strict
Content-Security-Policy (no inline styles) does not affect them. Each plot has a
``class="plot plot-<kind>"`` and a ``<title>`` for screen readers; marks carry
``data-*`` attributes that the tests read.
"""

from __future__ import annotations

import math
from html import escape
from typing import Sequence

from markupsafe import Markup

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#7f7f7f",
)
INK = "#1f2933"
MUTED = "#6b7785"
GRID = "#e3e7ec"
FONT = 'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif"'


def esc(text: object) -> str:
    return escape(str(text), quote=True)


def color(n: int) -> str:
    return PALETTE[n % len(PALETTE)]


def num(x: float) -> str:
    """A coordinate: short, finite."""
    if not math.isfinite(x):
        x = 0.0
    return f"{x:.1f}".rstrip("0").rstrip(".") if abs(x) < 1e7 else f"{x:.0f}"


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    if x == 0:
        return "0"
    if abs(x) >= 1e9 or abs(x) < 1e-3:
        return f"{x:.{digits - 1}e}"
    if abs(x) >= 10**digits:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def nice_ticks(lo: float, hi: float, n: int = 5, integer: bool = False) -> list[float]:
    """About ``n`` round tick values covering [lo, hi] (whole numbers when ``integer``)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if integer:
        step = max(1.0, float(math.ceil(step)))
    start = math.floor(lo / step) * step
    ticks: list[float] = []
    v = start
    while v <= hi + step * 1e-9 and len(ticks) < 50:
        ticks.append(round(v, 12))
        v += step
    return ticks


def _svg_open(kind: str, width: int, height: int, title: str, *, extra: str = "") -> str:
    return (
        f'<svg class="plot plot-{kind}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" preserveAspectRatio="xMinYMin meet" {FONT}{extra}>'
        f"<title>{esc(title)}</title>"
    )


def empty_plot(kind: str, message: str, width: int = 640, height: int = 80) -> Markup:
    return Markup(
        _svg_open(kind, width, height, message, extra=' data-empty="1"')
        + f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" fill="#fafbfc" stroke="{GRID}"/>'
        f'<text x="{width / 2}" y="{height / 2 + 5}" text-anchor="middle" font-size="14" fill="{MUTED}">'
        f"{esc(message)}</text></svg>"
    )


# ---------------------------------------------------------------- line chart
def line_chart(
    series: Sequence[dict],
    *,
    title: str,
    x_label: str,
    y_label: str,
    width: int = 900,
    height: int = 330,
    vline: tuple[float, str] | None = None,
    integer_x: bool = False,
) -> Markup:
    """Lines over a shared x axis.

    ``series``: dicts with ``label``, ``points`` [(x, y), ...], ``color`` and
    optional ``dash`` (bool) and ``key`` (a stable identifier for ``data-key``).
    ``vline``: (x, label) drawn as a vertical marker (e.g. the certification).
    ``integer_x``: the x axis counts something (whole-number ticks).
    """
    pts = [(x, y) for s in series for x, y in s["points"] if math.isfinite(x) and math.isfinite(y)]
    if not pts:
        return empty_plot("lines", "no data yet", width)
    ml, mr, mt, mb = 58, 16, 14, 42
    pw, ph = width - ml - mr, height - mt - mb
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    if vline is not None:
        x1 = max(x1, vline[0])
    y0, y1 = min(0.0, min(p[1] for p in pts)), max(p[1] for p in pts)
    if x1 <= x0:
        x1 = x0 + 1
    if y1 <= y0:
        y1 = y0 + 1
    y1 += (y1 - y0) * 0.05
    eps = 1e-9 * max(1.0, abs(x1) + abs(y1))
    xt = [v for v in nice_ticks(x0, x1, 6, integer=integer_x) if x0 - eps <= v <= x1 + eps]
    yt = [v for v in nice_ticks(y0, y1, 5) if y0 - eps <= v <= y1 + eps]

    def sx(x: float) -> float:
        return ml + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return mt + ph - (y - y0) / (y1 - y0) * ph

    out = [_svg_open("lines", width, height, title)]
    out.append(f'<g class="grid" stroke="{GRID}" stroke-width="1">')
    for v in yt:
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{num(sy(v))}" y2="{num(sy(v))}"/>')
    out.append("</g>")
    out.append(f'<g class="axis" font-size="11" fill="{MUTED}">')
    for v in yt:
        out.append(f'<text x="{ml - 6}" y="{num(sy(v) + 4)}" text-anchor="end">{esc(fmt(v))}</text>')
    for v in xt:
        out.append(f'<text x="{num(sx(v))}" y="{mt + ph + 16}" text-anchor="middle">{esc(fmt(v))}</text>')
    out.append(f'<text x="{ml + pw / 2}" y="{height - 6}" text-anchor="middle" fill="{INK}">{esc(x_label)}</text>')
    out.append(
        f'<text transform="translate(14 {mt + ph / 2}) rotate(-90)" text-anchor="middle" fill="{INK}">'
        f"{esc(y_label)}</text>"
    )
    out.append("</g>")
    out.append(f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="{GRID}"/>')
    if y0 < 0 < y1:
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{num(sy(0))}" y2="{num(sy(0))}" stroke="{MUTED}"/>')
    if vline is not None:
        vx = num(sx(vline[0]))
        out.append(
            f'<g class="vline"><line x1="{vx}" x2="{vx}" y1="{mt}" y2="{mt + ph}" stroke="#2f9e44" '
            f'stroke-width="1.5" stroke-dasharray="2 3"/><text x="{vx}" y="{mt + 12}" dx="-4" text-anchor="end" '
            f'font-size="11" fill="#2f9e44">{esc(vline[1])}</text></g>'
        )
    for n, s in enumerate(series):
        p = [(x, y) for x, y in s["points"] if math.isfinite(x) and math.isfinite(y)]
        if not p:
            continue
        d = "M" + " L".join(f"{num(sx(x))} {num(sy(y))}" for x, y in p)
        dash = ' stroke-dasharray="6 4"' if s.get("dash") else ""
        key = esc(s.get("key", n))
        out.append(
            f'<path class="series" data-key="{key}" data-label="{esc(s["label"])}" data-points="{len(p)}" '
            f'd="{d}" fill="none" stroke="{s["color"]}" stroke-width="{2.5 if s.get("dash") else 2}"'
            f'{dash} stroke-linejoin="round"><title>{esc(s["label"])}</title></path>'
        )
        if len(p) == 1:
            x, y = p[0]
            out.append(f'<circle cx="{num(sx(x))}" cy="{num(sy(y))}" r="3" fill="{s["color"]}"/>')
    out.append("</svg>")
    return Markup("".join(out))


# ---------------------------------------------------------------- heatmap
def _heat_color(p: float) -> str:
    """0 -> red, 1/2 -> white, 1 -> blue."""
    p = min(1.0, max(0.0, p))
    if p >= 0.5:
        t = (p - 0.5) * 2
        c0, c1 = (255, 255, 255), (37, 99, 171)
    else:
        t = (0.5 - p) * 2
        c0, c1 = (255, 255, 255), (200, 60, 50)
    r, g, b = (round(a + (b_ - a) * t) for a, b_ in zip(c0, c1))
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(
    names: Sequence[str],
    wins: Sequence[Sequence[float]],
    counts: Sequence[Sequence[float]],
    *,
    title: str = "Preference matrix",
) -> Markup:
    """Cell (i, j): the share of duels model i won against j, coloured, with wins/duels."""
    L = len(names)
    if L == 0:
        return empty_plot("heatmap", "no models")
    cell = max(22, min(64, 520 // L))
    # Names are never cut: the row labels' column and the rotated column labels' band grow with
    # the longest name (about 6.6 px per character at 11 px).
    longest = max(len(n) for n in names)
    label_w = max(60, int(6.6 * longest) + 12)
    top = max(34, int(6.6 * longest * 0.71) + 16)
    width = label_w + cell * L + int(6.6 * longest * 0.71) + 8
    height = top + cell * L + 8
    out = [_svg_open("heatmap", width, height, title)]
    out.append(f'<g font-size="11" fill="{INK}">')
    for j in range(L):
        x, y = label_w + cell * j + cell / 2, top - 8
        out.append(
            f'<text class="col" x="{num(x)}" y="{y}" transform="rotate(-45 {num(x)} {y})">'
            f"{esc(names[j])}<title>{esc(names[j])}</title></text>"
        )
    for i in range(L):
        out.append(
            f'<text class="row" x="{label_w - 6}" y="{num(top + cell * i + cell / 2 + 4)}" text-anchor="end">'
            f"{esc(names[i])}<title>{esc(names[i])}</title></text>"
        )
    out.append("</g>")
    show_text = cell >= 34
    for i in range(L):
        for j in range(L):
            x, y = label_w + cell * j, top + cell * i
            if i == j:
                out.append(
                    f'<rect class="cell diag" x="{x}" y="{y}" width="{cell}" height="{cell}" '
                    f'fill="#eef0f3" stroke="#ffffff"/>'
                )
                continue
            n = float(counts[i][j] or 0)
            w = float(wins[i][j] or 0)
            p = w / n if n > 0 else None
            fill = _heat_color(p) if p is not None else "#f7f8fa"
            tip = (
                f"{names[i]} vs {names[j]}: won {fmt(w)} of {int(n)} ({p:.0%})"
                if p is not None
                else f"{names[i]} vs {names[j]}: no duels yet"
            )
            out.append(
                f'<rect class="cell" data-i="{i}" data-j="{j}" data-wins="{fmt(w, 6)}" data-count="{int(n)}" '
                f'x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{fill}" stroke="#ffffff">'
                f"<title>{esc(tip)}</title></rect>"
            )
            if show_text:
                ink = "#ffffff" if p is not None and abs(p - 0.5) > 0.32 else INK
                main = f"{p:.2f}" if p is not None else "\u2013"
                out.append(
                    f'<text x="{x + cell / 2}" y="{y + cell / 2 - 1}" text-anchor="middle" '
                    f'font-size="12" fill="{ink}">{main}</text>'
                )
                out.append(
                    f'<text class="count" x="{x + cell / 2}" y="{y + cell / 2 + 13}" text-anchor="middle" '
                    f'font-size="10" fill="{ink}">{esc(fmt(w))}/{int(n)}</text>'
                )
    out.append("</svg>")
    return Markup("".join(out))


# ---------------------------------------------------------------- pulls vs oracle
def pair_bars(rows: Sequence[dict], *, title: str, width: int = 900) -> Markup:
    """Per pair: the share of duels so far beside the oracle's share.

    ``rows``: dicts with ``label``, ``count`` (int), ``share`` (0..1) and
    ``oracle`` (0..1 or None).
    """
    if not rows:
        return empty_plot("pairs", "no pairs")
    label_w, right = max(110, int(7.2 * max(len(r["label"]) for r in rows)) + 16), 150  # labels never cut
    width = max(width, label_w + right + 200)
    bar_h, gap = 11, 10
    row_h = bar_h * 2 + gap
    top = 8
    height = top + row_h * len(rows) + 22
    pw = width - label_w - right
    top_share = max([r["share"] for r in rows] + [r["oracle"] or 0 for r in rows] + [1e-9])
    scale = min(1.0, max(0.05, top_share * 1.1))
    out = [_svg_open("pairs", width, height, title)]
    for n, r in enumerate(rows):
        y = top + n * row_h
        oracle_attr = "" if r["oracle"] is None else f"{r['oracle']:.6f}"
        out.append(
            f'<g class="pair" data-label="{esc(r["label"])}" data-count="{int(r["count"])}" '
            f'data-share="{r["share"]:.6f}" data-oracle="{oracle_attr}">'
        )
        out.append(
            f'<text x="{label_w - 8}" y="{y + bar_h + 4}" text-anchor="end" font-size="12" fill="{INK}">'
            f"{esc(r['label'])}<title>{esc(r.get('tip', r['label']))}</title></text>"
        )
        w = pw * r["share"] / scale
        out.append(
            f'<rect class="bar actual" x="{label_w}" y="{y}" width="{num(max(w, 0.5))}" height="{bar_h}" '
            f'fill="{PALETTE[0]}"/>'
        )
        out.append(
            f'<text x="{num(label_w + max(w, 0.5) + 5)}" y="{y + bar_h - 2}" font-size="11" fill="{INK}">'
            f"{int(r['count'])} duels ({r['share']:.0%})</text>"
        )
        if r["oracle"] is not None:
            wo = pw * r["oracle"] / scale
            out.append(
                f'<rect class="bar oracle" x="{label_w}" y="{y + bar_h}" width="{num(max(wo, 0.5))}" '
                f'height="{bar_h}" fill="{PALETTE[1]}" fill-opacity="0.75"/>'
            )
            out.append(
                f'<text x="{num(label_w + max(wo, 0.5) + 5)}" y="{y + 2 * bar_h - 2}" font-size="11" '
                f'fill="{MUTED}">oracle {r["oracle"]:.0%}</text>'
            )
    axis_y = top + row_h * len(rows) + 2
    out.append(f'<line x1="{label_w}" x2="{label_w + pw}" y1="{axis_y}" y2="{axis_y}" stroke="{GRID}"/>')
    for v in nice_ticks(0, scale, 4):
        if v > scale + 1e-12:
            break
        x = label_w + pw * v / scale
        out.append(
            f'<text x="{num(x)}" y="{axis_y + 14}" text-anchor="middle" font-size="10" fill="{MUTED}">{v:.0%}</text>'
        )
    out.append("</svg>")
    return Markup("".join(out))


# ---------------------------------------------------------------- spend gauge
def spend_gauge(
    spend: float,
    budget: float | None,
    lower_bound: float | None,
    *,
    width: int = 900,
    unit: str = "USD",
    lower_bound_pc: float | None = None,
) -> Markup:
    """Spend as a bar against the budget, with the plug-in lower bounds marked: c* (green) and,
    for dctas-pc, c_pc* (purple, the bound of a rule that may also answer "no Condorcet winner")."""
    marks = [v for v in (spend, budget, lower_bound, lower_bound_pc) if v is not None and math.isfinite(v)]
    top_v = max(marks + [1e-12]) * 1.08
    ml, mr = 8, 8
    pw = width - ml - mr
    height = 78
    y, h = 20, 18

    def sx(v: float) -> float:
        return ml + pw * max(0.0, v) / top_v

    title = f"Spend {fmt(spend)} {unit}" + (f" of budget {fmt(budget)} {unit}" if budget else "")
    out = [_svg_open("spend", width, height, title)]
    out.append(f'<rect x="{ml}" y="{y}" width="{pw}" height="{h}" fill="#eef0f3" rx="3"/>')
    over = budget is not None and spend >= budget
    bar_fill = "#d9480f" if over else PALETTE[0]
    out.append(
        f'<rect class="bar spend" data-value="{spend:.9g}" x="{ml}" y="{y}" width="{num(max(0.5, sx(spend) - ml))}" '
        f'height="{h}" rx="3" fill="{bar_fill}"/>'
    )
    out.append(f'<text x="{ml}" y="{y - 6}" font-size="12" fill="{INK}">spend {esc(fmt(spend))} {unit}</text>')
    if budget is not None:
        bx = num(sx(budget))
        banchor = "start" if sx(budget) < ml + 200 else "end"  # keep clear of the spend label
        bdx = 6 if banchor == "start" else 0
        out.append(
            f'<g class="budget" data-value="{budget:.9g}"><line x1="{bx}" x2="{bx}" y1="{y - 4}" '
            f'y2="{y + h + 4}" stroke="{INK}" stroke-width="2"/>'
            f'<text x="{bx}" dx="{bdx}" y="{y - 6}" text-anchor="{banchor}" font-size="12" fill="{INK}">'
            f"budget {esc(fmt(budget))}</text></g>"
        )
    # the plug-in lower bounds: c* (green, dashed) and, for dctas-pc, c_pc* (purple, dotted, a line lower)
    for value, cls, label, colour, dash, text_y in (
        (lower_bound, "lower-bound", "c*", "#2f9e44", "3 2", y + h + 22),
        (lower_bound_pc, "lower-bound-pc", "c_pc*", "#7048e8", "1 2", y + h + 34),
    ):
        if value is None or not math.isfinite(value):
            continue
        vx = sx(value)
        anchor = "start" if vx < ml + 70 else ("end" if vx > ml + pw - 70 else "middle")
        out.append(
            f'<g class="{cls}" data-value="{value:.9g}"><line x1="{num(vx)}" x2="{num(vx)}" y1="{y - 2}" '
            f'y2="{y + h + 10}" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>'
            f'<text x="{num(vx)}" y="{text_y}" text-anchor="{anchor}" font-size="11" fill="{colour}">'
            f"{label} {esc(fmt(value))}</text></g>"
        )
    out.append("</svg>")
    return Markup("".join(out))


# ---------------------------------------------------------------- small progress bar
def progress_bar(fraction: float, *, label: str, done: bool = False, width: int = 120) -> Markup:
    f = min(1.0, max(0.0, fraction if math.isfinite(fraction) else 0.0))
    if done:
        f = 1.0
    fill = "#2f9e44" if done else PALETTE[0]
    return Markup(
        f'<svg class="plot plot-progress" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} 10" width="{width}" '
        f'height="10" role="img" data-fraction="{f:.4f}"><title>{esc(label)}</title>'
        f'<rect x="0" y="0" width="{width}" height="10" rx="5" fill="#e3e7ec"/>'
        f'<rect x="0" y="0" width="{num(max(f * width, 0.01))}" height="10" rx="5" fill="{fill}"/></svg>'
    )


def swatch(c: str, dash: bool = False) -> Markup:
    line = (
        f'<line x1="0" x2="22" y1="6" y2="6" stroke="{c}" stroke-width="2.5" stroke-dasharray="6 4"/>'
        if dash
        else f'<rect x="0" y="2" width="22" height="8" rx="2" fill="{c}"/>'
    )
    return Markup(
        f'<svg class="swatch" xmlns="http://www.w3.org/2000/svg" width="22" height="12" '
        f'viewBox="0 0 22 12" aria-hidden="true">{line}</svg>'
    )
