"""Drive the service's own policy (dctas-pc, :class:`algorithms.policies.PCPolicy`) on a prompt-level instance.

Unlike :mod:`algorithms.prompt_sim` (a self-contained rule), this steps the real
policy through ``next_pair`` / ``record`` as the service does, in two modes with
the same seed (docs/reuse.md, "The service's policy without replacement"):

* ``reuse``: each duel draws its prompt uniformly with replacement and pays only
  the answers and the (pair, prompt) verdict not yet paid; before each selection
  the policy gets the service's marginal costs (:func:`algorithms.reuse_costs.marginal_costs`:
  per model ``c_i x`` share of prompts with no stored answer of ``i``, judge
  ``c_J x`` share of verdicts not stored, rounded up to twentieths, at least 1%)
  through ``set_costs``; certificates are dctas-pc's i.i.d. test.
* ``wor``: pair ``k``'s ``n``-th duel uses prompt ``perm[n]`` of one secret random
  permutation shared by all pairs (``PCPolicy(population=P)``: (R4) tests, exact
  certificates, "undecidable"); it pays only what is not yet paid (answers), and
  every verdict is new.

A new verdict costs ``2 x instance.judge_cost`` (both orders), as in
:mod:`algorithms.prompt_sim`, with ``orders="both"``; with ``orders="auto"`` (the default of a
campaign's LLM judge, docs/algorithms.md "Orders chosen by the data") each new verdict is read
in the mode :class:`algorithms.judge_orders.AutoOrders` picks (one call or two), the table's
judge being order-consistent (both orders give ``v_ij(p)``), and the policy is told the cost of
two calls, as the service tells it (``service/money/costs.py: judge_cost_per_duel``). Pure (no
I/O); one campaign per call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .judge_orders import AutoOrders
from .policies import UNDECIDABLE, PCPolicy, make_policy
from .prompt_level import PromptInstance
from .prompt_sim import CAPPED, NO_CW, tally_trials
from .prompt_sim import UNDECIDABLE as UNDECIDABLE_CODE
from .reuse_costs import marginal_costs

__all__ = ["JUDGE_ORDERS", "POLICY_MODES", "PolicyCampaign", "policy_campaign", "policy_trials"]

POLICY_MODES = ("reuse", "wor")
JUDGE_ORDERS = ("both", "auto")


@dataclass(frozen=True)
class PolicyCampaign:
    """One campaign: ``outcome`` is the winner's index, ``NO_CW``, ``UNDECIDABLE`` or ``CAPPED``
    (codes of :mod:`algorithms.prompt_sim`); ``spend`` what was paid, ``duels`` judged duels;
    ``wins``/``counts`` the policy's L x L win (ties as halves) and duel counts at the end;
    ``judge_calls`` the judge calls paid, ``answer_spend`` the part of ``spend`` paid for answers,
    ``answers_by_model`` the answers paid per model."""

    outcome: int
    spend: float
    duels: int
    answers_paid: int
    verdicts_paid: int
    wins: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    counts: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    judge_calls: int = 0
    answer_spend: float = 0.0
    answers_by_model: tuple[int, ...] = ()
    #: each certificate as it was issued: (spend so far, duels so far, winner, beaten model)
    certificates: tuple[tuple[float, int, int, int], ...] = ()


def policy_campaign(
    instance: PromptInstance, mode: str, delta: float, seed: int, *, max_duels: int = 200_000, orders: str = "both"
) -> PolicyCampaign:
    """Run dctas-pc on ``instance`` in ``mode`` (``reuse`` or ``wor``) until it stops or ``max_duels``;
    a new verdict read in both orders (``orders="both"``) or in the mode ``orders: auto`` picks."""
    if mode not in POLICY_MODES:
        raise ValueError(f"mode must be one of {POLICY_MODES}, got {mode!r}")
    if orders not in JUDGE_ORDERS:
        raise ValueError(f"orders must be one of {JUDGE_ORDERS}, got {orders!r}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    L, P = instance.n_models, instance.n_prompts
    H = instance.halves
    costs = [float(x) for x in instance.costs]
    cj = 2.0 * instance.judge_cost
    rng = np.random.default_rng(seed)
    wor = mode == "wor"
    perm = rng.permutation(P) if wor else None
    pol = make_policy("dctas-pc", costs, delta, judge_cost=cj, population=P if wor else None)
    assert isinstance(pol, PCPolicy)
    paid_ans = np.zeros((L, P), dtype=bool)
    paid_ver = np.zeros((L, L, P), dtype=bool)
    answered = [0] * L
    judged = calls = 0
    answer_spend = 0.0
    auto = AutoOrders() if orders == "auto" else None
    draws = np.random.default_rng([seed, 1])  # auto's monitoring draws: independent of the verdicts
    certs: list[tuple[float, int, int, int]] = []
    seen = np.zeros((L, L), dtype=bool)
    n_verdicts = L * (L - 1) // 2 * P
    spend = 0.0
    duels = 0
    dirty = True
    while not pol.stopped and duels < max_duels:
        if not wor and dirty:
            mc = marginal_costs(costs, cj, answered, judged, (P, n_verdicts))
            pol.set_costs(mc["costs"], mc["judge_cost"])
            dirty = False
        i, j = pol.next_pair()
        if wor:
            assert perm is not None
            p = int(perm[int(pol.N[pol.pair_index(i, j)])])
        else:
            p = int(rng.integers(P))
        for m in (i, j):
            if not paid_ans[m, p]:
                paid_ans[m, p] = True
                answered[m] += 1
                spend += costs[m]
                answer_spend += costs[m]
                dirty = True
        a, b = min(i, j), max(i, j)
        v = H[i, j, p] / 2.0
        if not paid_ver[a, b, p]:
            paid_ver[a, b, p] = True
            judged += 1
            n_calls = 2 if auto is None or auto.mode(float(draws.random())) == "both" else 1
            if auto is not None and n_calls == 2:
                auto.observe(v, v, v)  # an order-consistent judge: both calls and the combined score agree
            calls += n_calls
            spend += cj * n_calls / 2.0
            dirty = True
        pol.record(i, j, v)
        duels += 1
        if int(pol.BEAT.sum()) > len(certs):
            for w, lost in zip(*np.nonzero(pol.BEAT & ~seen)):
                certs.append((spend, duels, int(w), int(lost)))
            seen = pol.BEAT.copy()
    if not pol.stopped:
        outcome = CAPPED
    elif pol.winner is not None:
        outcome = int(pol.winner)
    elif getattr(pol, "verdict", None) == UNDECIDABLE:
        outcome = UNDECIDABLE_CODE
    else:
        outcome = NO_CW
    return PolicyCampaign(
        outcome,
        spend,
        duels,
        int(paid_ans.sum()),
        judged,
        pol.wins_matrix(),
        pol.counts_matrix(),
        judge_calls=calls,
        answer_spend=answer_spend,
        answers_by_model=tuple(answered),
        certificates=tuple(certs),
    )


def policy_trials(
    instance: PromptInstance, mode: str, delta: float, trials: int, seed: int = 0, max_duels: int = 200_000
) -> dict:
    """``trials`` campaigns on seeds ``seed, seed + 1, ...``: per-trial arrays, errors and capped counts.

    An error is an answer other than the prompt-set truth: a wrong winner, or "no
    Condorcet winner"/"undecidable" when one exists (or a winner when none exists).
    Capped campaigns are counted apart, not as errors.
    """
    return tally_trials(
        instance, trials, lambda t: policy_campaign(instance, mode, delta, seed + t, max_duels=max_duels)
    )
