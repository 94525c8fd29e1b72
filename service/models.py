"""SQLAlchemy 2.0 models: campaigns, duels (the log), charges (the ledger), annotators.

Money is stored as integer nano-dollars (``*_nusd``: 1 USD = 10**9) so that a
campaign's spend is exactly the sum of its charges on every database.
Timestamps are timezone-aware UTC (stored naive on SQLite).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from algorithms.vocabulary import IN_FLIGHT, CampaignStatus, DuelStatus  # noqa: F401 (re-exported)

NANO = 1_000_000_000


def to_nusd(usd: float) -> int:
    return int(round(float(usd) * NANO))


def from_nusd(nusd: int | None) -> float | None:
    return None if nusd is None else nusd / NANO


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class UTCDateTime(TypeDecorator):
    """Aware UTC datetimes on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        value = value.astimezone(dt.timezone.utc)
        if dialect.name == "sqlite":
            value = value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc)


# BIGINT ids, but INTEGER PRIMARY KEY on SQLite (the rowid alias autoincrements).
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    # Every model is mapped to one Table (no other FromClause), so Core statements take ``Model.__table__``.
    __table__: ClassVar[Table]

    type_annotation_map = {dt.datetime: UTCDateTime, dict: JSON, list: JSON}


class Campaign(Base):
    __tablename__ = "campaigns"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    algorithm: Mapped[str] = mapped_column(String(16))
    delta: Mapped[float] = mapped_column(Float)
    tie_policy: Mapped[str] = mapped_column(String(8))
    status: Mapped[str] = mapped_column(String(20), index=True)
    end_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The limit that ended the campaign ("budget" or "max_duels"; limits.END_LIMITS), else NULL:
    # such a campaign continues when the limit is raised (PATCH /v1/campaigns/{id}).
    end_limit: Mapped[str | None] = mapped_column(String(12), nullable=True)

    # Configuration (client configs name API-key variables, never keys).
    models: Mapped[list] = mapped_column(JSON)
    # Models disabled or replaced while running, in order (service/campaigns/model_changes.py); None: none.
    model_changes: Mapped[list | None] = mapped_column(JSON, nullable=True)
    n_prompts: Mapped[int] = mapped_column(Integer)  # the texts live in the prompts table
    judge: Mapped[dict] = mapped_column(JSON)
    budget_nusd: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    max_duels: Mapped[int | None] = mapped_column(Integer, nullable=True)
    seed: Mapped[int] = mapped_column(BigInteger)
    # HMAC key of the prompt, side and tie draws (draws.draw_prompt_and_side); never shown by
    # any route. NULL for campaigns made before it existed: they keep their seed draws.
    draw_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # Duels an annotator may hold in flight at once (annotator_access.held_duel).
    max_pending_per_annotator: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    webhook_url: Mapped[str | None] = mapped_column(Text, nullable=True)

    # The policy's state and what GET shows are the campaign's PolicyCheckpoint row (written every few
    # records); ``state_seq`` is the ``event_seq`` it is at; the duel log holds the calls after it.
    leader: Mapped[int | None] = mapped_column(Integer, nullable=True)
    winner: Mapped[int | None] = mapped_column(Integer, nullable=True)
    event_seq: Mapped[int] = mapped_column(Integer, default=0)  # policy calls so far
    state_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # policy_state's event_seq

    spend_nusd: Mapped[int] = mapped_column(BigInteger, default=0)
    judge_spend_nusd: Mapped[int] = mapped_column(BigInteger, default=0)
    duels_created: Mapped[int] = mapped_column(Integer, default=0)
    duels_judged: Mapped[int] = mapped_column(Integer, default=0)
    duels_counted: Mapped[int] = mapped_column(Integer, default=0)
    duels_failed: Mapped[int] = mapped_column(Integer, default=0)
    # Pay once (docs/reuse.md): "reuse" shares stored answers / LLM verdicts, "fresh" pays each duel.
    answers: Mapped[str] = mapped_column(String(8), default="fresh", server_default="fresh")
    verdicts: Mapped[str] = mapped_column(String(8), default="fresh", server_default="fresh")
    # How duels draw their prompts (docs/reuse.md): "with_replacement" or "without_replacement".
    prompt_sampling: Mapped[str] = mapped_column(
        String(20), default="with_replacement", server_default="with_replacement"
    )

    # Background run (POST /run): survives restarts when LLMDUEL_RESUME_RUNS is on.
    # A batch campaign's rounds (service/campaigns/batch_jobs.py: round size, polling, window); None: call by call.
    batch: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    run_active: Mapped[bool] = mapped_column(Boolean, default=False)
    run_remaining: Mapped[int | None] = mapped_column(Integer, nullable=True)
    run_concurrency: Mapped[int] = mapped_column(Integer, default=1)
    run_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The run's one owner (host:pid:random of a service process) and its lease
    # (service/campaigns/leases.py); free when NULL or expired.
    run_owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    run_lease_expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)

    webhook_state: Mapped[str] = mapped_column(String(12), default="none")
    webhook_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # HMAC-SHA256 key of the campaign's webhook requests, returned once at creation.
    webhook_secret: Mapped[str | None] = mapped_column(String(100), nullable=True)
    # The events its webhook receives, comma-joined (service/campaigns/webhooks.py WEBHOOK_EVENTS); NULL:
    # campaign.ended alone. ``webhook_settle_due``: the latest ending's campaign.settled is yet to be written,
    # once the spend is final (Webhooks.settled_events_tx).
    webhook_events: Mapped[str | None] = mapped_column(String(100), nullable=True)
    webhook_settle_due: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false(), index=True)

    version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    ended_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    archived_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)  # hidden from the lists


class PolicyCheckpoint(Base):
    """A campaign's policy state (``policy.to_state()``) and what GET shows, at ``campaigns.state_seq``:
    written every few records (service/campaigns/policy_log.py), in its own row so that the updates of
    the campaign row with every duel do not copy its O(L^2) JSON (half a megabyte at 128 models)."""

    __tablename__ = "policy_checkpoints"

    campaign_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    policy_state: Mapped[dict] = mapped_column(JSON)
    counts: Mapped[dict] = mapped_column(JSON)  # {"N": LxL, "W": LxL}
    stats: Mapped[dict] = mapped_column(JSON)  # {"t", "S", "Z", "beta", "leader", "stopped"}


class Prompt(Base):
    __tablename__ = "prompts"

    campaign_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True
    )
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    text: Mapped[str] = mapped_column(Text)  # what the judge and the log show (turns rendered, service/prompts.py)
    qid: Mapped[str | None] = mapped_column(String(200), nullable=True)  # the question's own id
    category: Mapped[str | None] = mapped_column(String(200), nullable=True)
    turns: Mapped[list | None] = mapped_column(JSON, nullable=True)  # user turns of a multi-turn prompt
    reference: Mapped[str | None] = mapped_column(Text, nullable=True)  # reference answer for the judge
    # sha256 of the images of each user turn (service/images/), a list per turn, or None
    images: Mapped[list | None] = mapped_column(JSON, nullable=True)


class StoredImage(Base):
    """One image, stored once under the sha256 of its bytes, with its metadata-free blind copy
    (service/images/)."""

    __tablename__ = "images"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    media_type: Mapped[str] = mapped_column(String(20))
    width: Mapped[int] = mapped_column(Integer)
    height: Mapped[int] = mapped_column(Integer)
    size_bytes: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    blind: Mapped[bytes] = mapped_column(LargeBinary)
    blind_media_type: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class Duel(Base):
    __tablename__ = "duels"
    __table_args__ = (
        Index("ix_duels_campaign_status_id", "campaign_id", "status", "id"),  # the judged log in pages, by id
        Index("ix_duels_campaign_select_seq", "campaign_id", "select_seq"),  # the log after a checkpoint
        Index("ix_duels_campaign_record_seq", "campaign_id", "record_seq"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    campaign_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("campaigns.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)  # 1, 2, ... within the campaign
    model_i: Mapped[int] = mapped_column(Integer)  # the policy's pair, i < j
    model_j: Mapped[int] = mapped_column(Integer)
    a_is_i: Mapped[bool] = mapped_column(Boolean)  # answer "a" is model_i's
    prompt_index: Mapped[int] = mapped_column(Integer)
    prompt: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(12))
    answer_a: Mapped[str | None] = mapped_column(Text, nullable=True)
    answer_b: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The style features of both answers as stored (algorithms.style_control.FEATURES of answer a, then
    # of answer b), counted once when the answers are stored: the style fit reads these, not the texts.
    answer_style: Mapped[list | None] = mapped_column(JSON, nullable=True)
    completion_a: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    completion_b: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    choice: Mapped[str | None] = mapped_column(String(10), nullable=True)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)  # for model_i; None: not counted
    counted: Mapped[bool] = mapped_column(Boolean, default=False)
    judged_by: Mapped[str | None] = mapped_column(String(40), nullable=True)
    judge_detail: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    cost_nusd: Mapped[int] = mapped_column(BigInteger, default=0)
    expected_cost_nusd: Mapped[int] = mapped_column(BigInteger, default=0)
    # Replay: the policy call that chose this pair, and the one that recorded it.
    select_seq: Mapped[int] = mapped_column(Integer)
    pending_at_select: Mapped[list] = mapped_column(JSON)
    record_seq: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Without replacement: the duel's position in its pair's sequence (its prompt is perm[position]).
    # A judged duel whose record_seq is NULL is held until the pair's earlier positions are recorded.
    position: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The per-model and judge costs given to the policy before this selection, when they
    # changed (marginal costs given the stores; replay calls policy.set_costs with them).
    costs_at_select: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    requested_by: Mapped[str | None] = mapped_column(String(40), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    answered_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    judged_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    comment: Mapped[str | None] = mapped_column(Text, nullable=True)  # the annotator's note with its vote

    @property
    def model_a(self) -> int:
        return shown_models(self.model_i, self.model_j, self.a_is_i)[0]

    @property
    def model_b(self) -> int:
        return shown_models(self.model_i, self.model_j, self.a_is_i)[1]


def shown_models(model_i: int, model_j: int, a_is_i: bool) -> tuple[int, int]:
    """The models shown as answers a and b of a duel of ``model_i`` and ``model_j``."""
    return (model_i, model_j) if a_is_i else (model_j, model_i)


class Charge(Base):
    __tablename__ = "charges"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    campaign_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("campaigns.id", ondelete="CASCADE"), index=True)
    # NULL: an answer pre-generated for annotators before any duel needed it (service/campaigns/pregeneration.py)
    duel_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("duels.id", ondelete="CASCADE"), index=True, nullable=True
    )
    kind: Mapped[str] = mapped_column(String(8))  # "model" or "judge"
    model_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    amount_nusd: Mapped[int] = mapped_column(BigInteger)
    detail: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # A zero-cost reuse row: the charge that paid for the stored answer or verdict (no
    # foreign key: the paying charge may belong to another campaign, deleted since).
    reuses_charge_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class StoredAnswer(Base):
    """One model's answer to one prompt, paid once and shared by every campaign (service/campaigns/stores.py).

    ``key`` = sha256 of (``model_key``, ``prompt_hash``); ``model_key`` hashes the
    generation config (what changes the output). ``status`` is ``generating`` while a
    process holds the claim (``claimed_at``), ``ready`` once the answer and its charge
    are committed. Failed calls are never stored.
    """

    __tablename__ = "answer_store"
    __table_args__ = (Index("ix_answer_store_model_prompt", "model_key", "prompt_hash"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    model_key: Mapped[str] = mapped_column(String(64))
    prompt_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(12))
    text: Mapped[str | None] = mapped_column(Text, nullable=True)
    input_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    output_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cost_nusd: Mapped[int] = mapped_column(BigInteger, default=0)
    charge_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # a spare image taken by a duel not yet answered: the duel (service/campaigns/spares.py)
    taken_by: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    claimed_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class StoredVerdict(Base):
    """One LLM judge's verdict on one (prompt, answer pair, order), paid once (service/campaigns/stores.py).

    ``choice`` is in the terms of the stored order (``a`` = the first answer of the key).
    """

    __tablename__ = "verdict_store"
    __table_args__ = (Index("ix_verdict_store_judge_prompt", "judge_key", "prompt_hash"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    judge_key: Mapped[str] = mapped_column(String(64))
    prompt_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(12))
    choice: Mapped[str | None] = mapped_column(String(10), nullable=True)
    detail: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    cost_nusd: Mapped[int] = mapped_column(BigInteger, default=0)
    charge_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    claimed_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class DuelSkip(Base):
    """An annotator skipped a duel: the duel went back to the pool (its ``requested_by``
    became :data:`service.campaigns.skips.POOL_REQUESTER`) and is never handed to this
    annotator again; the annotator list counts these rows."""

    __tablename__ = "duel_skips"
    __table_args__ = (
        UniqueConstraint("duel_id", "annotator", name="uq_duel_skips_duel_annotator"),
        Index("ix_duel_skips_campaign_annotator", "campaign_id", "annotator"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    campaign_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("campaigns.id", ondelete="CASCADE"))
    duel_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("duels.id", ondelete="CASCADE"))
    annotator: Mapped[str] = mapped_column(String(40))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class BatchJob(Base):
    """One batch sent to a provider by a batch campaign's round (service/campaigns/batch_jobs.py).

    Written before the batch is sent (``status`` ``submitting``) with its ``key``, which goes into the
    provider's batch metadata, so a process that takes the run over finds the batch and collects it
    instead of sending it again; ``requests`` lists each request's ``custom_id``, its duel and slot,
    and the hash of its body. ``owner`` is the process that may collect it (a conditional update)."""

    __tablename__ = "batch_jobs"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    campaign_id: Mapped[int] = mapped_column(BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), index=True)
    round: Mapped[int] = mapped_column(Integer)
    phase: Mapped[str] = mapped_column(String(12))  # answers | verdicts
    key: Mapped[str] = mapped_column(String(100), unique=True)
    client: Mapped[dict] = mapped_column(JSON)  # the model client config the batch API is built from
    provider_batch_id: Mapped[str | None] = mapped_column(String(300), nullable=True)
    status: Mapped[str] = mapped_column(String(12))  # submitting, running, storing, collected, failed, cancelled
    requests: Mapped[list] = mapped_column(JSON)
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class RateLimitKey(Base):
    """One provider credential's shared quota (service/ratelimits.py): the row every
    worker locks before counting the window, and when the provider's last 429 lets it
    send again (``blocked_until``, seconds since the epoch). ``key`` is a hash
    (service/clients/ratelimit.py: credential_key), never the API key."""

    __tablename__ = "rate_limit_keys"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    blocked_until: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")


class RateLimitEvent(Base):
    """A request sent on a credential within the last minute and its tokens (the estimate
    until the provider reports its usage); older rows are deleted as the window moves."""

    __tablename__ = "rate_limit_events"
    __table_args__ = (Index("ix_rate_limit_events_key_at", "key", "at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(64))
    at: Mapped[float] = mapped_column(Float)
    tokens: Mapped[int] = mapped_column(BigInteger, default=0)


class IdempotencyKey(Base):
    """The first response to a request sent with an ``Idempotency-Key`` header
    (service/api/idempotency.py): the same caller sending the same key and request again within
    24 hours gets this response back, and nothing is done again. ``caller``: a hash of the
    request's credential (never the credential); ``request_hash``: a hash of its method, path,
    query and body; ``status_code`` None while the first request is under way."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (Index("ix_idempotency_keys_created_at", "created_at"),)

    caller: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    request_hash: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    content_type: Mapped[str | None] = mapped_column(String(200), nullable=True)
    response_body: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class BudgetHold(Base):
    """Budget held by a model call that is not a duel's: a pre-generated answer
    (service/campaigns/pregeneration.py, service/money/holds.py).

    Made before the call, in a transaction holding the campaign's row lock, when
    ``amount_nusd`` (the call's bound) fits the budget; deleted in the transaction
    that stores and charges the answer, or when the call fails. A hold counts while
    ``expires_at`` is in the future, so a process that died mid-call does not hold the
    budget longer than a duel's call would.
    """

    __tablename__ = "budget_holds"
    __table_args__ = (Index("ix_budget_holds_campaign_expires", "campaign_id", "expires_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    campaign_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("campaigns.id", ondelete="CASCADE"))
    amount_nusd: Mapped[int] = mapped_column(BigInteger)
    purpose: Mapped[str] = mapped_column(String(16))  # "pregeneration"
    model_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    key: Mapped[str | None] = mapped_column(String(64), nullable=True)  # the answer-store key being paid for
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class Annotator(Base):
    __tablename__ = "annotators"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    campaign_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("campaigns.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex
    label: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)


class AnnotatorRequestBucket(Base):
    """One annotator's request limit, shared by every process (service/api/annotator_limits.py):
    the tokens left in its bucket at ``at`` (seconds since the epoch, the database's clock)."""

    __tablename__ = "annotator_request_buckets"

    annotator_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("annotators.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    tokens: Mapped[float] = mapped_column(Float)
    at: Mapped[float] = mapped_column(Float)


class DashboardLogin(Base):
    """One sign-in through the ``/login`` form: its cookie's SHA-256, expiry and revocation
    (service/web/logins.py). ``key_id`` ties it to the admin key it was made with."""

    __tablename__ = "dashboard_logins"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex of the cookie value
    key_id: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, index=True)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)


class WebhookEvent(Base):
    """The webhook outbox: one row per event, written in the transaction that causes it.

    Delivered at least once (service/campaigns/webhooks.py): claimed with a lease
    (``claimed_by``, ``claimed_until``) by whichever process sends it, retried with
    exponential backoff until a 2xx answer or ``LLMDUEL_WEBHOOK_MAX_ATTEMPTS``.
    """

    __tablename__ = "webhook_events"
    __table_args__ = (Index("ix_webhook_events_due", "state", "next_attempt_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # "evt_...": the receivers' idempotency key
    campaign_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("campaigns.id", ondelete="CASCADE"), index=True)
    event_type: Mapped[str] = mapped_column(String(40))
    url: Mapped[str] = mapped_column(Text)
    payload: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # frozen at the first attempt
    state: Mapped[str] = mapped_column(String(12))  # pending, delivered, failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    claimed_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    claimed_until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    delivered_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class HealthCheck(Base):
    """The row ``/healthz`` writes to check that the database accepts writes (service/health.py)."""

    __tablename__ = "health_checks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    checked_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
