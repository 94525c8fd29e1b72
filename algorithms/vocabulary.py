"""The shared vocabulary of llmduel: every name that crosses a layer, defined once.

Each set of names is a :class:`enum.StrEnum`, so a member *is* its string value:
``Algorithm.DCTAS == "dctas"`` and members serialise to JSON as plain strings.
Every layer (algorithms, judges, model clients, service, API schemas, command
line) imports its names from here; no other module spells these strings.

This module sits in the lowest layer because every other layer may import from
it; it holds names only, no behaviour.
"""

from __future__ import annotations

from enum import StrEnum


class Algorithm(StrEnum):
    """Sampling-and-stopping rules (the paper's five; see docs/algorithms.md)."""

    DCTAS = "dctas"  # cost-aware Track-and-Stop (the paper's Algorithm 1)
    DCTAS_PC = "dctas-pc"  # pairwise certificates; can answer "no Condorcet winner" (not from the paper)
    TAS = "tas"  # Track-and-Stop, cost-unaware allocation
    CRR = "crr"  # cost-aware round robin over the pairs
    DCTAC = "dctac"  # cost-aware Track-and-Challenge (Hoeffding stop)
    DPCA = "dpca"  # phased cost-aware elimination


#: Every algorithm's name, llmduel's default first; the paper's five (exactly reproducible).
ALGORITHMS = ("dctas-pc", "dctas", "tas", "crr", "dctac", "dpca")
PAPER_ALGORITHMS = ("dctas", "tas", "crr", "dctac", "dpca")


class TiePolicy(StrEnum):
    """What a tie (and ``both_bad``) does to the statistics (docs/architecture.md, Ties)."""

    DROP = "drop"  # not counted
    HALF = "half"  # half a win each
    RANDOM = "random"  # a fair coin decides


class Choice(StrEnum):
    """A verdict on a duel, about the answers as shown (A left, B right)."""

    A = "a"
    B = "b"
    TIE = "tie"
    BOTH_BAD = "both_bad"


class CampaignStatus(StrEnum):
    """Where a campaign is; every status but ``RUNNING`` is final."""

    RUNNING = "running"
    CERTIFIED = "certified"
    BUDGET_EXHAUSTED = "budget_exhausted"
    STOPPED = "stopped"
    NO_CONDORCET_WINNER = "no_condorcet_winner"  # dctas-pc certified that no model beats all others
    UNDECIDABLE = "undecidable"  # no winner can be decided on this prompt set (dctas-pc without replacement)


class DuelStatus(StrEnum):
    """Where a duel is; ``CALLING`` and ``PENDING`` are in flight."""

    CALLING = "calling"  # models being called
    PENDING = "pending"  # answers stored, waiting for a verdict
    JUDGED = "judged"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"  # the campaign ended while the duel was in flight


class JudgeKind(StrEnum):
    """Where a campaign's verdicts come from (docs/clients-and-judges.md)."""

    HUMAN = "human"  # annotators vote through the API or the web form
    SIMULATED = "simulated"  # drawn from a known preference matrix
    LLM = "llm"  # a judge model, both orders (or one: orders)
    JURY = "jury"  # several LLM judges, their verdicts combined (majority or mean)


IN_FLIGHT: tuple[DuelStatus, ...] = (DuelStatus.CALLING, DuelStatus.PENDING)


class Reuse(StrEnum):
    """A campaign's ``answers`` and ``verdicts`` settings (docs/reuse.md).

    ``reuse``: one answer per (model, prompt), one LLM verdict per (prompt, answer
    pair, order), paid once and shared by every campaign; ``fresh``: every duel pays
    for new ones.
    """

    REUSE = "reuse"
    FRESH = "fresh"


class PromptSampling(StrEnum):
    """How a campaign draws its duels' prompts (docs/reuse.md, "In the service").

    ``with_replacement``: each duel draws a prompt uniformly at random;
    ``without_replacement``: pair (i, j)'s q-th duel uses prompt ``perm[q]`` of a
    secret permutation of the prompt set shared by all pairs. ``auto`` is a request
    value only: it resolves to one of the two when the campaign is created.
    """

    WITH_REPLACEMENT = "with_replacement"
    WITHOUT_REPLACEMENT = "without_replacement"
    AUTO = "auto"


class CostModel(StrEnum):
    """What the cost-aware policy, the oracle and the lower bound count as a duel's cost."""

    PER_QUERY = "per query"
    MARGINAL = "marginal given stored answers"


__all__ = [
    "Algorithm",
    "CampaignStatus",
    "Choice",
    "CostModel",
    "DuelStatus",
    "IN_FLIGHT",
    "JudgeKind",
    "PromptSampling",
    "Reuse",
    "TiePolicy",
]
