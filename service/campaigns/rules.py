"""The campaign rules as pure functions, shared by every transaction path.

The vote cycle's sequences (:mod:`service.cycle`, both drivers) and the other
transactions (:mod:`service.campaigns.lifecycle`, :mod:`service.cycle.orchestration`) decide with these functions only,
so a rule cannot differ between paths. No I/O, no database objects: plain values in,
plain values out.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import math
import random
import secrets
import string
import time
from typing import Any, Iterable, Sequence

import numpy as np

from algorithms.vocabulary import Algorithm, Choice, JudgeKind, PromptSampling, Reuse, TiePolicy

from ..models import to_nusd
from ..money.budget import END_LIMIT_BUDGET, LEDGER_CAP_NUSD, budget_spent

MAX_ERROR_CHARS = 2000
MAX_ANSWER_CHARS = 1_000_000


# ---------------------------------------------------------------- values
def jsonable(value: Any) -> Any:
    """Plain JSON types (numpy scalars and arrays become floats/ints/lists).

    The result equals ``json.loads(json.dumps(value))`` (with numpy values converted);
    the common shapes (dicts with string keys, lists, tuples, numbers, strings, None,
    numpy values) are converted directly, which is several times faster than the JSON
    round trip on the policy snapshots written with every vote; anything else takes the
    round trip.
    """
    try:
        return _plain(value)
    except _NotPlain:
        return json.loads(json.dumps(value, default=_np_default))


class _NotPlain(Exception):
    """A value :func:`_plain` leaves to the JSON round trip."""


_NUMBER_TYPES = frozenset((int, float))


def _plain(v: Any) -> Any:
    t = type(v)
    if t is str or t is int or t is float or t is bool or v is None:
        return v
    if t is dict:
        out = {}
        for k, x in v.items():
            if type(k) is not str:
                raise _NotPlain  # json turns keys into strings in its own way (1 -> "1", True -> "true")
            out[k] = _plain(x)
        return out
    if t is list or t is tuple:
        if _NUMBER_TYPES.issuperset(map(type, v)):  # the policy state's long rows: one pass in C
            return list(v)
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, np.generic):
        return _plain(v.item())
    if isinstance(v, str):  # StrEnum members: their value, as json.dumps writes it
        return str.__str__(v)
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    raise _NotPlain


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


def cost_nusd(cost: Any) -> int:
    """A reported cost in nano-USD (missing, negative or non-finite costs count 0)."""
    v = finite_or_none(cost)
    return to_nusd(v) if v is not None and v > 0 else 0


# ---------------------------------------------------------------- planning a duel
def ordered_pair(i: int, j: int) -> tuple[int, int]:
    """A pair as stored: ``model_i < model_j``."""
    i, j = int(i), int(j)
    return (j, i) if i > j else (i, j)


def pending_pairs(inflight: Iterable[Any]) -> list[list[int]]:
    """The in-flight duels' pairs, as the policy's ``pending`` argument."""
    return [[int(r.model_i), int(r.model_j)] for r in inflight]


def call_deadline(expiry: dt.timedelta) -> float:
    """The ``time.monotonic()`` by which a call must have returned when what it is reserved
    by (a duel, a pre-generation hold) lapses after ``expiry``: a call still running then
    is abandoned as failed, so it is never charged after its reservation stopped counting
    (docs/reliability.md, *Budget*). The margin is 10% of the expiry, at most 5 s."""
    seconds = expiry.total_seconds()
    return time.monotonic() + seconds - min(5.0, 0.1 * seconds)


def is_stale(expires_at: dt.datetime, now: dt.datetime) -> bool:
    """An in-flight duel past its expiry no longer counts (it is expired by the next plan)."""
    return expires_at <= now


ANSWER_MARKER = "\n[truncated by llmduel]"
# UTF-8 bytes of a stored answer: at most 4 bytes per character, plus the truncation marker.
MAX_ANSWER_BYTES = 4 * MAX_ANSWER_CHARS + len(ANSWER_MARKER.encode("utf-8"))


def _ceil_nusd(usd: float) -> int:
    """``usd`` rounded up to whole nano-USD, saturated at ``LEDGER_CAP_NUSD`` (NaN too): a bound that
    large (only in rows stored before the money bounds, docs/reliability.md, Limits) fits no budget,
    so the duel is refused for its budget instead of the request failing."""
    x = float(usd) * 1e9
    return int(math.ceil(x)) if x < LEDGER_CAP_NUSD else LEDGER_CAP_NUSD


def stored(config: Any) -> Any:
    """A config as the campaign row stores it: a client or judge config model becomes its JSON
    (``model_dump(mode="json")``); stored JSON passes unchanged. The rules read the stored form."""
    return config.model_dump(mode="json") if hasattr(config, "model_dump") else config


def model_bound_nusd(model: dict, prompt: str) -> int | None:
    """An upper bound of one model call's charge on ``prompt`` (nano-USD), or ``None``.

    See :func:`service.clients.config.call_cost_bound`; the input is the prompt's UTF-8 bytes and its
    images' tokens (:func:`prompt_image_tokens`), the output limit the client's or, for a price from a price map, the provider's (``pricing.max_output_tokens``).
    """
    from service.clients.config import call_cost_bound

    client = stored(model["client"])
    limit = (model.get("pricing") or {}).get("max_output_tokens")
    b = call_cost_bound(
        client, float(model["cost"]), len(prompt.encode("utf-8")), limit, prompt_image_tokens(model, prompt)
    )
    return None if b is None else _ceil_nusd(b)


def prompt_image_tokens(model: dict, prompt: str) -> int:
    """An upper bound of the input tokens of ``prompt``'s images for ``model``: each image named in the
    prompt text counts the most one of the campaign's images costs the model (``image_tokens``, stored
    at creation by its provider's rule, service/images/tokens.py); a row stored without it counts the
    most any accepted image can cost."""
    from service.images.tokens import prompt_image_count, worst_image_tokens

    n = prompt_image_count(prompt)
    if n == 0:
        return 0
    per = model.get("image_tokens")
    if not isinstance(per, int) or isinstance(per, bool) or per < 0:
        per = worst_image_tokens(stored(model["client"]))
    return n * per


def image_answers(models: Sequence[dict]) -> bool:
    """Whether some of a campaign's models answer with images (``output: image``): its judge sees them."""
    return any(m.get("output") == "image" for m in models)


def judge_bound_nusd(judge: dict, prompt: str, reference: str | None = None, image_answers: bool = False) -> int | None:
    """An upper bound of a duel's judge charge (nano-USD), or ``None``.

    A simulated judge charges nothing, a human judge its ``fee_per_vote``. An LLM
    judge makes one call per order (:func:`judge_orders`); each call's input is
    its system prompt and its template with the question, the reference answer and
    both answers, bounded by ``MAX_ANSWER_BYTES`` per answer, and the images it is shown: the
    prompt's and, with ``image_answers``, each answer's, at the most one image can cost the judge.
    """
    judge = stored(judge)
    if judge.get("kind") == "hybrid":  # hybrid hook: the automatic judge's bound plus one human fee
        b = judge_bound_nusd(judge["llm"], prompt, reference, image_answers)
        return None if b is None else b + cost_nusd((judge.get("human") or {}).get("fee_per_vote") or 0.0)
    if judge.get("kind") == "human":
        return vote_fee_nusd(judge)
    if judge.get("kind") == "jury":  # the sum of the jurors' bounds
        bounds = [judge_bound_nusd(j, prompt, reference, image_answers) for j in judge.get("judges") or []]
        return None if any(b is None for b in bounds) else sum(b for b in bounds if b is not None)
    if judge.get("kind") != "llm":
        return 0
    from judges.llm import JUDGE_TEMPLATE, render_judge_prompt
    from service.clients.config import call_cost_bound

    template = judge.get("prompt_template") or JUDGE_TEMPLATE
    rendered = render_judge_prompt(prompt, "", "", reference, template)
    fixed = len(rendered.encode("utf-8")) + len((judge.get("system_prompt") or "").encode("utf-8"))
    # each answer field may appear more than once in a template
    n_answers = sum(1 for _, name, _, _ in string.Formatter().parse(template) if name in ("answer_a", "answer_b"))
    input_bytes = fixed + max(2, n_answers) * MAX_ANSWER_BYTES
    # the judge sees the prompt's images and, with image models, each answer as an image (service/images/judge.py)
    from service.images.tokens import prompt_image_count, worst_image_tokens

    shown = prompt_image_count(prompt) + (max(2, n_answers) if image_answers else 0)
    image_tokens = shown * worst_image_tokens(judge["client"]) if shown else 0
    b = call_cost_bound(judge["client"], float(judge.get("cost", 0.0)), input_bytes, None, image_tokens)
    if b is None:
        return None
    return judge_orders(judge) * _ceil_nusd(b)


def unbounded_cost_reason(models: Sequence[dict], judge: dict) -> str | None:
    """Why no cost bound can be derived for a campaign with a budget, or ``None`` if it can."""
    for m in models:
        if model_bound_nusd(m, "") is None:
            return (
                f"models[{m.get('name')!r}]: with a budget, a client with per-token prices needs "
                "params.max_tokens (or the provider's output-token limit) or max_cost_per_query, "
                "so the budget can reserve an upper bound of each call's cost"
            )
    if judge_bound_nusd(judge, "") is None:
        return (
            "judge.client: with a budget, a judge client with per-token prices needs params.max_tokens "
            "(or the provider's output-token limit) or max_cost_per_query"
        )
    return None


def excessive_cost_reason(models: Sequence[dict], judge: dict) -> str | None:
    """Why a model's or the judge's per-call cost bound (an empty prompt; for the judge the longest
    answers) exceeds ``MAX_QUERY_USD``, or ``None``: a bound from a price and an output-token limit
    (``params.max_tokens``) must stay one the int64 ledger can reserve (docs/reliability.md, Limits)."""
    from service.clients.config import MAX_QUERY_USD

    cap = _ceil_nusd(MAX_QUERY_USD)
    for m in models:
        b = model_bound_nusd(m, "")
        if b is not None and b > cap:
            return (
                f"models[{m.get('name')!r}]: one call can cost up to {b / 1e9:.6g} USD (price x output-token "
                f"limit), above the bound of {MAX_QUERY_USD:g} USD per call; lower params.max_tokens or set "
                "max_cost_per_query"
            )
    b = judge_bound_nusd(judge, "")
    if b is not None and b > judge_orders(judge) * cap:
        return (
            f"judge.client: one judge call can cost up to {b / judge_orders(judge) / 1e9:.6g} USD (price x the "
            f"longest answers and output-token limit), above the bound of {MAX_QUERY_USD:g} USD per call; "
            "lower params.max_tokens or set max_cost_per_query"
        )
    return None


def judge_orders(judge: dict) -> int:
    """How many calls an LLM judge makes per duel at most: one per order, two with ``orders: both``
    and ``orders: auto`` (the default: each duel in one or both orders), one with ``orders: one``; a
    row stored before ``orders`` existed says it by ``both_orders``."""
    judge = stored(judge)
    if judge.get("kind") == "hybrid":  # hybrid hook: the automatic judge's calls
        return judge_orders(judge["llm"])
    if judge.get("kind") == "jury":  # every juror's calls
        return sum(judge_orders(j) for j in judge.get("judges") or [])
    if "orders" in judge:
        return 1 if judge["orders"] == "one" else 2
    return 2 if judge.get("both_orders", True) else 1


def judges_both_orders(judge: dict) -> bool:
    """Every verdict reads both orders: an LLM judge with ``orders: both``, a jury whose every
    juror has it. Such a verdict is the mirror of the mirrored duel's (stored once per unordered pair)."""
    judge = stored(judge)
    if judge.get("kind") == "hybrid":  # hybrid hook
        return judges_both_orders(judge["llm"])
    if judge.get("kind") == "jury":
        return all(judges_both_orders(j) for j in judge.get("judges") or [])
    if "orders" in judge:
        return judge["orders"] == "both"
    return judge_orders(judge) == 2


def lease_free(owner: str | None, expires_at: dt.datetime | None, now: dt.datetime) -> bool:
    """A background run's lease can be taken: nobody holds it, or its holder let it expire."""
    return owner is None or expires_at is None or expires_at <= now


def run_slots_full(run_in_flight: int, concurrency: int | None) -> bool:
    """A background run may not start another duel: ``concurrency`` of its duels are in flight."""
    return run_in_flight >= max(1, concurrency or 1)


def max_duels_reached(max_duels: int | None, judged: int, in_flight: int = 0) -> bool:
    """No further duel may start: judged plus in-flight duels reach ``max_duels``."""
    return max_duels is not None and judged + in_flight >= max_duels


# ---------------------------------------------------------------- blinding: the secret draws
DRAW_KEY_BYTES = 32


def new_draw_key() -> str:
    """A campaign's draw key: 256 random bits (hex) from :mod:`secrets`, never shown by any route."""
    return secrets.token_hex(DRAW_KEY_BYTES)


def _keyed_uniform(draw_key: str, label: str) -> int:
    """A 256-bit integer, HMAC-SHA256 of ``label`` under the campaign's draw key."""
    return int.from_bytes(hmac.new(bytes.fromhex(draw_key), label.encode("ascii"), hashlib.sha256).digest(), "big")


def answer_secret(draw_key: str | None) -> bytes | None:
    """The key of a campaign's simulated answers, derived from its secret draw key (None: a
    campaign made before draw keys, whose simulated texts stay as they were)."""
    if draw_key is None:
        return None
    return hmac.new(bytes.fromhex(draw_key), b"simulated-answers", hashlib.sha256).digest()


def draw_prompt_and_side(seed: int, number: int, n_prompts: int, draw_key: str | None = None) -> tuple[int, bool]:
    """Duel ``number``'s prompt index and whether answer "a" is model_i's.

    With a draw key (every campaign created since the blinding): HMAC-SHA256 of
    ``"{number}:prompt"`` and ``"{number}:side"`` under the key; the prompt index is
    the first value modulo ``n_prompts`` (bias below ``n_prompts / 2**256``), the side
    the second value's lowest bit. Without one (older campaigns, ``draw_key`` NULL):
    the former draw from the campaign seed, so their duels keep their old draws.
    """
    if draw_key is None:
        rng = random.Random(f"{seed}:{number}:draw")
        prompt_index = rng.randrange(n_prompts)
        return prompt_index, rng.random() < 0.5
    prompt_index = _keyed_uniform(draw_key, f"{number}:prompt") % n_prompts
    return prompt_index, bool(_keyed_uniform(draw_key, f"{number}:side") & 1)


def tie_coin(seed: int, number: int, draw_key: str | None = None) -> bool:
    """The fair coin of a tie under ``tie_policy=random``: True credits model_i (keyed like the draw)."""
    if draw_key is None:
        return random.Random(f"{seed}:{number}:tie").random() < 0.5
    return bool(_keyed_uniform(draw_key, f"{number}:tie") & 1)


# ---------------------------------------------------------------- sampling prompts without replacement
#: The tie policy under which every judged duel is counted as a fixed value, so the population of
#: a pair's outcomes is the whole prompt set (with ``drop`` it is the unknown set of decisive
#: prompts; with ``random`` a tie's coin is a fresh draw, not a fixed value of the prompt).
WOR_TIE_POLICIES = (TiePolicy.HALF,)


def wor_refusal(algorithm: str, answers: str, judge_kind: str | None, tie_policy: str | None) -> str | None:
    """Why a campaign cannot sample its prompts without replacement, or None when it can.

    ``tie_policy`` None: not given (it then defaults to ``half``). docs/reuse.md, "In the service".
    """
    if algorithm != Algorithm.DCTAS_PC:
        return (
            f"prompt_sampling without_replacement needs algorithm dctas-pc (its pairwise certificates run the "
            f"without-replacement test), got {algorithm}"
        )
    if answers != Reuse.REUSE:
        return (
            "prompt_sampling without_replacement needs answers: reuse (each model answers each prompt once, so a "
            "pair's outcome on a prompt is a fixed value)"
        )
    if judge_kind == "hybrid":  # hybrid hook
        return "prompt_sampling without_replacement is not supported with a hybrid judge (its test samples with replacement)"
    if judge_kind == JudgeKind.HUMAN:
        return (
            "prompt_sampling without_replacement needs an automatic judge (llm or simulated); human-judged "
            "campaigns sample with replacement"
        )
    if tie_policy == TiePolicy.RANDOM:
        return (
            "prompt_sampling without_replacement needs tie_policy half, got random (a tie's coin is drawn anew "
            "for each duel, but the exact without-replacement test treats every outcome as a fixed value of its "
            "prompt, so it would certify the coin: two identical models named winner over each other)"
        )
    if tie_policy is not None and tie_policy not in WOR_TIE_POLICIES:
        return (
            f"prompt_sampling without_replacement needs tie_policy half, got {tie_policy} (with drop the "
            "population of decisive prompts is unknown, so the without-replacement test cannot be set up)"
        )
    return None


def resolve_prompt_sampling(
    requested: str,
    tie_policy: str | None,
    *,
    algorithm: str,
    answers: str,
    verdicts: str,
    judge_kind: str | None,
) -> tuple[str, str]:
    """The stored (prompt_sampling, tie_policy) of a new campaign; ValueError (a 422) for an invalid pair.

    ``auto`` gives without_replacement exactly when it is allowed (:func:`wor_refusal`), the judge is
    an LLM judge and ``verdicts`` is reuse; else with_replacement. An absent ``tie_policy`` is
    ``half`` under without_replacement and ``drop`` otherwise.
    """
    refusal = wor_refusal(algorithm, answers, judge_kind, tie_policy)
    if requested == PromptSampling.WITHOUT_REPLACEMENT:
        if refusal is not None:
            raise ValueError(refusal)
        sampling = PromptSampling.WITHOUT_REPLACEMENT
    elif requested == PromptSampling.AUTO:
        wor = refusal is None and judge_kind in (JudgeKind.LLM, JudgeKind.JURY) and verdicts == Reuse.REUSE
        sampling = PromptSampling.WITHOUT_REPLACEMENT if wor else PromptSampling.WITH_REPLACEMENT
    else:
        sampling = PromptSampling.WITH_REPLACEMENT
    if tie_policy is None:
        half = sampling == PromptSampling.WITHOUT_REPLACEMENT or judge_kind == "hybrid"  # hybrid hook
        tie_policy = TiePolicy.HALF if half else TiePolicy.DROP
    return str(sampling), str(tie_policy)


def is_wor(prompt_sampling: str | None) -> bool:
    """The campaign samples its prompts without replacement (rows made before the setting: with)."""
    return prompt_sampling == PromptSampling.WITHOUT_REPLACEMENT


def prompt_permutation(draw_key: str, n_prompts: int) -> list[int]:
    """The campaign's secret permutation of its prompt indices, shared by all pairs.

    Prompt indices sorted by HMAC-SHA256 of ``"perm:{index}"`` under the draw key (ties,
    which have probability about ``n_prompts**2 / 2**257``, by index). Never shown by any
    route: whoever knew it could tell which prompt a pair's next duel uses.
    """
    return sorted(range(n_prompts), key=lambda k: (_keyed_uniform(draw_key, f"perm:{k}"), k))


def free_position(occupied: Iterable[int], n_prompts: int) -> int | None:
    """The lowest position of a pair not judged and not in flight (``occupied``), or None."""
    taken = set(int(q) for q in occupied)
    for q in range(n_prompts):
        if q not in taken:
            return q
    return None


def next_in_order(recorded: int, held: dict[int, Any]) -> list[Any]:
    """The held duels of one pair that may enter the policy now, in position order.

    ``recorded``: how many of the pair's outcomes the policy has (positions 0 .. recorded-1);
    ``held``: position -> duel judged but not yet recorded. The run of consecutive positions
    from ``recorded`` is released; a gap (an earlier position still in flight or re-issued)
    keeps the later ones held.
    """
    out = []
    q = recorded
    while q in held:
        out.append(held[q])
        q += 1
    return out


# ---------------------------------------------------------------- annotators
#: Default of ``max_pending_per_annotator``: one duel in flight per annotator.
DEFAULT_MAX_PENDING_PER_ANNOTATOR = 1


ANNOTATOR_LABEL_PREFIX = "annotator:"  # service.auth.Principal.label of an annotator


def annotator_owns(requested_by: str | None, label: str) -> bool:
    """An annotator reads and votes only on the duels handed to it (``requested_by`` its label);
    never on another annotator's, the admin's, a background run's or one the judge settled alone.
    Every other id is the same 404 as a missing one, so no 404 tells which duels went to humans."""
    return requested_by == label


def held_duel(inflight: Iterable[Any], label: str, limit: int) -> int | None:
    """The duel to hand back instead of a new one, or None when the annotator may start one.

    ``inflight``: the campaign's live in-flight duels (``id``, ``requested_by``). An
    annotator holding ``limit`` of them gets its oldest one again (same duel, no new
    charge); under the limit it gets a new duel.
    """
    own = sorted(int(r.id) for r in inflight if r.requested_by == label)
    return own[0] if len(own) >= max(1, int(limit)) else None


# ---------------------------------------------------------------- raising a limit
END_LIMIT_MAX_DUELS = "max_duels"
END_LIMIT_PROVIDER = "provider"  # paused on a provider fault (service.money.ledger): any PATCH continues it
END_LIMITS = (END_LIMIT_BUDGET, END_LIMIT_MAX_DUELS, END_LIMIT_PROVIDER)
#: The error of an in-flight duel cancelled by its campaign's end.
CANCELLED_ERROR = "the campaign ended before this duel was judged"


def limit_below_use(
    new_budget_nusd: int | None,
    spend_nusd: int,
    reserved_nusd: int,
    new_max_duels: int | None,
    duels_judged: int,
    in_flight: int = 0,
) -> str | None:
    """Why new limits cannot be set, or None.

    A budget must cover what is spent plus what the duels in flight reserved (so the
    spend never passes it), a duel cap the duels judged plus those in flight.
    """
    if new_budget_nusd is not None and new_budget_nusd < spend_nusd + reserved_nusd:
        held = (
            f" plus {reserved_nusd / 1e9:.9g} USD reserved by duels in flight and pre-generation calls"
            if reserved_nusd
            else ""
        )
        return f"budget {new_budget_nusd / 1e9:.9g} USD is below the {spend_nusd / 1e9:.9g} USD already spent{held}"
    if new_max_duels is not None and new_max_duels < duels_judged + in_flight:
        held = f" plus {in_flight} in flight" if in_flight else ""
        return f"max_duels {new_max_duels} is below the {duels_judged} duels already judged{held}"
    return None


def continue_refusal(
    status: str,
    end_limit: str | None,
    budget_raised: bool,
    max_duels_raised: bool,
    budget_nusd: int | None,
    spend_nusd: int,
    max_duels: int | None,
    duels_judged: int,
) -> str | None:
    """Why an ended campaign does not go back to running with these (new) limits, or None when it does.

    Only a campaign that ended on its budget or duel cap continues, once that limit
    was raised (one paused on a provider fault continues without raising anything) and neither limit is reached any more (the policy state is untouched,
    so the certificate's guarantee is that of one uninterrupted campaign).
    """
    if end_limit not in END_LIMITS:
        return f"the campaign ended with status {status}, not on its budget or duel cap; it cannot be continued"
    if end_limit == END_LIMIT_BUDGET and not budget_raised:
        return "the campaign ended on its budget: raise the budget to continue it"
    if end_limit == END_LIMIT_MAX_DUELS and not max_duels_raised:
        return "the campaign ended on its duel cap: raise max_duels to continue it"
    if budget_spent(budget_nusd, spend_nusd):
        return f"the budget ({budget_nusd / 1e9 if budget_nusd else 0:.9g} USD) is already spent; raise it further"
    if max_duels_reached(max_duels, duels_judged):
        return f"max_duels ({max_duels}) is already reached; raise it further"
    return None


# ---------------------------------------------------------------- recording a verdict
def score_of(
    choice: str,
    model_i: int,
    model_a: int,
    model_b: int,
    tie_policy: str,
    seed: int,
    number: int,
    score_a: float | None = None,
    *,
    draw_key: str | None = None,
) -> float | None:
    """The score of model_i for a verdict under the campaign's tie policy (None: not counted).

    A win is 1 or 0; a graded verdict (an LLM judge with strengths) gives
    ``score_a``, the score of answer ``a`` in [0, 1], instead (its side decides the
    choice, so ``a`` has ``score_a > 1/2``). A tie or "both bad" counts half under
    ``half``, a fair coin (:func:`tie_coin`, keyed by the campaign's draw key) under
    ``random``, nothing under ``drop``.
    """
    if choice in (Choice.A, Choice.B):
        if score_a is not None and 0.0 <= score_a <= 1.0 and (score_a > 0.5) == (choice == Choice.A):
            return float(score_a) if model_a == model_i else 1.0 - float(score_a)
        winner = model_a if choice == Choice.A else model_b
        return 1.0 if winner == model_i else 0.0
    if tie_policy == TiePolicy.HALF:
        return 0.5
    if tie_policy == TiePolicy.RANDOM:
        return 1.0 if tie_coin(seed, number, draw_key) else 0.0
    return None


def judge_cost_per_duel(judge: dict) -> float:
    """c_J, the judge's expected cost per duel used by the cost-aware allocation.

    An LLM judge costs its configured per-call ``cost`` times its calls per duel
    (:func:`judge_orders`: two with ``orders: both``, one with ``orders: one``, two with
    ``orders: auto``, the mode it starts in); a human
    judge its ``fee_per_vote``; a simulated judge nothing (docs/service.md, Judge cost).
    """
    judge = stored(judge)
    if judge.get("kind") == "hybrid":  # hybrid hook: the automatic judge; the human fee is the policy's own
        return judge_cost_per_duel(judge["llm"])
    if judge.get("kind") == "human":
        return float(judge.get("fee_per_vote") or 0.0)
    if judge.get("kind") == "jury":  # each juror's calls at its own cost
        return sum(judge_cost_per_duel(j) for j in judge.get("judges") or [])
    if judge.get("kind") != "llm":
        return 0.0
    return float(judge.get("cost") or 0.0) * float(judge_orders(judge))


def vote_fee_nusd(judge: dict) -> int:
    """What one recorded human vote is charged (nano-USD): the judge's ``fee_per_vote``, 0 for other judges."""
    judge = stored(judge)
    if judge.get("kind") != "human":
        return 0
    return cost_nusd(judge.get("fee_per_vote") or 0.0)
