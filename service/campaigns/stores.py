"""Pay once: the answer store and the verdict store (docs/reuse.md, docs/service.md "Answer and verdict reuse").

A model's answer to a prompt, and an LLM judge's verdict on a (prompt, answer
pair, order), are paid for once and shared by every campaign that needs the same
thing, across restarts. This module holds the rules once, for the general
transactions, the orchestration and the hot path:

* the store keys (what identifies "the same answer" and "the same verdict");
* which models and judges use the stores;
* the marginal cost of a duel given the stores, handed to the policy;
* :class:`Stores`, the store's own short transactions (claim, release,
  coverage), and :func:`finalize_answer` / :func:`finalize_verdict` that the
  answer and verdict transactions call so that a stored result and its charge
  commit together.

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
import hashlib
import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence, cast

from sqlalchemy import bindparam, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from algorithms.reuse_costs import COST_FLOOR, COST_STEPS, marginal_costs, missing_fraction  # noqa: F401 (re-exported)
from algorithms.vocabulary import Choice, CostModel, JudgeKind, PromptSampling, Reuse

from ..db import Database, rowcount
from ..models import BatchJob, StoredAnswer, StoredVerdict, utcnow
from .tasks import Background, in_thread

log = logging.getLogger("llmduel.campaigns")

GENERATING = "generating"
READY = "ready"

#: Client fields that do not change what a model answers: left out of the store key.
#: Every other field (kind, base_url, model, params such as temperature and
#: max_tokens, system prompt, and any field added later) is part of it.
NON_OUTPUT_CLIENT_FIELDS = frozenset(
    {
        "api_key_env",
        "price",
        "max_cost_per_query",
        "timeout_s",
        "max_attempts",
        "backoff_base_s",
        "backoff_max_s",
        "max_retry_after_s",
        "failure_rate",
        "latency_s",
    }
)
#: Judge fields that do not change a verdict (its price).
NON_OUTPUT_JUDGE_FIELDS = frozenset({"cost", "fee", "price", "verdicts"})


def _sha(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


# ---------------------------------------------------------------- keys
def prompt_hash(prompt: str) -> str:
    return _sha("prompt", prompt)


def text_hash(text: str) -> str:
    return _sha("text", text)


def generation_config(client: dict) -> dict:
    """The part of a client config that changes the output (the store key's material)."""
    return {k: v for k, v in sorted(dict(client or {}).items()) if k not in NON_OUTPUT_CLIENT_FIELDS}


def model_key(model: dict) -> str | None:
    """The hash of a model's generation config, or None when its answers are never stored.

    Simulated clients are not stored: they have no provider to pay, compute their
    answers locally inside the plan transaction, and their configured cost stands
    for a per-query price (the paper's cost model).
    """
    client = dict(model.get("client") or {})
    if client.get("kind") in (None, "simulated"):
        return None
    if model.get("output") == "image":  # an image model's answers are not the same client's text answers
        return _sha("model", "image", _canonical(generation_config(client)))
    return _sha("model", _canonical(generation_config(client)))


def answer_key(mkey: str, phash: str) -> str:
    return _sha("answer", mkey, phash)


def judge_key(judge: dict) -> str | None:
    """The hash of an LLM judge's config (client generation config, template, orders), else None."""
    if judge.get("kind") == JudgeKind.JURY:  # the jurors' keys (in order) and the rule that combines them
        keys = [judge_key({**j, "kind": JudgeKind.LLM}) for j in judge.get("judges") or []]
        return _sha("jury", str(judge.get("combine", "majority")), *[k or "" for k in keys])
    if judge.get("kind") != JudgeKind.LLM:
        return None
    # ``orders`` is stored beside its older spelling ``both_orders`` (always equal): hashing only
    # the latter keeps the keys of verdicts stored before ``orders`` existed
    material = {k: v for k, v in sorted(judge.items()) if k not in NON_OUTPUT_JUDGE_FIELDS and k != "orders"}
    material["client"] = generation_config(judge.get("client") or {})
    from ..stored_config import judge_orders

    material["both_orders"] = judge_orders(judge) == 2
    if judge.get("orders") == "auto":  # its verdicts read one or both orders: not a both-orders judge's
        material["orders"] = "auto"
    return _sha("judge", _canonical(material))


def verdict_order(judge: dict, answer_a: str, answer_b: str) -> tuple[str, str, bool, str]:
    """How a duel's verdict is asked for and stored: (first, second, swapped, order).

    A judge that sees both orders gives the mirror verdict for the mirror
    presentation, so its verdict is stored once per unordered pair, in a canonical
    order (``order = "both"``, first = the answer with the smaller hash); a one-order
    judge's verdict is stored per presentation order (``order = "ab"``).
    ``swapped``: the stored order is the duel's (b, a).
    """
    swapped, order = stored_order(judge, text_hash(answer_a), text_hash(answer_b))
    return (answer_b, answer_a, True, order) if swapped else (answer_a, answer_b, False, order)


def stored_order(judge: dict, hash_a: str, hash_b: str) -> tuple[bool, str]:
    """The rule of :func:`verdict_order` on the answers' text hashes: (swapped, order)."""
    from ..stored_config import judges_both_orders

    if judges_both_orders(judge):
        return hash_b < hash_a, "both"
    return False, "ab"


def verdict_key(jkey: str, phash: str, first: str, second: str, *, order: str) -> str:
    return verdict_key_of_hashes(jkey, phash, text_hash(first), text_hash(second), order=order)


def verdict_key_of_hashes(jkey: str, phash: str, first_hash: str, second_hash: str, *, order: str) -> str:
    """:func:`verdict_key` from the answers' :func:`text_hash` values."""
    return _sha("verdict", jkey, phash, first_hash, second_hash, order)


def verdict_question(prompt: str, reference: str | None) -> str:
    """What a verdict's prompt hash covers: the question and, when the prompt has one, its reference
    answer (the judge reads it, so it is part of the key)."""
    return prompt if reference is None else f"{prompt}\x00reference\x00{reference}"


def duel_verdict_key(judge: dict, prompt: str, reference: str | None, *, hash_a: str, hash_b: str) -> str:
    """The verdict-store key of a duel whose answers shown as a and b have text hashes ``hash_a`` and
    ``hash_b`` (the key :meth:`.calls.Calls.verdict` asks for; see :func:`verdict_order`)."""
    swapped, order = stored_order(judge, hash_a, hash_b)
    first, second = (hash_b, hash_a) if swapped else (hash_a, hash_b)
    jkey = judge_key(judge)
    assert jkey is not None  # called for judges whose verdicts are stored (stores_verdicts)
    return verdict_key_of_hashes(jkey, prompt_hash(verdict_question(prompt, reference)), first, second, order=order)


def mirror(choice: str | None) -> str | None:
    """A verdict seen from the other side (a <-> b; ties and "both bad" unchanged)."""
    if choice == Choice.A:
        return str(Choice.B)
    if choice == Choice.B:
        return str(Choice.A)
    return choice


# ---------------------------------------------------------------- which components use the stores
def stores_answers(setting: str | None, model: dict) -> bool:
    return setting == Reuse.REUSE and model_key(model) is not None


def stores_verdicts(setting: str | None, judge: dict) -> bool:
    """LLM judges only: a human always gives a fresh vote, a simulated judge costs nothing."""
    return setting == Reuse.REUSE and judge_key(judge) is not None


def pregenerates(answers: str | None, models: Sequence[dict], judge: dict) -> bool:
    """A campaign whose answers are pre-generated for annotators (human judge, a model using the
    answer store; service/campaigns/pregeneration.py): the only campaigns with budget holds."""
    return judge.get("kind") == JudgeKind.HUMAN and any(stores_answers(answers, m) for m in models)


def cost_model(answers: str | None, verdicts: str | None, models: Sequence[dict], judge: dict) -> str:
    """What the policy, the oracle and the lower bound count as a duel's cost."""
    if any(stores_answers(answers, m) for m in models) or stores_verdicts(verdicts, judge):
        return str(CostModel.MARGINAL)
    return str(CostModel.PER_QUERY)


# ---------------------------------------------------------------- marginal costs
# COST_FLOOR, COST_STEPS, missing_fraction and marginal_costs: algorithms/reuse_costs.py (pure; imported above)


def apply_costs(policy: Any, target: dict | None) -> dict | None:
    """Give the policy the campaign's current marginal costs before a selection.

    Returns what the duel log records (``duels.costs_at_select``) when the costs
    changed, else None; replay calls ``set_costs`` with the recorded values at the
    same point, so it stays exact however the costs were computed.
    """
    if target is None or not hasattr(policy, "set_costs"):
        return None
    if policy.set_costs(target["costs"], target["judge_cost"]):
        return {"costs": [float(x) for x in target["costs"]], "judge_cost": float(target["judge_cost"])}
    return None


# ---------------------------------------------------------------- what a duel will take from the stores
def duel_answer_keys(answers: str | None, models: Sequence[dict], i: int, j: int, *, prompt: str) -> dict[int, str]:
    """The answer-store keys of a duel on (``i``, ``j``), by model index, for the models that use the store.

    Two models with one generation config share a key; the duel takes the stored
    answer for ``i`` only and calls ``j`` (:meth:`.calls.Calls.acquire`), so only
    ``i`` is listed.
    """
    out: dict[int, str] = {}
    if answers != Reuse.REUSE:
        return out
    phash = None
    for k in (i, j):
        mkey = model_key(models[k])
        if mkey is not None:
            phash = phash or prompt_hash(prompt)
            key = answer_key(mkey, phash)
            if key not in out.values():
                out[k] = key
    return out


#: The readiness lookups of a duel's reservation, as statements every path runs (the asyncpg
#: driver compiles them): the answer keys (with the texts when a verdict key is derived from
#: them), a verdict key, a prompt's reference answer.
READY_ANSWER_KEYS = select(StoredAnswer.key).where(
    StoredAnswer.key.in_([bindparam("k1"), bindparam("k2")]), StoredAnswer.status == READY
)
READY_ANSWER_TEXTS = select(StoredAnswer.key, StoredAnswer.text).where(
    StoredAnswer.key.in_([bindparam("k1"), bindparam("k2")]), StoredAnswer.status == READY
)
READY_VERDICT = select(StoredVerdict.id).where(StoredVerdict.key == bindparam("vk"), StoredVerdict.status == READY)


class StoredKeys:
    """Which store keys are ready, remembered per process.

    A stored (``ready``) answer or verdict is never changed or deleted (only claims
    are), so a key once seen ready stays ready: the cache can only miss, never be
    wrong. A miss costs one indexed lookup. Answers map to their text hash (None
    when the text was not read).
    """

    limit = 200_000

    def __init__(self) -> None:
        self.answers: dict[str, str | None] = {}
        self.verdicts: set[str] = set()

    def answer(self, key: str, text_hash_: str | None) -> None:
        if len(self.answers) >= self.limit:
            self.answers.clear()
        if text_hash_ is not None or key not in self.answers:
            self.answers[key] = text_hash_

    def verdict(self, key: str) -> None:
        if len(self.verdicts) >= self.limit:
            self.verdicts.clear()
        self.verdicts.add(key)


@dataclass(frozen=True)
class DuelStores:
    """What the stores mean for a planned duel (:func:`stored_for_duel`), the inputs of its
    reservation (:func:`service.money.reserve.duel_budget`)."""

    #: the model indices whose answer is stored (each reserves nothing)
    answers: list[int]
    #: the number of judge orders whose verdict is stored
    orders: int
    #: the campaign's answers are pre-generated (:func:`pregenerates`): the only campaigns with
    #: budget holds, so the plan reads the holds of these alone (a new kind of hold widens this)
    pregenerated: bool


async def stored_for_duel(
    known: StoredKeys,
    lookup: Any,
    *,
    answers: str | None,
    verdicts: str | None,
    models: Sequence[dict],
    judge: dict,
    i: int,
    j: int,
    a_is_i: bool,
    prompt: str,
    reference: Any,
) -> DuelStores:
    """What a planned duel will take from the stores, and whether its campaign pre-generates answers.

    An answer counts only when it is stored (``ready``); one being generated (a
    claim) may still fail, so it stays reserved. A verdict can be known only when
    both answers are stored (its key hashes their texts). ``lookup``: awaitable
    ``ready_answers(keys, with_text) -> {key: text or None}`` and
    ``ready_verdict(key) -> bool`` on the plan's transaction; ``reference``: an
    awaitable callable giving the prompt's reference answer. Written once for every
    path (a synchronous caller runs it with :func:`run_now`).
    """
    pregenerated = pregenerates(answers, models, judge)
    keys = duel_answer_keys(answers, models, i, j, prompt=prompt)
    if not keys:
        return DuelStores([], 0, pregenerated)
    need_verdict = len(keys) == 2 and stores_verdicts(verdicts, judge)
    missing = [k for k in keys.values() if k not in known.answers or (need_verdict and known.answers[k] is None)]
    if missing:
        for key, text in (await lookup.ready_answers(missing, need_verdict)).items():
            known.answer(key, text_hash(text or "") if need_verdict else None)
    have = [idx for idx, k in keys.items() if k in known.answers]
    if not (need_verdict and len(have) == 2):
        return DuelStores(have, 0, pregenerated)
    # .get: another thread may clear the cache meanwhile (StoredKeys.limit); unknown counts as not stored
    hi, hj = known.answers.get(keys[i]), known.answers.get(keys[j])
    if hi is None or hj is None:
        return DuelStores(have, 0, pregenerated)
    vkey = duel_verdict_key(judge, prompt, await reference(), hash_a=hi if a_is_i else hj, hash_b=hj if a_is_i else hi)
    if vkey not in known.verdicts:
        if not await lookup.ready_verdict(vkey):
            return DuelStores(have, 0, pregenerated)
        known.verdict(vkey)
    from ..stored_config import judge_orders

    return DuelStores(have, judge_orders(judge), pregenerated)


class SessionLookup:
    """:func:`stored_for_duel`'s lookups on a synchronous session or connection (its awaits never suspend)."""

    def __init__(self, conn) -> None:
        self.conn = conn

    async def ready_answers(self, keys: Sequence[str], with_text: bool) -> dict[str, str | None]:
        stmt = READY_ANSWER_TEXTS if with_text else READY_ANSWER_KEYS
        rows = self.conn.execute(stmt, {"k1": keys[0], "k2": keys[-1]}).all()
        return {r.key: (r.text if with_text else None) for r in rows}

    async def ready_verdict(self, key: str) -> bool:
        return self.conn.execute(READY_VERDICT, {"vk": key}).first() is not None


def run_now(coro: Any) -> Any:
    """Run a coroutine whose awaits never suspend (synchronous lookups) to its end."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a synchronous lookup tried to suspend")


# ---------------------------------------------------------------- what a duel gets from a store
@dataclass
class Stored:
    """A result taken from a store instead of a new call (charged 0, refers to its paying charge)."""

    id: int
    charge_id: int | None
    text: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    choice: str | None = None
    detail: dict | None = None
    cost: float = 0.0
    spare: bool = False  # an unshown image of a call of several (service/campaigns/spares.py)


@dataclass
class Claim:
    """A store row this process claimed (status generating) before paying for the call."""

    table: str  # "answer" or "verdict"
    row_id: int
    key: str
    finalized: Stored | None = None
    extra: dict = field(default_factory=dict)


_TABLES: dict[str, type[StoredAnswer] | type[StoredVerdict]] = {"answer": StoredAnswer, "verdict": StoredVerdict}


_SA = StoredAnswer.__table__.c
#: The claimed row becomes the stored answer with its charge (both drivers of the answers transaction
#: run it; a ready row is never changed: when this call outlived its claim and another caller took it
#: over and stored its answer first, that stored answer stays).
FINALIZE_ANSWER = (
    update(StoredAnswer.__table__)
    .where(_SA.id == bindparam("rid"), _SA.status != READY)
    .values(
        status=READY,
        text=bindparam("text"),
        input_tokens=bindparam("input_tokens"),
        output_tokens=bindparam("output_tokens"),
        cost_nusd=bindparam("cost_nusd"),
        charge_id=bindparam("charge_id"),
        claimed_at=bindparam("now", type_=_SA.claimed_at.type),
    )
)


def finalized_answer(claim: Claim, completion: Any, *, text: str, amount_nusd: int, charge_id: int | None) -> dict:
    """The parameters of :data:`FINALIZE_ANSWER` for ``claim``, which is marked finalized with them."""
    tin, tout = getattr(completion, "input_tokens", None), getattr(completion, "output_tokens", None)
    claim.finalized = Stored(claim.row_id, charge_id, text=text, input_tokens=tin, output_tokens=tout)
    params = dict(rid=claim.row_id, text=text, cost_nusd=amount_nusd, charge_id=charge_id, now=utcnow())
    return params | {"input_tokens": tin, "output_tokens": tout}


def finalize_answer(s, claim: Claim, completion: Any, *, text: str, amount_nusd: int, charge_id: int | None) -> None:
    """Inside the answers transaction: the claimed row becomes the stored answer (with its charge)."""
    s.execute(
        FINALIZE_ANSWER, finalized_answer(claim, completion, text=text, amount_nusd=amount_nusd, charge_id=charge_id)
    )


def finalize_verdict(
    s, claim: Claim, *, choice: str, detail: dict | None, amount_nusd: int, charge_id: int | None
) -> None:
    """Inside the verdict transaction: the claimed row becomes the stored verdict (stored order)."""
    s.execute(
        update(StoredVerdict)
        .where(StoredVerdict.id == claim.row_id, StoredVerdict.status != READY)  # see finalize_answer
        .values(status=READY, choice=choice, detail=detail, cost_nusd=amount_nusd, charge_id=charge_id)
        .execution_options(synchronize_session=False)
    )
    claim.finalized = Stored(claim.row_id, charge_id, choice=choice, detail=detail)


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
