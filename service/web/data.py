"""What the pages show, built on the service's public functions.

Read-only helpers over :class:`service.campaigns.Campaigns` (its views, results and annotators)
and the ORM models (a few small read queries the service has no function for:
an annotator's open duel, their vote count, the version of a campaign row).
Everything here is synchronous and meant to run in a worker thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import func, select

from algorithms import InstanceError, solve_oracle
from algorithms.stats import empirical_preference
from algorithms.vocabulary import CampaignStatus, DuelStatus

from ..campaigns import finite_or_none, policy_log
from ..campaigns.verdicts import cost_unit as _cost_unit
from ..container import Campaigns
from ..models import Campaign, Duel, DuelSkip, utcnow
from . import plots
from .series import SeriesCache

RECENT_DUELS = 12
MAX_PAIR_ROWS = 30
PLOT_MODELS = 16  # the matrix and the evidence chart show at most this many models
CATEGORY_ROWS = 10  # the dashboard's ranking by category: the leading models of each category
#: the dashboard's style control and judge bias read the last this many judged duels (their API routes and
#: the export read every one): the judge bias decodes each judge reply, the style fit each duel's answer features
LOG_WINDOW = 5_000
STATUS_LABELS = {
    "running": "running",
    "certified": "certified",
    "budget_exhausted": "budget exhausted",
    "stopped": "stopped",
    "no_condorcet_winner": "no Condorcet winner",
    "undecidable": "undecidable on this prompt set",
}


# ---------------------------------------------------------------- campaign list
def progress_of(view: dict) -> tuple[float, str]:
    """How close a campaign is to certification (1 once certified): for dctas-pc its certificates
    (``pc_evidence``: k of L-1 pairs of the leader certified), for the paper's algorithms Z / beta."""
    if view["status"] == CampaignStatus.CERTIFIED:
        return 1.0, "certified"
    ev = view.get("pc_evidence")
    if ev:
        if view["status"] in (CampaignStatus.NO_CONDORCET_WINNER, CampaignStatus.UNDECIDABLE):
            return 1.0, STATUS_LABELS[view["status"]]
        if view.get("t", 0) == 0:
            return 0.0, "no counted duels yet"
        frac = float(ev["progress"])
        return frac, f"{ev['reference']}: {ev['certified']} of {ev['needed']} pairs certified ({frac:.0%})"
    beta = view.get("beta") or 0.0
    z = max(0.0, view.get("Z") or 0.0)
    if view.get("t", 0) == 0 or beta <= 0:
        return 0.0, "no counted duels yet"
    frac = min(1.0, z / beta)
    return frac, f"evidence Z = {z:.3g} of the threshold beta = {beta:.3g} ({frac:.0%})"


def list_signature(svc: Campaigns) -> str:
    with svc.db.read() as s:
        n, versions, last = s.execute(
            select(func.count(Campaign.id), func.coalesce(func.sum(Campaign.version), 0), func.max(Campaign.id))
        ).one()
    return f"{n}-{versions}-{last or 0}"


def campaign_list(svc: Campaigns, limit: int, offset: int) -> dict:
    page = svc.views.list_campaigns(limit, offset)
    rows = []
    for v in page["items"]:
        frac, tip = progress_of(v)
        rows.append(
            {
                "view": v,
                "status_label": STATUS_LABELS.get(v["status"], v["status"]),
                "progress": plots.progress_bar(frac, label=tip, done=v["status"] == CampaignStatus.CERTIFIED),
                "progress_tip": tip,
            }
        )
    page["rows"] = rows
    page["any_running"] = any(v["status"] == CampaignStatus.RUNNING for v in page["items"])
    page["signature"] = list_signature(svc)
    return page


# ---------------------------------------------------------------- dashboard
def campaign_version(svc: Campaigns, campaign_id: int) -> tuple[int, str] | None:
    with svc.db.read() as s:
        row = s.execute(select(Campaign.version, Campaign.status).where(Campaign.id == campaign_id)).first()
    return None if row is None else (int(row.version), str(row.status))


def _policy_state(svc: Campaigns, campaign_id: int) -> dict:
    with svc.db.read() as s:
        return policy_log.stored_state(s, campaign_id)


def _replayed_counts(policy) -> list[list[int]]:
    return policy.counts_matrix().astype(int).tolist()


@dataclass
class Evidence:
    plot: Any
    legend: list[dict]
    reference: int | None
    stopping_rule: str
    replay_ok: bool
    points: int


REPLAY_CATCH_UP = 5


def _replay_in_step(
    svc: Campaigns, cache: SeriesCache, cid: int, before: dict | None = None
) -> tuple[list, Any, dict, bool | None, dict]:
    """Replay the log, then read the campaign, until both describe the same counted duel ``t``.

    The view is read *after* the replay, so it has at least the replayed duels
    (a duel's record and the campaign row commit together); duels recorded in
    between (a run with several duels in flight) only make the view newer, and the
    replay catches up. A view read ``before`` the replay serves when the replay
    ends at its ``t`` (nothing was recorded in between); otherwise it is read again.
    Returns (points, policy, view, ok, the stored policy state it replayed) with ok
    None when the campaign kept moving through every attempt (nothing to compare, no warning).
    """
    state = _policy_state(svc, cid)  # decoded once per attempt (a large JSON at many models)
    points, policy = cache.series(svc.db, cid, state)
    if before is not None and before["t"] == policy.t:
        view = before
    else:
        view = svc.views.get_campaign(cid, admin=True, pairs=True)
    for _ in range(REPLAY_CATCH_UP):
        if policy.t >= view["t"]:
            break
        state = _policy_state(svc, cid)
        points, policy = cache.series(svc.db, cid, state)
        view = svc.views.get_campaign(cid, admin=True, pairs=True)
    if policy.t != view["t"]:
        return points, policy, view, None if policy.t < view["t"] else False, state
    return points, policy, view, _replayed_counts(policy) == view["counts"], state


def evidence_section(svc: Campaigns, cache: SeriesCache, view: dict) -> tuple[Evidence, dict]:
    """The evidence plot, from a replay of the log; returns (section, refreshed view)."""
    cid = view["id"]
    if view.get("hybrid") is not None:  # hybrid hook: its test is per-pair betting; the figures are in its panel
        note = "a hybrid campaign: see Human votes and the pair certificates"
        return Evidence(
            plot=plots.empty_plot("lines", note),
            legend=[],
            reference=None,
            stopping_rule="hybrid",
            replay_ok=True,
            points=0,
        ), view
    points, policy, view, ok, state = _replay_in_step(svc, cache, cid, view)
    if ok is False:  # stale cache (e.g. a database was replaced): rebuild once
        cache.forget(cid)
        points, policy, view, ok, state = _replay_in_step(svc, cache, cid)
    replay_ok = ok is not False
    names = [m["name"] for m in view["models"]]
    ref = view["winner_index"] if view["winner_index"] is not None else view["leader_index"]
    stopping_rule = getattr(policy, "stopping_rule", "glr")
    if ref is None or view["t"] == 0:
        return Evidence(
            plot=plots.empty_plot("lines", "no counted duels yet"),
            legend=[],
            reference=None,
            stopping_rule=stopping_rule,
            replay_ok=replay_ok,
            points=len(points),
        ), view
    if view.get("pc_evidence") and all(p.pc is not None for p in points):
        return _pc_evidence_section(view, points, names, ref=ref, state=state, replay_ok=replay_ok), view
    series: list[dict[str, Any]] = []
    legend = []
    last = points[-1].S
    nearest = sorted((j for j in range(len(names)) if j != ref), key=lambda j: (last[j] - last[ref], j))
    shown = set(nearest[: PLOT_MODELS - 1])  # many models: the challengers nearest the reference
    for j, name in enumerate(names):
        if j not in shown:
            continue
        c = plots.color(j)
        series.append(
            {
                "label": name,
                "key": f"model-{j}",
                "color": c,
                "points": [(p.t, p.S[j] - p.S[ref]) for p in points],
            }
        )
        current = points[-1].S[j] - points[-1].S[ref]
        legend.append({"swatch": plots.swatch(c), "label": name, "value": current})
    beta_pts = [(p.t, p.beta) for p in points if math.isfinite(p.beta)]
    series.append(
        {
            "label": f"threshold beta(t, delta={view['delta']:g})",
            "key": "beta",
            "color": "#1f2933",
            "points": beta_pts,
            "dash": True,
        }
    )
    legend.append(
        {
            "swatch": plots.swatch("#1f2933", dash=True),
            "label": "threshold beta(t, \u03b4)",
            "value": beta_pts[-1][1] if beta_pts else None,
        }
    )
    vline = None
    if view["status"] == CampaignStatus.CERTIFIED and state.get("stop_t"):
        vline = (float(state["stop_t"]), f"certified at t={state['stop_t']}")
    plot = plots.line_chart(
        series,
        title=f"Evidence of each challenger against {names[ref]}",
        x_label="counted duels t",
        y_label="S_j \u2212 S_ref",
        vline=vline,
        integer_x=True,
    )
    return Evidence(
        plot=plot, legend=legend, reference=ref, stopping_rule=stopping_rule, replay_ok=replay_ok, points=len(points)
    ), view


def _pc_lines(view: dict, points: list, names: list[str], ref: int) -> list[tuple[int, str, list]]:
    """(model, label, points) per line: the evidence that the model is beaten by the reference, or,
    when every model is beaten (no Condorcet winner), the strongest evidence that it is beaten."""
    L = len(names)
    lines = []
    every = view["status"] == CampaignStatus.NO_CONDORCET_WINNER
    for m in range(L):
        if m == ref and not every:
            continue
        pts = []
        for p in points:
            stats = [e["log_stat"] for e in p.pc if e["loser"] == m and (every or e["winner"] == ref)]
            if stats and math.isfinite(max(stats)):
                pts.append((p.t, max(stats)))
        label = f"{names[m]} beaten by any model" if every else f"{names[m]} beaten by {names[ref]}"
        lines.append((m, label, pts))
    return lines


def _pc_evidence_section(view: dict, points: list, names: list[str], *, ref: int, state: dict, replay_ok: bool):
    """dctas-pc: each pair's certificate statistic against its threshold (log(1/alpha) or log(L/delta))."""
    ev = view["pc_evidence"]
    thr = ev["log_threshold"]
    series: list[dict[str, Any]] = []
    legend: list[dict[str, Any]] = []
    for m, label, pts in _pc_lines(view, points, names, ref):
        c = plots.color(m)
        series.append({"label": label, "key": f"model-{m}", "color": c, "points": pts})
        legend.append({"swatch": plots.swatch(c), "label": label, "value": pts[-1][1] if pts else None})
    if thr is not None:
        t0, t1 = points[0].t, points[-1].t
        series.append(
            {
                "label": "certificate threshold",
                "key": "threshold",
                "color": "#1f2933",
                "dash": True,
                "points": [(t0, thr), (t1, thr)],
            }
        )
        legend.append({"swatch": plots.swatch("#1f2933", dash=True), "label": "threshold log((L−1)/δ)", "value": thr})
    vline = None
    if view["status"] != CampaignStatus.RUNNING and state.get("stop_t"):
        what = "certified" if view["status"] == CampaignStatus.CERTIFIED else "ended"
        vline = (float(state["stop_t"]), f"{what} at t={state['stop_t']}")
    every = view["status"] == CampaignStatus.NO_CONDORCET_WINNER
    plot = plots.line_chart(
        series,
        title="Evidence that each model is beaten" if every else f"Evidence that {names[ref]} beats each other model",
        x_label="counted duels t",
        y_label="log statistic of the certificate test",
        vline=vline,
        integer_x=True,
    )
    return Evidence(
        plot=plot, legend=legend, reference=ref, stopping_rule="certificates", replay_ok=replay_ok, points=len(points)
    )


def oracle_section(view: dict) -> dict:
    """Pulls per pair beside the oracle allocation at the empirical matrix."""
    # the models still compared (a model disabled while running is out of the question)
    on = [n for n, m in enumerate(view["models"]) if m.get("status", "active") == "active"]
    names = [view["models"][m]["name"] for m in on]
    # the policy's costs: marginal given the stores when the campaign reuses answers (view["cost_model"])
    costs = [float(x) for x in view.get("policy_costs") or [m["cost"] for m in view["models"]]]
    costs = [costs[m] for m in on]
    L, n_all = len(names), len(view["models"])
    N = np.asarray(view["counts"] or np.zeros((n_all, n_all)), dtype=float)[np.ix_(on, on)]
    W = np.asarray(view["wins"] or np.zeros((n_all, n_all)), dtype=float)[np.ix_(on, on)]
    t = max(1.0, float(view["t"]))
    oracle = None
    reason = None
    if view["t"] == 0:
        reason = "No counted duels yet: the oracle allocation needs an estimate of the preference matrix."
    else:
        try:
            oracle = solve_oracle(empirical_preference(W, N), costs)
        except InstanceError:
            reason = (
                "The empirical preference matrix has no Condorcet winner yet (no model beats every other "
                "in more than half of their duels, or a pair has no duels), so the oracle allocation is "
                "not defined for the current estimate."
            )
        except Exception as exc:  # a statistic must never break the page
            reason = f"The oracle could not be solved for the current estimate ({type(exc).__name__})."
    frac = {}
    if oracle is not None:
        frac = {tuple(p): float(f) for p, f in zip(oracle.pairs, oracle.pull_fractions)}
    rows: list[dict[str, Any]] = []
    for i in range(L):
        for j in range(i + 1, L):
            n = int(N[i][j])
            rows.append(
                {
                    "label": f"{names[i]} vs {names[j]}",  # never cut: the chart's label column grows
                    "tip": f"{names[i]} vs {names[j]}",
                    "count": n,
                    "share": n / t if view["t"] else 0.0,
                    "oracle": frac.get((i, j)) if oracle is not None else None,
                }
            )
    shown = rows
    if len(rows) > MAX_PAIR_ROWS:  # many models: the pairs that matter (most duels or oracle weight)
        keep = sorted(range(len(rows)), key=lambda k: -max(rows[k]["share"], rows[k]["oracle"] or 0.0))
        shown = [rows[k] for k in sorted(keep[:MAX_PAIR_ROWS])]
    return {
        "plot": plots.pair_bars(shown, title="Duels per pair and the oracle allocation"),
        "n_pairs": len(rows),
        "n_shown": len(shown),
        "oracle": oracle,
        "oracle_winner": names[oracle.winner] if oracle is not None else None,
        "reason": reason,
        "c_star": oracle.c_star if oracle is not None else None,
    }


def recent_duels(svc: Campaigns, campaign_id: int, n: int = RECENT_DUELS) -> tuple[list[dict], int]:
    """The last ``n`` duels that were not cancelled, newest first, and how many were cancelled.

    **choice**: cancelled duels (in flight when the campaign ended) are hidden: after
    a certificate with several duels in flight they would fill the table.
    """
    with svc.db.read() as s:
        c = policy_log.get_light(s, campaign_id)  # the duels' views read its models and status only
        if c is None:
            return [], 0
        cancelled = int(
            s.execute(
                select(func.count(Duel.id)).where(Duel.campaign_id == campaign_id, Duel.status == DuelStatus.CANCELLED)
            ).scalar_one()
        )
        duels = (
            s.execute(
                select(Duel)
                .where(Duel.campaign_id == campaign_id, Duel.status != DuelStatus.CANCELLED)
                .order_by(Duel.id.desc())
                .limit(n)
            )
            .scalars()
            .all()
        )
        meta = svc.views.prompt_meta(s, campaign_id, [d.prompt_index for d in duels])
        items = [svc.views.duel_view(d, c, None, meta.get(d.prompt_index)) for d in duels]
    labels = svc.annotators.annotator_labels(campaign_id)  # "annotator:3" -> the label the admin gave it
    out = []
    for d in items:
        winner = None
        if d["choice"] == "a":
            winner = d["model_a_name"]
        elif d["choice"] == "b":
            winner = d["model_b_name"]
        out.append(dict(d, winner_name=winner, judged_by_label=labels.get(d["judged_by"] or "", d["judged_by"])))
    return out, cancelled


def cost_unit(view: dict) -> str:
    """USD, or "cost units" when every model and the judge are simulated (:func:`service.campaigns.verdicts.cost_unit`)."""
    return _cost_unit(view["models"], view["judge"])


def _heatmap(view: dict, names: list[str], wins: list, counts: list) -> Any:
    """The preference matrix; above :data:`PLOT_MODELS` models, that of the ones with the least
    evidence against them (the leader first), the full matrix in the JSON view (``?pairs=true``)."""
    L = len(names)
    if L <= PLOT_MODELS:
        return plots.heatmap(names, wins, counts)
    S = view["evidence"] or [0.0] * L
    top = sorted(range(L), key=lambda m: (S[m] if m < len(S) else 0.0, m))[:PLOT_MODELS]
    return plots.heatmap(
        [names[m] for m in top],
        [[wins[a][b] for b in top] for a in top],
        [[counts[a][b] for b in top] for a in top],
        title=f"Preference matrix of the {PLOT_MODELS} leading models (of {L})",
    )


def category_summary(categories: list[dict], rows: int = CATEGORY_ROWS) -> list[dict]:
    """Each category's first ``rows`` models (``more``: how many the export's ranking_by_category.csv adds)."""
    return [dict(cat, rows=cat["rows"][:rows], more=max(0, len(cat["rows"]) - rows)) for cat in categories]


def dashboard(svc: Campaigns, cache: SeriesCache, campaign_id: int) -> dict:
    """Everything the dashboard shows (raises NotFound for an unknown campaign). Its figures (the
    evidence, the matrix, the oracle, the rankings) are computed once per change of the campaign
    (its ``version``) and kept in ``cache``; the recent duels and the annotators are read each time."""
    version = campaign_version(svc, campaign_id)
    out = cache.figures(campaign_id, version)
    if out is None:
        out = _figures(svc, cache, campaign_id)
        cache.keep_figures(campaign_id, version, out)
    recent, cancelled = recent_duels(svc, campaign_id)
    return dict(out, recent=recent, cancelled=cancelled, annotators=svc.annotators.list_annotators(campaign_id))


def _figures(svc: Campaigns, cache: SeriesCache, campaign_id: int) -> dict:
    view = svc.views.get_campaign(campaign_id, admin=True, pairs=True)
    evidence, view = evidence_section(svc, cache, view)
    version = campaign_version(svc, campaign_id)
    names = [m["name"] for m in view["models"]]
    L = len(names)
    counts = view["counts"] or [[0] * L for _ in range(L)]
    wins = view["wins"] or [[0.0] * L for _ in range(L)]
    models = []
    for m in view["models"]:
        i = m["index"]
        played = int(sum(counts[i]))
        won = float(sum(wins[i]))
        models.append(
            dict(
                m,
                played=played,
                won=won,
                evidence=view["evidence"][i] if i < len(view["evidence"]) else None,
                color=plots.color(i),
                swatch=plots.swatch(plots.color(i)),
            )
        )
    frac, tip = progress_of(view)
    spend = view["spend"] or 0.0
    unit = cost_unit(view)
    return {
        "c": view,
        "version": version[0] if version else 0,
        "running": view["status"] == CampaignStatus.RUNNING or view["pending"] > 0,
        "status_label": STATUS_LABELS.get(view["status"], view["status"]),
        "models": models,
        "evidence": evidence,
        "heatmap": _heatmap(view, names, wins, counts),
        "oracle": oracle_section(view),
        "spend_plot": plots.spend_gauge(
            spend,
            view["budget"],
            finite_or_none(view["lower_bound"]),
            unit=unit,
            lower_bound_pc=finite_or_none(view.get("lower_bound_pc")),
        ),
        "unit": unit,
        "ranking": svc.results.ranking(campaign_id, bootstrap=False),  # the page shows no bootstrap interval
        "category_rows": CATEGORY_ROWS,
        "ranking_by_category": category_summary(svc.results.ranking_by_category(campaign_id)),
        # refitted as the duels grow (Results.style); both on the last LOG_WINDOW judged duels
        "style": svc.results.style(campaign_id, settled=True, last=LOG_WINDOW),
        "bias": svc.results.judge_bias(campaign_id, last=LOG_WINDOW),
        "log_window": LOG_WINDOW,
        "spend_ratio": (spend / view["budget"]) if view["budget"] else None,
        "progress": plots.progress_bar(frac, label=tip, done=view["status"] == CampaignStatus.CERTIFIED, width=200),
        "progress_tip": tip,
        "judge_kind": (view["judge"] or {}).get("kind"),
    }


# ---------------------------------------------------------------- annotators
def open_duel_of(svc: Campaigns, campaign_id: int, label: str) -> int | None:
    """The oldest duel this annotator asked for that still waits for a vote."""
    with svc.db.read() as s:
        return s.execute(
            select(Duel.id)
            .where(
                Duel.campaign_id == campaign_id,
                Duel.requested_by == label,
                Duel.status == DuelStatus.PENDING,
                Duel.expires_at > utcnow(),
            )
            .order_by(Duel.id)
            .limit(1)
        ).scalar_one_or_none()


def annotator_progress(svc: Campaigns, campaign_id: int, label: str) -> tuple[int, int]:
    """(votes cast, duels skipped) by this annotator in this campaign."""
    with svc.db.read() as s:
        votes = s.execute(
            select(func.count(Duel.id)).where(
                Duel.campaign_id == campaign_id, Duel.judged_by == label, Duel.choice.is_not(None)
            )
        ).scalar_one()
        skipped = s.execute(
            select(func.count(DuelSkip.id)).where(DuelSkip.campaign_id == campaign_id, DuelSkip.annotator == label)
        ).scalar_one()
    return int(votes), int(skipped)
