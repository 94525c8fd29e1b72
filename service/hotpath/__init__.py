"""The two hot transactions of a vote cycle: the logic once, two drivers.

An annotator's cycle is "next duel" then "vote". Both decide with the functions of
:mod:`service.decide` (plain data in, a decision out), as the general ORM
transactions (:mod:`service.campaigns.plan_tx`, :mod:`service.campaigns.verdict_tx`)
do. On this path the ORM's bookkeeping would cost more than the decision, so the
writes are Core statements: the new duel, the vote, stale duels expired, a pooled
duel handed over, an ending (the campaign row, its webhook outbox row, the other
duels cancelled). A refusal is raised after the commit of what was written before
it.

The caller chooses the driver before the transaction (:mod:`.routing`):
:func:`handles` is a predicate over the campaign's configuration, false for
sampling without replacement (positions, outcomes held for an earlier position)
and for a hybrid judge, whose requests run the general ORM transaction. Each
request runs one transaction on one driver.

The decisions (:func:`.decisions.decide_plan` and :func:`.decisions.decide_vote`) are written once, as coroutines
that ask a *transaction driver* for each database round trip:

* :class:`SyncTx`: SQLAlchemy Core statements on a :meth:`Database.write` session
  (SQLite, and PostgreSQL in worker threads). Its methods never suspend, so
  :func:`run_sync` drives the coroutine to its end in one step, in the calling
  thread.
* :class:`PgTx`: an asyncpg connection from :class:`service.db.HotPool`, on the
  event loop: while PostgreSQL works, or the transaction waits for the row lock,
  the loop serves other requests. The writes of a transaction are one statement
  (data-modifying CTEs). asyncpg took about 0.2 ms of client CPU per transaction
  here against psycopg's 0.5 ms, which the 300 votes/s target needed
  (docs/reliability.md).

Both take the same lock (the campaign row; ``BEGIN IMMEDIATE`` on SQLite), make
the same decisions and write the same rows, so a campaign's stored state equals
its replayed log whichever path each step took. ``tests/test_fastpath.py`` runs one
scripted session on each path (and on the general path, with :data:`ENABLED`
off) and requires identical stored campaigns, duels and charges.
"""

from .decisions import CampaignConfig, handles
from .pg_driver import plan_duel_async, record_vote_async
from .routing import cached_choice, plan_on_hot_path, vote_campaign_hint, vote_on_hot_path
from .sync_driver import plan_duel, record_verdict, record_vote, run_sync

ENABLED = True  # False: never the asyncpg driver (tests run the same scenarios on both drivers)

__all__ = [
    "CampaignConfig",
    "ENABLED",
    "cached_choice",
    "handles",
    "plan_duel",
    "plan_on_hot_path",
    "plan_duel_async",
    "record_verdict",
    "record_vote",
    "record_vote_async",
    "run_sync",
    "vote_campaign_hint",
    "vote_on_hot_path",
]
