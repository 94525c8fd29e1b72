"""The vote cycle's plan, answers and verdict: each one sequence, two drivers.

:func:`.plan.decide_plan` plans every duel (an annotator's, the admin's, a
background run's), :func:`.answers.decide_answers` stores every duel's answers and
:func:`.verdict.decide_verdict` records every verdict (a vote, an automatic judge's),
for every case: refusals, stale duels, pooled duels,
caps, budget and pre-generation holds, runs, reuse, sampling without replacement
(positions, outcomes released in position order), a hybrid judge's pool,
certification. They decide with the pure functions beside them (each stage module ends with its own) and
the pure functions of :mod:`service.campaigns` and :mod:`service.money` (plain data in, a decision out) and ask a
*transaction driver* for each database round trip; a refusal is raised after the
commit of what was written before it.

* :class:`SyncTx` (:mod:`.sync_driver`): SQLAlchemy Core statements on a
  :meth:`Database.write` session, in the calling worker thread; every campaign and
  caller. Its methods never suspend, so :func:`run_sync` drives a sequence to its
  end in one step.
* :class:`PgTx` (:mod:`.pg_driver`): an asyncpg connection from
  :class:`service.db.HotPool`, on the event loop, for annotators' and the admin's
  requests (their duels' answers too) on the campaigns :func:`handles` accepts (not
  without replacement, not hybrid): while PostgreSQL works, or the transaction waits
  for the row lock, the loop serves other requests. The writes of a plan or a verdict
  are one statement (data-modifying CTEs).
  asyncpg took about 0.2 ms of client CPU per transaction here against psycopg's
  0.5 ms, which the 300 votes/s target needed (docs/reliability.md).

The caller chooses the driver before the transaction (:mod:`.routing`); each request
runs one transaction on one driver. Both take the same lock (the campaign row;
``BEGIN IMMEDIATE`` on SQLite) and write the same rows, so a campaign's stored state
equals its replayed log whichever driver each step took (``tests/service/cycle/test_fastpath.py``).
"""

from .pg_driver import plan_duel_async, record_vote_async, store_answers_async
from .routing import cached_choice, plan_on_hot_path, vote_campaign_hint, vote_on_hot_path
from .shared import CampaignConfig, handles
from .sync_driver import plan_duel, record_verdict, record_vote, run_sync, store_answers

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
    "store_answers",
    "store_answers_async",
    "vote_campaign_hint",
    "vote_on_hot_path",
]
