"""The response schemas of what a campaign's certificates say (issue 22): the certificate graph and
dctas-pc's per-pair evidence (``GET /v1/campaigns/{id}``: ``certificate_graph``, ``pc_evidence``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class CertificateEdge(BaseModel):
    winner: str
    loser: str
    exact: bool = Field(False, description="without_replacement: decided exactly by the pair's sum, no error.")


class PairEvidence(BaseModel):
    loser: str
    winner: str
    n: float = Field(description="Counted duels of the pair.")
    log_stat: float | None = Field(
        description="The test's statistic on a log scale (log-wealth for mixture and without_replacement)."
    )
    log_threshold: float | None = Field(
        description="The certificate is issued when log_stat reaches it: "
        "log(L/delta) for betting, mixture and without_replacement (log((L-1)/delta) at level delta/(L-1), "
        "log(1/alpha) at level product)."
    )
    certified: bool
    exact: bool


class LoserEvidence(BaseModel):
    model: str
    beaten_by: list[str]


class PCEvidence(BaseModel):
    test: str = Field(description="betting, mixture, kk, stitched or without_replacement.")
    statistic: str = Field(description="What log_stat is, in words.")
    log_threshold: float | None
    level: str = Field(
        "delta/L",
        description="Each certificate's error level: product (the default with replacement: alpha with "
        "3 alpha + (L-3) alpha^2 = delta, and 'no Condorcet winner' needing every model beaten at a stricter "
        "level) or delta/L (without replacement, and the kk, stitched and hybrid tests), so that every verdict is "
        "wrong with probability at most delta; delta/(L-1) for a campaign stored at that level (its verdicts are "
        "bounded by delta only when a Condorcet winner exists); delta for the portfolio test.",
    )
    reference: str | None = Field(description="The certified winner, else the current leader.")
    certified: int = Field(description="Certificates the reference holds.")
    needed: int = Field(
        description="L - 1: certificates a winner needs; for a leaderboard goal the pairs it rests on (ranking: "
        "every pair; top_k: the k models with the most certificates against the others), `certified` of them "
        "resolved."
    )
    progress: float = Field(
        description="Mean over the reference's L - 1 pairs of min(1, log_stat/log_threshold) "
        "(1 for a certified pair; 1 once the campaign ended)."
    )
    pairs: list[PairEvidence]
    losers: list[LoserEvidence]
    no_winner_log_threshold: float | None = Field(
        None,
        description="At the product level with four models or more: log(1/beta), the log statistic at which "
        "every model must be shown beaten for the verdict 'no Condorcet winner' (null where the certificates' "
        "own threshold suffices).",
    )
    no_winner_waits: bool = Field(
        False,
        description="Every model is shown beaten, but not yet each at no_winner_log_threshold: the verdict "
        "'no Condorcet winner' waits, and every other duel goes to a pair that brings a model to it.",
    )
