"""Campaign domain logic: create, next duel, vote, run, stop, replay.

Every write that touches a campaign runs in one transaction that first locks the
campaign row (:meth:`Database.lock_campaign`), so writes on one campaign are
serialised and a vote and the state update it causes commit together. Model and
judge calls happen outside any transaction:

1. *plan* (locked): expire stale duels, rebuild the policy from its stored state,
   ``next_pair(pending=in-flight pairs)``, check budget and caps, draw a prompt and
   the display order, insert the duel as ``calling``, commit.
2. both models are called concurrently, no lock held.
3. *store answers* (locked): charges for what was really spent; the duel becomes
   ``pending`` (waiting for a verdict) or ``failed`` (its pair is free again).
4. an automatic judge decides (no lock), then *record* (locked) like a vote: the
   duel moves ``pending -> judged`` with a conditional UPDATE (a second verdict or
   a duplicate vote finds no pending row: 409), the policy records the score,
   stops when it certifies, and the campaign row gets the new state.

The synchronous ``*_tx`` methods run in worker threads; the async methods
orchestrate them with the model and judge calls.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import math
import random
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import anyio
from sqlalchemy import func, insert, select, update

from . import fastpath
from .auth import Principal, hash_token, new_token
from .config import Settings
from .db import Database
from .models import (
    BUDGET_EXHAUSTED,
    CALLING,
    CANCELLED,
    CERTIFIED,
    EXPIRED,
    FAILED,
    IN_FLIGHT,
    JUDGED,
    PENDING,
    RUNNING,
    STOPPED,
    Annotator,
    Campaign,
    Charge,
    Duel,
    Prompt,
    from_nusd,
    to_nusd,
    utcnow,
)
from .schemas import CampaignCreate

log = logging.getLogger("llmduel.campaigns")

MAX_ERROR_CHARS = 2000
MAX_ANSWER_CHARS = 1_000_000


# ---------------------------------------------------------------- errors
class DomainError(Exception):
    status_code = 400

    def __init__(self, detail: str, *, retry_later: bool = False, ended: bool = False):
        super().__init__(detail)
        self.detail = detail
        self.retry_later = retry_later
        self.ended = ended  # this request ended the campaign (its webhook is due)


class NotFound(DomainError):
    status_code = 404


class Conflict(DomainError):
    status_code = 409


class Forbidden(DomainError):
    status_code = 403


class Unprocessable(DomainError):
    status_code = 422


# ---------------------------------------------------------------- helpers
def jsonable(value: Any) -> Any:
    """Plain JSON types (numpy scalars and arrays become floats/ints/lists)."""
    return json.loads(json.dumps(value, default=_np_default))


def _np_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def clean_text(text: Any, limit: int = MAX_ANSWER_CHARS) -> str:
    """Model output as storable text: str, no NUL, no lone surrogates, bounded."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if len(text) > limit:
        text = text[:limit] + "\n[truncated by llmduel]"
    text = text.replace("\x00", "\ufffd")
    return text.encode("utf-8", "replace").decode("utf-8")


def finite_or_none(x: Any) -> float | None:
    """``float(x)`` when it is a finite number, else None."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _cost_nusd(cost: Any) -> int:
    v = finite_or_none(cost)
    return to_nusd(v) if v is not None and v > 0 else 0


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


def draw_prompt_and_side(seed: int, number: int, n_prompts: int) -> tuple[int, bool]:
    """Duel ``number``'s prompt index and whether answer "a" is model_i's (from the campaign seed)."""
    rng = random.Random(f"{seed}:{number}:draw")
    prompt_index = rng.randrange(n_prompts)
    return prompt_index, rng.random() < 0.5


def new_policy(algorithm: str, costs: list[float], delta: float):
    from algorithms import make_policy

    return make_policy(algorithm, costs=costs, delta=delta)


def restore_policy(state: dict):
    from algorithms import policy_from_state

    return policy_from_state(state)


def warm_policies() -> None:
    """Load every algorithm's compiled kernels (numba's on-disk cache) in this process.

    The first policy call of a process otherwise pays ~0.7 s loading them, on
    whichever request comes first; the app does this at start-up, in a thread,
    before the worker accepts connections.
    """
    from algorithms import ALGORITHMS

    for algorithm in ALGORITHMS:
        for costs in ([1.0, 2.0], [1.0, 2.0, 3.0]):
            policy = new_policy(algorithm, costs, 0.01)
            for _ in range(3 * len(costs)):
                i, j = policy.next_pair(pending=[])
                policy.record(i, j, 1.0 if i == 0 else 0.0)
                policy.should_stop()
            restore_policy(policy_snapshot(policy)[0]).next_pair(pending=[[0, 1]])


def policy_snapshot(policy) -> tuple[dict, dict, dict, int | None]:
    """(state, counts, stats, leader) as stored in the campaign row."""
    summary = jsonable(policy.summary())
    counts = {"N": summary.get("N"), "W": summary.get("W")}
    stats = {k: v for k, v in summary.items() if k not in ("N", "W")}
    t = int(summary.get("t") or 0)
    leader = summary.get("leader") if t > 0 else None
    return jsonable(policy.to_state()), counts, stats, leader


class PolicyCache:
    """Policies kept between transactions, keyed by the campaign's ``event_seq``.

    Every policy call anywhere (any process) increments the campaign's
    ``event_seq`` under the row lock, so a cached policy whose sequence number
    equals the row's is exactly the stored state. ``take`` removes the entry (a
    failed transaction cannot leave a half-updated policy behind); ``put`` runs
    after a successful commit.
    """

    def __init__(self, size: int = 1000):
        self._items: dict[int, tuple[int, Any]] = {}
        self._size = size
        self._lock = threading.Lock()

    def take_exact(self, campaign_id: int, event_seq: int):
        """The cached policy if it is at ``event_seq`` (removed from the cache), else None."""
        with self._lock:
            hit = self._items.pop(campaign_id, None)
        return hit[1] if hit is not None and hit[0] == event_seq else None

    def take(self, c: Campaign):
        """The policy of the locked campaign row ``c``: cached, or rebuilt from its stored state."""
        policy = self.take_exact(c.id, c.event_seq)
        return policy if policy is not None else restore_policy(c.policy_state)

    def seq_of(self, campaign_id: int) -> int | None:
        """The ``event_seq`` of the cached policy (None: nothing cached); the entry stays."""
        hit = self._items.get(campaign_id)
        return None if hit is None else hit[0]

    def put(self, campaign_id: int, event_seq: int, policy: Any) -> None:
        with self._lock:
            if len(self._items) >= self._size:
                self._items.clear()
            self._items[campaign_id] = (event_seq, policy)


@dataclass
class DuelPlan:
    """What the model calls of one duel need, taken from the plan transaction."""

    campaign_id: int
    duel_id: int
    number: int
    i: int
    j: int
    a_is_i: bool
    prompt: str
    models: list[dict]
    judge: dict
    tie_policy: str
    seed: int
    select_ms: float = 0.0
    # Set when both models answered inside the plan transaction (instant clients):
    results: dict[int, Any] | None = None
    outcome: "DuelOutcome | None" = None

    @property
    def model_a(self) -> int:
        return self.i if self.a_is_i else self.j

    @property
    def model_b(self) -> int:
        return self.j if self.a_is_i else self.i


@dataclass
class DuelOutcome:
    duel_id: int
    status: str
    ended: bool = False
    failed: bool = False
    error: str | None = None
    view: dict | None = None  # the duel as an admin sees it, built inside the transaction


ADMIN_DUEL_FIELDS = ("model_a", "model_b", "model_a_name", "model_b_name", "score", "judged_by", "judge", "charges")


def duel_view_for(view: dict, admin: bool) -> dict:
    """Annotators do not see which model is behind which answer (nor the judge's notes)."""
    if admin:
        return view
    return {k: v for k, v in view.items() if k not in ADMIN_DUEL_FIELDS}


@dataclass
class ReplayResult:
    campaign_id: int
    ok: bool
    events: int
    diff: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"campaign_id": self.campaign_id, "ok": self.ok, "events": self.events, "diff": self.diff}


# ---------------------------------------------------------------- service
class CampaignService:
    """Domain logic over one :class:`Database`; one instance per app."""

    def __init__(self, settings: Settings, db: Database):
        self.settings = settings
        self.db = db
        self._http = None
        self._clients: dict[tuple[int, int], Any] = {}
        self._judges: dict[int, Any] = {}
        self._runs: dict[int, asyncio.Task] = {}
        self._background: set[asyncio.Task] = set()
        self._expiry = dt.timedelta(seconds=settings.duel_expiry_seconds)
        self._call_expiry = dt.timedelta(seconds=min(settings.call_timeout_seconds, settings.duel_expiry_seconds))
        self.token_cache: dict[str, tuple[int, int, float]] = {}
        self._policies = PolicyCache()
        # PostgreSQL: hot fast-path transactions on the event loop (asyncpg, service.db.HotPool).
        self._on_loop = settings.inline_transactions and db.hot_pool is not None
        self.hot_counts = {"loop": 0, "thread": 0}  # hot-path transactions by where they ran
        self.config_cache: dict[int, Any] = {}  # campaign id -> fastpath.CampaignConfig (never changes)
        self._prompts: dict[tuple[int, int], str] = {}

    # ------------------------------------------------------------ threads
    @staticmethod
    async def _thread(fn: Callable, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
        return await anyio.to_thread.run_sync(fn, *args)

    def cached_prompt(self, campaign_id: int, idx: int) -> str | None:
        return self._prompts.get((campaign_id, idx))

    def remember_prompt(self, campaign_id: int, idx: int, text: str) -> str:
        """Prompts never change once a campaign exists: they are cached per process."""
        if len(self._prompts) >= 50_000:
            self._prompts.clear()
        self._prompts[(campaign_id, idx)] = text
        return text

    def _prompt(self, s, campaign_id: int, idx: int) -> str:
        text = self.cached_prompt(campaign_id, idx)
        if text is None:
            text = self.remember_prompt(campaign_id, idx, s.execute(
                select(Prompt.text).where(Prompt.campaign_id == campaign_id, Prompt.idx == idx)).scalar_one())
        return text

    # ------------------------------------------------------------ create
    def create_campaign(self, body: CampaignCreate) -> int:
        costs = [m.cost for m in body.models]
        policy = new_policy(body.algorithm, costs, body.delta)
        state, counts, stats, leader = policy_snapshot(policy)
        now = utcnow()
        seed = body.seed if body.seed is not None else secrets.randbelow(2**62)
        campaign = Campaign(
            name=body.name,
            algorithm=body.algorithm,
            delta=body.delta,
            tie_policy=body.tie_policy,
            status=RUNNING,
            models=[{"name": m.name, "cost": m.cost, "client": m.client} for m in body.models],
            n_prompts=len(body.prompts),
            judge=body.judge,
            budget_nusd=to_nusd(body.budget) if body.budget is not None else None,
            max_duels=body.max_duels,
            seed=seed,
            webhook_url=body.webhook_url,
            policy_state=state,
            counts=counts,
            stats=stats,
            leader=leader,
            winner=None,
            event_seq=0,
            spend_nusd=0,
            judge_spend_nusd=0,
            duels_created=0,
            duels_judged=0,
            duels_counted=0,
            duels_failed=0,
            run_active=False,
            run_concurrency=1,
            webhook_state="none",
            version=0,
            created_at=now,
            updated_at=now,
        )
        with self.db.write() as s:
            s.add(campaign)
            s.flush()
            s.execute(insert(Prompt), [{"campaign_id": campaign.id, "idx": n, "text": text}
                                       for n, text in enumerate(body.prompts)])
            return int(campaign.id)

    def create_annotator(self, campaign_id: int, label: str | None) -> dict:
        token = new_token()
        with self.db.write() as s:
            self._lock_existing(s, campaign_id)
            row = Annotator(campaign_id=campaign_id, token_hash=hash_token(token), label=label, created_at=utcnow())
            s.add(row)
            s.flush()
            return {"id": int(row.id), "campaign_id": campaign_id, "label": label, "token": token}

    # ------------------------------------------------------------ views
    def _lock_existing(self, s, campaign_id: int) -> Campaign:
        """Lock the campaign's row for this transaction; NotFound if there is none."""
        c = self.db.lock_campaign(s, campaign_id)
        if c is None:
            raise NotFound(f"campaign {campaign_id} not found")
        return c

    def _pending_count(self, s, campaign_id: int, now: dt.datetime) -> int:
        return int(
            s.execute(
                select(func.count(Duel.id)).where(
                    Duel.campaign_id == campaign_id, Duel.status.in_(IN_FLIGHT), Duel.expires_at > now
                )
            ).scalar_one()
        )

    def campaign_view(self, c: Campaign, pending: int, admin: bool = True) -> dict:
        names = [m["name"] for m in c.models]
        stats = c.stats or {}
        counts = c.counts or {}
        lower = None
        if (stats.get("t") or 0) > 0:
            try:
                from algorithms import plugin_lower_bound

                lower = finite_or_none(plugin_lower_bound(counts["W"], counts["N"], [m["cost"] for m in c.models], c.delta))
            except Exception:  # a statistic must never break the view
                lower = None
        budget = from_nusd(c.budget_nusd)
        view = {
            "id": c.id,
            "name": c.name,
            "status": c.status,
            "end_reason": c.end_reason,
            "algorithm": c.algorithm,
            "delta": c.delta,
            "tie_policy": c.tie_policy,
            "models": [
                {
                    "index": n,
                    "name": m["name"],
                    "cost": m["cost"],
                    "client": m["client"] if admin else {"kind": m["client"].get("kind")},
                }
                for n, m in enumerate(c.models)
            ],
            "judge": c.judge if admin else {"kind": c.judge.get("kind")},
            "n_prompts": c.n_prompts,
            "budget": budget,
            "remaining_budget": None if budget is None else max(0.0, (c.budget_nusd - c.spend_nusd) / 1e9),
            "max_duels": c.max_duels,
            "seed": c.seed,
            "webhook_url": c.webhook_url if admin else None,
            "leader": names[c.leader] if c.leader is not None else None,
            "leader_index": c.leader,
            "winner": names[c.winner] if c.winner is not None else None,
            "winner_index": c.winner,
            "spend": from_nusd(c.spend_nusd),
            "judge_spend": from_nusd(c.judge_spend_nusd),
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
            "run": {
                "active": bool(c.run_active),
                "remaining": c.run_remaining,
                "concurrency": c.run_concurrency,
                "error": c.run_error,
            },
            "webhook_state": c.webhook_state,
            "created_at": c.created_at,
            "updated_at": c.updated_at,
            "ended_at": c.ended_at,
        }
        return view

    def get_campaign(self, campaign_id: int, admin: bool = True) -> dict:
        with self.db.read() as s:
            c = s.get(Campaign, campaign_id)
            if c is None:
                raise NotFound(f"campaign {campaign_id} not found")
            return self.campaign_view(c, self._pending_count(s, campaign_id, utcnow()), admin)

    def list_campaigns(self, limit: int, offset: int, status: str | None = None) -> dict:
        with self.db.read() as s:
            q = select(Campaign)
            cq = select(func.count(Campaign.id))
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
            items = [self.campaign_view(c, int(pend.get(c.id, 0))) for c in rows]
        nxt = offset + len(items)
        return {"items": items, "total": total, "limit": limit, "offset": offset,
                "next_offset": nxt if nxt < total else None}

    def duel_view(self, d: Duel, c: Campaign | None, charges: list[Charge] | None = None) -> dict:
        """The full (admin) view of a duel; :func:`duel_view_for` strips it for annotators."""
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
            "judged_by": d.judged_by,
            "judge": d.judge_detail,
        }
        if charges is not None:
            view["charges"] = [
                {"kind": ch.kind, "model_index": ch.model_index, "amount": from_nusd(ch.amount_nusd),
                 "created_at": ch.created_at}
                for ch in charges
            ]
        return view

    def get_duel(self, duel_id: int, principal: Principal) -> dict:
        with self.db.read() as s:
            d = s.get(Duel, duel_id)
            if d is None or not principal.can_access(d.campaign_id):
                # Annotators of other campaigns learn nothing about this duel.
                if d is not None and not principal.admin:
                    raise Forbidden("this token does not give access to this duel's campaign")
                raise NotFound(f"duel {duel_id} not found")
            c = s.get(Campaign, d.campaign_id)
            charges = None
            if principal.admin:
                charges = s.execute(select(Charge).where(Charge.duel_id == duel_id).order_by(Charge.id)).scalars().all()
            return duel_view_for(self.duel_view(d, c, charges), principal.admin)

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
                    by_duel[ch.duel_id].append(ch)
            items = [self.duel_view(d, c, by_duel[d.id]) for d in duels]
        nxt = offset + len(items)
        return {"items": items, "total": total, "limit": limit, "offset": offset,
                "next_offset": nxt if nxt < total else None}

    # ------------------------------------------------------------ state transitions
    def _finish(self, s, c: Campaign, status: str, reason: str, now: dt.datetime, keep_duel: int | None = None) -> None:
        """End a running campaign: in-flight duels are cancelled, the run stops."""
        c.status = status
        c.end_reason = reason
        c.ended_at = now
        c.run_active = False
        if c.webhook_url and c.webhook_state == "none":
            c.webhook_state = "pending"
        cond = [Duel.campaign_id == c.id, Duel.status.in_(IN_FLIGHT)]
        if keep_duel is not None:
            cond.append(Duel.id != keep_duel)
        s.execute(
            update(Duel).where(*cond).values(status=CANCELLED, error="the campaign ended before this duel was judged")
            .execution_options(synchronize_session=False)
        )

    @staticmethod
    def expected_judge_nusd(judge_spend_nusd: int, duels_done: int) -> int:
        """The next duel's expected judge cost: the mean judge spend so far, rounded up."""
        if judge_spend_nusd <= 0:
            return 0
        return -(-judge_spend_nusd // max(1, duels_done))

    def plan_duel_tx(self, campaign_id: int, principal: Principal | None, run: bool = False) -> DuelPlan:
        """Step 1 of a duel (locked): choose the pair and insert the duel as calling."""
        t0 = time.perf_counter()
        err: DomainError | None = None
        with self.db.write() as s:
            c = self._lock_existing(s, campaign_id)
            if principal is not None and not principal.can_access(campaign_id):
                raise Forbidden("this token does not give access to this campaign")
            if c.status != RUNNING:
                raise Conflict(f"campaign {campaign_id} has ended (status {c.status})")
            automatic = c.judge.get("kind") != "human"
            if principal is not None and not principal.admin and automatic:
                raise Forbidden("annotators can only request duels of human-judged campaigns")
            if run:
                if not c.run_active:
                    raise Conflict("the run was stopped")
                if c.run_remaining is not None:
                    if c.run_remaining <= 0:  # the loop ends; run_active drops when all its duels are done
                        raise Conflict("the run reached its max_duels")
                    c.run_remaining -= 1
            if err is None:
                now = utcnow()
                inflight = s.execute(
                    select(Duel.id, Duel.model_i, Duel.model_j, Duel.expected_cost_nusd, Duel.expires_at).where(
                        Duel.campaign_id == campaign_id, Duel.status.in_(IN_FLIGHT)
                    )
                ).all()
                stale = [r.id for r in inflight if r.expires_at <= now]
                if stale:
                    s.execute(
                        update(Duel).where(Duel.id.in_(stale), Duel.status.in_(IN_FLIGHT)).values(status=EXPIRED)
                        .execution_options(synchronize_session=False)
                    )
                    inflight = [r for r in inflight if r.expires_at > now]
                if c.max_duels is not None and c.duels_judged + len(inflight) >= c.max_duels:
                    if not inflight:
                        self._finish(s, c, STOPPED, f"max_duels ({c.max_duels}) reached", now)
                        err = Conflict(f"campaign {campaign_id} has ended: max_duels ({c.max_duels}) reached",
                                       ended=True)
                    else:
                        err = Conflict(
                            f"max_duels ({c.max_duels}) is reached counting the {len(inflight)} duels in flight",
                            retry_later=True,
                        )
            if err is None:
                policy = self._policies.take(c)
                pending = [[int(r.model_i), int(r.model_j)] for r in inflight]
                i, j = (int(x) for x in policy.next_pair(pending=pending))
                if i > j:
                    i, j = j, i
                costs = [float(m["cost"]) for m in c.models]
                expected = to_nusd(costs[i] + costs[j]) + self.expected_judge_nusd(c.judge_spend_nusd,
                                                                                   c.duels_judged + c.duels_failed)
                if c.budget_nusd is not None:
                    reserved = sum(int(r.expected_cost_nusd) for r in inflight)
                    if c.spend_nusd + reserved + expected > c.budget_nusd:
                        if not inflight:
                            self._finish(s, c, BUDGET_EXHAUSTED,
                                         f"the next duel's expected cost ({expected / 1e9:.6g} USD) exceeds the "
                                         f"remaining budget ({(c.budget_nusd - c.spend_nusd) / 1e9:.6g} USD)", now)
                            err = Conflict(f"campaign {campaign_id} has ended: budget exhausted", ended=True)
                        else:
                            err = Conflict(
                                f"the remaining budget is reserved by {len(inflight)} duels in flight",
                                retry_later=True,
                            )
            if err is None:
                number = c.duels_created + 1
                prompt_index, a_is_i = draw_prompt_and_side(c.seed, number, c.n_prompts)
                c.event_seq += 1
                duel = Duel(
                    campaign_id=campaign_id,
                    number=number,
                    model_i=i,
                    model_j=j,
                    a_is_i=a_is_i,
                    prompt_index=prompt_index,
                    prompt=self._prompt(s, campaign_id, prompt_index),
                    status=CALLING,
                    counted=False,
                    cost_nusd=0,
                    expected_cost_nusd=expected,
                    select_seq=c.event_seq,
                    pending_at_select=pending,
                    requested_by=principal.label if principal is not None else "run",
                    created_at=now,
                    expires_at=now + self._call_expiry,
                )
                state = jsonable(policy.to_state())
                if state != c.policy_state:  # next_pair changed the state (not the case for today's policies)
                    c.policy_state = state
                c.duels_created = number
                s.info["after_commit"] = lambda p=policy, seq=c.event_seq: self._policies.put(campaign_id, seq, p)
                c.version += 1
                c.updated_at = now
                plan = DuelPlan(
                    campaign_id=campaign_id,
                    duel_id=0,
                    number=number,
                    i=i,
                    j=j,
                    a_is_i=a_is_i,
                    prompt=duel.prompt,
                    models=[dict(m) for m in c.models],
                    judge=dict(c.judge),
                    tie_policy=c.tie_policy,
                    seed=int(c.seed),
                )
                charges, columns = self._answer_now(plan, now)
                for key, value in columns.items():
                    setattr(duel, key, value)
                if plan.results is not None:
                    c.spend_nusd += duel.cost_nusd
                    c.duels_failed += duel.status == FAILED
                s.add(duel)
                s.flush()
                plan.duel_id = int(duel.id)
                if charges:
                    s.execute(insert(Charge), [dict(ch, duel_id=duel.id) for ch in charges])
                if plan.results is not None:
                    plan.outcome = DuelOutcome(duel.id, duel.status, failed=duel.error is not None,
                                               error=duel.error, view=self.duel_view(duel, c))
        if err is not None:
            raise err
        plan.select_ms = (time.perf_counter() - t0) * 1000.0
        return plan

    @staticmethod
    def _settle_answers(plan: DuelPlan, results: dict[int, Any], now: dt.datetime):
        """What both calls' results mean for the duel.

        Returns (charges, total, fields, error): the charge rows (without
        ``duel_id``) for what the answers really cost, their sum in nano-USD, the
        duel's answer columns, and the failure message (None when both answered).
        """
        from service.clients import Completion

        errors: list[str] = []
        charges: list[dict] = []
        info: dict[int, dict] = {}
        for idx in (plan.i, plan.j):
            res = results[idx]
            name = plan.models[idx]["name"]
            if isinstance(res, Completion):
                amount = _cost_nusd(res.cost)
                info[idx] = {
                    "model": name,
                    "input_tokens": res.input_tokens,
                    "output_tokens": res.output_tokens,
                    "cost": from_nusd(amount),
                    "latency_s": finite_or_none(res.latency_s),
                    "attempts": res.attempts,
                }
                if amount:
                    charges.append({"campaign_id": plan.campaign_id, "kind": "model", "model_index": idx,
                                    "amount_nusd": amount, "created_at": now,
                                    "detail": {"input_tokens": res.input_tokens,
                                               "output_tokens": res.output_tokens}})
            else:
                message = _error_text(res)
                info[idx] = {"model": name, "error": message}
                errors.append(f"model {name!r}: {message}")
        total = sum(ch["amount_nusd"] for ch in charges)
        fields: dict[str, Any] = {"completion_a": info.get(plan.model_a), "completion_b": info.get(plan.model_b)}
        error = None
        if errors:
            error = clean_text("; ".join(errors), MAX_ERROR_CHARS)
        else:
            fields.update(answer_a=clean_text(results[plan.model_a].text),
                          answer_b=clean_text(results[plan.model_b].text), answered_at=now)
        return charges, total, fields, error

    def _answer_now(self, plan: DuelPlan, now: dt.datetime) -> tuple[list[dict], dict[str, Any]]:
        """Both answers inside the plan transaction, when both models are instant.

        Sets ``plan.results`` and returns (charges, the duel's columns) as
        :meth:`store_answers_tx` would record them; ([], {}) when the models must
        be called outside the transaction.
        """
        plan.results = self._instant_results(plan)
        if plan.results is None:
            return [], {}
        charges, total, columns, error = self._settle_answers(plan, plan.results, now)
        columns["cost_nusd"] = total
        if error is not None:
            columns.update(status=FAILED, error=error)
        else:
            columns.update(status=PENDING, expires_at=now + self._expiry)
        return charges, columns

    def store_answers_tx(self, plan: DuelPlan, results: dict[int, Any]) -> DuelOutcome:
        """Step 3 (locked): charges for what the calls really cost, answers or failure."""
        now = utcnow()
        with self.db.write() as s:
            c = self.db.lock_campaign(s, plan.campaign_id)
            d = s.get(Duel, plan.duel_id)
            if c is None or d is None:  # deleted meanwhile
                return DuelOutcome(plan.duel_id, "missing", failed=True, error="campaign or duel deleted")
            s.expunge(d)  # changed below by one explicit UPDATE
            charges, total, fields, error = self._settle_answers(plan, results, now)
            if charges:
                s.execute(insert(Charge), [dict(ch, duel_id=d.id) for ch in charges])
            d.cost_nusd += total
            c.spend_nusd += total
            for key, value in fields.items():
                setattr(d, key, value)
            if error is not None:
                d.error = error
                if d.status in IN_FLIGHT:
                    d.status = FAILED
                    c.duels_failed += 1
            elif d.status == CALLING:
                d.status = PENDING
                d.expires_at = now + self._expiry
            s.execute(
                update(Duel).where(Duel.id == d.id).values(
                    status=d.status, error=d.error, cost_nusd=d.cost_nusd, completion_a=d.completion_a,
                    completion_b=d.completion_b, answer_a=d.answer_a, answer_b=d.answer_b,
                    answered_at=d.answered_at, expires_at=d.expires_at,
                ).execution_options(synchronize_session=False)
            )
            # A spent budget ends the campaign when this duel's verdict is recorded
            # (or at the next plan), so the answers just paid for can still count.
            c.version += 1
            c.updated_at = now
            return DuelOutcome(d.id, d.status, failed=error is not None, error=d.error, view=self.duel_view(d, c))

    def record_verdict_tx(
        self,
        duel_id: int,
        choice: str | None,
        *,
        judged_by: str,
        principal: Principal | None = None,
        judge_cost: float = 0.0,
        judge_detail: dict | None = None,
        judge_error: str | None = None,
    ) -> DuelOutcome:
        """Step 4 (locked): a vote or an automatic verdict, counted exactly once.

        The duel moves pending -> judged by a conditional UPDATE (``WHERE status =
        'pending'``) in the same transaction as the policy update; a duplicate
        finds no pending row and gets 409.
        """
        err: DomainError | None = None
        outcome: DuelOutcome | None = None
        with self.db.write() as s:
            # Lock the duel's campaign in one statement.
            c = s.execute(
                select(Campaign)
                .where(Campaign.id == select(Duel.campaign_id).where(Duel.id == duel_id).scalar_subquery())
                .with_for_update()
            ).scalar_one_or_none()
            if c is None:
                raise NotFound(f"duel {duel_id} not found")
            if principal is not None and not principal.can_access(c.id):
                raise Forbidden("this token does not give access to this duel's campaign")
            d = s.get(Duel, duel_id)
            s.expunge(d)  # changed below by one conditional UPDATE
            now = utcnow()
            judge_nusd = _cost_nusd(judge_cost)
            if judge_nusd:
                # A judge call is charged whatever happens to its verdict.
                s.execute(insert(Charge), [{"campaign_id": c.id, "duel_id": d.id, "kind": "judge",
                                            "model_index": None, "amount_nusd": judge_nusd, "created_at": now}])
                d.cost_nusd += judge_nusd
                c.spend_nusd += judge_nusd
                c.judge_spend_nusd += judge_nusd
            if d.status != PENDING:
                err = Conflict(_not_pending_message(d))
            elif d.expires_at <= now:
                d.status = EXPIRED
                err = Conflict(f"duel {duel_id} expired at {d.expires_at.isoformat()} and no longer counts")
            elif c.status != RUNNING:
                err = Conflict(f"campaign {c.id} has ended (status {c.status})")
            if err is not None:
                if d.status == EXPIRED or judge_nusd:
                    s.execute(update(Duel).where(Duel.id == d.id).values(status=d.status, cost_nusd=d.cost_nusd)
                              .execution_options(synchronize_session=False))
                    c.version += 1
                    c.updated_at = now
            else:
                d.judged_at = now
                d.judged_by = judged_by
                d.judge_detail = jsonable(judge_detail) if judge_detail else None
                score = None
                if choice is None:
                    d.status = FAILED
                    d.error = clean_text(f"judge error: {judge_error or 'no verdict'}", MAX_ERROR_CHARS)
                else:
                    d.status = JUDGED
                    d.choice = choice
                    score = self._score(c, d, choice)
                    if score is not None:
                        d.score = score
                        d.counted = True
                        d.record_seq = c.event_seq + 1
                claimed = s.execute(
                    update(Duel).where(Duel.id == duel_id, Duel.status == PENDING).values(
                        status=d.status, choice=d.choice, score=d.score, counted=d.counted, judged_by=d.judged_by,
                        judge_detail=d.judge_detail, judged_at=now, record_seq=d.record_seq, error=d.error,
                        cost_nusd=d.cost_nusd,
                    ).execution_options(synchronize_session=False)
                ).rowcount
                if claimed != 1:  # cannot happen under the campaign lock; never count twice anyway
                    raise Conflict(f"duel {duel_id} already has a verdict")
                ended = False
                if choice is None:
                    c.duels_failed += 1
                else:
                    c.duels_judged += 1
                    if score is not None:
                        policy = self._policies.take(c)
                        policy.record(d.model_i, d.model_j, score)
                        c.event_seq += 1
                        c.duels_counted += 1
                        c.policy_state, c.counts, c.stats, c.leader = policy_snapshot(policy)
                        s.info["after_commit"] = lambda p=policy, seq=c.event_seq, cid=c.id: self._policies.put(cid, seq, p)
                        if policy.should_stop():
                            c.winner = int(policy.recommendation())
                            c.leader = c.winner
                            self._finish(s, c, CERTIFIED, f"certified by the {c.algorithm} stopping rule "
                                         f"at delta={c.delta:g}", now, keep_duel=d.id)
                            ended = True
                    if not ended and c.max_duels is not None and c.duels_judged >= c.max_duels:
                        self._finish(s, c, STOPPED, f"max_duels ({c.max_duels}) reached", now, keep_duel=d.id)
                        ended = True
                if not ended and c.budget_nusd is not None and c.spend_nusd >= c.budget_nusd:
                    self._finish(s, c, BUDGET_EXHAUSTED, "spend reached the budget", now, keep_duel=d.id)
                    ended = True
                c.version += 1
                c.updated_at = now
                outcome = DuelOutcome(d.id, d.status, ended=ended, failed=choice is None, error=d.error,
                                      view=self.duel_view(d, c))
        if err is not None:
            raise err
        return outcome

    @staticmethod
    def _score(c: Campaign, d: Duel, choice: str) -> float | None:
        """The score of model_i under the campaign's tie policy (None: not counted)."""
        if choice in ("a", "b"):
            winner = d.model_a if choice == "a" else d.model_b
            return 1.0 if winner == d.model_i else 0.0
        if c.tie_policy == "half":
            return 0.5
        if c.tie_policy == "random":
            return 1.0 if random.Random(f"{c.seed}:{d.number}:tie").random() < 0.5 else 0.0
        return None

    def stop_tx(self, campaign_id: int, reason: str = "stopped by the admin") -> bool:
        with self.db.write() as s:
            c = self._lock_existing(s, campaign_id)
            if c.status != RUNNING:
                raise Conflict(f"campaign {campaign_id} has already ended (status {c.status})")
            now = utcnow()
            self._finish(s, c, STOPPED, reason, now)
            c.version += 1
            c.updated_at = now
            return True

    def start_run_tx(self, campaign_id: int, max_duels: int | None, concurrency: int) -> dict:
        with self.db.write() as s:
            c = self._lock_existing(s, campaign_id)
            if c.status != RUNNING:
                raise Conflict(f"campaign {campaign_id} has ended (status {c.status})")
            if c.judge.get("kind") == "human":
                raise Conflict("a run needs an automatic judge; this campaign's judge is human")
            c.run_active = True
            c.run_remaining = max_duels
            c.run_concurrency = concurrency
            c.run_error = None
            c.updated_at = utcnow()
            return {"active": True, "remaining": max_duels, "concurrency": concurrency, "error": None}

    def end_run_tx(self, campaign_id: int, error: str | None = None) -> None:
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is None:
                return
            c.run_active = False
            if error:
                c.run_error = clean_text(error, MAX_ERROR_CHARS)
            c.updated_at = utcnow()

    def active_run_ids(self) -> list[int]:
        with self.db.read() as s:
            return [int(x) for x in s.execute(
                select(Campaign.id).where(Campaign.run_active.is_(True), Campaign.status == RUNNING)
            ).scalars()]

    # ------------------------------------------------------------ replay
    def replay(self, campaign_id: int) -> ReplayResult:
        """Rebuild the policy from the duel log, in the order the policy saw it.

        Selections are replayed too (``next_pair`` with the pending pairs of the
        time must give the logged pair). Also checks the counters and the ledger.
        """
        with self.db.read() as s:
            if not self.db.is_sqlite:  # the row, the log and the ledger from one snapshot (a live campaign
                s.connection(execution_options={"isolation_level": "REPEATABLE READ"})  # changes meanwhile)
            c = s.get(Campaign, campaign_id)
            if c is None:
                raise NotFound(f"campaign {campaign_id} not found")
            rows = s.execute(
                select(Duel.id, Duel.model_i, Duel.model_j, Duel.select_seq, Duel.record_seq, Duel.score,
                       Duel.pending_at_select, Duel.status, Duel.cost_nusd, Duel.choice)
                .where(Duel.campaign_id == campaign_id)
            ).all()
            charge_sums = dict(
                s.execute(
                    select(Charge.duel_id, func.sum(Charge.amount_nusd))
                    .where(Charge.campaign_id == campaign_id).group_by(Charge.duel_id)
                ).all()
            )
            stored_state = c.policy_state
            algorithm, delta = c.algorithm, c.delta
            costs = [float(m["cost"]) for m in c.models]
            counters = dict(spend=c.spend_nusd, judged=c.duels_judged, counted=c.duels_counted,
                            created=c.duels_created, failed=c.duels_failed, event_seq=c.event_seq)
        events = [(r.select_seq, 0, r) for r in rows]
        events += [(r.record_seq, 1, r) for r in rows if r.record_seq is not None]
        events.sort(key=lambda e: (e[0], e[1]))
        diff: list[str] = []
        policy = new_policy(algorithm, costs, delta)
        for seq, kind, r in events:
            if kind == 0:
                pair = tuple(int(x) for x in policy.next_pair(pending=r.pending_at_select or []))
                if sorted(pair) != [r.model_i, r.model_j]:
                    diff.append(f"duel {r.id}: replayed selection {pair} != logged pair ({r.model_i}, {r.model_j})")
            else:
                policy.record(r.model_i, r.model_j, r.score)
        replayed = jsonable(policy.to_state())
        diff.extend(json_diff(jsonable(stored_state), replayed, "policy_state"))
        seqs = [e[0] for e in events]
        if len(set(seqs)) != len(seqs) or (seqs and max(seqs) != counters["event_seq"]):
            diff.append(f"event sequence numbers are not unique or do not end at {counters['event_seq']}")
        checks = {
            "judged": (sum(1 for r in rows if r.choice is not None and r.status == JUDGED), counters["judged"]),
            "counted": (sum(1 for r in rows if r.record_seq is not None), counters["counted"]),
            "created": (len(rows), counters["created"]),
            "failed": (sum(1 for r in rows if r.status == FAILED), counters["failed"]),
            "spend_nusd": (int(sum(charge_sums.values())), counters["spend"]),
        }
        for name, (from_log, stored) in checks.items():
            if from_log != stored:
                diff.append(f"{name}: log gives {from_log}, campaign row says {stored}")
        for r in rows:
            if int(charge_sums.get(r.id, 0)) != int(r.cost_nusd):
                diff.append(f"duel {r.id}: cost {r.cost_nusd} nUSD != its charges {charge_sums.get(r.id, 0)} nUSD")
        return ReplayResult(campaign_id, not diff, len(events), diff)

    # ------------------------------------------------------------ async orchestration
    def _http_client(self):
        if self._http is None:
            import httpx

            self._http = httpx.AsyncClient(timeout=httpx.Timeout(120.0, connect=10.0))
        return self._http

    def _instant_results(self, plan: DuelPlan) -> dict[int, Any] | None:
        """Both answers at once when both clients are instant (simulated, no latency), else None."""
        for idx in (plan.i, plan.j):
            cfg = plan.models[idx].get("client") or {}
            if cfg.get("kind") != "simulated" or float(cfg.get("latency_s", 0.0) or 0.0) > 0:
                return None
        results: dict[int, Any] = {}
        for idx in (plan.i, plan.j):  # the order of the asynchronous path (failure draws)
            client = self._client(plan, idx)
            if not getattr(client, "instant", False):
                return None
            try:
                results[idx] = client.complete_now(plan.prompt)
            except Exception as exc:  # a simulated failure: the duel fails cleanly
                results[idx] = exc
        return results

    def _client(self, plan: DuelPlan, idx: int):
        key = (plan.campaign_id, idx)
        client = self._clients.get(key)
        if client is None:
            if len(self._clients) >= 4096:  # clients share one HTTP pool: dropping them is cheap
                self._clients.clear()
            from service.clients import build_client

            m = plan.models[idx]
            client = build_client(m["client"], model_name=m["name"], fixed_cost=float(m["cost"]),
                                  http=self._http_client())
            self._clients[key] = client
        return client

    def _judge(self, plan: DuelPlan):
        judge = self._judges.get(plan.campaign_id)
        if judge is None:
            if len(self._judges) >= 1024:
                self._judges.clear()
            from service.judging import build_judge

            judge = build_judge(plan.judge, model_names=[m["name"] for m in plan.models],
                                tie_policy=plan.tie_policy, http=self._http_client())
            self._judges[plan.campaign_id] = judge
        return judge

    async def _call_model(self, plan: DuelPlan, idx: int):
        try:
            return await self._client(plan, idx).complete(plan.prompt)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # ClientError, or a bug in a client: the duel fails cleanly
            return exc

    async def execute(self, plan: DuelPlan) -> DuelOutcome:
        """Steps 2-4 of a duel: call both models, store, judge automatically."""
        if plan.outcome is not None:  # answered inside the plan transaction
            res_i, res_j, outcome = plan.results[plan.i], plan.results[plan.j], plan.outcome
        else:
            res_i, res_j = await asyncio.gather(self._call_model(plan, plan.i), self._call_model(plan, plan.j))
            outcome = await self._thread(self.store_answers_tx, plan, {plan.i: res_i, plan.j: res_j})
        if outcome.ended:
            self._schedule_webhook(plan.campaign_id)
        if outcome.status != PENDING or plan.judge.get("kind") == "human":
            return outcome
        judge = self._judge(plan)
        rng = random.Random(f"{plan.seed}:{plan.number}:judge")
        try:
            verdict = await judge.judge(plan.prompt, res_i.text if plan.a_is_i else res_j.text,
                                        res_j.text if plan.a_is_i else res_i.text,
                                        model_a=plan.model_a, model_b=plan.model_b, rng=rng)
            choice, cost, detail, error = verdict.choice, verdict.cost, verdict.detail, verdict.error
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            choice, cost, detail, error = None, 0.0, None, f"judge raised {type(exc).__name__}"
            log.warning("campaign %s duel %s: judge raised %s", plan.campaign_id, plan.duel_id, type(exc).__name__)
        try:
            outcome = await self._thread(
                self.record_verdict_tx, plan.duel_id, choice, judged_by=f"judge:{plan.judge.get('kind')}",
                judge_cost=cost, judge_detail=detail, judge_error=error,
            )
        except Conflict as exc:  # the campaign ended or the duel expired meanwhile
            return DuelOutcome(plan.duel_id, "conflict", error=exc.detail)
        if outcome.ended:
            self._schedule_webhook(plan.campaign_id)
        return outcome

    def plan_duel(self, campaign_id: int, principal: Principal | None, run: bool = False) -> DuelPlan:
        """Plan a duel: the Core fast path when it applies, else the general transaction."""
        if fastpath.ENABLED and principal is not None and not run:
            try:
                return fastpath.plan_duel(self, campaign_id, principal)
            except fastpath.Fallback:
                pass
        return self.plan_duel_tx(campaign_id, principal, run)

    def _record_vote_tx(self, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
        return self.record_verdict_tx(duel_id, choice, judged_by=principal.label, principal=principal)

    def record_vote(self, duel_id: int, choice: str, principal: Principal) -> DuelOutcome:
        """Record a human vote: the Core fast path when it applies, else the general transaction."""
        if fastpath.ENABLED:
            try:
                return fastpath.record_vote(self, duel_id, choice, principal)
            except fastpath.Fallback:
                pass
        return self._record_vote_tx(duel_id, choice, principal)

    async def _hot(self, fast_async: Callable, sync_path: Callable, general_tx: Callable, *args: Any) -> Any:
        """A hot-path transaction. PostgreSQL: ``fast_async`` on the event loop, and
        on :class:`fastpath.Fallback` the general ORM transaction ``general_tx`` in a
        worker thread. SQLite (or LLMDUEL_INLINE_TRANSACTIONS=0): ``sync_path`` (the
        synchronous fast path, else the general transaction) in a worker thread."""
        if fastpath.ENABLED and self._on_loop:
            try:
                out = await fast_async(self, *args)
                self.hot_counts["loop"] += 1
                return out
            except fastpath.Fallback:
                self.hot_counts["thread"] += 1
                return await self._thread(general_tx, *args)
        self.hot_counts["thread"] += 1
        return await self._thread(sync_path, *args)

    async def _plan(self, campaign_id: int, principal: Principal | None, run: bool = False) -> DuelPlan:
        try:
            if principal is not None and not run:
                return await self._hot(fastpath.plan_duel_async, self.plan_duel, self.plan_duel_tx, campaign_id,
                                       principal)
            self.hot_counts["thread"] += 1
            return await self._thread(self.plan_duel, campaign_id, principal, run)
        except DomainError as exc:
            if exc.ended:
                self._schedule_webhook(campaign_id)
            raise

    async def next_duel(self, campaign_id: int, principal: Principal) -> tuple[dict, float]:
        plan = await self._plan(campaign_id, principal)
        outcome = await self.execute(plan)
        if outcome.view is None:
            return await self._thread(self.get_duel, plan.duel_id, principal), plan.select_ms
        return duel_view_for(outcome.view, principal.admin), plan.select_ms

    async def vote(self, duel_id: int, choice: str, principal: Principal) -> dict:
        outcome = await self._hot(fastpath.record_vote_async, self.record_vote, self._record_vote_tx, duel_id, choice,
                                  principal)
        if outcome.ended:
            self._schedule_webhook(outcome.view["campaign_id"])
        return duel_view_for(outcome.view, principal.admin)

    async def stop(self, campaign_id: int) -> dict:
        await self._thread(self.stop_tx, campaign_id)
        self._schedule_webhook(campaign_id)
        return await self._thread(self.get_campaign, campaign_id)

    # ------------------------------------------------------------ background runs
    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def start_run(self, campaign_id: int, max_duels: int | None, concurrency: int) -> dict:
        if campaign_id in self._runs and not self._runs[campaign_id].done():
            raise Conflict(f"a run is already active for campaign {campaign_id}")
        run = await self._thread(self.start_run_tx, campaign_id, max_duels, concurrency)
        self._runs[campaign_id] = self._spawn(self._run_loop(campaign_id, concurrency))
        return run

    def run_active_here(self, campaign_id: int) -> bool:
        task = self._runs.get(campaign_id)
        return task is not None and not task.done()

    async def _run_loop(self, campaign_id: int, concurrency: int) -> None:
        try:
            results = await asyncio.gather(*(self._run_worker(campaign_id) for _ in range(concurrency)))
            error = next((r for r in results if r), None)
            # Every duel this run started is finished now.
            await self._thread(self.end_run_tx, campaign_id, error)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # pragma: no cover - defensive
            log.exception("campaign %s: run crashed", campaign_id)
            try:
                await self._thread(self.end_run_tx, campaign_id, f"run crashed: {type(exc).__name__}")
            except Exception:
                pass
        finally:
            if self._runs.get(campaign_id) is asyncio.current_task():
                self._runs.pop(campaign_id, None)

    async def _run_worker(self, campaign_id: int) -> str | None:
        """Drive duels until the campaign or the run ends; returns an error or None."""
        failures = 0
        db_backoff = 0.5
        while True:
            try:
                plan = await self._plan(campaign_id, None, True)
            except Conflict as exc:
                if exc.retry_later:
                    await asyncio.sleep(0.05)
                    continue
                return None
            except NotFound:
                return None
            except Exception as exc:
                from sqlalchemy.exc import DBAPIError

                if isinstance(exc, DBAPIError):  # database away: wait and retry
                    log.warning("campaign %s: database error in run, retrying in %.1fs", campaign_id, db_backoff)
                    await asyncio.sleep(db_backoff)
                    db_backoff = min(db_backoff * 2, 10.0)
                    continue
                raise
            db_backoff = 0.5
            try:
                outcome = await self.execute(plan)
            except Exception as exc:
                from sqlalchemy.exc import DBAPIError

                if isinstance(exc, DBAPIError):
                    await asyncio.sleep(db_backoff)
                    continue
                raise
            if outcome.failed:
                failures += 1
                if failures >= self.settings.run_max_failures:
                    return f"run paused after {failures} consecutive failed duels; last error: {outcome.error}"
            else:
                failures = 0

    async def resume_runs(self) -> list[int]:
        ids = await self._thread(self.active_run_ids)
        for cid in ids:
            if not self.run_active_here(cid):
                with self.db.read() as s:
                    concurrency = s.get(Campaign, cid).run_concurrency or 1
                self._runs[cid] = self._spawn(self._run_loop(cid, concurrency))
                log.info("campaign %s: resumed its background run", cid)
        return ids

    # ------------------------------------------------------------ webhook
    def _schedule_webhook(self, campaign_id: int) -> None:
        try:
            self._spawn(self._deliver_webhook(campaign_id))
        except RuntimeError:  # no running loop (sync caller)
            pass

    def _claim_webhook_tx(self, campaign_id: int) -> tuple[str, dict] | None:
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is None or not c.webhook_url or c.webhook_state != "pending":
                return None
            c.webhook_state = "sending"
            report = self.campaign_view(c, 0)
            return c.webhook_url, jsonable_report(report)

    def _webhook_done_tx(self, campaign_id: int, ok: bool, error: str | None) -> None:
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is not None:
                c.webhook_state = "sent" if ok else "failed"
                c.webhook_error = None if ok else clean_text(error or "", MAX_ERROR_CHARS)

    async def _deliver_webhook(self, campaign_id: int) -> None:
        claim = await self._thread(self._claim_webhook_tx, campaign_id)
        if claim is None:
            return
        url, report = claim
        error = None
        for attempt in range(3):
            try:
                resp = await self._http_client().post(
                    url, json={"event": "campaign.ended", "campaign": report},
                    timeout=self.settings.webhook_timeout_seconds,
                    headers={"User-Agent": "llmduel-webhook/1"},
                )
                if resp.status_code < 400:
                    await self._thread(self._webhook_done_tx, campaign_id, True, None)
                    return
                error = f"HTTP {resp.status_code}"
            except Exception as exc:
                error = type(exc).__name__
            await asyncio.sleep(0.5 * 2**attempt)
        log.warning("campaign %s: webhook delivery failed (%s)", campaign_id, error)
        await self._thread(self._webhook_done_tx, campaign_id, False, error)

    # ------------------------------------------------------------ shutdown
    async def aclose(self) -> None:
        for task in list(self._runs.values()):
            task.cancel()
        for task in list(self._runs.values()):
            try:
                await task
            except BaseException:
                pass
        self._runs.clear()
        for obj in list(self._clients.values()) + list(self._judges.values()):
            try:
                await obj.aclose()
            except Exception:
                pass
        self._clients.clear()
        self._judges.clear()
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def jsonable_report(view: dict) -> dict:
    out = {}
    for k, v in view.items():
        out[k] = v.isoformat() if isinstance(v, dt.datetime) else v
    return jsonable(out)


def _error_text(exc: BaseException) -> str:
    try:
        from service.clients import ClientError

        if isinstance(exc, ClientError):
            return str(exc)
    except ImportError:  # pragma: no cover
        pass
    # Unexpected exceptions: the type only (their text might carry request details).
    return f"unexpected {type(exc).__name__} in the model client"


def _not_pending_message(d: Duel) -> str:
    if d.status == JUDGED:
        return f"duel {d.id} already has a verdict"
    if d.status == CALLING:
        return f"duel {d.id} is still waiting for the models' answers"
    if d.status == EXPIRED:
        return f"duel {d.id} expired and no longer counts"
    if d.status == FAILED:
        return f"duel {d.id} failed and cannot be judged"
    if d.status == CANCELLED:
        return f"duel {d.id} was cancelled: the campaign ended before it was judged"
    return f"duel {d.id} cannot be judged (status {d.status})"
