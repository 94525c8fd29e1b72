"""Pay once: the answer store and the verdict store (docs/reuse.md, docs/service.md "Answer and verdict reuse").

A model's answer to a prompt, and an LLM judge's verdict on a (prompt, answer
pair, order), are paid for once and shared by every campaign that needs the same
thing, across restarts. The rules are held once, for the general transactions,
the orchestration and the hot path:

* :mod:`.store_keys`: the store keys (what identifies "the same answer" and "the same verdict");
* :mod:`.store_settings`: which models and judges use the stores, and the marginal
  cost of a duel given the stores, handed to the policy;
* :mod:`.store_lookup`: what a planned duel takes from the stores (its reservation);
* :mod:`.store_claims`: a claimed row and a stored result, and
  :func:`~.store_claims.finalize_answer` / :func:`~.store_claims.finalize_verdict` that the
  answer and verdict transactions call so that a stored result and its charge
  commit together;
* this module: :class:`Stores`, the store's own short transactions (claim, release,
  coverage) and the per-process marginal costs.

Single flight. A missing answer is claimed before the call: a row with status
``generating`` under a unique key, so a second process finds the claim and polls
until the row is ``ready``; in one process a second duel awaits the first one's
future instead of polling. A claim belongs to a live process: its owner renews
``claimed_at`` every heartbeat (``LLMDUEL_RUN_HEARTBEAT_SECONDS``), and a claim not
renewed for the take-over bound (``LLMDUEL_RUN_LEASE_SECONDS``; its owner died or
stalled) is taken over, never only after the call timeout. A failed call releases
its claim: failures are never stored.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from typing import Any, Iterable, Sequence, cast

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from algorithms.reuse_costs import marginal_costs
from algorithms.vocabulary import CostModel, PromptSampling

from ..db import Database, rowcount
from ..models import BatchJob, StoredAnswer, StoredVerdict
from .store_claims import GENERATING, READY, Claim, Stored
from .store_keys import judge_key, model_key, prompt_hash
from .store_settings import cost_model, stores_answers, stores_verdicts
from .tasks import Background, in_thread

log = logging.getLogger("llmduel.campaigns")

_TABLES: dict[str, type[StoredAnswer] | type[StoredVerdict]] = {"answer": StoredAnswer, "verdict": StoredVerdict}


class Stores:
    """The stores' own short transactions (they run in worker threads, outside any campaign lock),
    and the per-process marginal costs handed to the policies (owned here, refreshed in
    tasks of ``background``)."""

    #: How old (seconds) a campaign's marginal costs may be before a plan refreshes them.
    store_costs_ttl = 0.5

    def __init__(self, db: Database, background: Background):
        self.db = db
        self.background = background
        self._store_costs: dict[int, tuple[float, dict | None]] = {}  # campaign id -> (monotonic time, costs)
        self._store_costs_busy: set[int] = set()  # refreshes under way
        self._prompt_hashes: dict[int, list[str]] = {}  # campaign id -> its prompts' hashes

    def _store_cost_cache(self) -> dict:
        return self._store_costs

    def store_costs_for(self, campaign_id: int) -> dict | None:
        """The latest marginal costs of a campaign using the stores ({"costs", "judge_cost"}), or None."""
        hit = self._store_cost_cache().get(campaign_id)
        return None if hit is None else hit[1]

    def refresh_store_costs(self, campaign_id: int) -> dict | None:
        """Recompute a campaign's marginal costs from the stores (a worker thread; no lock held).

        None for a campaign whose cost model is "per query" (its policy's costs never change).
        """
        import time

        from ..models import Campaign, Prompt
        from ..money.costs import judge_cost_per_duel
        from ..stored_config import judges_both_orders

        with self.db.read() as s:
            c = s.get(Campaign, campaign_id)
            if c is None:
                return None
            # per query: the costs never change; without replacement the policy computes its own
            # marginal costs from the shared permutation (set_costs is never called)
            if c.prompt_sampling == PromptSampling.WITHOUT_REPLACEMENT or (
                cost_model(c.answers, c.verdicts, c.models, c.judge) == CostModel.PER_QUERY
            ):
                self._store_cost_cache()[campaign_id] = (math.inf, None)
                return None
            models, judge, answers, verdicts = list(c.models), dict(c.judge), c.answers, c.verdicts
            hashes_cache = self._prompt_hashes
            hashes = hashes_cache.get(campaign_id)
            if hashes is None:
                texts = s.execute(select(Prompt.text).where(Prompt.campaign_id == campaign_id).order_by(Prompt.idx))
                hashes = [prompt_hash(t) for t in texts.scalars()]
                if len(hashes_cache) >= 1000:
                    hashes_cache.clear()
                hashes_cache[campaign_id] = hashes
        mkeys = [model_key(m) if stores_answers(answers, m) else None for m in models]
        jkey = judge_key(judge) if stores_verdicts(verdicts, judge) else None
        cov = self.coverage(mkeys, jkey, hashes)
        n_prompts = len(set(hashes))
        L = len(models)
        per_prompt = L * (L - 1) // 2 * (1 if judges_both_orders(judge) else 2)
        out = marginal_costs(
            [float(m["cost"]) for m in models],
            judge_cost_per_duel(judge),
            [None if k is None else cov["answered"].get(k, 0) for k in mkeys],
            None if jkey is None else cov["judged"],
            (n_prompts, n_prompts * per_prompt),
        )
        cache = self._store_cost_cache()
        if len(cache) >= 10_000:
            cache.clear()
        cache[campaign_id] = (time.monotonic(), out)
        return out

    def store_costs_stale(self, campaign_id: int) -> bool:
        import time

        hit = self._store_cost_cache().get(campaign_id)
        return hit is None or (hit[0] != math.inf and time.monotonic() - hit[0] > self.store_costs_ttl)

    async def update_store_costs(self, campaign_id: int, wait: bool) -> None:
        """Refresh a campaign's marginal costs when stale: awaited the first time or when ``wait``,
        else in the background (an annotator's next duel does not wait for it)."""
        if not self.store_costs_stale(campaign_id):
            return
        busy = self._store_costs_busy
        if wait or campaign_id not in self._store_cost_cache():
            await in_thread(self.refresh_store_costs, campaign_id)
            return
        if campaign_id in busy:
            return

        async def refresh() -> None:
            try:
                await in_thread(self.refresh_store_costs, campaign_id)
            except Exception as exc:  # the previous costs stay in use
                log.warning("campaign %s: marginal costs not refreshed (%s)", campaign_id, type(exc).__name__)
            finally:
                busy.discard(campaign_id)

        busy.add(campaign_id)
        self.background.spawn(refresh())

    def claim_tx(
        self, table: str, key: str, columns: dict, lease: dt.timedelta, *, batch: bool = False
    ) -> tuple[str, Any]:
        """Look ``key`` up and claim it when missing.

        Returns ("ready", Stored), ("claimed", row id) or ("wait", None) when another
        caller holds a live claim. A claim older than ``lease`` is taken over, except an answer
        that an open pre-generation batch asked for (its process died): that one only by the
        process collecting the batch (``batch``; service/cycle/pregen_recovery.py), so a duel
        waits for the batch's answer instead of paying for the call again.
        """
        model = _TABLES[table]
        with self.db.read() as s:  # the common case, a stored result, without the write lock
            # select() of a model chosen at run time is typed as the declarative base: the row is the model's
            row = cast(
                "StoredAnswer | StoredVerdict | None",
                s.execute(select(model).where(model.key == key, model.status == READY)).scalar_one_or_none(),
            )
            if row is not None:
                return "ready", _stored(table, row)
        try:
            with self.db.write() as s:
                now = self.db.clock(s)  # claims are leases: timed by the database (Database.clock)
                row = cast(
                    "StoredAnswer | StoredVerdict | None",
                    s.execute(select(model).where(model.key == key)).scalar_one_or_none(),
                )
                if row is None:
                    row_id = s.execute(
                        insert(model)
                        .values(key=key, status=GENERATING, cost_nusd=0, claimed_at=now, created_at=now, **columns)
                        .returning(model.id)
                    ).scalar_one()
                    return "claimed", int(row_id)
                if row.status == READY:
                    return "ready", _stored(table, row)
                if row.claimed_at + lease > now:
                    return "wait", None
                if table == "answer" and not batch and in_open_batch(s, key):
                    return "wait", None
                taken = rowcount(
                    s.execute(
                        update(model)
                        .where(model.id == row.id, model.status == GENERATING, model.claimed_at == row.claimed_at)
                        .values(claimed_at=now)
                        .execution_options(synchronize_session=False)
                    )
                )
                return ("claimed", int(row.id)) if taken == 1 else ("wait", None)
        except IntegrityError:  # another process inserted the same key meanwhile
            return "wait", None

    def renew_claims_tx(self, claims: Iterable[tuple[str, int]]) -> int:
        """The heartbeat of this process's store claims: their ``claimed_at`` becomes now (a claim
        another process took over, or that became ready, is left alone). Returns how many were renewed."""
        by_table: dict[str, list[int]] = {}
        for table, row_id in claims:
            by_table.setdefault(table, []).append(int(row_id))
        if not by_table:
            return 0
        renewed = 0
        with self.db.write() as s:
            now = self.db.clock(s)
            for table, ids in sorted(by_table.items()):
                model = _TABLES[table]
                renewed += rowcount(
                    s.execute(
                        update(model)
                        .where(model.id.in_(sorted(ids)), model.status == GENERATING)
                        .values(claimed_at=now)
                        .execution_options(synchronize_session=False)
                    )
                )
        return renewed

    def release_tx(self, claim: Claim) -> None:
        """Drop a claim whose call failed or whose result was not stored (never a ready row)."""
        model = _TABLES[claim.table]
        with self.db.write() as s:
            s.execute(
                delete(model)
                .where(model.id == claim.row_id, model.status == GENERATING)
                .execution_options(synchronize_session=False)
            )

    def coverage(self, model_keys: Sequence[str | None], jkey: str | None, prompt_hashes: Sequence[str]) -> dict:
        """How many of ``prompt_hashes`` have a stored answer per model key, and stored verdicts of ``jkey``."""
        keys = sorted({k for k in model_keys if k is not None})
        answered: dict[str, int] = dict.fromkeys(keys, 0)
        judged = 0
        hashes = list(dict.fromkeys(prompt_hashes))
        with self.db.read() as s:
            for start in range(0, len(hashes), 500):
                chunk = hashes[start : start + 500]
                if keys:
                    for mk, n in s.execute(
                        select(StoredAnswer.model_key, func.count())
                        .where(
                            StoredAnswer.model_key.in_(keys),
                            StoredAnswer.prompt_hash.in_(chunk),
                            StoredAnswer.status == READY,
                        )
                        .group_by(StoredAnswer.model_key)
                    ).all():
                        answered[mk] += int(n)
                if jkey is not None:
                    judged += int(
                        s.execute(
                            select(func.count()).where(
                                StoredVerdict.judge_key == jkey,
                                StoredVerdict.prompt_hash.in_(chunk),
                                StoredVerdict.status == READY,
                            )
                        ).scalar_one()
                    )
        return {"answered": answered, "judged": judged}


def _stored(table: str, row: Any) -> Stored:
    if table == "answer":
        return Stored(
            int(row.id),
            row.charge_id,
            text=row.text or "",
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
        )
    return Stored(int(row.id), row.charge_id, choice=row.choice, detail=row.detail)


def in_open_batch(s: Any, key: str) -> bool:
    """Whether an open pre-generation batch asked for the answer ``key`` (its rows keep each request's key)."""
    rows = s.execute(
        select(BatchJob.requests).where(
            BatchJob.phase == "pregen", BatchJob.status.in_(("submitting", "running", "storing"))
        )
    ).scalars()
    return any(r.get("key") == key for requests in rows for r in requests or ())
