"""The records of a batch campaign's rounds (:class:`BatchJobs`): one transaction each.

A batch is a ``batch_jobs`` row **before** it is sent (``submitting``, with the ``key`` that goes
into the provider's batch metadata), ``running`` once the provider accepted it, ``storing`` once its results are fetched, then
``collected``, ``failed`` or ``cancelled`` only after what it brought back is stored: a process
killed between fetching the results and storing them leaves the row open, and the process that
takes over fetches the results again from the provider (never sending the batch again) and stores
them. Only the row's ``owner`` (the run's owner when it was written or adopted) may move it to
``storing`` or close it: both are conditional updates, so a stalled former owner that wakes up
cannot fold the same results a second time. A process that takes a run over adopts
its open batches and their duels (:meth:`BatchJobs.adopt_tx`) and collects them instead of sending
them again (service/cycle/batch_rounds.py).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from typing import Any

from sqlalchemy import select, update

from algorithms.vocabulary import IN_FLIGHT, CampaignStatus, DuelStatus

from ..db import Database, rowcount
from ..models import BatchJob, Campaign, Duel, StoredAnswer, utcnow
from ..schemas.batch_config import next_round_size, remaining_duels
from . import policy_log
from .leases import ORPHAN_REQUESTER, RUN_REQUESTER
from .types import DuelPlan

#: A batch still open: sent or being sent, or its results fetched but not yet all stored.
OPEN = ("submitting", "running", "storing")
#: How long a cancelled batch may take to end (its finished part is still collected and charged).
CANCEL_GRACE_S = 600.0


def body_hash(group: str, body: dict[str, Any]) -> str:
    """What identifies a request across processes: its batch group and its body."""
    return hashlib.sha256((group + "\x00" + json.dumps(body, sort_keys=True)).encode()).hexdigest()[:32]


class BatchJobs:
    """The batch rows and the round's few writes on the campaign and its duels, fenced by ``owner_id``."""

    def __init__(self, db: Database, owner_id: str):
        self.db = db
        self.owner_id = owner_id

    def _mine(self, c: Campaign | None) -> bool:
        return c is not None and c.status == CampaignStatus.RUNNING and c.run_active and c.run_owner == self.owner_id

    def batch_config_tx(self, campaign_id: int) -> dict[str, Any] | None:
        with self.db.read() as s:
            return s.execute(select(Campaign.batch).where(Campaign.id == campaign_id)).scalar_one_or_none()

    def run_is_mine_tx(self, campaign_id: int) -> bool:
        with self.db.read() as s:
            return self._mine(s.get(Campaign, campaign_id))

    def start_round_tx(self, campaign_id: int) -> tuple[int, int] | None:
        """Round ``k`` begins: counted in ``batch.rounds``, its size (:func:`next_round_size`) set as the
        run's slots; (k, size), or None when the run is no longer this process's (stopped, ended, taken over)."""
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is None or not self._mine(c) or c.batch is None:
                return None
            k = int(c.batch.get("rounds") or 0) + 1
            try:
                remaining = remaining_duels(policy_log.policy_now(s, c))
            except Exception:  # a state the forecast cannot read: the round's plain size
                remaining = None
            size = next_round_size(c.batch, k, remaining)
            c.batch = {**c.batch, "rounds": k}
            c.run_concurrency = max(1, size)
            c.updated_at = utcnow()
            return k, size

    def start_pregen_round_tx(self, campaign_id: int) -> int | None:
        """A human campaign's pre-generation round in batches begins: counted in ``batch.rounds``; its
        number, or None when the campaign no longer runs."""
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is None or c.status != CampaignStatus.RUNNING or c.batch is None:
                return None
            k = int(c.batch.get("rounds") or 0) + 1
            c.batch = {**c.batch, "rounds": k}
            c.updated_at = utcnow()
            return k

    def campaign_running_tx(self, campaign_id: int) -> bool:
        with self.db.read() as s:
            status = s.execute(select(Campaign.status).where(Campaign.id == campaign_id)).scalar_one_or_none()
            return status == CampaignStatus.RUNNING

    def extend_tx(self, campaign_id: int, duel_ids: list[int], until: dt.datetime) -> None:
        """The round's duels in flight keep their reservations until the batch window closes."""
        if not duel_ids:
            return
        with self.db.write() as s:
            self.db.lock_campaign(s, campaign_id)
            s.execute(
                update(Duel)
                .where(Duel.id.in_(duel_ids), Duel.campaign_id == campaign_id, Duel.status.in_(IN_FLIGHT))
                .values(expires_at=until)
                .execution_options(synchronize_session=False)
            )

    def record_tx(self, campaign_id: int, k: int, phase: str, *, client: dict, requests: list[dict]) -> tuple[int, str]:
        """The batch's row, written before it is sent: (row id, key)."""
        key = f"llmduel-{campaign_id}-{k}-{phase[0]}-{secrets.token_hex(6)}"
        now = utcnow()
        with self.db.write() as s:
            job = BatchJob(
                campaign_id=campaign_id,
                round=k,
                phase=phase,
                key=key,
                client=client,
                status="submitting",
                requests=requests,
                owner=self.owner_id,
                created_at=now,
                updated_at=now,
            )
            s.add(job)
            s.flush()
            return int(job.id), key

    def submitted_tx(self, job_id: int, provider_batch_id: str) -> bool:
        """The batch was sent (``running``, its provider id kept); False when this process no longer owns the open
        row (it stalled past the take-over bound while sending it): the row is left as its new owner made it, never
        reopened once that owner closed it."""
        with self.db.write() as s:
            return bool(
                rowcount(
                    s.execute(
                        update(BatchJob)
                        .where(BatchJob.id == job_id, BatchJob.owner == self.owner_id, BatchJob.status.in_(OPEN))
                        .values(provider_batch_id=provider_batch_id, status="running", updated_at=utcnow())
                        .execution_options(synchronize_session=False)
                    )
                )
            )

    def is_open_tx(self, job_id: int) -> bool:
        """Whether the batch's row is still open (whoever owns it)."""
        with self.db.read() as s:
            return s.execute(select(BatchJob.status).where(BatchJob.id == job_id)).scalar_one_or_none() in OPEN

    def fetched_tx(self, job_id: int) -> bool:
        """The batch's results are fetched and about to be stored (``storing``; it stays open, so a process
        killed before they are stored leaves it to the one that takes over); False when this process no
        longer owns it (its results are not folded)."""
        with self.db.write() as s:
            return bool(
                rowcount(
                    s.execute(
                        update(BatchJob)
                        .where(BatchJob.id == job_id, BatchJob.owner == self.owner_id, BatchJob.status.in_(OPEN))
                        .values(status="storing", updated_at=utcnow())
                        .execution_options(synchronize_session=False)
                    )
                )
            )

    def close_tx(self, job_id: int, status: str, error: str | None = None) -> bool:
        """Close an open batch; False when this process no longer owns it (its results are not folded)."""
        with self.db.write() as s:
            return bool(
                rowcount(
                    s.execute(
                        update(BatchJob)
                        .where(BatchJob.id == job_id, BatchJob.owner == self.owner_id, BatchJob.status.in_(OPEN))
                        .values(status=status, error=error, updated_at=utcnow())
                        .execution_options(synchronize_session=False)
                    )
                )
            )

    def open_jobs_tx(self, campaign_id: int) -> list[dict[str, Any]]:
        with self.db.read() as s:
            rows = s.scalars(
                select(BatchJob).where(BatchJob.campaign_id == campaign_id, BatchJob.status.in_(OPEN))
            ).all()
            return [_job(r) for r in rows]

    def jobs_tx(self, campaign_id: int) -> list[dict[str, Any]]:
        with self.db.read() as s:
            rows = s.scalars(select(BatchJob).where(BatchJob.campaign_id == campaign_id).order_by(BatchJob.id)).all()
            return [_job(r) for r in rows]

    def adopt_tx(self, campaign_id: int) -> tuple[list[dict[str, Any]], list[int]]:
        """This process owns the run now: its open batches become this process's to collect, and their duels
        still in flight (orphaned by the take-over) become the run's again. (open batches, duel ids)."""
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is None or not self._mine(c):
                return [], []
            rows = s.scalars(
                select(BatchJob).where(BatchJob.campaign_id == campaign_id, BatchJob.status.in_(OPEN))
            ).all()
            duel_ids = sorted({int(r["duel_id"]) for job in rows for r in job.requests if r.get("duel_id")})
            for job in rows:
                job.owner = self.owner_id
            if duel_ids:
                s.execute(
                    update(Duel)
                    .where(
                        Duel.id.in_(duel_ids),
                        Duel.campaign_id == campaign_id,
                        Duel.status.in_(IN_FLIGHT),
                        Duel.requested_by.in_([ORPHAN_REQUESTER, RUN_REQUESTER]),
                    )
                    .values(requested_by=RUN_REQUESTER, error=None)
                    .execution_options(synchronize_session=False)
                )
            live = s.scalars(
                select(Duel.id).where(
                    Duel.id.in_(duel_ids), Duel.status.in_(IN_FLIGHT), Duel.requested_by == RUN_REQUESTER
                )
            ).all()
            return [_job(r) for r in rows], sorted(int(i) for i in live)

    def orphaned_pregen_tx(self, lease: dt.timedelta, campaign_id: int | None = None) -> list[dict[str, Any]]:
        """The open pre-generation batches (of ``campaign_id``, or of every campaign) that another process
        sent and no longer looks after, each adopted by this process (its ``owner`` set by a conditional
        update: one process adopts it). A pre-generation call holds its answer's store claim until the answer
        is stored, and its process renews the claim every heartbeat: a batch none of whose requests' claims
        is younger than ``lease`` (the take-over bound of any claim) was left by a process gone or stalled.

        Adoption is one conditional update that also needs the row untouched for ``lease`` and stamps it:
        a batch just adopted (whose answers' claims stay lapsed until its new owner claims them again)
        is not adopted a second time by another process's heartbeat."""
        q = select(BatchJob).where(
            BatchJob.phase == "pregen", BatchJob.status.in_(OPEN), BatchJob.owner != self.owner_id
        )
        if campaign_id is not None:
            q = q.where(BatchJob.campaign_id == campaign_id)
        # found in a read (every heartbeat of every process: usually none, or all still looked after) ...
        with self.db.read() as s:
            now = self.db.clock(s)
            orphans = []
            for job in s.scalars(q).all():
                keys = [r["key"] for r in job.requests if r.get("key")]
                live = s.scalars(
                    select(StoredAnswer.id).where(
                        StoredAnswer.key.in_(keys),
                        StoredAnswer.status == "generating",
                        StoredAnswer.claimed_at > now - lease,
                    )
                ).first()
                if keys and live is None:
                    orphans.append((int(job.id), job.owner))
        if not orphans:
            return []
        # ... adopted in a write, each by a conditional update (one process adopts it)
        with self.db.write() as s:
            now = self.db.clock(s)
            adopted = []
            for job_id, owner in orphans:
                taken = rowcount(
                    s.execute(
                        update(BatchJob)
                        .where(
                            BatchJob.id == job_id,
                            BatchJob.owner == owner,
                            BatchJob.status.in_(OPEN),
                            BatchJob.updated_at <= now - lease,
                        )
                        .values(owner=self.owner_id, updated_at=now)
                        .execution_options(synchronize_session=False)
                    )
                )
                mine = s.get(BatchJob, job_id) if taken else None  # the row this process just took
                if mine is not None:
                    adopted.append({**_job(mine), "campaign_id": int(mine.campaign_id)})
            return adopted

    def release_unsent_tx(self, campaign_id: int, why: str = "its batch round failed") -> int:
        """After a failed round, close the run's duels in flight that nothing can charge any more, so their
        reservations go: a duel still calling that no batch accepted by a provider holds, and a duel whose
        answers are stored (``pending``) that no open batch holds (its verdict was never asked for; the
        answers stay charged, and in the answer store for a later duel). A duel still calling in a batch the
        provider took keeps its reservation until its expiry (the provider may yet bill it)."""
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if c is None or c.run_owner not in (None, self.owner_id):  # taken over: the new owner's duels
                return 0
            sent, still_open = set(), set()
            for job in s.scalars(select(BatchJob).where(BatchJob.campaign_id == campaign_id)).all():
                ids = {int(r["duel_id"]) for r in job.requests if r.get("duel_id")}
                if job.provider_batch_id is not None:
                    sent |= ids
                if job.status in OPEN:
                    still_open |= ids
            rows = s.execute(
                select(Duel.id, Duel.status).where(
                    Duel.campaign_id == campaign_id, Duel.status.in_(IN_FLIGHT), Duel.requested_by == RUN_REQUESTER
                )
            ).all()
            unsent = [int(r.id) for r in rows if r.status != DuelStatus.PENDING and int(r.id) not in sent]
            unjudged = [int(r.id) for r in rows if r.status == DuelStatus.PENDING and int(r.id) not in still_open]
            self._expire(s, unsent, f"{why} (before its batch was sent)")
            self._expire(s, unjudged, f"{why} (before its verdict; its answers stay charged)")
            return len(unsent) + len(unjudged)

    def close_round_tx(self, campaign_id: int, duel_ids: list[int], why: str) -> int:
        """At the end of a round: expire those of its duels still in flight (none should be; the next round
        would wait for them), so the run never keeps a reservation past its round. Fenced by the run's owner."""
        with self.db.write() as s:
            c = self.db.lock_campaign(s, campaign_id)
            if not duel_ids or c is None or c.run_owner not in (None, self.owner_id):  # taken over: not ours
                return 0
            left = s.scalars(
                select(Duel.id).where(
                    Duel.id.in_(duel_ids),
                    Duel.campaign_id == campaign_id,
                    Duel.status.in_(IN_FLIGHT),
                    Duel.requested_by == RUN_REQUESTER,
                )
            ).all()
            self._expire(s, [int(i) for i in left], why)
            return len(left)

    @staticmethod
    def _expire(s: Any, duel_ids: list[int], why: str) -> None:
        if duel_ids:
            s.execute(
                update(Duel)
                .where(Duel.id.in_(duel_ids), Duel.status.in_(IN_FLIGHT))
                .values(status=DuelStatus.EXPIRED, error=why, expires_at=utcnow())
                .execution_options(synchronize_session=False)
            )

    def duel_plans_tx(
        self, campaign_id: int, duel_ids: list[int]
    ) -> list[tuple[DuelPlan, str, str | None, str | None]]:
        """The plans of the run's duels in flight (for a round resumed after a take-over), in plan order:
        (plan, status, answer a, answer b)."""
        with self.db.read() as s:
            c = s.get(Campaign, campaign_id)
            if c is None:
                return []
            duels = s.scalars(
                select(Duel)
                .where(Duel.id.in_(duel_ids), Duel.campaign_id == campaign_id, Duel.status.in_(IN_FLIGHT))
                .order_by(Duel.number)
            ).all()
            out = []
            for d in duels:
                plan = DuelPlan(
                    campaign_id=campaign_id,
                    duel_id=int(d.id),
                    number=int(d.number),
                    i=int(d.model_i),
                    j=int(d.model_j),
                    a_is_i=bool(d.a_is_i),
                    prompt=d.prompt,
                    models=c.models,
                    judge=c.judge,
                    tie_policy=c.tie_policy,
                    seed=int(c.seed),
                    prompt_index=d.prompt_index,
                    answers=c.answers,
                    verdicts=c.verdicts,
                    draw_key=c.draw_key,
                )
                status = DuelStatus.PENDING if d.status == DuelStatus.PENDING else DuelStatus.CALLING
                out.append((plan, str(status), d.answer_a, d.answer_b))
            return out


def _job(r: BatchJob) -> dict[str, Any]:
    return {
        "id": int(r.id),
        "round": r.round,
        "phase": r.phase,
        "key": r.key,
        "client": r.client,
        "provider_batch_id": r.provider_batch_id,
        "status": r.status,
        "requests": r.requests,
        "error": r.error,
    }
