"""The two hot transactions of a vote cycle: the logic once, two drivers.

An annotator's cycle is "next duel" then "vote". The general transactions
(:meth:`CampaignService.plan_duel_tx` and :meth:`CampaignService.record_verdict_tx`)
use the ORM and handle every case: ended campaigns, stale duels to expire,
``max_duels``, budgets, background runs, judge charges, certification. Most of a
campaign's life is the plain case, and there the ORM's bookkeeping costs more than
the decision. This module does the plain case, and whenever it does not apply it
raises :class:`Fallback` before writing anything; the caller then runs the
general transaction.

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

from .decisions import CampaignConfig, Fallback
from .pg_driver import plan_duel_async, record_vote_async
from .sync_driver import plan_duel, record_vote, run_sync

ENABLED = True  # tests switch it off to run the same scenarios on the general path

__all__ = [
    "CampaignConfig",
    "ENABLED",
    "Fallback",
    "plan_duel",
    "plan_duel_async",
    "record_vote",
    "record_vote_async",
    "run_sync",
]
