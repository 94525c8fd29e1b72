"""The outside calls of the duels: model and judge clients, their HTTP pool and rate limits,
and the answer and verdict stores' single flight (:class:`Calls`)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import random
import time
from typing import Any

import httpx
from sqlalchemy import select

from algorithms.vocabulary import IN_FLIGHT, CampaignStatus, DuelStatus
from service.judging import build_judge, parse_judge_config

from .. import egress
from ..clients import ClientError, build_client, parse_client_config
from ..clients.ratelimit import SEND_GUARD
from ..config import Settings
from ..db import Database
from ..images.checks import check_image
from ..images.store import blind_copies as stored_blind_copies
from ..images.store import put_image
from ..models import Campaign, Duel
from ..ratelimits import DatabaseRateLimiter
from . import spares, store_claims, store_keys, store_settings
from .draws import answer_secret
from .expiry import is_stale
from .prompt_cache import PromptCache
from .stores import Stores
from .tasks import Keeper, in_thread
from .types import DuelPlan

log = logging.getLogger("llmduel.campaigns")

#: The key of a graded verdict's score (of the answer shown first) in the judge detail a verdict store keeps.
STORED_SCORE = "score_first_shown"
#: The errors of a call or a judgement abandoned because its duel's reservation lapsed (expiry.call_deadline).
CALL_OUTLIVED_EXPIRY = "the call did not return before the duel's reservation expired (LLMDUEL_CALL_TIMEOUT_SECONDS)"
JUDGE_OUTLIVED_EXPIRY = "the judge did not decide before the duel expired (LLMDUEL_DUEL_EXPIRY_SECONDS)"
#: The error of a call cancelled while under way because its duel was gone (expired, or deleted with its campaign).
CALL_DUEL_GONE = "cancelled while under way: its duel expired or was deleted (its reservation had lapsed)"


class Calls:
    """Calls the models and the judges of this process's duels, and pays for each stored result once.

    Owns the shared HTTP client, the model clients and judges (cached per campaign), the rate
    limiter, the single-flight futures of the stores (``_flights``) and the store claims held
    by its calls under way (``live_claims``; :meth:`.runner.Runs.beat` renews them every
    heartbeat). Claims are taken and released through ``stores``; a new claim starts the
    ``keeper``; a prompt's turns and reference answer come from ``prompts``."""

    def __init__(self, settings: Settings, db: Database, prompts: PromptCache, stores: Stores, keeper: Keeper):
        self.settings = settings
        self.db = db
        self.prompts = prompts
        self.claim_tx = stores.claim_tx
        self.release_tx = stores.release_tx
        self.ensure_keeper = keeper.ensure
        self._http: httpx.AsyncClient | None = None
        self._clients: dict[tuple[int, int], Any] = {}
        self._judges: dict[int, Any] = {}
        # Single flight in this process: store key -> future of the duel paying for it (store_claims.Stored,
        # or None: not stored, look again).
        self._flights: dict[str, asyncio.Future] = {}
        self.store_poll_s = 0.2  # polling a claim held by another process
        # rpm/tpm of a client config, shared by every worker through the database (service/ratelimits.py)
        self.rate_limiter = DatabaseRateLimiter(db)
        # Store claims (table, row id) this process holds: the keeper renews their ``claimed_at`` every
        # heartbeat, so another process takes one over only once this process is gone or stalled,
        # within the take-over bound (the run lease), never the call timeout.
        self.live_claims: set[tuple[str, int]] = set()
        # Duels whose models this process is calling -> their hard expiry: the keeper renews their lease.
        self.live_duels: dict[int, Any] = {}
        self.claim_lease = dt.timedelta(seconds=settings.run_lease_seconds)
        # Campaign id -> what wraps its model clients while a batch round gathers their calls
        # (service/cycle/batch_rounds.py); absent: the clients are called directly.
        self.wrappers: dict[int, Any] = {}
        # Duel id -> the tasks of its model and judge calls under way here: the heartbeat cancels
        # them once the duel is gone (:meth:`drop_gone_calls`), instead of letting them run to
        # their own deadline for an answer nobody may charge.
        self.under_way: dict[int, set[asyncio.Task]] = {}

    async def close_clients(self) -> None:
        """Close the model clients, the judges and the shared HTTP client (when the app stops)."""
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

    def http_client(self) -> httpx.AsyncClient:
        """The HTTP client every model client and judge of this process shares (made on first use)."""
        if self._http is None:
            # Under LLMDUEL_ALLOWED_HOSTS: every new connection is checked (service.egress).
            self._http = egress.http_client(self.settings.egress, httpx.Timeout(120.0, connect=10.0))
        return self._http

    def instant_results(self, plan: DuelPlan) -> dict[int, Any] | None:
        """Both answers at once when both clients are instant (simulated, no latency), else None."""
        for idx in (plan.i, plan.j):
            cfg = plan.models[idx].get("client") or {}
            if cfg.get("kind") != "simulated" or float(cfg.get("latency_s", 0.0) or 0.0) > 0:
                return None
        results: dict[int, Any] = {}
        for idx in (plan.i, plan.j):  # the order of the asynchronous path (failure draws)
            client = self.client(plan, idx)
            if not getattr(client, "instant", False):
                return None
            try:
                results[idx] = client.complete_now(plan.prompt)
            except Exception as exc:  # a simulated failure: the duel fails cleanly
                results[idx] = exc
        return results

    def client(self, plan: DuelPlan, idx: int):
        key = (plan.campaign_id, idx)
        client = self._clients.get(key)
        if client is None:
            if len(self._clients) >= 4096:  # clients share one HTTP pool: dropping them is cheap
                self._clients.clear()
            m = plan.models[idx]
            # the stored row (validated when the campaign was created) parsed into its config model
            client = build_client(
                parse_client_config(m["client"], output=m.get("output", "text")),
                model_name=m["name"],
                fixed_cost=float(m["cost"]),
                http=self.http_client(),
                limiter=self.rate_limiter,
                secret=answer_secret(plan.draw_key),
                output=m.get("output", "text"),
            )
            self._clients[key] = client
        wrap = self.wrappers.get(plan.campaign_id)
        return client if wrap is None else wrap(client)

    def judge(self, plan: DuelPlan):
        judge = self._judges.get(plan.campaign_id)
        if judge is None:
            if len(self._judges) >= 1024:
                self._judges.clear()
            judge = build_judge(
                parse_judge_config(plan.judge),
                model_names=[m["name"] for m in plan.models],
                tie_policy=plan.tie_policy,
                http=self.http_client(),
                limiter=self.rate_limiter,
                images=self.blind_copies,
            )
            self._judges[plan.campaign_id] = judge
        return judge

    async def extras(self, plan: DuelPlan) -> tuple[list[str] | None, str | None]:
        """The duel's prompt turns and reference answer (cached; one read per prompt and process)."""
        if plan.prompt_index is None:
            return None, None
        extras = self.prompts.cached_prompt_extras(plan.campaign_id, plan.prompt_index)
        if extras is None:
            extras = await in_thread(self.prompts.prompt_extras, plan.campaign_id, plan.prompt_index)
        hashes = self.prompts.image_hashes(plan.campaign_id, plan.prompt_index)
        if hashes and extras[0]:  # vision: the turns with their images (service/images/)
            return await in_thread(self.prompts.turns_with_images, extras[0], hashes), extras[1]
        return extras

    def still_wanted_tx(self, campaign_id: int, duel_id: int) -> bool:
        """Whether a call of the duel may still send a request: its campaign runs and its duel
        (0: a pre-generated answer, no duel) is still in flight."""
        with self.db.read() as s:
            status = s.execute(select(Campaign.status).where(Campaign.id == campaign_id)).scalar_one_or_none()
            if status != CampaignStatus.RUNNING:
                return False
            if not duel_id:
                return True
            return s.execute(select(Duel.status).where(Duel.id == duel_id)).scalar_one_or_none() in IN_FLIGHT

    async def cancellable(self, plan: DuelPlan, call: Any) -> Any:
        """Await the coroutine ``call`` of ``plan``'s duel as a task the heartbeat may cancel once the
        duel is gone (:meth:`drop_gone_calls`): then :class:`ClientError` (:data:`CALL_DUEL_GONE`).
        Batch rounds' calls end with their window and are awaited directly."""
        if not plan.duel_id or plan.campaign_id in self.wrappers:
            return await call
        task = asyncio.ensure_future(call)  # the context (SEND_GUARD) is copied into the task
        tasks = self.under_way.setdefault(plan.duel_id, set())
        tasks.add(task)
        self.ensure_keeper()
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():  # cancelled from outside (a timeout, a shutdown)
                raise
            raise ClientError(CALL_DUEL_GONE) from None
        finally:
            tasks.discard(task)
            if not tasks and self.under_way.get(plan.duel_id) is tasks:
                del self.under_way[plan.duel_id]

    def gone_tx(self, duel_ids: list[int]) -> set[int]:
        """Which of ``duel_ids`` are gone: deleted, expired, or past their expiry on the database's
        clock (their reservations have lapsed: an answer arriving now would not be charged)."""
        with self.db.read() as s:
            now = self.db.clock(s)
            rows = s.execute(select(Duel.id, Duel.status, Duel.expires_at).where(Duel.id.in_(duel_ids))).all()
        alive = {
            int(r.id)
            for r in rows
            if r.status != DuelStatus.EXPIRED and (r.expires_at is None or not is_stale(r.expires_at, now))
        }
        return set(duel_ids) - alive

    async def drop_gone_calls(self) -> None:
        """A heartbeat: cancel the calls under way here whose duels are gone (expired elsewhere, their
        lease or reservation lapsed, deleted). A duel of an ended campaign keeps its calls until its
        expiry: an answer arriving before it is stored and charged, marked late."""
        if not self.under_way:
            return
        for duel_id in await in_thread(self.gone_tx, sorted(self.under_way)):
            for task in list(self.under_way.get(duel_id, ())):
                log.info("duel %s is gone: cancelling its call under way", duel_id)
                task.cancel()

    def guard(self, plan: DuelPlan):
        """The send guard of ``plan``'s calls (service.clients.ratelimit.SEND_GUARD)."""

        async def still_wanted() -> bool:
            return await in_thread(self.still_wanted_tx, plan.campaign_id, plan.duel_id)

        return still_wanted

    async def call_model(self, plan: DuelPlan, idx: int, turns: list[str] | None = None):
        """Model ``idx``'s answer (a Completion) or the exception that ended the call; a call
        still running at ``plan.deadline`` is abandoned (ClientError): its reservation lapses then.
        A call still queued for a rate-limit slot or a retry when its campaign ends is never sent."""
        limit = None if plan.deadline is None else plan.deadline - time.monotonic()
        token = SEND_GUARD.set(self.guard(plan))
        try:
            client = self.client(plan, idx)
            async with asyncio.timeout(limit):
                if turns:  # a multi-turn prompt: the user turns as one conversation (service/prompts.py)
                    res = await self.cancellable(plan, client.complete(plan.prompt, turns=turns))
                else:
                    res = await self.cancellable(plan, client.complete(plan.prompt))
                return await self.keep_images(res)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            return ClientError(CALL_OUTLIVED_EXPIRY)
        except Exception as exc:  # ClientError, or a bug in a client: the duel fails cleanly
            return exc
        finally:
            SEND_GUARD.reset(token)

    async def keep_images(self, res: Any) -> Any:
        """An image answer's bytes to the image store (its text names them), the Completion without them;
        ``res`` itself when it carries no image."""
        if getattr(res, "image", None) is None:
            return res
        await in_thread(self._store_images, [res.image, *(raw for _, raw in res.more_images)])
        names = tuple(name for name, _ in res.more_images)  # params.n: kept for later duels
        return dataclasses.replace(res, image=None, more_images=(), spares=names)

    def blind_copies(self, hashes: list[str]) -> dict[str, tuple[str, bytes]]:
        """The blind copies of images a judge is shown (service/images/judge.py)."""
        with self.db.read() as s:
            return stored_blind_copies(s, hashes)

    def _store_images(self, images: list[bytes]) -> None:
        """Store an image answer's images (content-addressed, once); the answer's text names the first."""
        with self.db.write() as s:
            for data in images:
                put_image(s, check_image(data))

    # ------------------------------------------------------------ the stores (pay once)
    async def acquire(
        self, plan: DuelPlan, slot: Any, table: str, key: str, *, columns: dict, batch: bool = False, wait: bool = True
    ):
        """A stored result for ``key`` (store_claims.Stored), or None: this duel claimed it and pays for the call.

        One paid call per key: in this process a second duel awaits the first one's
        future; another process's claim is polled until it is ready or older than
        the take-over bound (``claim_lease``: the run lease; its owner renews it every
        heartbeat while it lives), then taken over. With ``wait`` False, a duel that finds the
        key in flight in this process does not wait: it gets None and no claim (it pays its own
        call and stores nothing), as a batch round's verdicts must (the first one is stored only
        at the round's fold, after the phase the second would wait in).
        """
        loop = asyncio.get_running_loop()
        asked = plan.__dict__.setdefault("_store_keys", set())
        if key in asked:
            return None  # two models of one duel with the same generation config: the second is not stored
        asked.add(key)
        while True:
            fut = self._flights.get(key)
            if fut is not None:
                if not wait:
                    return None
                out = await asyncio.shield(fut)
                if out is not None:
                    return out
                continue
            fut = loop.create_future()
            self._flights[key] = fut
            try:
                status, info = await in_thread(self.claim_tx, table, key, columns, self.claim_lease, batch=batch)
            except BaseException:
                self._resolve(key, fut, None)
                raise
            if status == "claimed":
                plan.claims[slot] = store_claims.Claim(table, int(info), key, extra={"future": fut})
                self.live_claims.add((table, int(info)))
                self.ensure_keeper()  # the heartbeat that keeps the claim
                return None
            self._resolve(key, fut, info if status == "ready" else None)
            if status == "ready":
                return info
            await asyncio.sleep(self.store_poll_s)

    def _resolve(self, key: str, fut: asyncio.Future, value: Any) -> None:
        if self._flights.get(key) is fut:
            del self._flights[key]
        if not fut.done():
            fut.set_result(value)

    async def settle_claims(self, plan: DuelPlan, slots: list) -> None:
        """After the transaction that stores results: wake the waiters; release what was not stored."""
        for slot in slots:
            claim = plan.claims.pop(slot, None)
            if claim is None:
                continue
            self.live_claims.discard((claim.table, claim.row_id))
            if claim.finalized is None:
                try:
                    await asyncio.shield(in_thread(self.release_tx, claim))
                except Exception as exc:  # the claim then lapses after its lease
                    log.warning("releasing store claim %s failed: %s", claim.row_id, type(exc).__name__)
            self._resolve(claim.key, claim.extra["future"], claim.finalized)

    async def answer(self, plan: DuelPlan, idx: int, turns: list[str] | None = None):
        """Model ``idx``'s answer: from the answer store when the campaign reuses answers, else a call."""
        model = plan.models[idx]
        if not store_settings.stores_answers(plan.answers, model):
            keys = spares.spare_keys(model, plan.prompt) if spares.draws_spares(plan.answers, model) else None
            if keys is not None:  # an image of an earlier call of several, not yet shown, before a new call
                spare = await in_thread(spares.take_spare, self.db, *keys, plan.duel_id)
                if spare is not None:
                    return spare
            return await self.call_model(plan, idx, turns)
        mkey, phash = store_keys.model_key(model), store_keys.prompt_hash(plan.prompt)
        assert mkey is not None  # stores_answers: the model has a key
        key = store_keys.answer_key(mkey, phash)
        stored = await self.acquire(plan, idx, "answer", key, columns={"model_key": mkey, "prompt_hash": phash})
        if stored is not None:
            return stored
        return await self.call_model(plan, idx, turns)

    async def verdict(
        self, plan: DuelPlan, judge, text_a: str, text_b: str, *, deadline: float | None = None, wait: bool = True
    ) -> dict:
        """The judge's verdict on the duel (in the duel's a/b terms) and the :class:`.judge_charges.Judgement` fields;
        a judge still deciding at ``deadline`` (time.monotonic()) is abandoned as a judge error. ``wait``: as
        :meth:`acquire`'s (False in a batch round)."""
        rng = random.Random(f"{plan.seed}:{plan.number}:judge")
        _, reference = await self.extras(plan)  # the prompt's reference answer, if any
        extra: dict[str, Any] = {}
        first, second, swapped, model_first, model_second = text_a, text_b, False, plan.model_a, plan.model_b
        if store_settings.stores_verdicts(plan.verdicts, plan.judge):
            first, second, swapped, order = store_keys.verdict_order(plan.judge, text_a, text_b)
            if swapped:
                model_first, model_second = plan.model_b, plan.model_a
            # a reference answer is part of what the judge reads: it is part of the key
            jkey, phash = (
                store_keys.judge_key(plan.judge),
                store_keys.prompt_hash(store_keys.verdict_question(plan.prompt, reference)),
            )
            assert jkey is not None  # stores_verdicts: the judge has a key
            key = store_keys.verdict_key(jkey, phash, first, second, order=order)
            stored = await self.acquire(
                plan, "judge", "verdict", key, columns={"judge_key": jkey, "prompt_hash": phash}, wait=wait
            )
            if stored is not None:
                choice = store_keys.mirror(stored.choice) if swapped else stored.choice
                first_score = (stored.detail or {}).get(STORED_SCORE)  # a graded judge's score of the first answer
                return dict(
                    choice=choice,
                    judge_score=None if first_score is None else (1.0 - first_score if swapped else first_score),
                    judge_cost=0.0,
                    # the stored judgement's own detail (in the store's order), and where it came from
                    judge_detail={
                        **(stored.detail or {}),
                        "reused_verdict": stored.id,
                        "stored_order_swapped": swapped,
                    },
                    judge_error=None,
                    reused_verdict=stored,
                )
            extra["verdict_claim"] = plan.claims.get("judge")  # None: another duel of the round claimed the key
        token = SEND_GUARD.set(self.guard(plan))
        try:
            async with asyncio.timeout(None if deadline is None else deadline - time.monotonic()):
                verdict = await self.cancellable(
                    plan,
                    judge.judge(
                        plan.prompt,
                        first,
                        second,
                        model_a=model_first,
                        model_b=model_second,
                        rng=rng,
                        reference=reference,
                    ),
                )
            choice, cost, detail, error = verdict.choice, verdict.cost, verdict.detail, verdict.error
            first_score = verdict.score  # a graded judge's score of the answer shown first, else None
        except asyncio.CancelledError:
            raise
        except TimeoutError:  # the pending duel's reservation lapses at its expiry: never charged after it
            choice, cost, detail, error, first_score = None, 0.0, None, JUDGE_OUTLIVED_EXPIRY, None
        except Exception as exc:
            choice, cost, detail, error = None, 0.0, None, f"judge raised {type(exc).__name__}"
            first_score = None
            log.warning("campaign %s duel %s: judge raised %s", plan.campaign_id, plan.duel_id, type(exc).__name__)
        finally:
            SEND_GUARD.reset(token)
        if first_score is not None:  # kept with a stored verdict, so that a reuse gives the same graded score
            detail = {**(detail or {}), STORED_SCORE: first_score}
        if extra and detail is not None:  # asked in the store's canonical order: say whether it is the duel's
            detail = {**detail, "stored_order_swapped": swapped}
        if extra:
            extra["stored_choice"] = choice
        return dict(
            choice=store_keys.mirror(choice) if swapped else choice,
            judge_cost=cost,
            judge_detail=detail,
            judge_error=error,
            judge_score=None if first_score is None else (1.0 - first_score if swapped else first_score),
            **extra,
        )


def call_expiry(settings: Settings) -> dt.timedelta:
    """How long a model call may hold its reservation: the call timeout, at most the duel expiry."""
    return dt.timedelta(seconds=min(settings.call_timeout_seconds, settings.duel_expiry_seconds))
