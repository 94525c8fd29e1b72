"""The hybrid judge's decisions (pure): an automatic judge on every duel, a human on a random fraction.

A campaign whose ``judge`` is ``{"kind": "hybrid", "llm": {...}, "human": {"fee_per_vote": ...},
"human_rate": 0.2 | "active"}`` runs :class:`algorithms.hybrid.HybridPolicy` (stored algorithm
``dctas-pc-hybrid``). Each duel's answers are judged by the automatic judge at once; the policy
gives ``pi``; a coin keyed by the campaign's secret draw key (:func:`human_coin`) decides
whether the duel also waits for a human vote. The pool is :mod:`.hybrid_tx`, the verdicts :mod:`service.cycle.hybrid_verdict`; the
validity argument in docs/clients-and-judges.md, *Hybrid*.

What a hybrid duel stores in ``judge_detail["hybrid"]`` (:func:`hybrid_record`):
``judge_score`` (the automatic judge's score of model_i, in [0, 1]), ``judge_choice`` (its
verdict, a/b/tie/bad), ``pi``, ``coin`` (the keyed uniform draw) and ``selected``
(``coin < pi``). A selected duel's human vote is the duel's ``choice`` and ``score``.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from algorithms.hybrid import HYBRID, N_, HybridPolicy, hybrid_state_params
from algorithms.vocabulary import Algorithm, PromptSampling, TiePolicy

from ..money.costs import cost_nusd, judge_cost_per_duel
from ..stored_config import stored
from .draws import keyed_uniform
from .scoring import score_of

KIND = "hybrid"
ALGORITHM = HYBRID  # what the campaign row stores: "dctas-pc-hybrid"
#: ``judged_by`` of a duel the automatic judge settled alone; any other judged duel has a human vote
JUDGED_BY_JUDGE = "judge:hybrid"
COIN_BITS = 53
FORECAST_REFUSAL = (
    "forecasts do not simulate a hybrid judge (its human votes and the judge's agreement with them); "
    "benchmarks/bench_hybrid.py simulates hybrid campaigns"
)


def is_hybrid(judge: Mapping[str, Any] | None) -> bool:
    return bool(judge) and stored(judge).get("kind") == KIND


def llm_part(judge: Mapping[str, Any]) -> dict[str, Any]:
    """The automatic judge of a hybrid judge config (stored form)."""
    return dict(stored(judge)["llm"])


def fee_nusd(judge: Mapping[str, Any]) -> int:
    """One human vote's fee (nano-USD)."""
    return cost_nusd((stored(judge).get("human") or {}).get("fee_per_vote") or 0.0)


def refusal(algorithm: str, prompt_sampling: str | None, tie_policy: str | None) -> str | None:
    """Why a campaign cannot have a hybrid judge, or None (a 422 / a campaign file's exit 2)."""
    if algorithm != Algorithm.DCTAS_PC:
        return (
            f"a hybrid judge needs algorithm dctas-pc (it runs as {ALGORITHM}: dctas-pc's pairwise "
            f"certificates on the human-preference estimates), got {algorithm}"
        )
    if prompt_sampling == PromptSampling.WITHOUT_REPLACEMENT:
        return (
            "a hybrid judge samples prompts with replacement: its test is for independent draws, and "
            "without_replacement is not supported"
        )
    if tie_policy == TiePolicy.DROP:
        return (
            "a hybrid judge needs tie_policy half or random: with drop a human tie would leave a selected "
            "duel without a score, and the estimate is unbiased only if every selected duel counts"
        )
    return None


def new_policy(
    judge: Mapping[str, Any], costs: list[float], delta: float, stored_state: Mapping[str, Any] | None = None
) -> HybridPolicy:
    """The campaign's policy: dctas-pc-hybrid with the automatic judge's cost and the human fee;
    ``stored_state``: a replay's stored state, whose certificate level and test it keeps."""
    judge = stored(judge)
    extra: dict[str, Any] = {}
    if stored_state:  # the stored state's level, test, gap prior and allocation estimate (naming none:
        # delta/(L-1), mixture, wide, mean)
        params = hybrid_state_params(stored_state)
        extra = {k: params[k] for k in ("level", "test", "prior", "alloc")}
    return HybridPolicy(
        costs,
        delta,
        judge_cost=judge_cost_per_duel(judge["llm"]),
        human_fee=float((judge.get("human") or {}).get("fee_per_vote") or 0.0),
        human_rate=judge.get("human_rate", 0.2),
        **extra,
    )


def human_coin(draw_key: str, number: int) -> float:
    """Duel ``number``'s uniform draw in [0, 1) for the human-selection coin: HMAC-SHA256 of
    ``"{number}:human"`` under the campaign's secret draw key (replayable, unknown to annotators)."""
    return (keyed_uniform(draw_key, f"{number}:human") >> (256 - COIN_BITS)) / float(1 << COIN_BITS)


def judge_score(
    choice: str, *, model_i: int, model_a: int, model_b: int, number: int, score_a: float | None, draw_key: str | None
) -> float:
    """The automatic judge's score of model_i in [0, 1]: its graded or win score, a tie as 1/2."""
    s = score_of(
        choice,
        model_i=model_i,
        model_a=model_a,
        model_b=model_b,
        tie_policy=TiePolicy.HALF,
        seed=0,
        number=number,
        score_a=score_a,
        draw_key=draw_key,
    )
    return 0.5 if s is None else float(s)


def hybrid_record(choice: str, score: float, pi: float, coin: float, *, seen: int | None = None) -> dict[str, Any]:
    """What a hybrid duel stores about its automatic verdict and its coin; ``seen``: how many of
    its pair's duels the policy had recorded when ``pi`` was drawn (the replay recomputes an active
    ``pi`` from the pair's state at that point)."""
    rec = {"judge_choice": choice, "judge_score": score, "pi": pi, "coin": coin, "selected": coin < pi}
    if seen is not None:
        rec["seen"] = seen
    return rec


def pair_seen(policy: HybridPolicy, i: int, j: int) -> int:
    """How many duels of pair (i, j) the policy has recorded."""
    return int(policy.ST[policy.pair_index(i, j), N_])


def _active_pi_diff(policy: HybridPolicy, r: Any, h: Mapping[str, Any], diff: list[str]) -> None:
    """An active ``pi`` must be rule (H5) on the pair's state after its first ``seen`` records (kept
    by :func:`replay_record` on the replayed policy): drawn before the human vote, from the past."""
    i, j = int(r.model_i), int(r.model_j)
    k = policy.pair_index(i, j)
    snaps = _pair_snaps(policy, k)
    m = h.get("seen")
    if not policy.active or not isinstance(m, int) or isinstance(m, bool):
        return
    if not 0 <= m < len(snaps):
        diff.append(f"duel {r.id}: pi drawn after {m} records of its pair, but {len(snaps) - 1} came before it")
        return
    J = float(h["judge_score"]) if i < j else 1.0 - float(h["judge_score"])
    expected = policy.pi_of_row(snaps[m], J)
    if abs(expected - float(h["pi"])) > 1e-12:
        diff.append(f"duel {r.id}: pi {h['pi']} != {expected}, the active rule on its pair's first {m} records")


def _pair_snaps(policy: HybridPolicy, k: int) -> list[np.ndarray]:
    """The replayed pair's statistics row after each of its records (the first: before any)."""
    pairs = policy.__dict__.setdefault("_replay_pairs", {})
    if k not in pairs:
        pairs[k] = [policy.ST[k].copy()]
    return pairs[k]


def _keep_pair_state(policy: HybridPolicy, r: Any) -> None:
    k = policy.pair_index(int(r.model_i), int(r.model_j))
    _pair_snaps(policy, k).append(policy.ST[k].copy())


def detail_of(judge_detail: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``hybrid`` record of a duel's ``judge_detail`` (None: not judged by the automatic judge yet)."""
    if not isinstance(judge_detail, Mapping):
        return None
    h = judge_detail.get("hybrid")
    return dict(h) if isinstance(h, Mapping) else None


def record_args(judge_detail: Mapping[str, Any] | None, score: float | None) -> tuple[float, float | None, float]:
    """``(J, H or None, pi)`` of a resolved duel for :meth:`HybridPolicy.record`."""
    h = detail_of(judge_detail)
    if h is None:
        raise ValueError("not a hybrid duel")
    if not h["selected"]:
        return float(h["judge_score"]), None, float(h["pi"])
    if score is None:
        raise ValueError("a hybrid duel selected for a human vote has no human score")
    return float(h["judge_score"]), float(score), float(h["pi"])


def resolved(status: str, judge_detail: Mapping[str, Any] | None, score: float | None) -> bool:
    """Does the duel have everything its record needs (judge verdict; the human's score when selected)?"""
    h = detail_of(judge_detail)
    if h is None:
        return False
    return (not h["selected"]) or (status == "judged" and score is not None)


def next_records(rows: list[Any]) -> list[Any]:
    """A pair's duels to record now, in the order they were drawn (``select_seq``).

    ``rows``: the pair's duels not recorded yet that are in flight or judged (failed, expired or
    cancelled duels never count and do not block). Records go in draw order and stop at the first
    duel that is not resolved: a judge-only duel waits behind an earlier duel still waiting for its
    human (or its verdict), so the order of a pair's outcomes never depends on how long votes take.
    """
    out = []
    for r in sorted(rows, key=lambda r: r.select_seq):
        if not resolved(r.status, r.judge_detail, r.score):
            break
        out.append(r)
    return out


def counts_of(policy: HybridPolicy) -> dict[str, Any]:
    """``N`` (duels) and ``W`` (estimated human wins: duels x the pair's estimate) as L x L matrices."""
    L = policy.L
    N = [[0.0] * L for _ in range(L)]
    W = [[0.0] * L for _ in range(L)]
    s = policy.summary()
    for (i, j), n, est in zip(s["pairs"], s["duels"], s["estimate"]):
        N[i][j] = N[j][i] = float(n)
        p = 0.5 if est is None else min(max(float(est), 0.0), 1.0)
        W[i][j], W[j][i] = n * p, n * (1.0 - p)
    return {"N": N, "W": W}


def draw_order_diff(rows: list[Any]) -> list[str]:
    """What a replay finds wrong with the draw-order rule: each pair's recorded duels must be its
    duels in the order they were drawn (``select_seq``), none left out before a recorded one. A
    duel belongs to its pair's sequence once its verdict and coin are recorded (a failed verdict
    never does); one that is not recorded may only be followed by duels that are not either."""
    pairs: dict[tuple[int, int], list[Any]] = {}
    for r in rows:
        pairs.setdefault((int(r.model_i), int(r.model_j)), []).append(r)
    out: list[str] = []
    for items in pairs.values():
        gap, last = None, None
        for r in sorted(items, key=lambda r: r.select_seq):
            if r.record_seq is None:
                if gap is None and r.status != "failed" and detail_of(r.judge_detail) is not None:
                    gap = r
                continue
            if gap is not None:
                out.append(
                    f"duel {r.id}: recorded although duel {gap.id} of its pair, drawn before it, was not "
                    f"(status {gap.status}): the pair's records left out a duel of its draw order"
                )
            if last is not None and r.record_seq < last.record_seq:
                out.append(f"duel {r.id}: recorded before duel {last.id} of its pair, drawn before it")
            last = r
    return out


def replay_record(policy: HybridPolicy, r: Any, draw_key: str, diff: list[str]) -> None:
    """Replay one recorded hybrid duel: its coin must be the keyed draw (and ``selected`` its
    outcome), a fixed rate's ``pi`` the rate; then the record the policy saw."""
    h = detail_of(r.judge_detail)
    if h is None:
        diff.append(f"duel {r.id}: recorded without its hybrid record (judge verdict, pi, coin)")
        return
    coin = human_coin(draw_key, int(r.number))
    if h.get("coin") != coin or h.get("selected") != (coin < float(h["pi"])):
        diff.append(f"duel {r.id}: stored coin {h.get('coin')} / selected {h.get('selected')} != keyed draw {coin}")
    if not policy.active and float(h["pi"]) != float(policy.human_rate):
        diff.append(f"duel {r.id}: pi {h['pi']} != the fixed human_rate {policy.human_rate}")
    if h["selected"] and r.score is None:
        diff.append(f"duel {r.id}: selected for a human but recorded without a human score")
        return
    _active_pi_diff(policy, r, h, diff)
    J, H, pi = record_args(r.judge_detail, r.score)
    policy.record(int(r.model_i), int(r.model_j), J, H, pi)
    _keep_pair_state(policy, r)
