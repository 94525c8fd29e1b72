"""What a campaign's numbers say, in words a user can check (issue 22): the evidence of the rule
that decides, the certificate graph, the part of the top cycle the certificates support, and the
verdict in plain words.

Pure functions over a campaign's stored policy state and its view (no database). The dctas-pc
evidence comes only from :meth:`algorithms.policies.PCPolicy.pair_evidence` (per ordered pair:
the certificate test's log statistic against its log threshold); the GLR statistic ``Z`` against
``beta(t, delta)`` is the decisive evidence only for the paper's algorithms.
"""

from __future__ import annotations

import math
from typing import Any

from algorithms.certificates import certified_top
from algorithms.hybrid import policy_from_state
from algorithms.vocabulary import Algorithm, CampaignStatus

# Endings that are a verdict of the test itself (its progress is complete), unlike a stop or a limit.
VERDICT_ENDINGS = frozenset({CampaignStatus.CERTIFIED, CampaignStatus.NO_CONDORCET_WINNER, CampaignStatus.UNDECIDABLE})

PC_TESTS = {
    "mixture": "the mixture martingale's log-wealth",
    "kk": "the Kaufmann-Koolen statistic n d(p, 1/2) - 3 log(1 + log n)",
    "stitched": "the stitched boundary's statistic",
    "portfolio": "the log-wealth of the winner's bet, paid from the shared pool",
    "without_replacement": "the without-replacement betting test's log-wealth",
}


def cost_unit(models: list[dict], judge: dict | None) -> str:
    """**choice**: "cost units" when every model and the judge are simulated (the paper's
    instances: no money is spent, costs are the paper's units), else "USD"."""
    simulated = all((m.get("client") or {}).get("kind") == "simulated" for m in models)
    return "cost units" if simulated and (judge or {}).get("kind") not in ("llm", "jury") else "USD"


def amount(x: float | None, unit: str) -> str:
    """An amount with its unit: ``0.0123 USD``, ``12.5 cost units``."""
    if x is None:
        return "-"
    if x == 1 and unit.endswith("units"):
        unit = unit[:-1]  # "1 cost unit"
    return f"{x:.4g} {unit}" if abs(x) < 1000 else f"{x:,.2f} {unit}"


def _names(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


# ---------------------------------------------------------------- dctas-pc evidence
def pc_evidence(algorithm: str, state: dict | None, names: list[str], status: str) -> dict[str, Any] | None:
    """The certificate evidence of a dctas-pc campaign (None for the paper's algorithms or no state).

    ``pairs``: per ordered pair, the evidence that ``loser`` is beaten by ``winner`` (the test's log
    statistic, its log threshold, whether the certificate is held, and whether it is exact);
    ``reference``: the certified winner, else the current leader; ``certified`` of ``needed``
    (``L - 1``): the reference's certificates; ``progress`` in [0, 1]: the mean over the
    reference's ``L - 1`` pairs of ``min(1, log_stat / log_threshold)`` (0 below zero, 1 once
    certified); 1 once the campaign has ended. ``losers``: each model shown to be beaten and by whom.
    ``level``: each certificate's error level, ``product`` or ``delta/L`` (``delta/(L-1)`` for a state stored
    at that level; ``delta`` for the portfolio test, whose level is shared by the models).
    ``no_winner_log_threshold``: at the product level with four models or more, ``log(1/beta)``, the log
    statistic at which every model must be beaten for "no Condorcet winner" (else None);
    ``no_winner_waits``: every model is beaten, and that verdict waits for each to reach it.
    """
    if algorithm != Algorithm.DCTAS_PC or not state:
        return None
    try:
        policy = policy_from_state(state)
        items = policy.pair_evidence()
        test = policy.certificate_test_name
        ref = policy.winner if policy.winner is not None else policy.leader()
        nocw_thr = getattr(policy, "no_winner_log_threshold", None)
        nocw_waits = bool(getattr(policy, "no_winner_waits", lambda: False)())
    except Exception:  # a statistic must never break the view
        return None
    L = len(names)
    pairs = [
        {
            "loser": names[e["loser"]],
            "winner": names[e["winner"]],
            "n": e["n"],
            "log_stat": _finite(e["log_stat"]),
            "log_threshold": _finite(e["log_threshold"]),
            "certified": e["certified"],
            "exact": e["exact"],
        }
        for e in items
    ]
    own = [e for e in items if e["winner"] == ref]
    certified = sum(1 for e in own if e["certified"])

    # Progress counts certified pairs only, so the fraction and "k of L-1 pairs" say the same thing;
    # a verdict that ends the test (no Condorcet winner, undecidable) completes it, a stop does not.
    active = list(getattr(policy, "arms", range(L)))  # a model disabled while running is out of the question
    needed = len(active) - 1
    if getattr(policy, "goal", "winner") != "winner":  # a leaderboard: the pairs its goal rests on
        certified, needed = _goal_pairs(policy, active)
    progress = 1.0 if status in VERDICT_ENDINGS else certified / max(1, needed)
    beaten_by: dict[int, list[str]] = {}  # one pass over the pairs (L^2), not one per model
    for e in items:
        if e["certified"]:
            beaten_by.setdefault(int(e["loser"]), []).append(names[e["winner"]])
    losers = [{"model": names[m], "beaten_by": beaten_by[m]} for m in range(L) if m in beaten_by]
    return {
        "test": test,
        "statistic": PC_TESTS.get(test, test),
        "log_threshold": _finite(items[0]["log_threshold"]) if items else None,
        "level": "delta" if test == "portfolio" else getattr(policy, "level", "delta/L"),
        "reference": names[ref] if 0 <= ref < L else None,
        "certified": certified,
        "needed": needed,
        "progress": progress,
        "pairs": pairs,
        "losers": losers,
        "no_winner_log_threshold": _finite(nocw_thr) if nocw_thr is not None else None,
        "no_winner_waits": nocw_waits,
    }


def _goal_pairs(policy: Any, active: list[int]) -> tuple[int, int]:
    """``(resolved, needed)`` pairs of a leaderboard goal: every pair for ``ranking``; for ``top_k`` the pairs
    between the ``k`` models with the most certificates and the others (resolved: a certificate or an exact tie)."""
    B = policy.BEAT
    resolved = B | B.T | policy.exact_ties()
    if policy.goal == "top_k":
        order = sorted(active, key=lambda m: (-int(B[m].sum()), m))
        pairs = [(u, v) for u in order[: policy.k] for v in order[policy.k :]]
    else:
        pairs = [(u, v) for n, u in enumerate(active) for v in active[n + 1 :]]
    return sum(1 for u, v in pairs if resolved[u, v]), len(pairs)


def _finite(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def evidence_line(c: dict[str, Any]) -> str:
    """The decisive evidence in one line: dctas-pc's certificates, or the GLR ``Z`` of ``beta``."""
    ev = c.get("pc_evidence")
    if ev:
        ref = ev.get("reference") or "-"
        thr = ev.get("log_threshold")
        open_pairs = [p for p in ev["pairs"] if p["winner"] == ref and not p["certified"]]
        best = max(open_pairs, key=lambda p: p["log_stat"] or 0.0, default=None)
        out = f"{ref}: {ev['certified']} of {ev['needed']} pairs certified"
        if best is not None and thr:
            out += f"; closest open pair vs {best['loser']}: log statistic {best['log_stat'] or 0:.2f} of {thr:.2f}"
        return out
    return f"GLR evidence Z {float(c.get('Z') or 0):.2f} of threshold beta {float(c.get('beta') or 0):.2f}"


# ---------------------------------------------------------------- the certificate graph
def certificate_graph(certificates: list | None, names: list[str], exact_pairs: set | None = None) -> list[dict]:
    """Who was shown to beat whom: ``[{"winner", "loser", "exact"}]`` from the stored ``[w, l]`` pairs."""
    exact_pairs = exact_pairs or set()
    return [
        {"winner": names[int(w)], "loser": names[int(lo)], "exact": (int(w), int(lo)) in exact_pairs}
        for w, lo in certificates or []
    ]


# ---------------------------------------------------------------- the verdict in plain words
def verdict_facts(view: dict[str, Any]) -> dict[str, Any]:
    """The certified facts beside the verdict and the verdict in plain words (keys added to the view)."""
    # the models still compared (a model disabled while running is not part of the verdict), re-indexed
    active = [n for n, m in enumerate(view["models"]) if m.get("status", "active") == "active"]
    pos = {m: a for a, m in enumerate(active)}
    names = [view["models"][m]["name"] for m in active]
    costs = [float(view["models"][m]["cost"]) for m in active]
    L = len(names)
    certs = [
        (pos[int(w)], pos[int(lo)]) for w, lo in view.get("certificates") or [] if int(w) in pos and int(lo) in pos
    ]
    beaten = {lo for _, lo in certs}
    pc = view.get("algorithm") == Algorithm.DCTAS_PC
    not_beaten = [m for m in range(L) if m not in beaten] if pc and (certs or view["status"] != "running") else []
    exact = {
        (pos[int(i)], pos[int(j)]): float(p) for i, j, p in view.get("exact") or [] if int(i) in pos and int(j) in pos
    }
    ties = [(i, j) for (i, j), p in exact.items() if p == 0.5 and i in not_beaten and j in not_beaten]
    top = certified_top(certs, L)
    unit = cost_unit(view["models"], view.get("judge"))
    group = not_beaten if not_beaten else top
    ended_open = view["status"] in (CampaignStatus.UNDECIDABLE, CampaignStatus.NO_CONDORCET_WINNER)
    cheapest = min(group, key=lambda m: (costs[m], m)) if ended_open and len(group) > 1 else None
    facts: dict[str, Any] = {
        "not_beaten": [names[m] for m in not_beaten],
        "exact_ties": [[names[i], names[j]] for i, j in ties],
        "top_cycle_certified": [names[m] for m in top],
        "cheapest": names[cheapest] if cheapest is not None else None,
        "cost_unit": unit,
    }
    facts["verdict"] = _words(
        view,
        names=names,
        costs=costs,
        certs=certs,
        not_beaten=not_beaten,
        ties=ties,
        top=top,
        cheapest=cheapest,
        unit=unit,
    )
    off = [m["name"] for m in view["models"] if m.get("status", "active") != "active"]
    if off and facts["verdict"]:
        were = "was" if len(off) == 1 else "were"
        facts["verdict"] += f" {_names(off)} {were} disabled while the campaign ran: the verdict is about the others."
    return facts


def _words(view, *, names, costs, certs, not_beaten, ties, top, cheapest, unit) -> str:
    status = view["status"]
    L = len(names)
    delta = float(view["delta"])
    if status == CampaignStatus.CERTIFIED and view.get("winner") is not None:
        rest = [n for n in names if n != view["winner"]]
        return (
            f"{view['winner']} beats every other model: it was shown to beat {_names(rest)} "
            f"(error probability at most {delta:g})."
        )
    cheap = (
        f" The cheaper is {names[cheapest]} ({amount(costs[cheapest], unit)} per query)."
        if cheapest is not None
        else ""
    )
    if status == CampaignStatus.UNDECIDABLE:
        top_names = [names[m] for m in not_beaten]
        rest = [m for m in range(L) if m not in not_beaten]
        beats_rest = bool(rest) and all((w, lo) in certs for w in not_beaten for lo in rest)
        head = f"No model can be certified the winner on these {view.get('population') or view['n_prompts']} prompts."
        if len(not_beaten) == 2 and ties:
            out = f"{head} {top_names[0]} and {top_names[1]} tie at the top on this prompt set"
            out += "; both beat the rest" if beats_rest else ""
            if cheapest is not None:
                out += f"; the cheaper is {names[cheapest]} ({amount(costs[cheapest], unit)} per query)"
            return out + "."
        parts = [head]
        if top_names:
            parts.append(f"Not beaten: {_names(top_names)}.")
        for i, j in ties:
            parts.append(f"{names[i]} and {names[j]} tie exactly on this prompt set.")
        if beats_rest:
            parts.append(f"{'Each' if len(not_beaten) > 1 else 'It'} was shown to beat the rest.")
        if cheapest is not None:
            cheap = cheap.replace("The cheaper", "The cheapest" if len(not_beaten) > 2 else "The cheaper")
        return " ".join(parts) + cheap
    if status == CampaignStatus.NO_CONDORCET_WINNER:
        lost = "; ".join(f"{names[lo]} lost to {names[w]}" for w, lo in _one_loss_each(certs, L))
        out = f"Every model was shown to lose to another ({lost})."
        if top:
            out += f" {_names([names[m] for m in top])} reach every other model through certified wins."
            if cheapest is not None:
                out += f" The cheapest of them is {names[cheapest]} ({amount(costs[cheapest], unit)} per query)."
        return out
    return ""


#: The verdict's first words by status (``campaign show``, ``watch`` and certificate.json).
VERDICT_PREFIX: dict[str, str] = {
    CampaignStatus.CERTIFIED: "certified",
    CampaignStatus.NO_CONDORCET_WINNER: "no Condorcet winner",
    CampaignStatus.UNDECIDABLE: "undecidable",
}


def verdict_sentence(status: str, words: str) -> str | None:
    """``"<status in words>: <verdict in plain words>"`` for the three verdicts (None otherwise)."""
    prefix = VERDICT_PREFIX.get(status)
    return f"{prefix}: {words}" if prefix and words else None


def _one_loss_each(certs: list[tuple[int, int]], L: int) -> list[tuple[int, int]]:
    """One certified loss per model (the first stored), in model order."""
    out: dict[int, tuple[int, int]] = {}
    for w, lo in certs:
        out.setdefault(lo, (w, lo))
    return [out[m] for m in range(L) if m in out]


VERDICTS: dict[str, str] = {
    CampaignStatus.CERTIFIED: "certified: {winner} beats every other model (error probability at most {delta:g})",
    CampaignStatus.NO_CONDORCET_WINNER: "no Condorcet winner: every model was shown to lose to another one",
    CampaignStatus.UNDECIDABLE: "undecidable: no model can be certified on this prompt set (the exhausted "
    "pairs' preferences are known exactly; no pair left could decide)",
    CampaignStatus.BUDGET_EXHAUSTED: "not certified: the budget or the duel cap ran out (leader: {leader})",
    CampaignStatus.STOPPED: "not certified: stopped by an admin (leader: {leader})",
    CampaignStatus.RUNNING: "running: not certified yet (leader: {leader})",
}


#: Ended without a winner: the recorded end reason says why (the duel cap, the admin, the budget).
ENDED_BY_REASON = "not certified: {reason} (leader: {leader})"


def verdict_text(
    status: str, winner: str | None, leader: str | None, delta: float, *, end_reason: str | None = None
) -> str:
    """The campaign's outcome in plain words; a campaign stopped or out of budget names its ``end_reason``
    (``stopped`` is also the status of a campaign that reached its ``max_duels``)."""
    template = VERDICTS.get(status, "{status}")
    if end_reason and status in (CampaignStatus.STOPPED, CampaignStatus.BUDGET_EXHAUSTED):
        template = ENDED_BY_REASON
    return template.format(winner=winner, leader=leader or "none", delta=delta, status=status, reason=end_reason)


def _tier_words(tier: list[str], status: str) -> str:
    if len(tier) == 1:
        return tier[0]
    sep = " = " if status == "tie" else ", "
    return "{" + sep.join(tier) + "}"


def leaderboard_facts(stats: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """A leaderboard goal's view keys (``goal``, ``k``, ``top_k``, ``ranking``, ``ranking_tiers``) from the
    policy's summary (:meth:`algorithms.policies.PCPolicy.leaderboard`), by name; ``leaderboard_words``:
    the certified order in words (None for the winner goal)."""
    goal = stats.get("goal") or "winner"
    tiers = stats.get("tiers") if goal != "winner" else None
    if not tiers:
        return {"goal": goal, "k": None, "top_k": None, "ranking": None, "ranking_tiers": None}
    named = [{"models": [names[m] for m in t["models"]], "status": t["status"]} for t in tiers]
    top = [names[m] for m in stats["top_k"]] if stats.get("top_k") is not None else None
    order = " > ".join(_tier_words(t["models"], t["status"]) for t in named)
    if goal == "top_k":
        k = stats.get("k")
        exact = top is not None and len(top) == k
        words = (
            f"the best {k}: {', '.join(top or [])}" + ("" if exact else f" (not yet separated at position {k})")
        ) + f"; order so far {order}"
    else:
        words = f"order {order}"
    return {
        "goal": goal,
        "k": stats.get("k"),
        "top_k": top,
        "ranking": [t["models"] for t in named],
        "ranking_tiers": named,
        "leaderboard_words": words,
    }
