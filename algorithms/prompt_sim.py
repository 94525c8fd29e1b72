"""Simulate a pairwise-certificate campaign on a prompt-level instance, with and without reuse.

The rule (self-contained here, docs/reuse.md):

* Certificate "``m`` beaten by ``k``": a one-sided test at level
  ``alpha = delta / (L - 1)`` rejects ``p_mk >= 1/2`` (equivalently shows
  ``p_km > 1/2``). Each pair ``(i, j)`` runs two bettors on its own outcomes,
  one for each direction (:func:`algorithms.prompt_level.bet_size`).
* Stop when one model is left unbeaten (it is returned) or when every model is
  beaten ("no Condorcet winner").
* Pair choice: a pair is *useful* when it is undecided and one of its
  directions could still beat a model not yet beaten. Among useful pairs pick
  the one with the least estimated spend to a decision::

      need_k  = max(1, log(1/alpha) / (2 g_k^2) - n_k),  g_k = |xbar_k - 1/2| + 1/sqrt(n_k + 1)
      score_k = need_k * (expected marginal cost of one more duel on k + COST_FLOOR * fresh cost)

  (ties to the lowest pair index). The rule is the same in every mode; only
  the cost of a duel differs.

Modes:

* ``MODE_FRESH`` (a): prompts uniform with replacement, every duel pays two
  answers and two judge calls; i.i.d. test (R2).
* ``MODE_REUSE`` (b): same draws, pays only answers and verdicts not yet paid;
  i.i.d. test (R2). Given the same seed, (a) and (b) make the same duels.
* ``MODE_WOR`` (c): pair ``k``'s ``n``-th duel uses prompt ``perm[n]`` of one
  secret random permutation shared by all pairs; test (R4) with ``N = P``; a
  pair whose sum already decides the prompt-set mean certifies exactly; a pair
  that has seen every prompt is never picked; the campaign ends with "no
  Condorcet winner on this prompt set" (``UNDECIDABLE``) when no useful pair is
  left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from algorithms.prompt_level import PromptInstance, log_wealth_step

__all__ = [
    "MODE_FRESH",
    "MODE_REUSE",
    "MODE_WOR",
    "MODES",
    "NO_CW",
    "UNDECIDABLE",
    "CAPPED",
    "CampaignResult",
    "simulate_campaign",
    "run_trials",
]

MODE_FRESH, MODE_REUSE, MODE_WOR = 0, 1, 2
MODES = {"fresh": MODE_FRESH, "reuse": MODE_REUSE, "wor": MODE_WOR}
NO_CW, UNDECIDABLE, CAPPED = -1, -2, -3
COST_FLOOR = (
    0.01  # a duel already paid for still counts 1% of a fresh duel, so free pairs near a tie are not drawn forever
)


@njit(cache=True)
def _campaign(H, costs, cj, mode, alpha, seed, max_duels, trace):
    L = H.shape[0]
    P = H.shape[2]
    K = L * (L - 1) // 2
    PI = np.empty(K, np.int64)
    PJ = np.empty(K, np.int64)
    k = 0
    for i in range(L):
        for j in range(i + 1, L):
            PI[k] = i
            PJ[k] = j
            k += 1
    np.random.seed(seed)
    perm = np.random.permutation(P)
    pos = np.empty(P, np.int64)  # pos[p] = position of prompt p in perm
    for q in range(P):
        pos[perm[q]] = q
    n = np.zeros(K, np.int64)
    SH = np.zeros(K, np.int64)  # sum of 2 v_ij over the pair's draws
    SQ = np.zeros(K)  # sum of v_ij^2
    logA = np.zeros(K)  # bettor on p_ij > 1/2  ("j beaten by i")
    logB = np.zeros(K)  # bettor on p_ji > 1/2  ("i beaten by j")
    status = np.zeros(K, np.int64)  # 0 open, 1 j beaten by i, 2 i beaten by j, 3 closed undecidable
    beaten = np.zeros(L, np.bool_)
    paid_ans = np.zeros((L, P), np.bool_)
    paid_ver = np.zeros((K, P), np.bool_)
    fresh = np.empty(K)
    unpaid = np.empty(K)  # (b) unpaid cost summed over all prompts; (c) over the pair's prompts not yet drawn
    for k in range(K):
        fresh[k] = costs[PI[k]] + costs[PJ[k]] + 2.0 * cj
        unpaid[k] = P * fresh[k]
    thr = math.log(1.0 / alpha)
    spend = 0.0
    n_answers = 0
    n_verdicts = 0
    duels = 0
    T = max_duels if trace else 1
    tr_pair = np.full(T, -1, np.int64)
    tr_prompt = np.full(T, -1, np.int64)
    outcome = CAPPED
    while True:
        # ---- end?
        alive = 0
        last = -1
        for m in range(L):
            if not beaten[m]:
                alive += 1
                last = m
        if alive == 1:
            outcome = last
            break
        if alive == 0:
            outcome = NO_CW
            break
        # ---- choose
        best = -1
        best_score = np.inf
        for k in range(K):
            if status[k] != 0:
                continue
            i = PI[k]
            j = PJ[k]
            nk = n[k]
            if mode == MODE_WOR:
                if nk >= P:
                    continue
                left = 2 * (P - nk)
                possA = SH[k] + left > P
                possB = (2 * nk - SH[k]) + left > P
            else:
                possA = True
                possB = True
            if not ((possA and not beaten[j]) or (possB and not beaten[i])):
                continue
            xbar = 0.5
            if nk > 0:
                xbar = SH[k] / (2.0 * nk)
            g = abs(xbar - 0.5) + 1.0 / math.sqrt(nk + 1.0)
            need = thr / (2.0 * g * g) - nk
            if need < 1.0:
                need = 1.0
            if mode == MODE_FRESH:
                marg = fresh[k]
            elif mode == MODE_REUSE:
                marg = unpaid[k] / P
            else:
                marg = unpaid[k] / (P - nk)
                if need > P - nk:
                    need = P - nk
            score = need * (marg + COST_FLOOR * fresh[k])
            if score < best_score:
                best_score = score
                best = k
        if best < 0:
            outcome = UNDECIDABLE
            break
        if duels >= max_duels:
            outcome = CAPPED
            break
        # ---- duel
        k = best
        i = PI[k]
        j = PJ[k]
        nk = n[k]
        if mode == MODE_WOR:
            p = perm[nk]
        else:
            p = np.random.randint(0, P)
        if trace:
            tr_pair[duels] = k
            tr_prompt[duels] = p
        duels += 1
        if mode == MODE_FRESH:
            spend += fresh[k]
            n_answers += 2
            n_verdicts += 1
        else:
            if mode == MODE_WOR:
                unpaid[k] -= (
                    (0.0 if paid_ans[i, p] else costs[i])
                    + (0.0 if paid_ans[j, p] else costs[j])
                    + (0.0 if paid_ver[k, p] else 2.0 * cj)
                )
            for a in (i, j):
                if not paid_ans[a, p]:
                    paid_ans[a, p] = True
                    spend += costs[a]
                    n_answers += 1
                    for k2 in range(K):
                        if PI[k2] != a and PJ[k2] != a:
                            continue
                        if mode == MODE_REUSE:
                            unpaid[k2] -= costs[a]
                        elif k2 != k and pos[p] >= n[k2]:
                            unpaid[k2] -= costs[a]
            if not paid_ver[k, p]:
                paid_ver[k, p] = True
                spend += 2.0 * cj
                n_verdicts += 1
                if mode == MODE_REUSE:
                    unpaid[k] -= 2.0 * cj
        # ---- bet (the bets use the pair's own past only), then record
        x = H[i, j, p] / 2.0
        s = SH[k] / 2.0
        sB = nk - s
        sqB = nk - 2.0 * s + SQ[k]
        Npop = P if mode == MODE_WOR else 0  # (R4) with N = P, else (R2)
        inc = log_wealth_step(nk, s, SQ[k], x, Npop, 0.5)
        if inc < np.inf:  # inf (m_s < 0) only on a pair already closed by its exact certificate
            logA[k] += inc
        inc = log_wealth_step(nk, sB, sqB, 1.0 - x, Npop, 0.5)
        if inc < np.inf:
            logB[k] += inc
        n[k] = nk + 1
        SH[k] += H[i, j, p]
        SQ[k] += x * x
        # ---- certify
        nk = n[k]
        if mode == MODE_WOR and SH[k] > P:
            status[k] = 1  # exact: p_ij > 1/2 on the prompt set
        elif mode == MODE_WOR and 2 * nk - SH[k] > P:
            status[k] = 2
        elif logA[k] >= thr:
            status[k] = 1
        elif logB[k] >= thr:
            status[k] = 2
        elif mode == MODE_WOR and nk == P:
            status[k] = 3  # exact tie p_ij = 1/2: neither direction can ever be certified
        if status[k] == 1:
            beaten[j] = True
        elif status[k] == 2:
            beaten[i] = True
    return (
        outcome,
        spend,
        duels,
        n_answers,
        n_verdicts,
        tr_pair[:duels] if trace else tr_pair[:0],
        tr_prompt[:duels] if trace else tr_prompt[:0],
        n,
    )


@dataclass(frozen=True)
class CampaignResult:
    """One simulated campaign.

    ``outcome``: the winner's index, ``NO_CW`` (every model beaten),
    ``UNDECIDABLE`` (mode c: what is left cannot be decided on this prompt set,
    so there is no Condorcet winner on it) or ``CAPPED`` (``max_duels`` reached).
    ``trace_pairs``/``trace_prompts``: the pair index and prompt of every duel
    (empty unless ``trace=True``); ``pair_counts``: duels per pair.
    """

    outcome: int
    spend: float
    duels: int
    answers_paid: int
    verdicts_paid: int
    trace_pairs: np.ndarray
    trace_prompts: np.ndarray
    pair_counts: np.ndarray

    @property
    def says_no_winner(self) -> bool:
        return self.outcome in (NO_CW, UNDECIDABLE)


def _mode(mode: str | int) -> int:
    if isinstance(mode, str):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
        return MODES[mode]
    if mode not in MODES.values():
        raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
    return int(mode)


def simulate_campaign(
    instance: PromptInstance,
    mode: str | int,
    delta: float,
    seed: int,
    *,
    max_duels: int = 1_000_000,
    trace: bool = False,
) -> CampaignResult:
    """Run one campaign (module docstring) at confidence ``delta`` with a seeded generator."""
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if int(max_duels) < 1:
        raise ValueError("max_duels must be >= 1")
    L = instance.n_models
    alpha = delta / (L - 1)
    out = _campaign(
        instance.halves,
        instance.costs,
        instance.judge_cost,
        _mode(mode),
        alpha,
        int(seed) % (2**32),
        int(max_duels),
        bool(trace),
    )
    return CampaignResult(
        int(out[0]), float(out[1]), int(out[2]), int(out[3]), int(out[4]), out[5].copy(), out[6].copy(), out[7].copy()
    )


def run_trials(
    instance: PromptInstance, mode: str | int, delta: float, trials: int, seed: int = 0, max_duels: int = 1_000_000
) -> dict:
    """``trials`` campaigns with seeds ``seed, seed + 1, ...``; per-trial arrays and the error count.

    An error is an answer other than the prompt-set truth: a wrong winner, or
    "no Condorcet winner" when one exists (or a winner when none exists).
    Capped campaigns are counted apart (``capped``), not as errors.
    """
    return tally_trials(
        instance, trials, lambda t: simulate_campaign(instance, mode, delta, seed + t, max_duels=max_duels)
    )


def tally_trials(instance: PromptInstance, trials: int, campaign: Any) -> dict:
    """Run ``campaign(t)`` for ``t = 0..trials-1`` (each result has ``outcome``, ``spend``,
    ``duels``) and count errors against ``instance``'s prompt-set winner, capped apart."""
    truth = instance.condorcet_winner()
    outcome = np.empty(trials, np.int64)
    spend = np.empty(trials)
    duels = np.empty(trials, np.int64)
    for t in range(trials):
        r = campaign(t)
        outcome[t], spend[t], duels[t] = r.outcome, r.spend, r.duels
    capped = outcome == CAPPED
    wrong = (outcome >= 0) if truth is None else ((outcome != truth) & ~capped)
    return {
        "outcome": outcome,
        "spend": spend,
        "duels": duels,
        "errors": int(wrong.sum()),
        "capped": int(capped.sum()),
        "truth": truth,
    }
