"""Pure helpers of the campaign and duel views (what each caller may see, JSON forms, diffs)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import object_session

from algorithms import plugin_lower_bound, plugin_pc_lower_bound
from algorithms.policies import PAPER_ALGORITHMS
from algorithms.vocabulary import IN_FLIGHT

from ..auth import Principal
from ..clients.config import images_per_call
from ..clients.params import campaign_params_warnings
from ..db import Database
from ..images.slots import slot_names
from ..models import Campaign, Charge, Duel, Prompt, from_nusd, utcnow
from ..money.costs import judge_cost_per_duel
from ..plain_values import finite_or_none, jsonable
from ..pricing import cost_warning
from ..prompts import question_id
from ..webhook_events import events_of
from . import hybrid, hybrid_view, policy_log, settlement, store_settings, verdicts
from .annotator_access import annotator_owns
from .expiry import run_under_way
from .model_changes import CHANGE_FIELDS, active_models, model_status
from .sampling import is_wor
from .types import NotFound
from .verdicts import verdict_text

CONDORCET_NOTE = (
    "This algorithm is from the paper: its certificate assumes that a Condorcet winner (a model that beats "
    "every other) exists. If none exists it can certify a wrong model; dctas-pc answers 'no Condorcet winner' "
    "instead."
)


def _exact_certificates(ev: dict | None, names: list[str]) -> list[tuple[int, int]]:
    """(winner, loser) indices of the certificates issued exactly (without replacement)."""
    if not ev:
        return []
    index = {n: i for i, n in enumerate(names)}
    return [(index[p["winner"]], index[p["loser"]]) for p in ev["pairs"] if p["exact"]]


# ---------------------------------------------------------------- what an annotator sees
# Whitelists (a field added to the admin views stays admin-only until it is added here):
# the voting form needs the prompt, the two answers, its own duel and whether the
# campaign still runs; nothing that tells the models or the draw apart (docs/reliability.md,
# Blinding). schemas.AnnotatorDuelOut and schemas.AnnotatorCampaignOut are these fields.
ANNOTATOR_DUEL_FIELDS = (
    "id",
    "campaign_id",
    "status",
    "prompt",
    "answer_a",
    "answer_b",
    "choice",
    "error",
    "created_at",
    "expires_at",
    "campaign_status",
    "comment",
)
ANNOTATOR_CAMPAIGN_FIELDS = ("id", "name", "status", "judge_kind", "guidelines", "votes_counted", "max_duels")
# A failed, expired or cancelled duel's error as an annotator reads it: the stored text
# names models and providers, so annotators get one sentence per status instead.
ANNOTATOR_ERRORS = {
    "failed": "this duel could not be completed (a model or the judge failed); it costs you nothing",
    "expired": "this duel expired and no longer counts",
    "cancelled": "the campaign ended before this duel was judged",
}


def annotator_error(status: str, error: str | None) -> str | None:
    """The error an annotator may read: a fixed sentence for the duel's status, never the stored text."""
    if error is None:
        return None
    return ANNOTATOR_ERRORS.get(str(status), "this duel cannot be voted on")


def duel_view_for(view: dict, admin: bool) -> dict:
    """The admin view of a duel, or what an annotator may see of it (:data:`ANNOTATOR_DUEL_FIELDS`)."""
    if admin:
        return view
    out = slot_names({k: view.get(k) for k in ANNOTATOR_DUEL_FIELDS})  # images by slot, never by hash
    out["error"] = annotator_error(view["status"], view.get("error"))
    return out


def annotator_campaign_view(c: Campaign) -> dict:
    """What an annotator may see of its campaign: its name, whether it still runs, the
    annotators' guidelines and how many votes are in (never models, costs or statistics)."""
    return {
        "id": c.id,
        "name": c.name,
        "status": c.status,
        "judge_kind": c.judge.get("kind"),
        "guidelines": c.judge.get("guidelines") or (c.judge.get("human") or {}).get("guidelines"),  # hybrid hook
        "votes_counted": int(c.duels_judged or 0),
        "max_duels": c.max_duels,
    }


def jsonable_report(view: dict) -> dict:
    """A campaign view as plain JSON (datetimes as ISO strings)."""
    out = {}
    for k, v in view.items():
        out[k] = v.isoformat() if isinstance(v, dt.datetime) else v
    return jsonable(out)


def json_diff(stored: Any, replayed: Any, path: str = "") -> list[str]:
    """Human-readable differences between two JSON values."""
    if isinstance(stored, dict) and isinstance(replayed, dict):
        out: list[str] = []
        for key in sorted(set(stored) | set(replayed), key=str):
            p = f"{path}.{key}" if path else str(key)
            if key not in stored:
                out.append(f"{p}: missing in stored state (replayed {replayed[key]!r})")
            elif key not in replayed:
                out.append(f"{p}: missing in replayed state (stored {stored[key]!r})")
            else:
                out.extend(json_diff(stored[key], replayed[key], p))
        return out
    if isinstance(stored, list) and isinstance(replayed, list) and len(stored) == len(replayed):
        out = []
        for n, (a, b) in enumerate(zip(stored, replayed)):
            out.extend(json_diff(a, b, f"{path}[{n}]"))
        return out
    if stored != replayed:
        return [f"{path or '<root>'}: stored {stored!r} != replayed {replayed!r}"]
    return []


def _bound_costs(c, state: dict | None) -> list[float]:
    """The costs of the lower bound and the oracle: the policy's (marginal given the stores, or configured)."""
    costs = (state or {}).get("costs")
    return [float(x) for x in costs] if costs else [float(m["cost"]) for m in c.models]


#: above this many models the view summarises its per-pair figures unless asked for them (?pairs=true)
PAIR_DETAIL_MODELS = 16


def summarise_pairs(view: dict) -> dict:
    """The view without its L x L figures (128 models: 2.4 MB with them, 74 KB without): ``counts`` and
    ``wins`` empty, ``pc_evidence.pairs`` only the reference's L - 1 pairs (its certificates), a simulated
    judge's ``preference`` matrix left out of ``judge``; ``pairs_included`` false."""
    view["counts"], view["wins"] = [], []
    ev = view.get("pc_evidence")
    if ev and ev.get("reference") is not None:  # a copy: the full evidence is kept for the next view
        view["pc_evidence"] = dict(ev, pairs=[p for p in ev["pairs"] if p["winner"] == ev["reference"]])
    judge = view.get("judge")
    if isinstance(judge, dict) and "preference" in judge:
        view["judge"] = {k: v for k, v in judge.items() if k != "preference"}
    view["pairs_included"] = False
    return view


def _lower_bounds(c, stats: dict, counts: dict, costs: list[float]) -> tuple[float | None, float | None]:
    """``c* log(1/4 delta)`` and, for dctas-pc, ``c_pc* log(1/4 delta)`` at the empirical matrix of the models
    still compared (a model disabled while running is out of the question); None when not defined."""
    if not (stats.get("t") or 0) > 0:
        return None, None
    on = active_models(len(c.models), c.model_changes)
    try:
        W = [[counts["W"][a][b] for b in on] for a in on]
        N = [[counts["N"][a][b] for b in on] for a in on]
        sub = [costs[m] for m in on]
        lower = finite_or_none(plugin_lower_bound(W, N, sub, c.delta))
        # the bound of a rule that may also answer "no Condorcet winner"
        lower_pc = finite_or_none(plugin_pc_lower_bound(W, N, sub, c.delta)) if c.algorithm == "dctas-pc" else None
    except Exception:  # a statistic must never break the view
        return None, None
    return lower, lower_pc


def run_view(c: Campaign, clock: dt.datetime, admin: bool) -> dict:
    """The campaign view's ``run``. ``active`` until the run's last duel in flight is recorded or given up (the
    spend is final once it is false), its lease read on the database's ``clock``, as its owner renews it."""
    return {
        "active": run_under_way(c.run_active, c.run_owner, c.run_lease_expires_at, clock),
        "remaining": c.run_remaining,
        "concurrency": c.run_concurrency,
        "error": c.run_error,
        "owner": c.run_owner if admin else None,
        "lease_expires_at": c.run_lease_expires_at.isoformat() if admin and c.run_lease_expires_at else None,
    }


def provider_faults(d: Duel | SimpleNamespace) -> list[dict]:
    """The provider faults of a duel (service.money.ledger): each call that reported usage above
    its bound, with the reported cost and the bound it was charged at."""
    out = []
    for side, rec in (("a", d.completion_a), ("b", d.completion_b), ("judge", d.judge_detail)):
        if isinstance(rec, dict) and rec.get("provider_fault"):
            out.append(
                {
                    "side": side,
                    "fault": rec["provider_fault"],
                    "reported_cost": rec.get("reported_cost"),
                    "bound": rec.get("bound"),
                    "output_tokens": rec.get("output_tokens"),
                }
            )
    return out


class Views:
    """Read-only views of campaigns and duels over one :class:`~service.db.Database`; the policy's
    figures between checkpoints are computed once per change (:mod:`.policy_log`) and kept."""

    def __init__(self, db: Database):
        self.db = db
        self.snapshots = policy_log.SnapshotCache()

    def snapshot(self, c: Campaign) -> policy_log.Snapshot:
        """``c``'s policy figures at its ``event_seq`` (read in ``c``'s session when they are not stored)."""
        return policy_log.snapshot_of(object_session(c), c, self.snapshots)

    # ------------------------------------------------------------ views
    def lock_existing(self, s, campaign_id: int) -> Campaign:
        """Lock the campaign's row for this transaction; NotFound if there is none."""
        c = self.db.lock_campaign(s, campaign_id)
        if c is None:
            raise NotFound(f"campaign {campaign_id} not found")
        return c

    def pending_count(self, s, campaign_id: int, now: dt.datetime) -> int:
        return int(
            s.execute(
                select(func.count(Duel.id)).where(
                    Duel.campaign_id == campaign_id, Duel.status.in_(IN_FLIGHT), Duel.expires_at > now
                )
            ).scalar_one()
        )

    def observed_costs(self, s, campaign_id: int) -> dict[int, tuple[int, int]]:
        """Per model index: (charged calls, their total in nano-USD), from the ledger's model charges.

        A reuse row (a stored answer served again at no cost) is no call: counting it would
        pull the mean charge below the price of a call and raise a false cost warning."""
        rows = s.execute(
            select(Charge.model_index, func.count(Charge.id), func.sum(Charge.amount_nusd))
            .where(Charge.campaign_id == campaign_id, Charge.kind == "model", Charge.reuses_charge_id.is_(None))
            .group_by(Charge.model_index)
        ).all()
        return {int(k): (int(n), int(total or 0)) for k, n, total in rows if k is not None}

    def model_views(self, c: Campaign, admin: bool, observed: dict[int, tuple[int, int]] | None) -> list[dict]:
        """The models as the campaign view lists them; prices and observed costs for the admin only."""
        out = []
        status = model_status([m["name"] for m in c.models], c.model_changes)
        for n, m in enumerate(c.models):
            view = {
                "index": n,
                "name": m["name"],
                "cost": m["cost"],
                "client": m["client"] if admin else {"kind": m["client"].get("kind")},
                "status": status[n]["status"],
            }
            for key in ("reason", "disabled_at", "replaced_by", "replaces"):
                if status[n].get(key) is not None:
                    view["disabled_reason" if key == "reason" else key] = status[n][key]
            if admin:
                pricing_record = m.get("pricing") or {}
                calls, total = (observed or {}).get(n, (0, 0))
                mean = total / 1e9 / calls if calls else None
                price = pricing_record.get("price") or m["client"].get("price")
                view.update(
                    cost_source=pricing_record.get("cost_source", "configured"),
                    derived_cost=pricing_record.get("derived_cost"),
                    charged="per_token" if m["client"].get("price") is not None else "per_call",
                    price=None
                    if price is None
                    else {
                        **price,
                        "source": pricing_record.get("price_source") or "client",
                        "key": pricing_record.get("price_key"),
                    },
                    expected_input_tokens=pricing_record.get("expected_input_tokens"),
                    expected_output_tokens=pricing_record.get("expected_output_tokens"),
                    calls=calls if observed is not None else None,
                    observed_cost=mean,
                    # an image model's cost is per image: a call of several (params.n) is charged that many
                    cost_warning=cost_warning(m["name"], float(m["cost"]) * images_per_call(m["client"]), mean, calls),
                )
            out.append(view)
        return out

    def campaign_view(
        self,
        c: Campaign,
        pending: int,
        *,
        clock: dt.datetime,
        admin: bool = True,
        observed: dict | None = None,
        pairs: bool | None = None,
        spend_final: bool = False,
    ) -> dict:
        """The admin's view; ``clock``: the database's, which times the run's lease (``run.active``); ``spend_final``:
        :func:`.settlement.spend_final`, read by the caller; ``pairs``: the per-pair figures in full (None: up to
        :data:`PAIR_DETAIL_MODELS` models; above, summarised: :func:`summarise_pairs`)."""
        if not admin:
            return annotator_campaign_view(c)
        names, snap = [m["name"] for m in c.models], self.snapshot(c)
        stats, counts = snap.stats or {}, snap.counts or {}
        lower, lower_pc = _lower_bounds(c, stats, counts, _bound_costs(c, snap.policy_state))
        budget = from_nusd(c.budget_nusd)
        view = {
            "id": c.id,
            "name": c.name,
            "status": c.status,
            "end_reason": c.end_reason,
            "end_limit": c.end_limit,
            "algorithm": c.algorithm,
            "assumes_condorcet_winner": c.algorithm in PAPER_ALGORITHMS,
            "condorcet_note": CONDORCET_NOTE if c.algorithm in PAPER_ALGORITHMS else None,
            "judge_cost": judge_cost_per_duel(c.judge),
            "answers": c.answers,
            "verdicts": c.verdicts,
            "cost_model": store_settings.cost_model(c.answers, c.verdicts, c.models, c.judge),
            "prompt_sampling": c.prompt_sampling,
            "population": stats.get("population") if is_wor(c.prompt_sampling) else None,
            "exact": stats.get("exact") if is_wor(c.prompt_sampling) else None,
            "policy_costs": (snap.policy_state or {}).get("costs"),
            "policy_judge_cost": ((snap.policy_state or {}).get("params") or {}).get("judge_cost", 0.0),
            "certificates": stats.get("certificates"),
            "copeland_winner": names[stats["copeland_winner"]] if stats.get("copeland_winner") is not None else None,
            "top_cycle": [names[m] for m in stats["top_cycle"]] if stats.get("top_cycle") is not None else None,
            "delta": c.delta,
            "tie_policy": c.tie_policy,
            "models": self.model_views(c, admin, observed),
            "model_changes": [{k: e[k] for k in CHANGE_FIELDS if k in e} for e in c.model_changes or ()],
            "judge": c.judge if admin else {"kind": c.judge.get("kind")},
            "n_prompts": c.n_prompts,
            "budget": budget,
            "remaining_budget": None if c.budget_nusd is None else max(0.0, (c.budget_nusd - c.spend_nusd) / 1e9),
            "max_duels": c.max_duels,
            "seed": c.seed,
            "max_pending_per_annotator": c.max_pending_per_annotator,
            "webhook_url": c.webhook_url if admin else None,
            "webhook_events": events_of(c.webhook_events) if c.webhook_url else None,
            "leader": names[c.leader] if c.leader is not None else None,
            "leader_index": c.leader,
            "winner": names[c.winner] if c.winner is not None else None,
            "winner_index": c.winner,
            "spend": from_nusd(c.spend_nusd),
            "judge_spend": from_nusd(c.judge_spend_nusd),
            "spend_final": spend_final,
            "duels": c.duels_judged,
            "duels_counted": c.duels_counted,
            "duels_created": c.duels_created,
            "duels_failed": c.duels_failed,
            "pending": pending,
            "t": int(stats.get("t") or 0),
            "counts": counts.get("N") or [],
            "wins": counts.get("W") or [],
            "evidence": stats.get("S") or [],
            "Z": finite_or_none(stats.get("Z")) or 0.0,
            "beta": finite_or_none(stats.get("beta")) or 0.0,
            "lower_bound": lower,
            "lower_bound_pc": lower_pc,
            "run": run_view(c, clock, admin),
            "batch": c.batch,
            "webhook_state": c.webhook_state,
            "webhook_error": c.webhook_error if admin else None,
            "created_at": c.created_at,
            "updated_at": c.updated_at,
            "ended_at": c.ended_at,
            "archived_at": c.archived_at,
        }
        view["cost_warnings"] = [m["cost_warning"] for m in view["models"] if m.get("cost_warning")] if admin else None
        view["config_warnings"] = campaign_params_warnings(c.models, c.judge) if admin else None
        view["pc_evidence"] = self._pc_evidence(c, snap, names)
        exact_pairs = set(_exact_certificates(view["pc_evidence"], names))
        view["certificate_graph"] = verdicts.certificate_graph(stats.get("certificates"), names, exact_pairs)
        board = verdicts.leaderboard_facts(stats, names)
        words = board.pop("leaderboard_words", None)
        view.update(board)
        facts = verdicts.verdict_facts(view)
        facts["verdict"] = facts["verdict"] or verdict_text(
            c.status, view["winner"], view["leader"], c.delta, end_reason=c.end_reason
        )
        if words:  # a leaderboard goal: its certified order, beside how the campaign ended
            facts["verdict"] = f"{facts['verdict']}; {words}" if c.status != "certified" else f"certified {words}"
        view.update(facts, pairs_included=True)
        full = pairs if pairs is not None else len(names) <= PAIR_DETAIL_MODELS
        return view if full else summarise_pairs(view)

    def _pc_evidence(self, c: Campaign, snap: policy_log.Snapshot, names: list[str]) -> dict | None:
        """dctas-pc's certificate evidence, computed once per change (and status) of the campaign."""
        key = ("pc_evidence", c.status)
        if key not in snap.derived:
            snap.derived[key] = verdicts.pc_evidence(c.algorithm, snap.policy_state, names, c.status)
        ev = snap.derived[key]
        return None if ev is None else dict(ev)  # the caller's copy

    def report_view(self, s, c: Campaign, now: dt.datetime) -> dict:
        """The admin's view of ``c`` as a webhook reports it (inside the caller's session): the keys of
        ``GET /v1/campaigns/{id}`` but the webhook's own state, ``hybrid`` included."""
        clock = self.db.clock(s)
        view = self.campaign_view(
            c, self.pending_count(s, c.id, now), clock=clock, spend_final=settlement.spend_final(s, c, clock)
        )
        view["hybrid"] = hybrid_view.summary(s, c) if hybrid.is_hybrid(c.judge) else None
        return view

    def get_campaign(self, campaign_id: int, admin: bool = True, pairs: bool | None = None) -> dict:
        with self.db.read() as s:
            c = policy_log.get_light(s, campaign_id)
            if c is None:
                raise NotFound(f"campaign {campaign_id} not found")
            observed = self.observed_costs(s, campaign_id) if admin else None
            clock = self.db.clock(s)
            view = self.campaign_view(
                c,
                self.pending_count(s, campaign_id, utcnow()),
                clock=clock,
                admin=admin,
                observed=observed,
                pairs=pairs,
                spend_final=admin and settlement.spend_final(s, c, clock),
            )
            if hybrid.is_hybrid(c.judge):  # hybrid hook: human votes, agreement; annotators count human votes
                view.update(hybrid_view.summary_for(s, c, admin))
            return view

    def list_campaigns(self, limit: int, offset: int, status: str | None = None, archived: bool = False) -> dict:
        """A page of campaigns, newest first: the unarchived ones, or with ``archived`` the archived ones."""
        with self.db.read() as s:
            shown = Campaign.archived_at.is_not(None) if archived else Campaign.archived_at.is_(None)
            q = select(Campaign).where(shown)
            cq = select(func.count(Campaign.id)).where(shown)
            if status:
                q = q.where(Campaign.status == status)
                cq = cq.where(Campaign.status == status)
            total = int(s.execute(cq).scalar_one())
            rows = s.execute(q.order_by(Campaign.id.desc()).limit(limit).offset(offset)).scalars().all()
            now = utcnow()
            pend: dict[int, int] = {}
            if rows:
                pend = dict(
                    s.execute(
                        select(Duel.campaign_id, func.count(Duel.id))
                        .where(
                            Duel.campaign_id.in_([r.id for r in rows]),
                            Duel.status.in_(IN_FLIGHT),
                            Duel.expires_at > now,
                        )
                        .group_by(Duel.campaign_id)
                    ).all()
                )
            clock = self.db.clock(s)
            final = settlement.spend_final_of(s, rows, clock)
            items = [self.campaign_view(c, int(pend.get(c.id, 0)), clock=clock, spend_final=final[c.id]) for c in rows]
        nxt = offset + len(items)
        return {
            "items": items,
            "total": total,
            "limit": limit,
            "offset": offset,
            "next_offset": nxt if nxt < total else None,
        }

    def prompt_meta(self, s, campaign_id: int, indices) -> dict[int, tuple[str, str | None]]:
        """``prompt index -> (question id, category)`` for these prompts of a campaign."""
        wanted = sorted(set(indices))
        if not wanted:
            return {}
        rows = s.execute(
            select(Prompt.idx, Prompt.qid, Prompt.category).where(
                Prompt.campaign_id == campaign_id, Prompt.idx.in_(wanted)
            )
        ).all()
        return {r.idx: (question_id(r.qid, r.idx), r.category) for r in rows}

    def duel_view(
        self,
        d: Duel | SimpleNamespace,  # an ORM duel or the vote cycle's DuelRow (the same columns)
        c: Campaign | SimpleNamespace | None,  # a campaign, or the cycle's fields of one
        charges: Sequence[Charge] | None = None,
        meta: tuple[str, str | None] | None = None,
    ) -> dict:
        """The full (admin) view of a duel; :func:`duel_view_for` strips it for annotators.

        ``meta``: the prompt's (question id, category) when the caller looked them up.
        """
        names = [m["name"] for m in c.models] if c is not None else None
        view = {
            "id": d.id,
            "campaign_id": d.campaign_id,
            "number": d.number,
            "status": d.status,
            "prompt": d.prompt,
            "answer_a": d.answer_a,
            "answer_b": d.answer_b,
            "choice": d.choice,
            "counted": bool(d.counted),
            "error": d.error,
            "cost": from_nusd(d.cost_nusd),
            "created_at": d.created_at,
            "answered_at": d.answered_at,
            "judged_at": d.judged_at,
            "expires_at": d.expires_at,
            "campaign_status": c.status if c is not None else None,
            "model_a": d.model_a,
            "model_b": d.model_b,
            "model_a_name": names[d.model_a] if names else None,
            "model_b_name": names[d.model_b] if names else None,
            "score": d.score,
            "position": d.position,
            "record_seq": d.record_seq,
            "judged_by": d.judged_by,
            "judge": d.judge_detail,
            "question_id": meta[0] if meta else None,
            "category": meta[1] if meta else None,
            "comment": d.comment,
            "provider_faults": provider_faults(d),
        }
        if charges is not None:
            view["charges"] = [
                {
                    "id": ch.id,
                    "kind": ch.kind,
                    "model_index": ch.model_index,
                    "amount": from_nusd(ch.amount_nusd),
                    "reuses_charge_id": ch.reuses_charge_id,
                    "reused": bool(ch.detail and ch.detail.get("reused")),
                    "provider_fault": (ch.detail or {}).get("provider_fault"),
                    "reported_cost": (ch.detail or {}).get("reported_cost"),
                    "created_at": ch.created_at,
                }
                for ch in charges
            ]
        return view

    def get_duel(self, duel_id: int, principal: Principal, image_names: bool = False) -> dict:
        """A duel as ``principal`` may see it; ``image_names``: only its stored ``prompt``, ``answer_a`` and
        ``answer_b`` (image hashes included), for the image routes, after the same access check."""
        with self.db.read() as s:
            d = s.get(Duel, duel_id)
            # Another campaign's duel, or another annotator's: the same 404 as a missing id,
            # so an annotator cannot learn which ids exist.
            if (
                d is None
                or not principal.can_access(d.campaign_id)
                or (not principal.admin and not annotator_owns(d.requested_by, principal.label))
            ):
                raise NotFound(f"duel {duel_id} not found")
            c = s.get(Campaign, d.campaign_id)
            charges = None
            if principal.admin:
                charges = s.execute(select(Charge).where(Charge.duel_id == duel_id).order_by(Charge.id)).scalars().all()
            if image_names:
                return {"prompt": d.prompt, "answer_a": d.answer_a, "answer_b": d.answer_b}
            meta = self.prompt_meta(s, d.campaign_id, [d.prompt_index]).get(d.prompt_index)
            view = duel_view_for(self.duel_view(d, c, charges, meta), principal.admin)
            if not principal.admin and d.judged_by != principal.label:
                view["choice"] = None  # an admin-started duel another annotator voted on: not this one's vote
            return view

    def list_duels(self, campaign_id: int, limit: int, offset: int, status: str | None = None) -> dict:
        with self.db.read() as s:
            c = s.get(Campaign, campaign_id)
            if c is None:
                raise NotFound(f"campaign {campaign_id} not found")
            cond = [Duel.campaign_id == campaign_id]
            if status:
                cond.append(Duel.status == status)
            total = int(s.execute(select(func.count(Duel.id)).where(*cond)).scalar_one())
            duels = s.execute(select(Duel).where(*cond).order_by(Duel.id).limit(limit).offset(offset)).scalars().all()
            by_duel: dict[int, list[Charge]] = {d.id: [] for d in duels}
            if duels:
                for ch in s.execute(
                    select(Charge).where(Charge.duel_id.in_(list(by_duel))).order_by(Charge.id)
                ).scalars():
                    if ch.duel_id is not None:  # every row here: the query selects by duel
                        by_duel[ch.duel_id].append(ch)
            meta = self.prompt_meta(s, campaign_id, [d.prompt_index for d in duels])
            items = [self.duel_view(d, c, by_duel[d.id], meta.get(d.prompt_index)) for d in duels]
        nxt = offset + len(items)
        return {
            "items": items,
            "total": total,
            "limit": limit,
            "offset": offset,
            "next_offset": nxt if nxt < total else None,
        }
