"""A campaign's judge bias, measured from its duel log (pure: rows in, a JSON-safe dict out).

Three rates, each with a 95% Wilson score interval (Wilson 1927; the interval of
``k`` successes in ``n`` Bernoulli trials that stays inside [0, 1] and keeps its level for
small ``n`` and extreme rates, where the normal interval does not):

* ``first_position``: of the judge's decisive verdicts, the share that picked the answer
  shown first. An LLM judge counts per call (each order of each duel, each juror of a jury);
  another judge (human, simulated) per duel, ``a`` being the answer shown first.
* ``order_disagreement`` (LLM judges with ``orders: both`` or ``auto``): of the duels whose two
  orders both gave a verdict, the share where the two orders disagree (the verdict flips
  when the answers are swapped: the flip rate);
* ``order_ties`` (same duels): the share where both orders said tie; and ``modes`` (an LLM
  judge): how many of the judge's verdicts read both orders and how many one, with
  ``one_order_cheaper``: whether these rates say one order per duel costs less per certificate
  than both (:class:`algorithms.judge_orders.AutoOrders`, the rule ``orders: auto`` follows;
  None before it has enough duels read in both orders).
* ``longer_wins``: of the decisive duel verdicts between answers of different lengths
  (characters), the share won by the longer answer;
* ``larger_image_wins`` (image answers only, else None): of the decisive duel verdicts between
  image answers of different sizes (width x height), the share won by the larger image;
* ``jury`` (a jury only): per juror, the share of the jury's verdicts its own verdict agrees with,
  and its own ``first_position`` rate (which juror leans on the position).

Only verdicts the judge actually gave count: a duel that reused a stored verdict repeats
a judgement already counted. :data:`LIMITS` are the warning thresholds (docs/clients-and-judges.md,
"Judge bias").
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from ..clients.params import judge_clients, same_model

Z95 = 1.959963984540054
#: Warnings: a judge choosing one position in more than 80% of its decisive verdicts; the two
#: orders disagreeing on more than half the duels; the longer answer winning more than 80%.
LIMITS = {"first_position": 0.80, "order_disagreement": 0.50, "longer_wins": 0.80, "larger_image_wins": 0.80}
MIN_VERDICTS = 10  # no warning from fewer verdicts than this


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of ``k`` successes in ``n`` trials, or None when ``n == 0``."""
    if n <= 0:
        return None
    p = k / n
    den = 1.0 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    # the ends are exactly 0 at k = 0 and 1 at k = n (rounding would leave a speck)
    return (0.0 if k == 0 else max(0.0, mid - half)), (1.0 if k == n else min(1.0, mid + half))


def rate(k: int, n: int) -> dict[str, Any]:
    """``{"count", "of", "rate", "low", "high"}`` (rate and interval None when ``n == 0``)."""
    ci = wilson(k, n)
    return {
        "count": int(k),
        "of": int(n),
        "rate": round(k / n, 4) if n else None,
        "low": round(ci[0], 4) if ci else None,
        "high": round(ci[1], 4) if ci else None,
    }


def _calls(detail: dict | None) -> list[dict]:
    """The judge calls of a verdict detail (a jury's calls carry their ``juror``)."""
    calls = (detail or {}).get("calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def first_position_of(call: dict) -> bool | None:
    """Did this call pick the answer it showed first? None for a tie or no verdict.

    ``verdict`` is in the terms of the judge's answer a; order ``ab`` showed a first, ``ba`` b."""
    v, order = call.get("verdict"), call.get("order")
    if v not in ("a", "b") or order not in ("ab", "ba"):
        return None
    return (v == "a") == (order == "ab")


def judge_bias(rows: Iterable[Any], judge: dict, models: list[dict] | None = None) -> dict[str, Any]:
    """The bias report of a campaign's judged duels.

    ``rows``: objects with ``choice``, ``judge_detail``, ``len_a``, ``len_b`` (the answers'
    lengths as shown), optionally ``area_a``, ``area_b`` (an image answer's pixels, else None) and, with
    ``models``, ``model_a`` and ``model_b``; ``judge``: the campaign's stored judge config; ``models``: its
    stored model entries (for the judge that is also a contestant).
    """
    rows = list(rows)
    tally = BiasTally(judge, models, areas=bool(rows) and hasattr(rows[0], "area_a"))
    for r in rows:
        tally.add(r)
    return tally.report()


class BiasTally:
    """:func:`judge_bias`'s counts, gathered duel by duel (:meth:`add`, in the log's order), so that a pass over
    the log that reads the rows for another reason (the export's ``judgments.jsonl``) counts them too.

    ``areas``: the rows carry ``area_a`` and ``area_b`` (asked of every row only then: a missing attribute of a
    database row is an exception caught inside SQLAlchemy, dear when asked twice per duel)."""

    def __init__(self, judge: dict, models: list[dict] | None = None, *, areas: bool = False):
        from algorithms.judge_orders import AutoOrders

        self.judge, self.models, self.areas = judge, models, areas
        self.kind = judge.get("kind")
        self.llm = self.kind in ("llm", "jury")
        self.first = self.decisive = self.flips = self.paired = self.ties = 0
        self.longer = self.decided = self.verdicts = self.larger = self.sized = 0
        self.images = False
        self.modes = {"both": 0, "one": 0}
        self.evidence = AutoOrders(window=1_000_000)  # every both-order duel of a single llm judge
        self.agree: dict[str, list[int]] = {}  # juror -> [agrees with the jury, verdicts]
        self.juror_first: dict[str, list[int]] = {}  # juror -> [first position, decisive calls]
        clients = [client for _, client in judge_clients(judge)] if models else []
        # contestants one of the judge's own clients calls -> [decisive duels, won]
        self.own = {
            m: [0, 0]
            for m, spec in enumerate(models or [])
            if any(same_model(spec.get("client") or {}, client) for client in clients)
        }

    def add(self, r: Any) -> None:
        """Count one judged duel (a row as :func:`judge_bias` describes)."""
        shown = (r.model_a, r.model_b) if self.own else None
        areas = (r.area_a, r.area_b) if self.areas else None
        self.count(r.choice, r.judge_detail, lengths=(r.len_a, r.len_b), shown=shown, areas=areas)

    def count(
        self,
        choice: str | None,
        detail: dict | None,
        *,
        lengths: tuple[int | None, int | None],
        shown: tuple[int, int] | None = None,
        areas: tuple[int | None, int | None] | None = None,
        n: int = 1,
    ) -> None:
        """Count one judged duel: its ``choice``, its judge's ``detail``, the ``lengths`` of its answers as shown,
        the models shown as a and b (``shown``: needed when the judge is a contestant) and the image answers'
        pixels (``areas``, None for text answers); ``n`` such duels at once (a grouped read of the log: a judge
        that is not an LLM, whose detail says only whether the verdict was reused)."""
        if n != 1 and (self.llm or (detail or {}).get("jurors")):
            raise ValueError("an LLM judge's verdicts are counted one by one")
        if self.own and choice in ("a", "b") and shown is not None:  # every decisive duel, reused or not
            for m, tally in self.own.items():
                if m in shown:
                    tally[0] += n
                    tally[1] += n * int(shown[0 if choice == "a" else 1] == m)
        area_a, area_b = areas if areas is not None else (None, None)
        if area_a is not None:
            self.images = True
        detail = detail or {}
        if "reused_verdict" in detail:
            return
        self.verdicts += n
        for j in detail.get("jurors") or []:
            if isinstance(j, dict) and "agrees" in j:
                tally = self.agree.setdefault(str(j.get("name")), [0, 0])
                tally[0] += int(bool(j["agrees"]))
                tally[1] += 1
        if self.llm:
            self._calls(detail)
        elif choice in ("a", "b"):
            self.decisive += n
            self.first += n * int(choice == "a")
        len_a, len_b = lengths
        if choice in ("a", "b") and len_a is not None and len_b is not None and len_a != len_b:
            self.decided += n
            self.longer += n * int((choice == "a") == (len_a > len_b))
        if choice in ("a", "b") and area_a is not None and area_b is not None and area_a != area_b:
            self.sized += n
            self.larger += n * int((choice == "a") == (area_a > area_b))

    def _calls(self, detail: dict) -> None:
        by_juror: dict[Any, list[str]] = {}
        calls = _calls(detail)
        for c in calls:
            f = first_position_of(c)
            if f is not None:
                self.decisive += 1
                self.first += int(f)
                if "juror" in c:
                    tally = self.juror_first.setdefault(str(c["juror"]), [0, 0])
                    tally[0] += int(f)
                    tally[1] += 1
            if c.get("verdict") in ("a", "b", "tie"):
                by_juror.setdefault(c.get("juror"), []).append(c["verdict"])
        for vs in by_juror.values():
            if len(vs) == 2:
                self.paired += 1
                self.flips += int(vs[0] != vs[1])
                self.ties += int(vs[0] == vs[1] == "tie")
        if self.kind == "llm" and calls:
            self.modes["both" if len(calls) == 2 else "one"] += 1
            _observe(self.evidence, detail)

    def report(self) -> dict[str, Any]:
        from ..stored_config import judges_both_orders

        judge, kind, llm = self.judge, self.kind, self.llm
        both = llm and judges_both_orders(judge)
        orders = judge.get("orders") if kind == "llm" and judge.get("orders") in ("both", "one", "auto") else None
        margin = self.evidence.margin()
        out: dict[str, Any] = {
            "judge": kind,
            "orders": (orders or ("both" if both else "one")) if llm else None,
            "verdicts": self.verdicts,
            "first_position": rate(self.first, self.decisive),
            "order_disagreement": rate(self.flips, self.paired) if both or self.paired else None,
            "order_ties": rate(self.ties, self.paired) if both or self.paired else None,
            "modes": dict(self.modes) if kind == "llm" else None,
            "one_order_cheaper": None if margin is None or kind != "llm" else bool(margin > 0),
            "longer_wins": rate(self.longer, self.decided),
            "larger_image_wins": rate(self.larger, self.sized) if self.images else None,
            "limits": dict(LIMITS),
            "jury": None,
            "self_judging": [
                {"model": (self.models or [])[m]["name"], "wins": rate(won, n)} for m, (n, won) in self.own.items()
            ],
        }
        if kind == "jury":
            out["jury"] = {
                "combine": judge.get("combine", "majority"),
                "jurors": [
                    {"name": name, "agreement": rate(k, n), "first_position": rate(*self.juror_first.get(name, [0, 0]))}
                    for name, (k, n) in self.agree.items()
                ],
            }
        out["warnings"] = warnings(out)
        return out


def _observe(evidence: Any, detail: dict) -> None:
    """Count a verdict read in both orders (both calls scored) in ``evidence`` (an AutoOrders)."""
    calls = _calls(detail)
    scores = [c.get("score_a") for c in calls]
    combined = detail.get("score_a")
    if len(calls) != 2:
        return
    a, b = scores
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and isinstance(combined, (int, float)):
        evidence.observe(float(a), float(b), float(combined))


def warnings(report: dict[str, Any]) -> list[str]:
    """Plain-language warnings for the rates past :data:`LIMITS` (each from at least MIN_VERDICTS)."""
    out = []
    fp = report["first_position"]
    if fp["of"] >= MIN_VERDICTS and fp["rate"] is not None:
        share = max(fp["rate"], 1 - fp["rate"])
        if share > LIMITS["first_position"]:
            side = "first" if fp["rate"] >= 0.5 else "second"
            out.append(
                f"the judge chose the {side} position in {share:.0%} of its {fp['of']} decisive verdicts "
                f"(limit {LIMITS['first_position']:.0%}): it reads the position more than the answers; "
                "check its prompt and verdict format"
            )
    od = report.get("order_disagreement")
    if od and od["of"] >= MIN_VERDICTS and od["rate"] > LIMITS["order_disagreement"]:
        out.append(
            f"the two orders disagree on {od['rate']:.0%} of {od['of']} duels (limit "
            f"{LIMITS['order_disagreement']:.0%}): these duels count as ties"
        )
    lw = report["longer_wins"]
    if lw["of"] >= MIN_VERDICTS and lw["rate"] is not None and max(lw["rate"], 1 - lw["rate"]) > LIMITS["longer_wins"]:
        longer = lw["rate"] >= 0.5
        share = lw["rate"] if longer else 1 - lw["rate"]
        out.append(
            f"the {'longer' if longer else 'shorter'} answer won {share:.0%} of {lw['of']} decisive duels (limit "
            f"{LIMITS['longer_wins']:.0%}): the judge may favour {'length' if longer else 'brevity'}"
        )
    li = report.get("larger_image_wins")
    if (
        li
        and li["of"] >= MIN_VERDICTS
        and li["rate"] is not None
        and max(li["rate"], 1 - li["rate"]) > LIMITS["larger_image_wins"]
    ):
        bigger = li["rate"] >= 0.5
        share = li["rate"] if bigger else 1 - li["rate"]
        out.append(
            f"the {'larger' if bigger else 'smaller'} image won {share:.0%} of {li['of']} decisive duels (limit "
            f"{LIMITS['larger_image_wins']:.0%}): the judge may favour image size"
        )
    for own in report.get("self_judging") or []:
        won = own["wins"]
        measured = f"it won {won['rate']:.0%} of its {won['of']} decisive duels" if won["of"] else "no duel yet"
        out.append(
            f"the judge is also the contestant {own['model']!r} ({measured} as judged by itself): LLM judges "
            "tend to favour their own answers; prefer a judge that is not a contestant, or a jury"
        )
    return out
