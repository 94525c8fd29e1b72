"""How a campaign reads in the terminal: the lines of ``llmduel campaign show``, ``watch``'s progress and
verdict, the forecast and the judge bias report (:mod:`service.cli.campaigns` prints them).

Each function takes the JSON the REST API returns and gives text; none talks to the server. A key a
server from an older release does not send is left out of the text, not an error.
"""

from __future__ import annotations

from typing import Any

from service.cli.args import CLIError
from service.cli.hybrid_show import hybrid_lines


def money_text(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4f}" if abs(x) < 100 else f"{x:,.2f}"


def verdict_line(c: dict[str, Any]) -> str:
    """The outcome of a campaign in one line: the server's plain-words verdict for an ended
    dctas-pc campaign (by name: what ties, what is not beaten, the cheapest)."""
    status = c["status"]
    prefix = {"certified": "certified", "no_condorcet_winner": "no Condorcet winner", "undecidable": "undecidable"}
    if c.get("verdict") and status in prefix:
        return f"{prefix[status]}: {c['verdict']}"
    if status == "certified":
        return f"certified: {c['winner']} beats every other model (delta {c['delta']:g})"
    if status == "no_condorcet_winner":
        return "no Condorcet winner: every model was shown to lose to another one"
    if status == "undecidable":
        return f"undecidable: no model can be certified on this prompt set ({c.get('population')} prompts)"
    leader = c.get("leader") or "none"
    if status == "budget_exhausted":
        return f"not certified: {c.get('end_reason') or 'budget or duel cap reached'} (leader {leader})"
    if status == "stopped":  # by the admin, or on reaching max_duels: the end reason says which
        return f"not certified: {c.get('end_reason') or 'stopped'} (leader {leader})"
    return f"running (leader {leader})"


def progress_fraction(c: dict[str, Any]) -> float:
    """Evidence against the threshold, in [0, 1] (1: the test stops): dctas-pc's certificate
    progress (``pc_evidence.progress``), else the GLR ``Z / beta``."""
    if c.get("pc_evidence"):
        return float(c["pc_evidence"]["progress"])
    beta = float(c.get("beta") or 0.0)
    z = float(c.get("Z") or 0.0)
    if c["status"] in ("certified", "no_condorcet_winner", "undecidable"):  # the test ended on a verdict
        return 1.0
    if beta <= 0:
        return 0.0
    return max(0.0, min(1.0, z / beta))


def progress_line(c: dict[str, Any], width: int = 24) -> str:
    frac = progress_fraction(c)
    filled = int(round(frac * width))
    bar = "#" * filled + "." * (width - filled)
    budget = f" of {money_text(c['budget'])}" if c.get("budget") is not None else ""
    cap = f"/{c['max_duels']}" if c.get("max_duels") else ""
    return (
        f"[{bar}] {_evidence_short(c)}"
        f"  spend {money_text(c['spend'])}{budget} {c.get('cost_unit') or 'USD'}  duels {c['duels']}{cap}"
        f"  leader {c.get('leader') or '-'}"
    )


def _evidence_short(c: dict[str, Any]) -> str:
    ev = c.get("pc_evidence")
    if ev:
        return f"certified {ev['certified']}/{ev['needed']} pairs"
    return f"evidence {float(c.get('Z') or 0):.2f}/{float(c.get('beta') or 0):.2f}"


def _level_words(ev: dict[str, Any]) -> str:
    """The threshold in symbols: ``log(L/delta)``, ``log((L-1)/delta)`` or, at the product level, ``log(1/alpha)``."""
    level = ev.get("level")
    return "log(1/alpha)" if level == "product" else "log((L-1)/delta)" if level == "delta/(L-1)" else "log(L/delta)"


def evidence_lines(c: dict[str, Any]) -> list[str]:
    """The evidence of the rule that decides: dctas-pc's certificates, else the GLR Z of beta."""
    ev = c.get("pc_evidence")
    if not ev:
        return [f"  evidence   GLR Z {float(c.get('Z') or 0):.3f} of threshold beta {float(c.get('beta') or 0):.3f}"]
    thr = ev.get("log_threshold")
    rows = [
        f"  evidence   {ev['reference'] or '-'}: {ev['certified']} of {ev['needed']} pairs certified "
        f"({ev['test']} test; a pair is certified when its log statistic reaches "
        + (f"{_level_words(ev)} = {thr:.3f})" if thr is not None else "its threshold)")
    ]
    for p in ev["pairs"]:
        if p["winner"] != ev["reference"]:
            continue
        state = "certified (exact)" if p["exact"] else "certified" if p["certified"] else "open"
        rows.append(
            f"             - {p['loser']} beaten by {p['winner']}: {float(p['log_stat'] or 0):.3f} of "
            f"{float(p['log_threshold'] or 0):.3f} after {p['n']:g} duels, {state}"
        )
    for lo in ev["losers"]:
        if lo["beaten_by"] != [ev["reference"]]:
            rows.append(f"             - {lo['model']} shown to lose to {', '.join(lo['beaten_by'])}")
    if ev.get("no_winner_waits"):
        rows.append(
            "             every model is shown to lose; 'no Condorcet winner' waits until each reaches "
            f"log(1/beta) = {float(ev['no_winner_log_threshold'] or 0):.3f}"
        )
    return rows


def summary(c: dict[str, Any]) -> str:
    lines = [
        f"campaign {c['id']}: {c['name']}",
        f"  status     {c['status']}"
        + (f" ({c['end_reason']})" if c.get("end_reason") and c["status"] != "undecidable" else ""),
        f"  verdict    {verdict_line(c)}",
        *certificate_lines(c),
        f"  algorithm  {c['algorithm']}, delta {c['delta']:g}, tie policy {c['tie_policy']}",
        f"  sampling   prompts {str(c.get('prompt_sampling') or 'with_replacement').replace('_', ' ')}",
        *exact_lines(c),
        f"  judge      {c['judge'].get('kind')}",
        *hybrid_lines(c),  # hybrid hook
        *model_lines(c["models"], c.get("cost_unit") or "USD"),
        f"  prompts    {c['n_prompts']}",
        f"  spend      {money_text(c['spend'])} {c.get('cost_unit') or 'USD'}"
        + (f" of {money_text(c['budget'])} {c.get('cost_unit') or 'USD'}" if c.get("budget") is not None else "")
        + f" (judge {money_text(c['judge_spend'])} {c.get('cost_unit') or 'USD'})"
        + spend_state(c),
        f"  duels      {c['duels']} judged, {c['duels_failed']} failed, {c['pending']} in flight"
        + (f", cap {c['max_duels']}" if c.get("max_duels") else ""),
        *evidence_lines(c),
        f"  run        {run_state(c)}"
        + (f", error: {c['run']['error']}" if c["run"].get("error") else "")
        + (
            f" (fix the cause, then: llmduel campaign resume {c['id']})"
            if c["run"].get("error") and not c["run"]["active"] and c["status"] == "running"
            else ""
        ),
        *(f"  warning    {w}" for w in c.get("cost_warnings") or []),
        *(f"  warning    {w}" for w in c.get("config_warnings") or []),
    ]
    return "\n".join(lines) + "\n"


def certificate_lines(c: dict[str, Any]) -> list[str]:
    """Who was shown to beat whom, and the models that reach every other through certified wins."""
    graph = c.get("certificate_graph") or []
    shown = "; ".join(f"{e['winner']} beats {e['loser']}" + (" (exact)" if e.get("exact") else "") for e in graph)
    rows = [f"  shown      {shown}"] if shown else []
    if c.get("top_cycle_certified") and c["status"] == "no_condorcet_winner":
        rows.append(f"  top cycle  certified members: {', '.join(c['top_cycle_certified'])}")
    return rows


def exact_lines(c: dict[str, Any]) -> list[str]:
    """Without replacement: the pairs judged on every prompt, whose preference is known exactly."""
    names = [m["name"] for m in c["models"]]
    return [
        f"  exact      {names[int(i)]} vs {names[int(j)]}: {float(p):.4g} on all {c.get('population')} prompts"
        for i, j, p in c.get("exact") or []
    ]


def model_lines(models: list[dict[str, Any]], unit: str = "USD") -> list[str]:
    """The models as a table: expected cost per query (configured or derived from prices) beside the
    observed mean charge of its calls (the admin view's ``cost_source``, ``observed_cost``, ``calls``)."""
    width = max([len(m["name"]) for m in models] + [5])
    rows = [
        f"  models     {'model':<{width}}  {'cost/query':>12}  {'source':<10}  {'observed/query':>14}  calls  charged"
    ]
    for m in models:
        observed = m.get("observed_cost")
        calls = m.get("calls")
        rows.append(
            f"             {m['name']:<{width}}  {m['cost']:>12.6g}  {m.get('cost_source') or '-':<10}  "
            f"{'-' if observed is None else format(observed, '.6g'):>14}  {'-' if calls is None else calls}"
            + f"  {m.get('charged') or '-'}"
            + (" !" if m.get("cost_warning") else "")
            + (
                "  disabled" + (f" (replaced by {m['replaced_by']})" if m.get("replaced_by") else "")
                if m.get("status") == "disabled"
                else ""
            )
        )
    return rows


def format_forecast(f: Any) -> str:
    """The forecast of ``POST /v1/campaigns/forecast`` in words (fields it lacks are left out)."""
    if not isinstance(f, dict):
        raise CLIError("the server's forecast is not a JSON object")

    def num(x: Any, money: bool) -> str:
        if not isinstance(x, (int, float)) or isinstance(x, bool):
            return "-"
        return money_text(float(x)) if money else f"{float(x):,.0f}"

    def spread(d: Any, money: bool) -> str:
        d = d if isinstance(d, dict) else {}
        return (
            f"mean {num(d.get('mean'), money)} (p10 {num(d.get('p10'), money)}, "
            f"median {num(d.get('median'), money)}, p90 {num(d.get('p90'), money)})"
        )

    lines = [
        f"forecast ({f.get('basis')}, {f.get('trials')} simulated runs of {f.get('algorithm')}, "
        f"delta {f.get('delta')}, {f.get('mode', 'fresh')} duels)",
        f"  cost to certify   {spread(f.get('cost'), True)} USD",
        f"  duels             {spread(f.get('duels'), False)}",
    ]
    if f.get("ceiling") is not None:
        lines.append(f"  ceiling           {num(f['ceiling'], True)} USD (every answer and verdict paid once)")
    if f.get("lower_bound") is not None:
        lines.append(f"  lower bound       {num(f['lower_bound'], True)} USD")
    if isinstance(f.get("within_budget"), (int, float)):
        lines.append(f"  within budget     {100 * f['within_budget']:.0f}% of runs")
    batch = f.get("batch")
    if isinstance(batch, dict):  # a batch campaign: the cost above is at the batch prices
        ratio = batch.get("price_ratio")
        lines.append(
            f"  at list prices    {spread(batch.get('cost_at_list_price'), True)} USD "
            f"(batch prices x{ratio if isinstance(ratio, (int, float)) else '-'})"
        )
        if batch.get("rounds") is not None:
            lines.append(f"  rounds            {spread(batch.get('rounds'), False)}")
            lines.append(f"  duels past stop   {spread(batch.get('extra_duels'), False)}")
    if f.get("note"):
        lines.append(f"  note: {f['note']}")
    return "\n".join(lines) + "\n"


def _rate_text(r: dict[str, Any] | None) -> str:
    if not r or not r.get("of"):
        return "no verdicts yet"
    return f"{r['rate']:.0%} of {r['of']} (95% CI {r['low']:.0%} to {r['high']:.0%})"


def bias_lines(b: dict[str, Any]) -> list[str]:
    """The judge bias report (GET /v1/campaigns/{id}/judge-bias) as lines of ``campaign show``."""
    lines = [
        f"  judge bias first position {_rate_text(b['first_position'])}",
        f"             longer answer wins {_rate_text(b['longer_wins'])}",
    ]
    if b.get("order_disagreement") is not None:
        lines.insert(1, f"             orders disagree {_rate_text(b['order_disagreement'])}")
    if b.get("modes"):
        m = b["modes"]
        cheaper = b.get("one_order_cheaper")
        verdict = "" if cheaper is None else f"; one order {'cheaper' if cheaper else 'not cheaper'} at these rates"
        lines.insert(
            -1, f"             orders {b.get('orders')}: {m['both']} duels in both, {m['one']} in one{verdict}"
        )
    for juror in (b.get("jury") or {}).get("jurors") or []:
        lines.append(f"  juror      {juror['name']}: agrees with the jury {_rate_text(juror['agreement'])}")
    lines += [f"  warning    {w}" for w in b.get("warnings") or []]
    return lines


def run_state(c: dict) -> str:
    """The run line's state: an ended campaign's run stays active while its last duels in flight are recorded."""
    if not c["run"]["active"]:
        return "idle"
    return "active" if c["status"] == "running" else "active (recording its last duels in flight; spend not final)"


def spend_state(c: dict) -> str:
    """An ended campaign's spend: final, or still open to the charges of calls under way (``spend_final``)."""
    if c["status"] == "running" or "spend_final" not in c:  # a server from before the field: nothing to say
        return ""
    return ", final" if c["spend_final"] else ", not final yet (calls under way)"
