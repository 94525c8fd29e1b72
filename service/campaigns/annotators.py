"""Annotator management: list with votes and agreement, revoke (creation is in transactions).

An annotator's votes are the duels it judged (``Duel.judged_by == "annotator:<id>"``)
with a choice. **Agreement** (docs/service.md, "Annotators"):

* an *item* is a prompt and an unordered pair of models: ``(prompt_index, {i, j})``;
* a vote's *outcome* is the model it preferred, ``i`` or ``j``, or ``none`` for ``tie``
  and ``both_bad`` (**choice**: both say "no preference between the two");
* for one vote of annotator A on an item that at least one *other* annotator also
  voted on, let the others' votes on that item (every vote, revoked annotators
  included) have most-frequent outcomes ``M`` (several when tied): the vote scores
  ``1/|M|`` if its outcome is in ``M``, else 0;
* ``agreement`` = the mean score over A's votes on shared items; ``shared_items`` =
  how many distinct items those are; ``agreement`` is null when there are none.

Only annotators' votes count (not the admin's or an automatic judge's verdicts).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select, update

from algorithms.vocabulary import DuelStatus

from ..auth import TokenCache, hash_token, new_token
from ..db import Database
from ..models import Annotator, Duel, utcnow
from .hybrid_tx import released_values
from .skips import skips_by_annotator
from .types import NotFound
from .views import Views

ANNOTATOR_PREFIX = "annotator:"
RELEASED = "released: the annotator's token was revoked before it voted"

Vote = tuple[int, int, int, int, str]  # (annotator id, prompt_index, model_i, model_j, outcome)


def outcome(choice: str, a_is_i: bool) -> str:
    """The model a vote preferred (``i``/``j``) or ``none``."""
    if choice == "a":
        return "i" if a_is_i else "j"
    if choice == "b":
        return "j" if a_is_i else "i"
    return "none"


def agreement(votes: Iterable[Vote]) -> dict[int, tuple[float | None, int]]:
    """``{annotator id: (agreement, shared_items)}`` for every annotator with votes (the rule above)."""
    by_item: dict[tuple[int, int, int], list[tuple[int, str]]] = defaultdict(list)
    for aid, prompt, i, j, out in votes:
        lo, hi = (i, j) if i < j else (j, i)
        if i > j:  # the same item seen with the pair the other way round
            out = {"i": "j", "j": "i"}.get(out, out)
        by_item[(prompt, lo, hi)].append((aid, out))
    scores: dict[int, list[float]] = defaultdict(list)
    shared: dict[int, set] = defaultdict(set)
    everyone: set[int] = set()
    for item, item_votes in by_item.items():
        for aid, out in item_votes:
            everyone.add(aid)
            others = Counter(o for other, o in item_votes if other != aid)
            if not others:
                continue
            top = max(others.values())
            modes = {o for o, n in others.items() if n == top}
            scores[aid].append(1.0 / len(modes) if out in modes else 0.0)
            shared[aid].add(item)
    return {aid: ((sum(scores[aid]) / len(scores[aid])) if scores[aid] else None, len(shared[aid])) for aid in everyone}


def annotator_id_of(label: str | None) -> int | None:
    """The id in a ``judged_by``/``requested_by`` value ``annotator:<id>``."""
    if label and label.startswith(ANNOTATOR_PREFIX) and label[len(ANNOTATOR_PREFIX) :].isdigit():
        return int(label[len(ANNOTATOR_PREFIX) :])
    return None


def _record(row: Any, votes: int, stats: tuple[float | None, int] | None, skipped: int = 0) -> dict:
    agree, shared_items = stats if stats is not None else (None, 0)
    return {
        "id": int(row.id),
        "label": row.label,
        "votes": votes,
        "skips": skipped,
        "agreement": agree,
        "shared_items": shared_items,
        "created_at": row.created_at,
        "revoked_at": row.revoked_at,
    }


class Annotators:
    """The admin's view and revocation of a campaign's annotators.

    Revoking drops the token from this process's :class:`~service.auth.TokenCache` (handed in), so the
    token is refused here at once."""

    def __init__(self, db: Database, views: Views, tokens: TokenCache):
        self.db = db
        self.views = views
        self.tokens = tokens

    def _annotator_votes(self, s, campaign_id: int) -> list[Vote]:
        rows = s.execute(
            select(Duel.judged_by, Duel.prompt_index, Duel.model_i, Duel.model_j, Duel.choice, Duel.a_is_i).where(
                Duel.campaign_id == campaign_id,
                Duel.status == DuelStatus.JUDGED,
                Duel.choice.is_not(None),
                Duel.judged_by.like(ANNOTATOR_PREFIX + "%"),
            )
        ).all()
        out = []
        for r in rows:
            aid = annotator_id_of(r.judged_by)
            if aid is not None:
                out.append((aid, int(r.prompt_index), int(r.model_i), int(r.model_j), outcome(r.choice, r.a_is_i)))
        return out

    def _require_campaign(self, s, campaign_id: int) -> None:
        from ..models import Campaign

        if s.execute(select(Campaign.id).where(Campaign.id == campaign_id)).first() is None:
            raise NotFound(f"campaign {campaign_id} not found")

    def create_annotator(self, campaign_id: int, label: str | None) -> dict:
        """A new annotator of the campaign; the token is returned this once (only its hash is stored)."""
        token = new_token()
        with self.db.write() as s:
            self.views.lock_existing(s, campaign_id)
            row = Annotator(campaign_id=campaign_id, token_hash=hash_token(token), label=label, created_at=utcnow())
            s.add(row)
            s.flush()
            return {"id": int(row.id), "campaign_id": campaign_id, "label": label, "token": token}

    def list_annotators(self, campaign_id: int) -> list[dict]:
        """The campaign's annotators, oldest first, with votes and agreement."""
        with self.db.read() as s:
            self._require_campaign(s, campaign_id)
            rows = s.execute(
                select(Annotator.id, Annotator.label, Annotator.created_at, Annotator.revoked_at)
                .where(Annotator.campaign_id == campaign_id)
                .order_by(Annotator.id)
            ).all()
            if not rows:  # no annotator: no vote to read (the read scans the campaign's judged duels)
                return []
            votes = self._annotator_votes(s, campaign_id)
            skipped = skips_by_annotator(s, campaign_id)
        counts = Counter(v[0] for v in votes)
        stats = agreement(votes)
        return [
            _record(r, counts.get(int(r.id), 0), stats.get(int(r.id)), skipped.get(f"{ANNOTATOR_PREFIX}{r.id}", 0))
            for r in rows
        ]

    def annotator_labels(self, campaign_id: int) -> dict[str, str]:
        """``{"annotator:<id>": label}`` for the dashboards (``annotator <id>`` when it has none)."""
        with self.db.read() as s:
            rows = s.execute(select(Annotator.id, Annotator.label).where(Annotator.campaign_id == campaign_id)).all()
        return {f"{ANNOTATOR_PREFIX}{r.id}": (r.label or f"annotator {r.id}") for r in rows}

    def revoke_annotator(self, campaign_id: int, annotator_id: int) -> dict:
        """Revoke the token (idempotent) and release the annotator's pending duels."""
        now = utcnow()
        with self.db.write() as s:
            c = self.views.lock_existing(s, campaign_id)
            row = s.get(Annotator, annotator_id)
            if row is None or int(row.campaign_id) != campaign_id:
                raise NotFound(f"annotator {annotator_id} of campaign {campaign_id} not found")
            if row.revoked_at is None:
                row.revoked_at = now
                s.execute(
                    update(Duel)
                    .where(
                        Duel.campaign_id == campaign_id,
                        Duel.requested_by == f"{ANNOTATOR_PREFIX}{annotator_id}",
                        Duel.status == DuelStatus.PENDING,
                    )
                    .values(
                        **(
                            released_values(c.judge, now)
                            or {"status": DuelStatus.EXPIRED, "error": RELEASED, "expires_at": now}
                        )
                    )  # hybrid hook: back to its pool
                    .execution_options(synchronize_session=False)
                )
            token_hash = row.token_hash
        self.tokens.drop(token_hash)  # this process refuses it at once; others within the cache's TTL
        return next(a for a in self.list_annotators(campaign_id) if a["id"] == annotator_id)
