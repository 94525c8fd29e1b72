"""Pre-generation for annotators: answers for the next duels, made before anyone waits for them.

With a human judge and answer reuse, after each annotator's next-duel request the service
generates, in a small background task per campaign, the stored answers that the
next ``PREGEN_DUELS`` planned duels will need: the prompts those duels will draw
(the campaign's own prompt draw, :func:`service.campaigns.draws.draw_prompt_and_side`)
answered by every model that uses the answer store and has no stored answer yet.
When the duel comes, its answers are in the store and the annotator does not
wait for the models.

Pre-generated answers are charged to the campaign like any answer (a ``charges``
row with no duel, ``detail.pregenerated``) and count toward its spend. Each call
first holds its cost bound against the budget (:mod:`service.money.holds`: a
``budget_holds`` row made under the campaign's row lock, only when the bound fits
``budget - spend - reservations of duels in flight - other holds``); the hold is
deleted in the transaction that stores and charges the answer, or when the call
fails, and lapses at the call expiry if the process dies. When a bound does not
fit, nothing more is pre-generated in that round. It uses the single flight of the
store: a duel needing an answer being pre-generated waits for it instead of paying
again.

A human campaign created with ``batch`` buys these answers on the providers' batch APIs
(:meth:`Pregeneration.pregenerate_in_batches`): the answers of the next ``round_size`` planned
duels (at least ``PREGEN_DUELS``) go out as one batch per model endpoint (a *pre-generation
round*, counted in ``batch.rounds``; its batches are ``batch_jobs`` rows of phase ``pregen``, written
before they are sent), charged at the batch price (the list price when none is known). Each call
holds its bound for the batch window (twice ``window_seconds``, plus a minute) instead of the call
timeout. A request that failed is sent again in the round's next batch (at most 3 batches); a batch
that has not ended within its window is cancelled and what it finished is still stored and charged.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from typing import Any, Awaitable, Callable

from sqlalchemy import select

from algorithms.vocabulary import IN_FLIGHT, CampaignStatus

from ..clients import Completion
from ..config import Settings
from ..db import Database
from ..images.store import with_images
from ..models import Campaign, Charge, Duel, Prompt, StoredAnswer, utcnow
from ..money import charges, holds, ledger, reserve
from ..redaction import redact
from ..stored_text import clean_text
from . import store_claims, store_keys, store_settings
from .calls import Calls, call_expiry
from .credentials import secret_keys
from .draws import draw_prompt_and_side
from .endings import Endings
from .expiry import call_deadline, is_stale
from .lost_commits import PAUSE_MAX_S, TRIES, WAIT_S, once_committed
from .model_changes import disabled_models
from .tasks import Background, in_thread
from .types import DuelPlan

log = logging.getLogger("llmduel.campaigns")

PREGEN_DUELS = 4  # planned duels ahead whose answers are generated
PREGEN_CONCURRENCY = 2  # model calls at once per campaign
PREGEN_PAUSE_S = 30.0  # no pre-generation for a campaign this long after a failed call


def planned_prompts(seed: int, duels_created: int, n_prompts: int, k: int, *, draw_key: str | None = None) -> list[int]:
    """The prompt indices of the next ``k`` planned duels (the same draw as the plan transaction)."""
    out: list[int] = []
    for number in range(duels_created + 1, duels_created + 1 + k):
        idx = draw_prompt_and_side(seed, number, n_prompts, draw_key)[0]
        if idx not in out:
            out.append(idx)
    return out


class Pregeneration:
    """Background pre-generation of the answers the next duels need (human judges, answer reuse).

    Owns its tasks' bookkeeping: the campaigns being pre-generated (``busy``) and those paused
    after a failed call (``paused``). Calls the models through ``calls`` (the stores' single
    flight included), spawns its tasks on ``background``, and pauses a campaign on a provider
    fault through ``endings``; its transactions (budget holds, the charged answer) are its own."""

    def __init__(
        self,
        settings: Settings,
        db: Database,
        calls: Calls,
        background: Background,
        endings: Endings,
        batches: Callable[..., Any] | None = None,
    ):
        self.settings = settings
        # (campaign id, batch setting, round, still running?) -> a batch collector of phase "pregen"
        # (service/cycle/batch_collector.py), and the round's start; None: no batch API in this process
        self.batches = batches
        self.db = db
        self.calls = calls
        self.background = background
        self.endings = endings
        self.call_expiry = call_expiry(settings)  # the cycle's bound of one call's reservation
        # (campaign id) -> collects the pre-generation batches a process gone left open (before more are sent);
        # set by build_campaigns (service/cycle/pregen_recovery.py)
        self.recover: Callable[[int], Awaitable[Any]] | None = None
        self.busy: set[int] = set()  # campaigns with a pre-generation task under way
        self.paused: dict[int, float] = {}  # campaign id -> time.monotonic() until which it is not pre-generated

    def schedule(self, campaign_id: int) -> None:
        """After an annotator's next-duel: pre-generate in the background (one task per campaign;
        paused for ``PREGEN_PAUSE_S`` after a failed call, so a failing provider is not called more)."""
        busy, paused = self.busy, self.paused
        if campaign_id in busy or paused.get(campaign_id, 0.0) > time.monotonic():
            return
        busy.add(campaign_id)

        async def run() -> None:
            try:
                if await self.pregenerate(campaign_id) < 0:
                    if len(paused) >= 10_000:
                        paused.clear()
                    paused[campaign_id] = time.monotonic() + PREGEN_PAUSE_S
            except Exception as exc:  # never breaks a request; the duels call the models themselves
                log.warning("campaign %s: pre-generation failed (%s)", campaign_id, type(exc).__name__)
            finally:
                busy.discard(campaign_id)

        self.background.spawn(run())

    def targets_tx(self, campaign_id: int, k: int = PREGEN_DUELS) -> tuple[DuelPlan, list] | None:
        """What to pre-generate: a plan-like context and [(model index, prompt, key, model_key, prompt_hash)]."""
        with self.db.read() as s:
            c = s.get(Campaign, campaign_id)
            if (
                c is None
                or c.status != CampaignStatus.RUNNING
                or not store_settings.pregenerates(c.answers, c.models, c.judge)
            ):
                return None
            off = disabled_models(c.model_changes)  # a disabled model is not called any more
            users = [n for n, m in enumerate(c.models) if n not in off and store_settings.stores_answers(c.answers, m)]
            if not users:
                return None
            if c.batch is not None:  # answers bought in batches: a round's worth of duels ahead
                k = max(k, int(c.batch.get("round_size") or k))
            indices = planned_prompts(int(c.seed), c.duels_created, c.n_prompts, k, draw_key=c.draw_key)
            rows = s.execute(
                select(Prompt.idx, Prompt.text, Prompt.turns, Prompt.images).where(
                    Prompt.campaign_id == campaign_id, Prompt.idx.in_(indices)
                )
            ).all()
            texts = {r.idx: r.text for r in rows}
            # a multi-turn prompt (or one with images) is sent as its turns, as in a duel
            turns = {r.idx: with_images(s, r.turns, r.images) if r.images else r.turns for r in rows}
            wanted = []
            for idx in indices:
                phash = store_keys.prompt_hash(texts[idx])
                for n in users:
                    mkey = store_keys.model_key(c.models[n])
                    assert mkey is not None  # users store their answers: each has a key
                    wanted.append((n, texts[idx], store_keys.answer_key(mkey, phash), mkey, phash, turns[idx]))
            have = set(
                s.execute(select(StoredAnswer.key).where(StoredAnswer.key.in_([w[2] for w in wanted]))).scalars()
            )
            plan = context(c)
            plan.__dict__["batch"] = dict(c.batch) if c.batch is not None else None
        return plan, [w for w in wanted if w[2] not in have]

    def context_tx(self, campaign_id: int) -> DuelPlan | None:
        """The plan-like context of the campaign's pre-generated calls (no duel), or None when it is gone."""
        with self.db.read() as s:
            c = s.get(Campaign, campaign_id)
            return None if c is None else context(c)

    async def pregenerate(self, campaign_id: int) -> int:
        """Generate the missing answers of the next planned duels; returns how many were paid for,
        or -1 when a call failed, or when nothing was paid because no call's bound fit the budget
        (the remaining ones are not made, and pre-generation pauses for the campaign)."""
        if self.recover is not None:  # answers a process gone left in open batches: collected, never sent again
            await self.recover(campaign_id)
        found = await in_thread(self.targets_tx, campaign_id)
        if not found:
            return 0
        context, targets = found
        batch = context.__dict__.pop("batch", None)
        if not targets:
            return 0
        collector = None
        if batch is not None and self.batches is not None:
            collector = await self.batches(campaign_id, batch)
            if collector is None:  # the campaign no longer runs
                return 0
        # in batches: every call at once, so they are parked together and go out as one batch per model
        gate = asyncio.Semaphore(len(targets) if collector is not None else PREGEN_CONCURRENCY)
        expiry = self.call_expiry
        if collector is not None:  # the holds last as long as the batch may
            expiry = dt.timedelta(seconds=float(batch["window_seconds"]) * 2 + 60)
        failed: list[int] = []
        no_room: list[int] = []

        async def one(n: int, prompt: str, key: str, mkey: str, phash: str, turns: list[str] | None) -> int:
            async with gate:
                if failed or no_room:
                    return 0
                plan = DuelPlan(**{**context.__dict__, "prompt": prompt, "claims": {}})
                try:
                    stored = await self.calls.acquire(
                        plan, n, "answer", key, columns={"model_key": mkey, "prompt_hash": phash}
                    )
                    if stored is not None:
                        return 0
                    hold = await in_thread(self.hold_tx, campaign_id, n, prompt, key, expiry=expiry)
                    if hold is None:  # the call's bound does not fit the budget (or the campaign ended)
                        no_room.append(n)
                        return 0
                    plan.deadline = call_deadline(expiry)  # the hold lapses then
                    try:
                        if collector is not None:
                            meta = {"model": n, "key": key, "model_key": mkey, "prompt_hash": phash, "prompt": prompt}
                            res = await batched_call(collector, self.calls.client(plan, n), prompt, turns, meta=meta)
                            if isinstance(res, Completion):  # an image answer: its bytes to the image store
                                res = await self.calls.keep_images(res)
                        else:
                            res = await self.calls.call_model(plan, n, turns)
                        if isinstance(res, Completion):
                            await self.store_paid_answer(campaign_id, n, plan.claims[n], res, hold=hold, prompt=prompt)
                            hold = None  # released with the charge
                            return 1
                        failed.append(n)
                        return 0
                    finally:
                        if hold is not None:
                            await asyncio.shield(in_thread(self.release_hold_tx, hold))
                finally:
                    await self.calls.settle_claims(plan, [n])

        if collector is not None:
            paid = sum(await collector.run([one(*t) for t in targets], keep_failure=True, one_call_each=True))
            if collector.failure is not None:
                log.warning("campaign %s: a pre-generation batch failed: %s", campaign_id, collector.failure)
                failed.append(-1)
        else:
            paid = sum(await asyncio.gather(*(one(*t) for t in targets)))
        return -1 if failed or (no_room and not paid) else paid

    async def store_paid_answer(self, campaign_id: int, n: int, claim: Any, res: Completion, *, hold: int, prompt: str):
        """:meth:`store_pregenerated_tx` in a worker thread; after a lost connection, run again only when it did
        not commit (its hold is still there: :func:`.lost_commits.once_committed`)."""

        def attempt() -> Awaitable[None]:
            return in_thread(self.store_pregenerated_tx, campaign_id, n, claim, res, hold_id=hold, prompt=prompt)

        async def written() -> bool | None:
            return True if await in_thread(self.hold_gone_tx, hold) else None

        await once_committed(attempt, written, what=f"campaign {campaign_id}'s pre-generated answer")

    async def store_recovered_answer(
        self, campaign_id: int, n: int, claim: Any, res: Completion, *, prompt: str, hold_key: str | None
    ) -> None:
        """:meth:`store_pregenerated_tx` of an answer collected from a batch a process gone left (its holds
        released by ``hold_key``, service/cycle/pregen_recovery.py), in a worker thread; after a lost
        connection, run again only when it did not commit (:func:`.lost_commits.once_committed`): the holds
        of its key are gone, as for :meth:`store_paid_answer`, when one of them outlives every retry; else
        (lapsed, or lapsing meanwhile: any pre-generation's ``take_hold`` deletes the campaign's expired holds,
        which would read as committed; no key) when its answer is stored."""
        safe = utcnow() + dt.timedelta(seconds=TRIES * (WAIT_S + PAUSE_MAX_S))  # past the retries' checks
        held = hold_key is not None and await in_thread(self.key_held_tx, campaign_id, hold_key, safe)

        def attempt() -> Awaitable[None]:
            return in_thread(self.store_pregenerated_tx, campaign_id, n, claim, res, prompt=prompt, hold_key=hold_key)

        async def written() -> bool | None:
            if held and hold_key is not None:
                return None if await in_thread(self.key_held_tx, campaign_id, hold_key, utcnow()) else True
            if await in_thread(self.answer_stored_tx, claim.row_id):
                return True
            # a provider fault charges the call and pauses the campaign but keeps no answer: its charge says so
            return True if await in_thread(self.row_charged_tx, campaign_id, claim.row_id) else None

        await once_committed(attempt, written, what=f"campaign {campaign_id}'s recovered pre-generated answer")

    def key_held_tx(self, campaign_id: int, key: str, until: dt.datetime) -> bool:
        """Whether a budget hold of the answer's store ``key`` is still there, running past ``until``."""
        with self.db.read() as s:
            return holds.key_held(s, campaign_id, key, until)

    def row_charged_tx(self, campaign_id: int, row_id: int) -> bool:
        """Whether a charge of the campaign paid the answer store's row ``row_id`` without a duel (its detail's
        ``store_row``, written for the answers of a batch collected after a take-over)."""
        with self.db.read() as s:
            q = select(Charge.id).where(
                Charge.campaign_id == campaign_id,
                Charge.duel_id.is_(None),
                Charge.detail["store_row"].as_integer() == row_id,
            )
            return s.execute(q.limit(1)).first() is not None

    def answer_stored_tx(self, row_id: int) -> bool:
        """Whether the answer store's row ``row_id`` holds its answer (finalised)."""
        with self.db.read() as s:
            status = s.execute(select(StoredAnswer.status).where(StoredAnswer.id == row_id)).scalar_one_or_none()
            return status == store_claims.READY

    def hold_gone_tx(self, hold_id: int) -> bool:
        """Whether the budget hold ``hold_id`` is gone (released with its charge, or dropped)."""
        with self.db.read() as s:
            return not holds.hold_exists(s, hold_id)

    def hold_tx(
        self, campaign_id: int, n: int, prompt: str, key: str, *, expiry: dt.timedelta | None = None
    ) -> int | None:
        """Hold the bound of model ``n``'s call on ``prompt`` against the budget (locked); the hold's
        id, or None when the campaign no longer runs or the bound does not fit."""
        now = utcnow()
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is None or c.status != CampaignStatus.RUNNING:
                return None
            amount = reserve.answer_reserve_nusd(c.models[n], prompt)
            inflight = s.execute(
                select(Duel.expected_cost_nusd, Duel.expires_at).where(
                    Duel.campaign_id == campaign_id, Duel.status.in_(IN_FLIGHT)
                )
            ).all()
            live = [r for r in inflight if not is_stale(r.expires_at, now)]
            held = holds.held_nusd(s, campaign_id, now)  # the plan's check: a refusal of either kind means no room
            over = reserve.budget_decision(
                campaign_id,
                budget_nusd=c.budget_nusd,
                spent_nusd=c.spend_nusd,
                live=live,
                held_nusd=held,
                expected_nusd=amount,
            )
            if over is not None:
                return None
            return holds.take_hold(
                s,
                campaign_id,
                amount_nusd=amount,
                now=now,
                expires_at=now + (expiry or self.call_expiry),
                model_index=n,
                key=key,
            )

    def release_hold_tx(self, hold_id: int) -> None:
        """Release a pre-generation call's hold (the call failed, or its answer was not stored)."""
        with self.db.write() as s:
            holds.drop_hold(s, hold_id)

    def store_pregenerated_tx(
        self,
        campaign_id: int,
        n: int,
        claim: Any,
        res: Completion,
        *,
        hold_id: int | None = None,
        prompt: str = "",
        hold_key: str | None = None,
    ) -> None:
        """Charge a pre-generated answer to the campaign (no duel) and store it, in one transaction
        that also releases the call's budget hold (``hold_key``: without its id, the holds of the answer's
        store key, as when a batch of a process gone is collected). The charge is the ledger's (at most the
        call's bound, which the hold reserved); a provider fault pauses the campaign and the answer is not kept."""
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is None:
                return
            now = utcnow()  # under the lock: an answer that waited for it past its hold's end is not charged
            charge = ledger.model_charge(c.models[n], prompt, res)
            amount = charge.amount_nusd
            if hold_id is not None:
                if not holds.hold_live(s, hold_id, now):  # past its hard deadline (a stall): not charged
                    log.warning("campaign %s: a pre-generated answer arrived after its hold lapsed", campaign_id)
                    holds.drop_hold(s, hold_id)
                    return
                holds.drop_hold(s, hold_id)
            elif hold_key is not None:
                holds.drop_holds_of_key(s, campaign_id, hold_key)
            detail = {
                "pregenerated": True,
                **({"store_row": claim.row_id} if hold_id is None else {}),  # what a lost commit's check reads
                "input_tokens": res.input_tokens,
                "output_tokens": res.output_tokens,
                **charge.detail(),
            }
            if c.status != CampaignStatus.RUNNING:  # sent before the campaign ended, answered after it
                detail[ledger.LATE] = True
            row = charges.charge_row(campaign_id, charges.MODEL, amount, now, model_index=n, detail=detail)
            charge_id = charges.charge_without_duel(s, row)  # and the spend (no row for 0)
            if charge.fault is not None:
                self.endings.pause_for_fault(s, c, charge.fault, now)
                return
            text = redact(clean_text(res.text), secret_keys(self.settings, c.models, c.judge))  # as a duel's answer
            store_claims.finalize_answer(s, claim, res, text=text, amount_nusd=amount, charge_id=charge_id)


def context(c: Campaign) -> DuelPlan:
    """The plan-like context of campaign ``c``'s pre-generated calls: no duel (0), no prompt yet."""
    return DuelPlan(
        campaign_id=int(c.id),
        duel_id=0,
        number=0,
        i=0,
        j=1,
        a_is_i=True,
        prompt="",
        models=[dict(m) for m in c.models],
        judge=dict(c.judge),
        tie_policy=c.tie_policy,
        seed=int(c.seed),
        answers=c.answers,
        verdicts=c.verdicts,
        draw_key=c.draw_key,
    )


async def batched_call(
    collector: Any, client: Any, prompt: str, turns: list[str] | None, *, meta: dict[str, Any] | None = None
) -> Any:
    """One model call through a batch collector (a model without a batch API is called directly):
    its Completion, or the exception that ended it (the duel path's :meth:`Calls.call_model` contract).
    ``meta`` (the answer's store key, model and prompt) is kept in the batch's row with the request."""
    try:
        model = collector.wrap(client, meta)
        return await (model.complete(prompt, turns=turns) if turns else model.complete(prompt))
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return exc
