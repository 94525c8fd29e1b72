"""What the plan, answers and verdict sequences share (:mod:`.plan`, :mod:`.answers`, :mod:`.verdict`).

A campaign's configuration (:class:`CampaignConfig`, cached per process, and
:func:`handles`, the campaigns the asyncpg driver covers), a duel's columns as plain
attributes (:class:`DuelRow`), the policy at an ``event_seq`` (cached or rebuilt from
its stored state).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from types import SimpleNamespace
from typing import TYPE_CHECKING

from ..campaigns import policy_log
from ..campaigns.hybrid import is_hybrid
from ..campaigns.policy_cache import restore_policy
from ..campaigns.sampling import is_wor
from ..models import Duel, shown_models

if TYPE_CHECKING:  # pragma: no cover
    from .driver import Tx
    from .service_port import HotService


@dataclass(frozen=True)
class CampaignConfig:
    """What never changes once a campaign exists (cached per process).

    The budget and the duel cap can be raised (PATCH): they are read with the locked row instead.
    """

    models: list
    judge: dict
    tie_policy: str
    seed: int
    n_prompts: int
    draw_key: str | None
    max_pending_per_annotator: int
    answers: str = "fresh"
    verdicts: str = "fresh"
    prompt_sampling: str = "with_replacement"
    algorithm: str = ""
    delta: float = 0.0

    @property
    def hybrid(self) -> bool:
        """A hybrid judge: an automatic judge on every duel, annotators on the selected ones."""
        return is_hybrid(self.judge)


_CONFIG_COLUMNS = tuple(f.name for f in fields(CampaignConfig))  # the columns a cache miss reads
#: how long a transaction waits for the cached policy another one of this process is putting back
POLICY_RETURN_WAIT_S = 0.05


def handles(cfg: CampaignConfig) -> bool:
    """Whether the asyncpg driver covers a campaign with this configuration.

    Not for sampling without replacement (positions, outcomes held for an earlier position,
    released in position order) nor for a hybrid judge (its pool of selected duels, its
    draw order): those requests run the same sequence on the SQLAlchemy driver.
    """
    return not is_wor(cfg.prompt_sampling) and cfg.judge.get("kind") != "hybrid"


def not_handled(campaign_id: int) -> RuntimeError:
    return RuntimeError(f"campaign {campaign_id} is not one this driver covers (cycle.handles)")


class DuelRow(SimpleNamespace):
    """A duel's columns as plain attributes (unset ones None): the sequences build
    their views from this instead of an ORM instance."""

    _EMPTY = dict.fromkeys(Duel.__table__.c.keys())

    @property
    def model_a(self) -> int:
        return shown_models(self.model_i, self.model_j, self.a_is_i)[0]

    @property
    def model_b(self) -> int:
        return shown_models(self.model_i, self.model_j, self.a_is_i)[1]

    def __init__(self, **columns):
        super().__init__(**{**self._EMPTY, **columns})


def remember_config(svc: HotService, campaign_id: int, row) -> CampaignConfig:
    cfg = CampaignConfig(
        models=row.models,
        judge=row.judge,
        tie_policy=row.tie_policy,
        seed=int(row.seed),
        n_prompts=int(row.n_prompts),
        draw_key=row.draw_key,
        max_pending_per_annotator=int(row.max_pending_per_annotator),
        answers=row.answers,
        verdicts=row.verdicts,
        prompt_sampling=row.prompt_sampling,
        algorithm=row.algorithm,
        delta=float(row.delta),
    )
    cache: dict = svc.config_cache
    if len(cache) >= 10_000:
        cache.clear()
    cache[campaign_id] = cfg
    return cfg


async def config_of(svc: HotService, tx: Tx, campaign_id: int, model: int = -1) -> CampaignConfig:
    """The cached configuration, read again when it lacks model index ``model`` (a model added by a
    replacement in another process: models are only ever appended, service/cycle/model_changes.py)."""
    cfg = svc.config_cache.get(campaign_id)
    if cfg is not None and model < len(cfg.models):
        return cfg
    return remember_config(svc, campaign_id, await tx.config(campaign_id))


async def policy_at(
    svc: HotService, tx: Tx, campaign_id: int, *, event_seq: int, fetched_state: dict | None, state_seq: int | None
):
    """The campaign's policy at ``event_seq``: the cached object, brought forward by the policy
    calls logged since when another process made them; else its stored state (at ``state_seq``;
    ``fetched_state`` when the first round trip brought it) and the calls logged after it
    (:mod:`service.campaigns.policy_log`)."""
    base = event_seq if state_seq is None else int(state_seq)
    seq, policy = svc.policies.take_latest(campaign_id)
    if policy is None and (lent := svc.policies.lent(campaign_id)) is not None:
        # the transaction before this one (this process) has it and is putting it back after its COMMIT
        await tx.wait_returned(lent, POLICY_RETURN_WAIT_S)
        seq, policy = svc.policies.take_latest(campaign_id)
    if policy is not None and seq == event_seq:
        return policy
    if policy is None or seq is None or not base <= seq < event_seq:  # no cached policy nearer than the stored state
        state = fetched_state if fetched_state is not None else await tx.policy_state(campaign_id)
        policy, seq = restore_policy(state), base
    if seq < event_seq:
        policy_log.advance(policy, await tx.policy_tail(campaign_id, seq, event_seq))
    return policy
