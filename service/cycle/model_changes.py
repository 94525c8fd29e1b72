"""Disable or replace a model of a running campaign (``POST /v1/campaigns/{id}/models/{name}/disable``
and ``.../replace``; docs/guide.md, *A failing model*).

Disabling model ``m`` changes the campaign's question to the same question about the remaining
models: the policy is rebuilt on them from the duels already recorded between them
(:func:`algorithms.restricted.restrict`), its certificates at the level for the new number of
models; the duels with ``m`` stay in the log, the ledger and the exports, and no longer count.
Replacing ``m`` by a new model is the same plus the new model, with no evidence yet. What this
does to the certificate: docs/algorithms.md, *Disabling or replacing a model*.

One locked transaction: the refusals, ``m``'s duels in flight cancelled, the new policy state
and the change recorded in ``campaigns.model_changes`` with the policy call (``seq``) at which it
took effect (a replay rebuilds the policy at the same point, :mod:`service.campaigns.replay`). A
campaign paused on a provider fault continues; one the rebuilt policy already certifies ends.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update

from algorithms import PolicyError
from algorithms.restricted import restrict
from algorithms.vocabulary import IN_FLIGHT, Algorithm, CampaignStatus, DuelStatus

from ..campaigns import hybrid, policy_log
from ..campaigns.credentials import require_key_envs
from ..campaigns.endings import Endings
from ..campaigns.limits import END_LIMIT_PROVIDER
from ..campaigns.model_changes import DISABLE, REPLACE, active_models
from ..campaigns.policy_cache import policy_snapshot
from ..campaigns.spares import several_images_reason
from ..campaigns.types import Conflict, NotFound, Unprocessable
from ..campaigns.views import Views
from ..clients.config import client_json
from ..config import Settings
from ..db import Database
from ..egress import EgressDenied
from ..models import Campaign, Duel, Prompt, utcnow
from ..money.bounds import excessive_cost_reason, unbounded_cost_reason
from ..names import duplicate_names
from ..pricing import DEFAULT_EXPECTED_OUTPUT_TOKENS, resolve_image_cost, resolve_model_cost
from ..stored_text import MAX_ERROR_CHARS, clean_text
from .verdict import policy_ending

#: A disabled model's duels in flight end with this error.
DISABLED_ERROR = "cancelled: the model was disabled"


def change_refusal(c: Campaign, name: str, names: list[str], active: list[int]) -> str | None:
    """Why ``name`` cannot be disabled in ``c`` now (a 409), or None."""
    paused = c.status == CampaignStatus.STOPPED and c.end_limit == END_LIMIT_PROVIDER
    if c.status != CampaignStatus.RUNNING and not paused:
        return f"campaign {c.id} has ended (status {c.status}); a model is disabled or replaced while it runs"
    if c.algorithm != Algorithm.DCTAS_PC:
        return (
            f"disabling a model needs algorithm dctas-pc (its certificates are rebuilt for the remaining "
            f"models); campaign {c.id} uses {c.algorithm}"
        )
    if hybrid.is_hybrid(c.judge):
        return "a model of a campaign with a hybrid judge cannot be disabled (its human pool is drawn per pair)"
    if c.batch is not None:
        return "a model of a batch campaign cannot be disabled (its rounds are sent as whole batches)"
    m = names.index(name)
    if m not in active:
        return f"model {name!r} is already disabled"
    return None


class ModelChanges:
    """The disable and replace transactions (no state of their own)."""

    def __init__(self, settings: Settings, db: Database, views: Views, endings: Endings):
        self.settings = settings
        self.db = db
        self.lock_existing = views.lock_existing
        self.finish = endings.finish

    def change_tx(self, campaign_id: int, name: str, reason: str | None, new_model: Any = None) -> dict:
        """Disable ``name`` (``new_model`` None) or replace it by ``new_model`` (a :class:`ModelSpec`).

        Returns ``{"change": the recorded entry, "revived": whether a provider pause was lifted,
        "run_error": the paused run's error or None, "judge_kind"}``. 404 for an unknown model, 409 for
        the refusals of :func:`change_refusal`, when fewer than two models would remain or a ``top_k``
        goal would need more; 422 for a replacement that is not a valid new model."""
        with self.db.write() as s:
            c = self.lock_existing(s, campaign_id)
            names = [str(m["name"]) for m in c.models]
            if name not in names:
                raise NotFound(f"campaign {campaign_id} has no model named {name!r}; its models: {', '.join(names)}")
            active = active_models(len(c.models), c.model_changes)
            refusal = change_refusal(c, name, names, active)
            if refusal is not None:
                raise Conflict(refusal)
            m = names.index(name)
            models = list(c.models)
            arms = [a for a in active if a != m]
            if new_model is not None:
                if c.judge.get("kind") == "simulated":
                    raise Conflict(
                        "a simulated judge's preference matrix covers the models the campaign was created with; "
                        "a replacement needs a judge that reads the answers (llm, jury or human)"
                    )
                models.append(self._new_model(s, c, names, new_model))
                arms.append(len(models) - 1)
            now = utcnow()
            policy = self._rebuilt_policy(s, c, models, arms)
            s.execute(
                update(Duel)
                .where(
                    Duel.campaign_id == campaign_id,
                    Duel.status.in_([str(x) for x in IN_FLIGHT]),
                    (Duel.model_i == m) | (Duel.model_j == m),
                )
                .values(status=DuelStatus.CANCELLED, error=DISABLED_ERROR)
            )
            seq = int(c.event_seq) + 1
            entry = {
                "seq": seq,
                "action": REPLACE if new_model is not None else DISABLE,
                "model": name,
                "index": m,
                "reason": clean_text(reason, MAX_ERROR_CHARS) if reason else None,
                "at": now.isoformat(),
                "costs": [float(x) for x in policy.costs],
                "arms": list(policy.arms),
            }
            if new_model is not None:
                entry["added"] = {"name": models[-1]["name"], "index": len(models) - 1}
            c.model_changes = [*(c.model_changes or []), entry]
            c.models = models
            c.event_seq = seq
            state, counts, stats, c.leader = policy_snapshot(policy)
            policy_log.write_checkpoint(s, c.id, state=state, counts=counts, stats=stats)
            c.state_seq = seq  # a checkpoint at the change (the log after it replays on the new policy)
            revived = c.status != CampaignStatus.RUNNING
            if revived:  # paused on a provider fault: it continues without the model
                c.status, c.end_reason, c.end_limit, c.ended_at = CampaignStatus.RUNNING, None, None, None
                if c.webhook_state != "sending":
                    c.webhook_state, c.webhook_error = "none", None
            end = policy_ending(policy, c.algorithm, c.delta, c.n_prompts)
            if end is not None:  # the remaining models are already decided
                self.finish(s, c, end.status, end.reason, now=now, winner=end.winner)
            c.version += 1
            c.updated_at = now
            return {
                "change": entry,
                "revived": revived,
                "run_error": c.run_error,
                "run_active": bool(c.run_active),
                "judge_kind": c.judge.get("kind"),
                "status": str(c.status),
            }

    def _rebuilt_policy(self, s, c: Campaign, models: list[dict], arms: list[int]):
        """The policy on ``arms`` rebuilt from the recorded duels (409 when the goal does not fit)."""
        if len(arms) < 2:
            raise Conflict("at least two models must remain in a campaign; replace the model instead")
        records = s.execute(
            select(Duel.model_i, Duel.model_j, Duel.score)
            .where(Duel.campaign_id == c.id, Duel.record_seq.is_not(None))
            .order_by(Duel.record_seq)
        ).all()
        state = policy_log.policy_now(s, c).to_state()  # its costs now (a checkpoint may be older)
        costs = [float(x) for x in (state.get("costs") or [])]
        costs += [float(m["cost"]) for m in models[len(costs) :]]
        try:
            return restrict(state, costs, arms, [(r.model_i, r.model_j, r.score) for r in records])
        except PolicyError as exc:
            raise Conflict(f"the remaining {len(arms)} models cannot keep this campaign's goal: {exc}") from None

    def _new_model(self, s, c: Campaign, names: list[str], spec: Any) -> dict:
        """The replacement as the campaign stores it: unique name, allowed address, key present, cost resolved."""
        if duplicate_names([*names, spec.name]):
            raise Unprocessable(f"model.name: {spec.name!r} is already a model of campaign {c.id} (names stay unique)")
        url = getattr(spec.client, "base_url", None)
        if url and not self.settings.egress.allow_all:
            try:
                self.settings.egress.check_url(url)
            except EgressDenied as exc:
                raise Unprocessable(f"model.client.base_url: {exc.message}") from None
        prompts = list(s.execute(select(Prompt.text).where(Prompt.campaign_id == c.id).order_by(Prompt.idx)).scalars())
        try:
            if spec.output == "image" and spec.client.price is None:  # an image model: charged per image
                cost, record = resolve_image_cost(spec.name, spec.cost, client_json(spec.client))
                client = client_json(spec.client)
            else:
                cost, client, record = resolve_model_cost(
                    spec.name,
                    spec.cost,
                    client_json(spec.client),
                    prompts=prompts,
                    expected_output_tokens=spec.expected_output_tokens
                    if spec.expected_output_tokens is not None
                    else DEFAULT_EXPECTED_OUTPUT_TOKENS,
                    price_map=None,
                    cost_source=spec.cost_source,
                )
        except ValueError as exc:
            raise Unprocessable(f"model: {exc}") from None
        stored = {"name": spec.name, "cost": cost, "client": client}
        if spec.output == "image":
            stored["output"] = "image"
            several = several_images_reason([stored], c.answers)
            if several is not None:
                raise Unprocessable(f"model: {several}")
        if record is not None:
            stored["pricing"] = record
        require_key_envs([stored], {})
        models = [*c.models, stored]
        why = excessive_cost_reason(models, c.judge) or (
            unbounded_cost_reason(models, c.judge) if c.budget_nusd is not None else None
        )
        if why is not None:
            raise Unprocessable(why)
        return stored
